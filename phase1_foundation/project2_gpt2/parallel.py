"""Data parallelism for train.py: one process per GPU under torchrun, each with a full copy of the model.

Every step, each process runs its share of the batch forward and backward, DDP averages the gradients across
processes, and every copy takes the same optimizer step. What the processes must agree on lives here: joining
the group, the step itself (with gradient accumulation), averages and random states gathered from every
process, when to stop, and what a lost process looks like. With one process every function is the plain
single-device version, so train.py reads the same either way.
"""

import contextlib
import os
import re
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from common.data.tokens import Batches
from common.training import checkpoint as ckpt
from common.training.device import autocast
from common.training.interrupt import GracefulInterrupt
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


def optimizer_step(stepper: torch.nn.Module, model: GPT, batches: Batches, optimizer: torch.optim.Optimizer,
                   scaler: torch.amp.GradScaler, cfg: SimpleNamespace, world_size: int) -> float:
    """One optimizer step over GRAD_ACCUM_STEPS micro-batches; the mean loss over them and all processes.

    `stepper` is the model as it is run: compiled, wrapped in DistributedDataParallel, or the model itself.
    """
    loss_sum = torch.zeros((), device=batches.device)
    for micro in range(cfg.GRAD_ACCUM_STEPS):
        last = micro == cfg.GRAD_ACCUM_STEPS - 1
        # DDP averages the gradients across processes during backward(), a round of communication; the
        # micro-steps before the last only add to the local gradients, so they skip it (no_sync).
        with stepper.no_sync() if world_size > 1 and not last else contextlib.nullcontext():
            x, y = batches.next()  # (B / world_size, T) each
            with autocast(batches.device):
                _, loss = stepper(x, y)
            scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
        loss_sum += loss.detach()
    scaler.unscale_(optimizer)  # so that clipping sees the true gradients (fp16 scales them)
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return mean_over_processes(loss_sum, world_size) / cfg.GRAD_ACCUM_STEPS


def mean_over_processes(value: torch.Tensor, world_size: int) -> float:
    """The average of a scalar over all processes: each computed its loss on its own share of the batch."""
    if world_size > 1:
        value = value.clone()
        dist.all_reduce(value)  # sum
        value /= world_size
    return value.item()


def every_rng_state(world_size: int) -> list[dict] | None:
    """Every process's random generators, in rank order (each draws its own dropout masks); None alone."""
    if world_size == 1:
        return None
    states = [None] * world_size
    dist.all_gather_object(states, ckpt.rng_state())
    return states


def interrupt_requested(interrupt: GracefulInterrupt, world_size: int, device: torch.device) -> bool:
    """Ctrl-C reaches every process torchrun started, but not necessarily between the same two steps: the
    processes agree to stop if any of them saw it, so all of them save at the same step. (The flag lives on
    the process's device, as every tensor a collective sees must: NCCL reduces GPU tensors only.)"""
    if world_size == 1:
        return interrupt.requested
    flag = torch.tensor(float(interrupt.requested), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def lost_a_process(error: RuntimeError) -> str | None:
    """What a collective's error says when another process of the run has stopped (was killed, crashed, lost
    its machine), in a few words; None for any other error. Gloo reports the closed connection at once."""
    if not isinstance(error, dist.DistError) and not re.search(r"gloo|NCCL|[Cc]onnection", str(error)):
        return None
    first = str(error).strip().splitlines()[0]
    return re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # without the source file and the advice
