"""BERT's pre-training objective (§3.1, §A.2): the masked-LM loss plus the next-sentence loss, and the metrics
made of them. train.py minimises `pretraining_loss`; train.py and the exercises measure with `evaluate`, and
train.py logs `neighbour_attention` beside it: how much attention goes to the token before and after.

The masked-LM numbers are kept apart by what the model saw at each chosen position (KINDS): [MASK], a random
token, or the token itself. Only at [MASK] must the model guess from context; where the token is left
unchanged the answer is in the input, and a model that copies it scores 100% there. The mean over all chosen
positions mixes the two, so the headline is the [MASK] positions' loss and accuracy.

Metrics are kept as summed counts (losses times targets, correct answers, targets), so any number of batches
adds up exactly, and each mean is taken once at the end. baselines.py adds the counts of trivial predictors
under their own names ("unigram_mask_loss", ...), and `metrics` turns both kinds into means.
"""

from collections import Counter
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import Tensor

from common.training.device import autocast
from phase1_foundation.project3_contextual_embeddings.model import BERT
from phase1_foundation.project3_contextual_embeddings.pretraining_data import (
    KINDS,
    chosen_targets,
    pair_batches,
)

PREDICTORS = ("", "unigram_", "copy_", "bigram_")  # the model, then baselines.py's trivial predictors


def sums_by_kind(predictor: str, kind: Tensor, loss: Tensor | None, correct: Tensor) -> dict[str, Tensor]:
    """Summed losses (N,) and correct answers (N,) of one predictor over all chosen positions ("mlm") and for
    each of KINDS: {"mlm_loss": ..., "mask_correct": ..., ...}, prefixed with the predictor's name."""
    one_hot = F.one_hot(kind, len(KINDS)).T.float()  # (3, N)
    sums = {f"{predictor}mlm_correct": correct.sum()}
    sums |= dict(zip([f"{predictor}{k}_correct" for k in KINDS], one_hot @ correct.float(), strict=True))
    if loss is not None:
        sums[f"{predictor}mlm_loss"] = loss.sum()
        sums |= dict(zip([f"{predictor}{k}_loss" for k in KINDS], one_hot @ loss, strict=True))
    return sums


def count_by_kind(kind: Tensor) -> dict[str, Tensor]:
    """How many chosen positions (N,) there are of each of KINDS, and in all: what every mean divides by."""
    return {"mlm_count": torch.tensor(len(kind), device=kind.device),
            **dict(zip([f"{k}_count" for k in KINDS], F.one_hot(kind, len(KINDS)).sum(dim=0), strict=True))}


def pretraining_loss(model: BERT, batch: dict, use_nsp: bool) -> tuple[torch.Tensor, Counter]:
    """The loss to minimise for one batch of masked sentence pairs, and the counts its metrics are made of."""
    chosen, targets, kind = chosen_targets(batch)  # (B, T) the chosen positions (MLM_PROB); (N,), (N,)
    # Only the chosen positions are scored: the loss ignore_index would give, without (B, T, V) logits.
    mlm_logits, nsp_logits = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"],
                                   chosen=chosen)  # (N, V), (B, 2)
    token_loss = F.cross_entropy(mlm_logits.float(), targets, reduction="none")  # (N,)
    mlm_loss = token_loss.mean()  # PAPER: BERT §3.1 Task #1, cross-entropy at the chosen positions only
    loss, nsp_labels = mlm_loss, batch["nsp_labels"]  # (B,): 1 = B follows A, 0 = B from another document
    sums = sums_by_kind("", kind, token_loss.detach(), mlm_logits.argmax(-1) == targets) | count_by_kind(kind)
    sums["tokens"] = batch["attention_mask"].sum()
    if use_nsp:
        nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)  # PAPER: BERT §3.1 Task #2 (NSP)
        # PAPER: BERT §A.2, "the training loss is the sum of the mean masked LM likelihood and the mean next
        # sentence prediction likelihood"
        loss = mlm_loss + nsp_loss
        sums |= {"nsp_loss": nsp_loss.detach() * len(nsp_labels), "nsp_is_next": nsp_labels.sum(),
                 "nsp_correct": (nsp_logits.argmax(-1) == nsp_labels).sum()}
    values = torch.stack([v.float() for v in sums.values()]).tolist()  # one copy off the device, not one each
    counts = Counter(dict(zip(sums, values, strict=True)))
    if use_nsp:
        counts["nsp_count"] = len(nsp_labels)
    return loss, counts


