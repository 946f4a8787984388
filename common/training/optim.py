"""The optimizer and the learning-rate schedules the papers used.

They turn each batch's gradients into the model's next weights, the step between batches and checkpoint in
corpus → tokenizer → token files → batches → model → checkpoint.

Weight decay is applied to every weight matrix, the embedding tables included, and to nothing else: GPT-1
decays "all non bias or gain weights" (§4.1), and BERT's `AdamWeightDecayOptimizer` excludes only LayerNorm
and biases.
"""

import math

import torch
from torch import nn


def adamw(model: nn.Module, lr: float, weight_decay: float, betas: tuple[float, float], device: torch.device):
    """AdamW with decay on matrices (dim >= 2) only, using the fused CUDA kernel where it exists."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    # fused: one kernel for the whole update on CUDA; foreach: batched tensor ops elsewhere.
    fast = {"fused": True} if device.type == "cuda" else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=betas, **fast)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def warmup_cosine(step: int, *, peak_lr: float, warmup_steps: int, total_steps: int,
                  floor: float = 0.1) -> float:
    """Linear warmup to `peak_lr`, then half a cosine down to `floor * peak_lr` at `total_steps`.

    GPT-1 (§4.1) and Kaplan et al. (§2.2) decay to zero; Chinchilla (§3, App. B) decays by 10x, the
    default here.
    """
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return peak_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def warmup_linear(step: int, *, peak_lr: float, warmup_steps: int, total_steps: int,
                  floor: float = 0.0) -> float:
    """Linear warmup, then linear decay to `floor * peak_lr`: the schedule of BERT's pre-training (§A.2)
    and of GPT-1's fine-tuning.
    """
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return peak_lr * (1 - (1 - floor) * progress)

