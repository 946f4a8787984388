"""Chapter 2's training step against a lean from-scratch GPT trained the way nanoGPT trains, at nanoGPT's CPU
configuration, in one process.

    uv run python phase1_foundation/project2_gpt2/bench_training.py
    uv run python phase1_foundation/project2_gpt2/bench_training.py --N_LAYER=6 --BLOCK_SIZE=128

Is this training loop as fast as the smallest well-known one? The defaults are the CPU configuration of
nanoGPT's README. The lean side is written here from nanoGPT's choices (no biases, exact GELU, fused
attention, a memmap reopened per batch, AdamW one tensor at a time); ours is train.py's own step. The sides
take turns after a warm-up round, the median round counts, and one more round each under torch.profiler
splits a step into kinds of work. README, "Against a lean training loop".
"""

import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from common.data.tokens import Batches
from common.errors import run_main
from common.training.config import load_config
from common.training.device import autocast, describe, grad_scaler, seed_everything
from common.training.metrics import matmul_flops
from common.training.optim import adamw, set_lr, warmup_cosine
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.bench import race, report
from phase1_foundation.project2_gpt2.model import GPT, GPTConfig
from phase1_foundation.project2_gpt2.parallel import wrap

# PAPER: none; nanoGPT's README, "I only have a macbook" (its CPU command line), and its train.py defaults.
NANOGPT_CPU = ["--DEVICE=cpu", "--N_LAYER=4", "--N_HEAD=4", "--N_EMBD=128", "--BLOCK_SIZE=64",
               "--BATCH_SIZE=12", "--GRAD_ACCUM_STEPS=1", "--DROPOUT=0.0", "--LEARNING_RATE=1e-3",
               "--BETAS=0.9,0.99", "--WARMUP_ITERS=100", "--MAX_ITERS=2000",
               "--VOCAB_SIZE=65"]  # the 65 characters of TinyShakespeare
ROUNDS = 7  # timed rounds per side, after one warm-up round
STEPS = 20  # optimizer steps per round and side
TOKENS = 300_000  # length of the random token file both sides read


