"""Device choice and precision on this (CPU-only) machine, and seeding."""

import random

import numpy as np
import pytest
import torch

from common.errors import CourseError
from common.training import device as devices
from common.training.device import (
    autocast,
    autocast_dtype,
    describe,
    grad_scaler,
    pick_device,
    seed_everything,
)


@pytest.fixture
def fresh_probe():
    """Each test sees the probe run afresh (pick_device remembers a device's answer for the process)."""
    devices.device_problem.cache_clear()
    yield
    devices.device_problem.cache_clear()


def pretend(monkeypatch, cuda: bool, mps: bool, compute=None):
    """A machine that reports CUDA and MPS as given; `compute` stands in for the device's arithmetic."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    if compute is not None:
        monkeypatch.setattr(devices, "_matmul_softmax", compute)


def correct(a, b, device):
    return torch.softmax(a @ b / 8, dim=-1)


def raises_off_cpu(a, b, device):
    if device.type != "cpu":
        raise RuntimeError("MPS backend out of memory\nsecond line of the message")
    return correct(a, b, device)


def wrong_off_cpu(a, b, device):
    return correct(a, b, device) + (0.05 if device.type != "cpu" else 0.0)


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


def test_a_device_that_raises_is_passed_over_in_one_line(monkeypatch, capsys, fresh_probe):
    pretend(monkeypatch, cuda=False, mps=True, compute=raises_off_cpu)
    assert pick_device("auto") == torch.device("cpu")
    assert capsys.readouterr().out == ("mps is available but fails a check (RuntimeError: MPS backend out of "
                                       "memory): not using it\n")


def test_a_device_that_computes_wrong_numbers_is_passed_over(monkeypatch, capsys, fresh_probe):
    pretend(monkeypatch, cuda=True, mps=False, compute=wrong_off_cpu)
    assert pick_device("auto") == torch.device("cpu")
    assert "cuda is available but fails a check (a test matmul and softmax differ from the CPU's by 0.05)" \
        in capsys.readouterr().out


def test_the_next_device_is_tried_and_a_working_one_chosen_silently(monkeypatch, capsys, fresh_probe):
    pretend(monkeypatch, cuda=True, mps=True, compute=correct)
    assert pick_device("auto") == torch.device("cuda") and capsys.readouterr().out == ""
    devices.device_problem.cache_clear()

    def cuda_broken(a, b, device):
        return raises_off_cpu(a, b, device) if device.type == "cuda" else correct(a, b, device)

    pretend(monkeypatch, cuda=True, mps=True, compute=cuda_broken)
    assert pick_device("auto") == torch.device("mps")
    assert capsys.readouterr().out.startswith("cuda is available but fails a check")


def test_a_named_device_that_fails_the_check_is_one_clear_line(monkeypatch, fresh_probe):
    pretend(monkeypatch, cuda=False, mps=True, compute=wrong_off_cpu)
    with pytest.raises(CourseError, match=r"^error: --DEVICE=mps fails a check \(.*\); use --DEVICE=cpu$"):
        pick_device("mps")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine whose CUDA really is missing")
def test_the_probe_catches_a_cuda_that_is_reported_but_absent(monkeypatch, capsys, fresh_probe):
    """No stand-in arithmetic: PyTorch itself fails to put a tensor on the missing GPU, and auto moves on."""
    pretend(monkeypatch, cuda=True, mps=False)
    assert pick_device("auto") == torch.device("cpu")
    assert capsys.readouterr().out.startswith("cuda is available but fails a check (")


def test_the_probe_runs_once_per_device(monkeypatch, fresh_probe):
    calls = []

    def counted(a, b, device):
        calls.append(device.type)
        return correct(a, b, device)

    pretend(monkeypatch, cuda=True, mps=False, compute=counted)
    assert [pick_device("auto") for _ in range(3)] == [torch.device("cuda")] * 3
    assert calls == ["cpu", "cuda"]  # the CPU's reference and the device's, once


def test_under_torchrun_each_process_checks_its_own_gpu(monkeypatch, fresh_probe):
    """torchrun gives each process cuda:LOCAL_RANK: that is the GPU to check, and the only one to open."""
    checked = []

    def recorded(a, b, device):
        checked.append(str(device))
        return correct(a, b, device)

    pretend(monkeypatch, cuda=True, mps=False, compute=recorded)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert pick_device("auto") == torch.device("cuda") and checked == ["cpu", "cuda:1"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_missing_cuda_is_one_line():
    with pytest.raises(CourseError, match="sees no CUDA GPU"):
        pick_device("cuda")


def test_seed_everything_repeats_all_generators():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    seed_everything(7)
    first = draw()
    seed_everything(7)
    assert draw() == first
