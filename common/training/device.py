"""Where the model runs and in which precision.

Every chapter trains on whatever the learner has: an NVIDIA GPU, an Apple-silicon GPU or a plain CPU. This
module makes that choice once, so a chapter's `train.py` only says `autocast(device)` around its forward pass.
"""

import contextlib
import functools
import os
import random
from types import SimpleNamespace

import numpy as np
import torch

from common.errors import CourseError


def pick_device(name: str = "auto") -> torch.device:
    """`auto` takes the fastest device present that passes `device_problem`'s check (cuda > mps > cpu); any
    other name is checked, not trusted."""
    if name == "auto":
        # Under torchrun each process trains on cuda:LOCAL_RANK: check that GPU, and open no other.
        rank = int(os.environ.get("LOCAL_RANK", 0))
        for candidate, available, checked in (("cuda", torch.cuda.is_available, f"cuda:{rank}"),
                                              ("mps", torch.backends.mps.is_available, "mps")):
            if not available():
                continue
            if (problem := device_problem(torch.device(checked))) is None:
                return torch.device(candidate)
            print(f"{candidate} is available but fails a check ({problem}): not using it")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise CourseError(
            f"error: unknown device {name!r}; use --DEVICE=auto, cuda, cuda:N, mps or cpu"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CourseError(
            "error: --DEVICE=cuda but PyTorch sees no CUDA GPU; use --DEVICE=auto or --DEVICE=cpu"
        )
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise CourseError(f"error: --DEVICE={name} but only {torch.cuda.device_count()} CUDA GPU(s) exist")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise CourseError("error: --DEVICE=mps but this machine has no Apple-silicon GPU; use --DEVICE=auto")
    if device.type not in ("cuda", "mps", "cpu"):
        raise CourseError(f"error: unsupported device {name!r}; use --DEVICE=auto, cuda, mps or cpu")
    if device.type != "cpu" and (problem := device_problem(device)) is not None:
        raise CourseError(f"error: --DEVICE={name} fails a check ({problem}); use --DEVICE=cpu")
    return device


@functools.cache
def device_problem(device: torch.device) -> str | None:
    """What is wrong with `device`, in a few words, or None when it computes what the CPU computes.

    A device can be reported available and still not work: a driver that does not match, a hosted macOS
    machine whose MPS device fails on first use, an operation its backend gets wrong. One small matmul and
    softmax, compared with the CPU's, finds that before a run is built on it. Checked once per device and
    process, and never for the CPU.
    """
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 64, generator=generator), torch.randn(64, 64, generator=generator)
    expected = _matmul_softmax(a, b, torch.device("cpu"))
    try:
        result = _matmul_softmax(a, b, device)
    except Exception as error:  # any failure of the device is the answer, not a crash
        lines = str(error).strip().splitlines()
        return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    if not torch.allclose(result, expected, rtol=1e-2, atol=1e-3):  # TF32 and kernel order, nothing more
        gap = (result - expected).abs().max().item()
        return f"a test matmul and softmax differ from the CPU's by {gap:.2g}"
    return None


def _matmul_softmax(a: torch.Tensor, b: torch.Tensor, device: torch.device) -> torch.Tensor:
    """softmax(a b / 8) computed on `device` and brought back: the two operations every model here needs."""
    return torch.softmax(a.to(device) @ b.to(device) / 8, dim=-1).cpu()  # (64, 64): scores of spread about 1


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a clock read next measures it (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The low-precision type for matmuls, or None to stay in fp32.

    bf16 has fp32's exponent range, so it needs no loss scaling; older CUDA GPUs (before Ampere) lack it and
    get fp16 with a GradScaler. MPS and CPU stay in fp32: autocast there is slower or less mature than the
    gain.
    """
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """Mixed precision for the forward pass and loss (the backward pass follows it automatically)."""
    dtype = autocast_dtype(device)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device) -> torch.amp.GradScaler:
    """A GradScaler that is only active for fp16, where small gradients would otherwise underflow to zero."""
    return torch.amp.GradScaler(device.type, enabled=autocast_dtype(device) == torch.float16)


def enable_tf32() -> None:
    """Let fp32 matmuls use TensorFloat-32 tensor cores on Ampere+ GPUs (no effect elsewhere)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def seed_everything(seed: int) -> None:
    """Seed every random number generator a run touches, so two runs with one seed are the same run."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def describe(device: torch.device) -> str:
    """One line for the start of a run: which device, which chip, which precision."""
    dtype = autocast_dtype(device)
    precision = f"{str(dtype).removeprefix('torch.')} autocast" if dtype else "fp32"
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)}, {precision})"
    if device.type == "mps":
        return f"mps (Apple GPU, {precision})"
    return f"cpu ({torch.get_num_threads()} threads, {precision})"


def device_here(state: dict, device: str | None = None) -> torch.device:
    """Where a checkpoint's model runs on this machine: `device` when one is asked for (a script's --DEVICE),
    else the device that trained it when this machine has it and it works, else the best one this machine
    has. A checkpoint trained on a GPU is read on a laptop all the time."""
    if device is not None:
        return pick_device(device)
    trained_on = state["config"]["DEVICE"]
    try:
        return pick_device(trained_on)
    except CourseError:
        here = pick_device("auto")
        print(f"the checkpoint was trained on {trained_on}, which this machine cannot use: running on {here}")
        return here


def settings_on(state: dict, device: torch.device) -> SimpleNamespace:
    """A checkpoint's run settings for work on `device`: DEVICE (which decides where batches go and whether
    autocast runs) becomes this machine's, and the rest is the run's."""
    return SimpleNamespace(**{**state["config"], "DEVICE": str(device)})
