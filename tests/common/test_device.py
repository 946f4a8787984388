"""Device choice and precision on this (CPU-only) machine, and seeding."""

import random

import numpy as np
import pytest
import torch

from common.device import autocast, autocast_dtype, describe, grad_scaler, pick_device, seed_everything


def test_auto_picks_cpu_without_accelerators():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert pick_device("auto").type == expected


def test_cpu_runs_in_fp32():
    cpu = torch.device("cpu")
    assert autocast_dtype(cpu) is None
    assert not grad_scaler(cpu).is_enabled()
    with autocast(cpu):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    assert describe(cpu).startswith("cpu (") and "fp32" in describe(cpu)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_missing_cuda_is_one_line():
    with pytest.raises(SystemExit, match="sees no CUDA GPU"):
        pick_device("cuda")


def test_seed_everything_repeats_all_generators():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    seed_everything(7)
    first = draw()
    seed_everything(7)
    assert draw() == first