class LeanGPT(nn.Module):
    """The reference: a GPT as nanoGPT builds it at its defaults, in as few lines as it takes."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int):
        super().__init__()
        self.n_head = n_head
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "ln_1": nn.LayerNorm(n_embd, bias=False), "qkv": nn.Linear(n_embd, 3 * n_embd, bias=False),
            "attn_out": nn.Linear(n_embd, n_embd, bias=False), "ln_2": nn.LayerNorm(n_embd, bias=False),
            "fc": nn.Linear(n_embd, 4 * n_embd, bias=False),
            "fc_out": nn.Linear(4 * n_embd, n_embd, bias=False),
        }) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, bias=False)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / (2 * n_layer) ** 0.5 if name.endswith("_out.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx: Tensor, targets: Tensor) -> Tensor:
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        C, nh = x.size(-1), self.n_head
        for layer in self.layers:
            q, k, v = layer["qkv"](layer["ln_1"](x)).split(C, dim=2)  # 3 x (B, T, C)
            q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
            x = x + layer["attn_out"](y)
            x = x + layer["fc_out"](F.gelu(layer["fc"](layer["ln_2"](x))))  # exact GELU
        logits = self.head(self.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def reference_round(path: Path, cfg: SimpleNamespace, device: torch.device, steps: int):
    """The reference's training steps, as nanoGPT's loop takes them on a CPU."""
    model = LeanGPT(cfg.VOCAB_SIZE, cfg.BLOCK_SIZE, cfg.N_LAYER, cfg.N_HEAD, cfg.N_EMBD).to(device)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": cfg.WEIGHT_DECAY},
                                   {"params": others, "weight_decay": 0.0}], lr=cfg.LEARNING_RATE,
                                  betas=cfg.BETAS)  # neither foreach nor fused: what a CPU gets by default
    generator = torch.Generator().manual_seed(cfg.SEED)
    step = 0

    def batch() -> tuple[Tensor, Tensor]:
        data = np.memmap(path, dtype=np.uint16, mode="r")  # reopened every call, as nanoGPT does
        starts = torch.randint(len(data) - cfg.BLOCK_SIZE, (cfg.BATCH_SIZE,), generator=generator)
        T = cfg.BLOCK_SIZE
        x = torch.stack([torch.from_numpy(data[s : s + T].astype(np.int64)) for s in starts])  # (B, T)
        y = torch.stack([torch.from_numpy(data[s + 1 : s + 1 + T].astype(np.int64)) for s in starts])
        return x.to(device), y.to(device)

    def run() -> None:
        nonlocal step
        for _ in range(steps):
            lr = warmup_cosine(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                               total_steps=cfg.MAX_ITERS, floor=cfg.MIN_LR_RATIO)
            set_lr(optimizer, lr)
            x, y = batch()
            loss = model(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss.item()  # nanoGPT logs every step at its CPU settings
            step += 1

    return run


def our_round(path: Path, cfg: SimpleNamespace, device: torch.device, steps: int):
    """Ours: train.py's step, line for line as its loop takes it in one process, with its data path, model,
    AdamW and clipping (compiled with --COMPILE=true; the warm-up round then includes the compiling)."""
    model = GPT(GPTConfig(vocab_size=cfg.VOCAB_SIZE, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                          n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT)).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)
    batches = Batches(np.memmap(path, dtype=np.uint16, mode="r"), cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device,
                      seed=cfg.SEED)
    stepper = wrap(model, cfg.COMPILE, 1, device)  # as train.py runs it
    step = 0

    def run() -> None:
        nonlocal step
        for _ in range(steps):
            set_lr(optimizer, warmup_cosine(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                                            total_steps=cfg.MAX_ITERS, floor=cfg.MIN_LR_RATIO))
            loss_sum = torch.zeros((), device=device)
            for _ in range(cfg.GRAD_ACCUM_STEPS):
                x, y = batches.next()  # (B, T) each
                with autocast(device):
                    _, loss = stepper(x, y)
                scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
                loss_sum += loss.detach()
            scaler.unscale_(optimizer)  # so that clipping sees the true gradients (fp16 scales them)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            loss_sum.item()  # train.py reads each step's loss (its report needs it), which waits for the step

    return run, model


def main(argv: list[str] | None = None, rounds: int = ROUNDS, steps: int = STEPS) -> dict:
    """Print and return the race: tokens/s of each side and the ratio ours / reference."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = load_config(config, ["--PRESET=cpu", *NANOGPT_CPU, *argv])
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tokens.bin"
        np.random.default_rng(cfg.SEED).integers(cfg.VOCAB_SIZE, size=TOKENS, dtype=np.uint16).tofile(path)
        ours, model = our_round(path, cfg, device, steps)
        sides = {"ours": ours, "theirs": reference_round(path, cfg, device, steps)}
        print(f"device: {describe(device)}; torch {torch.__version__}; "
              f"this device's matmuls: {matmul_flops(device) / 1e9:,.0f} GFLOP/s")
        print(f"shape: {cfg.N_LAYER} layers, {cfg.N_HEAD} heads, {cfg.N_EMBD} wide, block {cfg.BLOCK_SIZE}, "
              f"batch {cfg.BATCH_SIZE}, vocabulary {cfg.VOCAB_SIZE}; "
              f"ours {model.num_parameters():,} parameters")
        seconds = race(sides, rounds, device)
        tokens = steps * cfg.BATCH_SIZE * cfg.BLOCK_SIZE
        labels = ("ours (train.py's step)", "lean GPT, nanoGPT's step")
        result = report(f"training: {steps} steps a round of {cfg.BATCH_SIZE} x {cfg.BLOCK_SIZE} tokens",
                        seconds, tokens, target=1.2, labels=labels)
        result["profile"] = {name: profile(run, steps) for name, run in sides.items()}
    print(f"\nwhere a step's time goes, ms (torch.profiler over one more round of {steps} steps a side):")
    print(f"  {'':<40}{'ours':>8}{'lean':>8}")
    for kind in result["profile"]["ours"]:
        print(f"  {kind:<40}{result['profile']['ours'][kind]:>8.2f}{result['profile']['theirs'][kind]:>8.2f}")
    return result


# The kinds of work a step is split into: the profiler's own op names (self time, summed per step).
KINDS = {
    "matrix products, forward and backward": ("aten::mm", "aten::addmm", "aten::bmm"),
    "GELU, forward and backward": ("aten::gelu", "aten::gelu_backward"),
    "attention (fused kernel), fwd and bwd": ("aten::_scaled_dot_product",),
    "copies (aten::copy_)": ("aten::copy_",),
    "sums (bias gradients, norms)": ("aten::sum",),
}
OPTIMIZER = "Optimizer.step#AdamW.step"  # the profiler's label for one optimizer.step(), children included


def profile(run, steps: int) -> dict[str, float]:
    """Milliseconds per step of each kind of work in one round of `run`, the optimizer step, and the whole
    step's ops together, as torch.profiler measures them (its own overhead makes them a little slower)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    events = prof.key_averages()
    per_step = {kind: sum(e.self_cpu_time_total for e in events if e.key.startswith(names)) / steps / 1e3
                for kind, names in KINDS.items()}
    optimizer = sum(e.cpu_time_total for e in events if e.key == OPTIMIZER)
    per_step["AdamW (optimizer.step)"] = optimizer / steps / 1e3
    per_step["all ops"] = sum(e.self_cpu_time_total for e in events) / steps / 1e3
    return per_step


if __name__ == "__main__":
    run_main(main)
