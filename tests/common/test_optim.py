"""Schedules hit the values the papers describe; AdamW decays matrices only."""

import pytest
import torch

from common.training.optim import adamw, set_lr, warmup_cosine, warmup_linear


def test_warmup_cosine_shape():
    lr = lambda s: warmup_cosine(s, peak_lr=1.0, warmup_steps=10, total_steps=110, floor=0.1)  # noqa: E731
    assert lr(0) == pytest.approx(0.1) and lr(9) == pytest.approx(1.0)
    assert lr(60) == pytest.approx(0.55)  # halfway down the cosine: floor + (1 - floor) / 2
    assert lr(110) == pytest.approx(0.1) and lr(500) == pytest.approx(0.1)
    assert all(lr(s) >= lr(s + 1) for s in range(10, 200))


def test_warmup_cosine_to_zero_like_gpt1():
    assert warmup_cosine(100, peak_lr=2.5e-4, warmup_steps=10, total_steps=100, floor=0.0) == 0.0


def test_warmup_linear():
    lr = lambda s: warmup_linear(s, peak_lr=2.0, warmup_steps=4, total_steps=104)  # noqa: E731
    assert lr(3) == pytest.approx(2.0) and lr(54) == pytest.approx(1.0) and lr(104) == pytest.approx(0.0)


def test_adamw_decays_matrices_only():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    optimizer = adamw(model, lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95), device=torch.device("cpu"))
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and [p.shape for p in decayed["params"]] == [(4, 4)]
    assert plain["weight_decay"] == 0.0 and len(plain["params"]) == 3
    set_lr(optimizer, 0.5)
    assert all(group["lr"] == 0.5 for group in optimizer.param_groups)
