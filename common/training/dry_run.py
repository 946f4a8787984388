"""`train.py --DRY_RUN=True`: will a preset fit a 4 GB laptop GPU, and how long will it train there?

Answered on the CPU, without training: the chapter builds its model, and one training step runs at the
preset's batch and block size while PyTorch's own tools watch it.

    FLOPs     torch.utils.flop_counter.FlopCounterMode counts every matmul and attention of the step,
              forward and backward; times the run's steps, that is the run's training compute.
    memory    what a GPU holds at the peak of a step: the parameters, their gradients and AdamW's two
              moments (fp32 each); every tensor autograd saves for backward, seen one by one through
              torch.autograd.graph.saved_tensors_hooks while the forward pass runs under the dtype autocast
              uses on the GPU (bf16; none for the cpu preset, which trains in fp32); and the largest set of
              gradients one backward operation holds at once, seen by a hook on every node of the graph (for
              a language model, the gradient of the logits that backward starts from).
    time      the larger of two estimates, both resting on stated assumptions: the FLOPs over what the GPU
              delivers (its peak dense bf16 throughput, as common.training.metrics.PEAK_TFLOPS lists it, times
              an MFU, the share of that peak a run uses), and the operations the step runs times what the host
              spends launching each, which is what bounds a model too small to keep a GPU busy.

Where the devices differ, the GPU is followed. Its fused attention kernel applies attention dropout inside the
kernel and saves no (T, T) mask, while the CPU's fused kernels have no dropout and fall back to the explicit
path, which saves the whole attention matrix; so the bf16 step runs with the kernel's dropout off and saves
what the GPU's kernel saves. What stays approximate: the CPU's autocast keeps a few operations in bf16 that a
GPU's runs in fp32 (LayerNorm and softmax among them); torch.compile, which may fuse away some saved
tensors, is not applied; the CUDA context, the allocator's rounding and evaluation passes are left out.
"""

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from unittest import mock

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from common.training.metrics import PEAK_TFLOPS
from common.training.optim import adamw

LAPTOP_GPU = "RTX 3050 Laptop"  # the course's reference device: 4 GB, Ampere, bf16 tensor cores
ASSUMED_MFU = 0.3  # an assumption: the share of the GPU's peak a small model's run uses (root README)
LAUNCH_SECONDS = 10e-6  # an assumption: host time eager PyTorch spends on each operation it launches
GPU_MEMORY = 4e9  # bytes on the reference GPU
FITS_MEMORY = 3.5e9  # what a preset may plan for: the rest is the CUDA context and the allocator's slack
FITS_MINUTES = 15  # a preset's run on the reference GPU, by the estimate


@dataclass(frozen=True)
class StepCost:
    """What one training step of a model costs, measured on the CPU."""

    parameters: int
    flops: float  # forward and backward of one micro-batch
    operations: int  # tensor operations the step runs, the optimizer's included
    parameter_bytes: int
    gradient_bytes: int
    optimizer_bytes: int  # AdamW's moments (and its step counters)
    activation_bytes: int  # saved for backward, at the autocast dtype
    backward_bytes: int  # the largest gradients one backward operation takes in and gives out at once
    seconds: float  # the step here, on the CPU, with the counters running

    @property
    def memory_bytes(self) -> int:
        return (self.parameter_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes
                + self.backward_bytes)

    @property
    def laptop_seconds(self) -> float:
        """One step on the reference GPU: its FLOPs at ASSUMED_MFU of the peak, or the host's launches, which
        run ahead of the GPU, whichever takes longer."""
        computing = self.flops / (PEAK_TFLOPS[LAPTOP_GPU] * 1e12 * ASSUMED_MFU)
        return max(computing, self.operations * LAUNCH_SECONDS)


