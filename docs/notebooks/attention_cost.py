"""Time and peak memory of one causal attention computation against the sequence length T.

Used by 09-cost-of-attention.ipynb. What is measured: from q, k, v of shape (B, h, T, hs) to the output
(B, h, T, hs), forward only, without gradients; the projections around it (c_attn, c_proj) are left out.
Two paths compute the same function:

- explicit: the (B, h, T, T) score matrix, the causal mask, softmax, @ v, the lines of
  phase1_foundation/project1_gpt/model.py::CausalSelfAttention with fast_attention=False;
- sdpa: F.scaled_dot_product_attention(q, k, v, is_causal=True), PyTorch's fused kernel.

Peak memory is measured, not computed. On a GPU with the allocator's own counters. On a CPU from the
operating system: the peak resident set size during the call minus the resident size just before it. A
process keeps only one peak, and an allocator reuses memory it freed earlier, so each path runs in a fresh
process of its own with T ascending; on Linux the peak is also reset before each call. A reading that did
not raise the peak is reported as None rather than trusted. For that the module also runs as a script:

    python attention_cost.py explicit 256,512,1024 5      # path, the T values, timing repeats

which prints one JSON line per T.
"""

import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import torch
from torch.nn import functional as F

from common.training.device import synchronize

BATCH, HEADS, HEAD_SIZE = 1, 8, 64  # one layer of a model 512 wide, one sequence
MiB = 2**20


def explicit(q, k, v, mask):
    """Attention as chapter 1 writes it out: the scores are a (B, h, T, T) tensor in memory."""
    att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, h, T, T)
    att = att.masked_fill(~mask, float("-inf"))  # mask (T, T) is True where key j <= query i
    return F.softmax(att, dim=-1) @ v  # (B, h, T, hs)


def sdpa(q, k, v, mask):
    """The same function through PyTorch's fused kernel (the mask is implied by is_causal=True)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, hs)


PATHS = {"explicit": explicit, "sdpa": sdpa}


def inputs(T: int, device: torch.device, seed: int = 0):
    """Random q, k, v (B, h, T, hs) and the (T, T) causal mask, all on `device`."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(BATCH, HEADS, T, HEAD_SIZE, generator=g).to(device) for _ in range(3))
    mask = torch.ones(T, T, dtype=torch.bool, device=device).tril_()
    return q, k, v, mask


def sdpa_kernel_name(T: int, device: torch.device) -> str:
    """The kernel F.scaled_dot_product_attention picks for these inputs (the dispatcher's own choice)."""
    q, k, v, _ = inputs(T, device)
    try:
        return torch.nn.attention.SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=True)).name
    except (AttributeError, RuntimeError, ValueError):  # a private function: it may move
        return "unknown"


def describe(device: torch.device) -> str:
    """One line naming the machine the numbers come from."""
    if device.type == "cuda":
        what = f"GPU {torch.cuda.get_device_name(device)}"
    else:
        name = platform.processor() or platform.machine()
        if sys.platform == "linux":
            lines = Path("/proc/cpuinfo").read_text().splitlines()
            name = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")), name)
        elif sys.platform == "darwin":
            cmd = ["sysctl", "-n", "machdep.cpu.brand_string"]
            name = subprocess.run(cmd, capture_output=True, text=True).stdout.strip() or name
        what = (f"CPU {name}, {psutil.cpu_count(logical=False)} cores / {psutil.cpu_count()} logical, "
                f"{torch.get_num_threads()} thread{'s' * (torch.get_num_threads() > 1)} used")
        if device.type == "mps":
            what = "Apple GPU (MPS) with " + what
    return f"{what}; torch {torch.__version__}"


def _rss() -> tuple[int, int]:
    """(current, peak) resident set size of this process, in bytes.

    On Linux from /proc/self/status (VmRSS, VmHWM). Not from getrusage's ru_maxrss: a child process started
    from a big one (a Jupyter kernel) inherits its parent's peak there, which would hide a smaller peak of
    its own. Elsewhere (macOS) from psutil and ru_maxrss (bytes on macOS).
    """
    if sys.platform == "linux":
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        return int(status["VmRSS"].split()[0]) * 1024, int(status["VmHWM"].split()[0]) * 1024
    return psutil.Process().memory_info().rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> None:
    """Lower the peak to the current size (Linux >= 4.0); elsewhere T ascending does the job."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_memory(fn, args: tuple, device: torch.device) -> float | None:
    """MiB that fn(*args) needs at its peak above what was allocated before it (its output included)."""
    gc.collect()
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn(*args)
        synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / MiB
    if device.type == "mps":  # no peak counter, but the caching allocator keeps, after the call, what it took
        torch.mps.empty_cache()
        before = torch.mps.driver_allocated_memory()
        fn(*args)
        synchronize(device)
        return (torch.mps.driver_allocated_memory() - before) / MiB
    _reset_peak()
    before, mark = _rss()
    fn(*args)
    peak = _rss()[1]
    return (peak - before) / MiB if peak > mark else None  # None: the call stayed under an older peak


def measure(path: str, Ts: list[int], repeats: int, device: torch.device) -> list[dict]:
    """For each T (ascending): the first call's peak memory, then the median time of `repeats` calls."""
    fn = PATHS[path]
    with torch.no_grad():
        fn(*inputs(64, device))  # kernel set-up and the first allocations, before anything is measured
        rows = []
        for T in sorted(Ts):
            args = inputs(T, device)
            mib = peak_memory(fn, args, device)
            times = []
            for _ in range(repeats):
                synchronize(device)
                start = time.perf_counter()
                fn(*args)
                synchronize(device)
                times.append(time.perf_counter() - start)
            rows.append({"T": T, "ms": 1000 * statistics.median(times), "mib": mib})
            del args
    return rows


def measure_series(path: str, Ts: list[int], repeats: int, device: torch.device) -> list[dict]:
    """measure(), in this process on a GPU, in a fresh process on a CPU (same thread count as this one)."""
    if device.type != "cpu":
        return measure(path, Ts, repeats, device)
    # MALLOC_MMAP_THRESHOLD_ (glibc) fixes the size above which memory comes straight from the operating
    # system and goes back to it when freed. Left to itself glibc raises that size as the program runs and
    # keeps freed blocks for reuse, and a call that reuses them would not show in the resident size.
    env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()), MALLOC_MMAP_THRESHOLD_="65536")
    cmd = [sys.executable, __file__, path, ",".join(map(str, Ts)), str(repeats)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines()]


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    for row in measure(sys.argv[1], [int(t) for t in sys.argv[2].split(",")], int(sys.argv[3]),
                       torch.device("cpu")):
        print(json.dumps(row), flush=True)
