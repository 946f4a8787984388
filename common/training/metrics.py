"""What a training run reports: a JSONL log of losses, a loss plot, MFU, the device's measured matmul rate, a
NaN guard, and the summary.json it ends with, which the exercises read after running train.py
as a program."""

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from common.errors import CourseError
from common.files import write_atomic
from common.training.device import autocast_dtype, synchronize


class MetricsLog:
    """A JSONL file beside the checkpoints: one {"step": ..., "train_loss": ..., ...} object per line.

    JSONL because a line is complete the moment it is written: a crash loses at most the line being
    written, and the file can be read (or plotted) while training runs.

    A resumed run restarts from its checkpoint's step, so lines logged after that checkpoint belong to
    a future that never happened; we drop them so the curve continues without a loop-back.
    A fresh run (resume_step=None) starts a new file.
    """

    def __init__(self, path: Path, resume_step: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = [] if resume_step is None else [r for r in self.read() if r["step"] <= resume_step]
        # a crash now must not lose the curve we are keeping
        write_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))

    def log(self, step: int, **fields: float) -> None:
        """Append one line. Opening the file for each line flushes it, so a crash keeps every line logged."""
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **fields}) + "\n")

    def read(self) -> list[dict]:
        return read_metrics(self.path)


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics file, skipping a last line cut short by a crash."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def plot_losses(metrics_path: Path, png_path: Path, title: str, panels: Sequence[str] = ("loss",),
                references: dict[str, dict[str, float]] | None = None) -> Path:
    """Plot train and val curves against step into a PNG: one panel per name in `panels`, drawing the
    `train_<name>` and `val_<name>` fields of the log (a model with two losses, like BERT's, gets two panels).
    `references` adds dashed horizontal lines to a panel, {panel: {label: loss}}: the baselines to beat.

    Validation runs every few hundred steps, so its points are sparser than the training ones; each
    series is plotted from the lines that have it. We draw on a bare matplotlib Figure, which renders
    with the Agg backend, instead of going through pyplot: that needs no display and leaves the
    backend of a notebook that imports this module alone.
    """
    records = read_metrics(metrics_path)
    if not records:
        raise CourseError(f"error: no metrics in {metrics_path}; train first, the run writes this file")
    # Imported here, not at the top: matplotlib takes seconds to load, and a run needs it only at its end.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8 * len(panels), 5))
    for ax, name in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels, strict=True):
        for split, style in (("train", "-"), ("val", "o-")):
            points = [(r["step"], r[f"{split}_{name}"]) for r in records if f"{split}_{name}" in r]
            if points:
                steps, values = zip(*points, strict=True)
                ax.plot(steps, values, style, label=split)
        for (label, value), color in zip((references or {}).get(name, {}).items(), ("C2", "C3", "C4"),
                                         strict=False):
            ax.axhline(value, color=color, linestyle="--", label=f"{label} ({value:.3f})")
        ax.set(xlabel="step", ylabel=f"{name.replace('_', ' ')} (nats)", title=title)
        ax.grid(alpha=0.3)
        ax.legend()
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=120)
    return png_path