class _Operations(TorchDispatchMode):
    """Counts the tensor operations that reach PyTorch's kernels."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def measure_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: Callable[[], torch.Tensor],
                 dtype: torch.dtype | None) -> StepCost:
    """One training step: `loss()` draws a batch and returns its loss; backward and the optimizer follow.

    The step counted is the second: in the first, AdamW creates its state, work no later step repeats. A
    tensor saved for backward is counted once by the storage it lives in (views share one), and not at all
    when that storage is a parameter's: parameters are counted on their own.
    """
    parameters = list(model.parameters())
    parameter_storages = {p.untyped_storage().data_ptr() for p in parameters}
    saved: dict[int, int] = {}  # storage address -> bytes
    largest = 0  # bytes of gradients into and out of one backward node

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameter_storages:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor  # kept as it is: counting only

    def gradients(grad_inputs: tuple, grad_outputs: tuple) -> None:
        nonlocal largest
        largest = max(largest, sum(g.nbytes for g in (*grad_inputs, *grad_outputs) if g is not None))

    model.train()
    optimizer.zero_grad(set_to_none=True)
    with _as_on_a_gpu(dtype):
        first = loss()
    first.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    start = time.perf_counter()
    with FlopCounterMode(display=False) as flops, _Operations() as operations:
        with saved_tensors_hooks(pack, lambda tensor: tensor), _as_on_a_gpu(dtype):
            step_loss = loss()
        handles = [node.register_hook(gradients) for node in _nodes(step_loss.grad_fn)]
        step_loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    for handle in handles:
        handle.remove()
    gradient_bytes = sum(p.grad.nbytes for p in parameters if p.grad is not None)
    optimizer_bytes = sum(value.nbytes for state in optimizer.state.values() for value in state.values()
                          if torch.is_tensor(value))
    optimizer.zero_grad(set_to_none=True)
    return StepCost(
        parameters=sum(p.numel() for p in parameters), flops=float(flops.get_total_flops()),
        operations=operations.count, parameter_bytes=sum(p.nbytes for p in parameters),
        gradient_bytes=gradient_bytes, optimizer_bytes=optimizer_bytes, activation_bytes=sum(saved.values()),
        backward_bytes=largest, seconds=seconds,
    )


def _nodes(root) -> list:
    """Every node of the autograd graph that ends in `root`."""
    seen, todo = {}, [root]
    while todo:
        node = todo.pop()
        if node is not None and id(node) not in seen:
            seen[id(node)] = node
            todo.extend(next_node for next_node, _ in node.next_functions)
    return list(seen.values())


@contextlib.contextmanager
def _as_on_a_gpu(dtype: torch.dtype | None):
    """bf16 autocast, and attention dropout left to the kernel (module docstring); nothing for fp32."""
    if dtype is None:
        yield
        return
    attention = F.scaled_dot_product_attention

    def fused(*args, dropout_p: float = 0.0, **kwargs) -> torch.Tensor:
        return attention(*args, **kwargs)

    with mock.patch.object(F, "scaled_dot_product_attention", fused), torch.autocast("cpu", dtype=dtype):
        yield


def dtype_for(preset: str) -> torch.dtype | None:
    """The autocast dtype of the device a preset is written for: bf16 on the GPU, none (fp32) on the CPU."""
    return torch.bfloat16 if preset == "gpu" else None


def describe(cost: StepCost, *, preset: str, flops: float, seconds: float, what: str) -> str:
    """The dry run's report: parameters, the run's FLOPs, the peak memory and its parts, the laptop's time.

    `flops` and `seconds` are the whole run's training compute and laptop-GPU time, `what` says what they
    count ("3,000 steps of 32 x 256 tokens").
    """
    precision = "bf16 autocast, as on a GPU" if dtype_for(preset) else "fp32, as on the CPU"
    gb = 1e9
    fits = "fits" if cost.memory_bytes <= FITS_MEMORY else "does not fit"
    return "\n".join([
        f"dry run, nothing trained: preset {preset}; one step measured on the CPU ({precision}) in "
        f"{cost.seconds:.1f} s, counters included",
        f"  parameters      {cost.parameters:,}",
        f"  training FLOPs  {flops:.2e} for {what} ({cost.flops:.2e} a step, counted by FlopCounterMode)",
        f"  peak memory     {cost.memory_bytes / gb:.2f} GB = parameters {cost.parameter_bytes / gb:.2f} + "
        f"gradients {cost.gradient_bytes / gb:.2f} + AdamW {cost.optimizer_bytes / gb:.2f} + activations "
        f"saved for backward {cost.activation_bytes / gb:.2f} + backward's largest step "
        f"{cost.backward_bytes / gb:.2f} ({fits} in {FITS_MEMORY / gb:g} GB of a {GPU_MEMORY / gb:g} GB GPU)",
        f"  laptop GPU      about {seconds / 60:.1f} min on an {LAPTOP_GPU} GPU, an estimate: the FLOPs at "
        f"{PEAK_TFLOPS[LAPTOP_GPU]:g} TFLOP/s bf16 peak x {ASSUMED_MFU:.0%} MFU, or {cost.operations:,} "
        f"operations a step at {LAUNCH_SECONDS * 1e6:g} us each, whichever is longer (both assumed)",
    ])


def report(model: torch.nn.Module, loss: Callable[[], torch.Tensor], cfg: SimpleNamespace) -> dict:
    """A chapter's dry run: one step of `model` (on the CPU) measured, the run's cost printed and returned.

    The optimizer is the chapters' AdamW at the run's settings; `cfg` also gives the preset and the run's
    length: MAX_ITERS steps of GRAD_ACCUM_STEPS micro-batches of BATCH_SIZE sequences of BLOCK_SIZE tokens.
    """
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, torch.device("cpu"))
    cost = measure_step(model, optimizer, loss, dtype_for(cfg.PRESET))
    micro_batches = cfg.MAX_ITERS * cfg.GRAD_ACCUM_STEPS
    flops, seconds = cost.flops * micro_batches, cost.laptop_seconds * micro_batches
    what = f"{cfg.MAX_ITERS:,} steps of {cfg.BATCH_SIZE * cfg.GRAD_ACCUM_STEPS} x {cfg.BLOCK_SIZE} tokens"
    print(describe(cost, preset=cfg.PRESET, flops=flops, seconds=seconds, what=what))
    return summary(cost, flops, seconds)


def summary(cost: StepCost, flops: float, seconds: float) -> dict:
    """The numbers a dry run prints, as a dict (what tests and the README read)."""
    return {"parameters": cost.parameters, "flops": flops, "laptop_minutes": seconds / 60,
            "memory_bytes": cost.memory_bytes, "activation_bytes": cost.activation_bytes,
            "backward_bytes": cost.backward_bytes, "step_seconds": cost.seconds}
