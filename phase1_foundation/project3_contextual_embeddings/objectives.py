"""BERT's pre-training objective (§3.1, §A.2): the masked-LM loss plus the next-sentence loss, and the metrics
made of them. train.py minimises `pretraining_loss`; train.py and the exercises measure with `evaluate`.

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

from common.device import autocast
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
    chosen, targets, kind = chosen_targets(batch)  # (B, T) the 15% chosen positions; (N,) targets, (N,) kinds
    # Only the chosen positions are scored (model.py gathers them), rather than scoring all B·T positions and
    # giving the others cross_entropy's ignore_index: the same loss without the (B, T, V) logits.
    mlm_logits, nsp_logits = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"],
                                   masked=chosen)  # (N, V), (B, 2)
    token_loss = F.cross_entropy(mlm_logits.float(), targets, reduction="none")  # (N,)
    mlm_loss = token_loss.mean()
    loss, nsp_labels = mlm_loss, batch["nsp_labels"]  # (B,): 1 = B follows A, 0 = B from another document
    sums = sums_by_kind("", kind, token_loss.detach(), mlm_logits.argmax(-1) == targets) | count_by_kind(kind)
    sums["tokens"] = batch["attention_mask"].sum()
    if use_nsp:
        nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)  # PAPER: BERT §3.1, from the pooled [CLS]
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
    positions) and KINDS, e.g. val_mask_loss (the model at [MASK]) or val_bigram_mask_accuracy, and NSP's."""
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
    return out


def validation_batches(split: tuple, cfg: SimpleNamespace, vocab_size: int,
                       device: torch.device) -> list[dict]:
    """The EVAL_ITERS batches every validation pass scores: the same pairs and masks each time (seed
    SEED + 1), so two passes, two runs with the same settings, and the baselines all see the same targets."""
    batches = pair_batches(split, cfg, vocab_size, device, seed=cfg.SEED + 1)
    return [batches.next() for _ in range(cfg.EVAL_ITERS)]


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