def metrics(counts: Counter, split: str) -> dict:
    """Means from summed counts: {split}_{predictor}{kind}_loss and _accuracy for kind in mlm (all chosen
    positions) and KINDS, e.g. val_mask_loss (the model at [MASK]) or val_bigram_mask_accuracy, and NSP's
    (val_nsp_loss, val_nsp_accuracy; val_overlap_nsp_accuracy for baselines.py's rule)."""
    out = {}
    for predictor in PREDICTORS:
        for kind in ("mlm", *KINDS):
            if not counts[f"{kind}_count"]:
                continue
            for measure, total in (("loss", "loss"), ("accuracy", "correct")):
                if f"{predictor}{kind}_{total}" in counts:
                    out[f"{split}_{predictor}{kind}_{measure}"] = (counts[f"{predictor}{kind}_{total}"]
                                                                   / counts[f"{kind}_count"])
    if counts["nsp_count"]:
        out[f"{split}_nsp_loss"] = counts["nsp_loss"] / counts["nsp_count"]
        out[f"{split}_nsp_accuracy"] = counts["nsp_correct"] / counts["nsp_count"]
    if counts["overlap_nsp_count"]:  # baselines.py's NSP rule, shared rare tokens
        out[f"{split}_overlap_nsp_accuracy"] = counts["overlap_nsp_correct"] / counts["overlap_nsp_count"]
    return out


def validation_batches(split: tuple, cfg: SimpleNamespace, vocab_size: int,
                       device: torch.device) -> list[dict]:
    """The EVAL_ITERS batches every validation pass scores: the same pairs and masks each time (seed
    SEED + 1), so two passes, two runs with the same settings, and the baselines all see the same targets."""
    batches = pair_batches(split, cfg, vocab_size, device, seed=cfg.SEED + 1)
    return [batches.next() for _ in range(cfg.EVAL_ITERS)]


@torch.no_grad()
def neighbour_attention(model: BERT, batch: dict, rows: int = 32) -> dict[str, float]:
    """The mean attention weight queries put on the key just before them (offset -1) and just after (+1), in
    each layer: {"attention_layer1_prev": ..., "attention_layer1_next": ..., ...}, and "attention_uniform",
    what attention spread evenly over a row's real tokens would put there.

    Averaged over heads and over the real query positions whose neighbour at that offset is real too. The
    fused kernel never shows the weights, so the explicit path is switched on for the pass and a forward hook
    on attn_dropout (an identity in eval mode) reads them. Runs in eval mode under no_grad, `rows` pairs at a
    time, and draws no random number: the training run it is called from goes on exactly as without it.
    """
    attentions = [block.attn for block in model.blocks]
    real = batch["attention_mask"].bool()  # (B, T)
    # Entry i of a (T, T) matrix's diagonal at offset -1 is [i + 1, i], query i + 1 reading the key before it;
    # at +1 it is [i, i + 1], query i reading the key after it. Either way both tokens must be real:
    both = (real[:, 1:] & real[:, :-1]).float()  # (B, T - 1)
    sums = torch.zeros(len(attentions), 2, device=real.device)  # (n_layer, 2): previous, next
    rows_now = slice(None)  # the rows of the pass in progress

    def reader(layer: int):
        def read(module, inputs, weights):  # weights (rows, nh, T, T)
            for column, offset in enumerate((-1, 1)):
                neighbour = weights.diagonal(offset, dim1=-2, dim2=-1).float().mean(dim=1)  # (rows, T - 1)
                sums[layer, column] += (neighbour * both[rows_now]).sum()
        return read

    was_training, fast = model.training, [attn.fast for attn in attentions]
    hooks = [attn.attn_dropout.register_forward_hook(reader(i)) for i, attn in enumerate(attentions)]
    model.eval()
    try:
        for attn in attentions:
            attn.fast = False
        for start in range(0, len(real), rows):
            rows_now = slice(start, start + rows)
            model.hidden_states(batch["input_ids"][rows_now], batch["segment_ids"][rows_now],
                                batch["attention_mask"][rows_now])
    finally:
        for attn, was_fast in zip(attentions, fast, strict=True):
            attn.fast = was_fast
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    means = (sums / both.sum()).tolist()  # one copy off the device
    out = {f"attention_layer{layer + 1}_{name}": means[layer][column]
           for layer in range(len(attentions)) for column, name in enumerate(("prev", "next"))}
    out["attention_uniform"] = ((both / real.sum(dim=1, keepdim=True)).sum() / both.sum()).item()
    return out


@torch.no_grad()
def evaluate(model: BERT, batches: list[dict], use_nsp: bool) -> tuple[dict, Counter]:
    """Validation metrics of the model on `batches` (from validation_batches), and their counts."""
    was_training = model.training
    model.eval()
    counts = Counter()
    for batch in batches:
        with autocast(batch["input_ids"].device):
            counts.update(pretraining_loss(model, batch, use_nsp)[1])  # += would drop zero counts
    model.train(was_training)
    return metrics(counts, "val"), counts