# Peak dense tensor-core throughput in TFLOP/s for bf16 (fp16 on T4 and V100, which have no bf16),
# never the 2x "with sparsity" figures. Data-centre cards: NVIDIA's datasheets. GeForce cards: the
# "FP32 accumulate" column of NVIDIA's Ampere (GA102) and Ada (AD102) whitepapers, which is what
# PyTorch's bf16 matmuls use; cards those tables omit are computed the same way, as
# SMs x 512 FLOPs per clock x boost clock. Laptop parts use the highest boost clock NVIDIA lists, which
# a laptop with a lower power limit does not reach, so their MFU reads low.
PEAK_TFLOPS = {
    "A100": 312.0,
    "H100": 989.5,  # SXM, named "NVIDIA H100 80GB HBM3"
    "H100 PCIe": 756.5,
    "H100 NVL": 835.5,
    "H200": 989.5,
    "H200 NVL": 835.5,
    "L4": 121.0,
    "L40": 181.0,
    "L40S": 362.0,
    "T4": 65.0,
    "V100": 125.0,  # SXM2
    "V100-PCIE": 112.0,
    "V100S": 130.0,
    "RTX 3050": 18.2,
    "RTX 3060": 25.5,
    "RTX 3060 Ti": 32.4,
    "RTX 3070": 40.6,
    "RTX 3070 Ti": 43.5,
    "RTX 3080": 59.5,
    "RTX 3080 Ti": 68.2,
    "RTX 3090": 71.0,
    "RTX 3090 Ti": 80.0,
    "RTX 4060": 30.2,
    "RTX 4060 Ti": 44.1,
    "RTX 4070": 58.3,
    "RTX 4070 SUPER": 71.0,
    "RTX 4070 Ti": 80.2,
    "RTX 4070 Ti SUPER": 88.2,
    "RTX 4080": 97.5,
    "RTX 4080 SUPER": 104.4,
    "RTX 4090": 165.2,
    "RTX 3050 Laptop": 14.3,
    "RTX 3050 Ti Laptop": 17.4,
    "RTX 3060 Laptop": 26.2,
    "RTX 3070 Laptop": 33.2,
    "RTX 3070 Ti Laptop": 35.0,
    "RTX 3080 Laptop": 42.0,
    "RTX 3080 Ti Laptop": 47.2,
    "RTX 4050 Laptop": 24.3,
    "RTX 4060 Laptop": 29.1,
    "RTX 4070 Laptop": 40.1,
    "RTX 4080 Laptop": 67.7,
    "RTX 4090 Laptop": 79.4,
}


def peak_flops(device: torch.device) -> float | None:
    """Peak FLOP/s of `device`, or None when we do not know it (CPU, Apple GPU, an unlisted card).

    The longest table name found in the card's name wins, so "RTX 4090 Laptop GPU" is not taken for
    a desktop RTX 4090 and "L40S" is not taken for an L4; a laptop never gets a desktop number.
    Guessing for unknown hardware would print a confident but wrong MFU, so we return None and the
    caller reports "MFU unknown".
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    matches = [model for model in PEAK_TFLOPS if model in name]
    if not matches:
        return None
    model = max(matches, key=len)
    if "Laptop" in name and "Laptop" not in model:
        return None
    return PEAK_TFLOPS[model] * 1e12


def mfu(flops_per_token: float, tokens_per_second: float, device) -> float | None:
    """Model FLOPs utilisation: the fraction of the hardware's peak that the training math uses.

    flops_per_token counts the forward and backward pass (about 6 x parameters), so MFU compares the
    model's necessary work with the chip's limit, independent of implementation tricks.
    """
    peak = peak_flops(device)
    if peak is None:
        return None
    return flops_per_token * tokens_per_second / peak


def matmul_flops(device: torch.device, size: int = 1024, repeats: int = 20) -> float:
    """FLOP/s of `device` on square matmuls just now, in the precision training uses (bf16 or fp16 on CUDA,
    fp32 elsewhere): printed beside a run's tokens/s, it tells a slow or busy machine from a slow program."""
    device = torch.device(device)
    dtype = autocast_dtype(device) or torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    a @ b  # the first call pays for setup
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def check_finite(loss: float, step: int, last_checkpoint: Path | None) -> None:
    """Stop at the first NaN or infinite loss, because every later step would only spread it.

    Saving now would store NaN weights (and keep-K pruning could then delete the good ones), so we stop
    without saving and point at the last good checkpoint. The usual cause is a learning rate too high
    for the model or the batch size.
    """
    loss = float(loss)
    if math.isfinite(loss):
        return
    if last_checkpoint is None:
        where = (
            "no checkpoint was saved yet; lower the learning rate (or lengthen the warmup) and start again"
        )
    else:
        where = (
            f"the last good checkpoint is kept: {last_checkpoint}; "
            "lower the learning rate (or lengthen the warmup) and resume from it"
        )
    raise CourseError(f"error: the loss became {loss} at step {step}, so training stopped; {where}")


def save_summary(out_dir: Path, summary: dict) -> Path:
    """The numbers a run ends with, as out_dir/summary.json beside its checkpoints."""
    # atomic: an exercise reads a summary.json that exists as the sign that its run finished
    return write_atomic(Path(out_dir) / "summary.json", json.dumps(summary, indent=1) + "\n")
