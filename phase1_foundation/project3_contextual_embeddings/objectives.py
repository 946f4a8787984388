"""BERT's pre-training objective (§3.1, §A.2): the masked-LM loss plus the next-sentence loss, and the metrics
made of them. train.py minimises `pretraining_loss`; train.py and the exercises measure with `evaluate`.

Metrics are kept as summed counts (losses times targets, correct answers, targets), so any number of batches
adds up exactly, and each mean is taken once at the end.
"""

from collections import Counter
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from common.device import autocast
from phase1_foundation.project3_contextual_embeddings.model import BERT
from phase1_foundation.project3_contextual_embeddings.pretraining_data import IGNORE, pair_batches


def pretraining_loss(model: BERT, batch: dict, use_nsp: bool,
                     most_frequent: int) -> tuple[torch.Tensor, Counter]:
    """The loss to minimise for one batch of masked sentence pairs, and the counts its metrics are made of."""
    masked = batch["mlm_labels"] != IGNORE  # (B, T): the 15% chosen positions, the only ones with a target
    mlm_logits, nsp_logits = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"],
                                   masked=masked)
    targets = batch["mlm_labels"][masked]  # (N,)
    mlm_loss = F.cross_entropy(mlm_logits.float(), targets)  # mean over the N chosen positions
    loss, nsp_labels = mlm_loss, batch["nsp_labels"]  # (B,): 1 = B follows A, 0 = B from another document
    sums = {"mlm_loss": mlm_loss.detach() * len(targets),
            "mlm_correct": (mlm_logits.argmax(-1) == targets).sum(),
            "most_frequent": (targets == most_frequent).sum(), "tokens": batch["attention_mask"].sum()}
    if use_nsp:
        nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)  # PAPER: BERT §3.1, from the pooled [CLS]
        # PAPER: BERT §A.2, the training loss is the sum of the mean MLM and mean NSP likelihoods
        loss = mlm_loss + nsp_loss
        sums |= {"nsp_loss": nsp_loss.detach() * len(nsp_labels), "nsp_is_next": nsp_labels.sum(),
                 "nsp_correct": (nsp_logits.argmax(-1) == nsp_labels).sum()}
    values = torch.stack([v.float() for v in sums.values()]).tolist()  # one copy off the device, not one each
    counts = Counter(dict(zip(sums, values, strict=True)), mlm_count=len(targets))
    if use_nsp:
        counts["nsp_count"] = len(nsp_labels)
    return loss, counts


def metrics(counts: Counter, split: str) -> dict:
    """Mean losses and accuracies from summed counts: {split}_mlm_loss, {split}_mlm_accuracy, and NSP's."""
    out = {f"{split}_mlm_loss": counts["mlm_loss"] / counts["mlm_count"],
           f"{split}_mlm_accuracy": counts["mlm_correct"] / counts["mlm_count"]}
    if counts["nsp_count"]:
        out[f"{split}_nsp_loss"] = counts["nsp_loss"] / counts["nsp_count"]
        out[f"{split}_nsp_accuracy"] = counts["nsp_correct"] / counts["nsp_count"]
    return out


@torch.no_grad()
def evaluate(model: BERT, split: tuple, cfg: SimpleNamespace, device: torch.device,
             most_frequent: int) -> tuple[dict, Counter]:
    """Validation metrics on the same EVAL_ITERS batches every time (same pairs, same masks), and
    their counts."""
    was_training = model.training
    model.eval()
    batches = pair_batches(split, cfg, model.config.vocab_size, device, seed=cfg.SEED + 1)
    counts = Counter()
    for _ in range(cfg.EVAL_ITERS):
        with autocast(device):
            counts += pretraining_loss(model, batches.next(), cfg.USE_NSP, most_frequent)[1]
    model.train(was_training)
    return metrics(counts, "val"), counts
