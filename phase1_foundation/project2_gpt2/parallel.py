"""Data parallelism for train.py: one process per GPU under torchrun, each with a full copy of the model.

The step, with DDP's no_sync, is in train.py's loop; here are joining the group, wrapping the model, a loss
averaged over processes, and what a lost process looks like. With one process every function is the plain
single-device version, so train.py reads the same either way. README, "On a GPU, and on several".
"""

import os
import re
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from phase1_foundation.project2_gpt2.model import GPT


def start_processes(cfg: SimpleNamespace) -> tuple[int, int, torch.device]:
    """(rank, world_size, device) of this process. Under torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK),
    join the process group: NCCL between GPUs, gloo between CPU processes."""
    if "RANK" not in os.environ:
        return 0, 1, torch.device(cfg.DEVICE)
    device = torch.device(cfg.DEVICE)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))  # one GPU per process on each machine
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), device


def wrap(model: GPT, compile_it: bool, world_size: int, device: torch.device) -> torch.nn.Module:
    """The model as each step runs it: wrapped in DistributedDataParallel under torchrun, compiled with
    --COMPILE=true (on CUDA and the CPU; not on MPS, where the course has not run it), or the model itself.

    Compile after wrapping: the compiler then sees DDP's gradient buckets and splits its graph at them, so the
    averaging of one bucket overlaps the backward pass of the next (PyTorch's DDP notes)."""
    stepper = model
    if world_size > 1:
        stepper = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    if compile_it and device.type == "mps":
        print("--COMPILE=true is skipped on mps: the course has not checked torch.compile there")
        return stepper
    return torch.compile(stepper) if compile_it else stepper


def mean_over_processes(value: torch.Tensor, world_size: int) -> float:
    """The average of a scalar over all processes: each computed its loss on its own share of the batch."""
    if world_size > 1:
        value = value.clone()
        dist.all_reduce(value)  # sum
        value /= world_size
    return value.item()


def lost_a_process(error: RuntimeError) -> str | None:
    """What a collective's error says when another process of the run has stopped (was killed, crashed, lost
    its machine), in a few words; None for any other error. Gloo reports the closed connection at once."""
    if not isinstance(error, dist.DistError) and not re.search(r"gloo|NCCL|[Cc]onnection", str(error)):
        return None
    first = str(error).strip().splitlines()[0]
    return re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # without the source file and the advice
