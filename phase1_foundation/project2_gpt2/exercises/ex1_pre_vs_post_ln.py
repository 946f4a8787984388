"""Exercise 1: pre-LN (GPT-2) against post-LN (GPT-1) at depth 24: the loss, and the gradient of each layer.

GPT-2 §2.3 moved the LayerNorm to the input of each sub-block and added one after the last block. Build a
24-layer model both ways from the same initial weights, train both on the same batches at the chapter's
learning rate (1e-3) with a 10-step warmup, and measure two things: the loss curves, and the norm of the
gradient of each layer's weights (on one fixed batch, at initialisation and every EVAL_INTERVAL steps).

    pre-LN  (GPT-2, model.py's Block):  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x));  ... ln_f at the end
    post-LN (GPT-1, PostLNBlock here):  x = ln_1(x + attn(x));  x = ln_2(x + mlp(x));  no final LayerNorm

    uv run python phase1_foundation/project2_gpt2/exercises/ex1_pre_vs_post_ln.py
    uv run python phase1_foundation/project2_gpt2/exercises/ex1_pre_vs_post_ln.py --N_LAYER=12

What you should see: at initialisation the gradients of both reach every layer: post-LN's are level from
bottom to top, pre-LN's a little larger at the bottom. Within the first 25 steps post-LN's gradients in the
bottom layers fall to about a millionth of those at the top, a straight line on the plot's log scale (the
same factor lost at every layer), and its loss stays on the unigram plateau (the loss of a model that
ignores the context) for the whole run; pre-LN's gradients stay within a small factor of each other, and its
loss falls below the plateau and keeps falling. In post-LN the only path from the loss to layer l passes
through every LayerNorm above it, and each divides the gradient by the spread of what it normalises; once
training makes the sub-blocks' outputs as large as the stream they are added to, that is a factor above one
per LayerNorm, 48 times over (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture",
analyse these gradients; Liu et al. 2020, "Understanding the Difficulty of Training Transformers", add that
post-LN's heavy reliance on its residual branches amplifies every update). Pre-LN's residual stream is a
plain sum from the embedding to ln_f, so every layer gets the loss's gradient directly. (At initialisation
neither shows it: GPT-2's small N(0, 0.02) weights make every sub-block's output tiny next to the stream,
and each LayerNorm then passes the gradient on almost unchanged.) The curves and the gradients are saved as
OUT_DIR/pre_vs_post_ln.png (default OUT_DIR: checkpoints/project2/exercises/ex1_pre_vs_post_ln).
"""

import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from common.baselines import unigram_cross_entropy
from common.config import load_config
from common.device import seed_everything
from common.optim import adamw, set_lr, warmup_cosine
from common.tokens import Batches, load_tokens
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.download_data import prepare
from phase1_foundation.project2_gpt2.exercises import parse_args
from phase1_foundation.project2_gpt2.model import GPT, Block, GPTConfig, KVCache
from phase1_foundation.project2_gpt2.tokenizer import load_tokenizer

# The exercise's changes to the preset: 24 layers (GPT-2 medium's depth), narrow enough to train on a CPU in
# minutes, the chapter's learning rate with a short warmup, only the first 200 steps, where the two differ
# most, and the gradients measured every 25. Your own --NAME=value settings come after these, so they win.
SETTINGS = [
    "--N_LAYER=24", "--N_HEAD=4", "--N_EMBD=64", "--BLOCK_SIZE=64", "--BATCH_SIZE=16", "--GRAD_ACCUM_STEPS=1",
    "--LEARNING_RATE=1e-3", "--WARMUP_ITERS=10", "--MAX_ITERS=200", "--EVAL_INTERVAL=25",
]
VARIANTS = {"post_ln": "post-LN (GPT-1)", "pre_ln": "pre-LN (GPT-2)"}


class PostLNBlock(Block):
    """GPT-1's block: the same sub-blocks and LayerNorms as GPT-2's, each LayerNorm after its addition."""

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:  # (B, T, C) -> (B, T, C)
        x = self.ln_1(x + self.attn(x, cache))
        x = self.ln_2(x + self.mlp(x))
        return x


def build(config: GPTConfig, post_ln: bool, seed: int) -> GPT:
    """The chapter's GPT, or the same weights in post-LN blocks with no final LayerNorm: one seed, so the two
    models start from identical weights and differ only in where the LayerNorms sit."""
    seed_everything(seed)
    model = GPT(config)
    if post_ln:
        for i, block in enumerate(model.blocks):
            post = PostLNBlock(config)
            post.load_state_dict(block.state_dict())
            model.blocks[i] = post
        model.ln_f = nn.Identity()  # a post-LN stack already ends in a LayerNorm (the last block's ln_2)
    return model


def layer_gradient_norms(model: GPT, x: Tensor, y: Tensor) -> list[float]:
    """The norm of the loss's gradient with respect to all of each block's parameters, bottom block first.

    Measured without dropout and without touching the optimizer: the gradients are cleared afterwards.
    """
    model.eval()
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    norms = [math.sqrt(sum(p.grad.pow(2).sum().item() for p in block.parameters())) for block in model.blocks]
    model.zero_grad(set_to_none=True)
    model.train()
    return norms


def train_step(model: GPT, batches: Batches, optimizer: torch.optim.Optimizer, cfg: SimpleNamespace) -> float:
    """One optimizer step as train.py takes it on one device, in fp32: GRAD_ACCUM_STEPS micro-batches, the
    gradient clipped at GRAD_CLIP, AdamW. Returns the mean loss over the micro-batches."""
    total = 0.0
    for _ in range(cfg.GRAD_ACCUM_STEPS):
        x, y = batches.next()  # (B, T) each
        _, loss = model(x, y)
        (loss / cfg.GRAD_ACCUM_STEPS).backward()
        total += loss.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total / cfg.GRAD_ACCUM_STEPS


@torch.no_grad()
def validation_loss(model: GPT, val_tokens: np.ndarray, cfg: SimpleNamespace, device: torch.device) -> float:
    """Mean loss on EVAL_ITERS validation batches, the same ones for both models."""
    model.eval()
    batches = Batches(val_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED + 1)
    loss = sum(model(*batches.next())[1].item() for _ in range(cfg.EVAL_ITERS)) / cfg.EVAL_ITERS
    model.train()
    return loss


def bottom_over_top(norms: list[float]) -> float:
    """Median gradient norm of the bottom quarter of the layers over that of the top quarter: 1 when every
    layer gets the same, far below 1 when the gradient vanishes on its way down."""
    quarter = max(1, len(norms) // 4)
    return float(np.median(norms[:quarter]) / np.median(norms[-quarter:]))


def train_variant(post_ln: bool, cfg: SimpleNamespace, vocab_size: int, train_tokens: np.ndarray,
                  val_tokens: np.ndarray, device: torch.device) -> dict:
    """Train one arrangement as train.py would; its losses and its per-layer gradient norms."""
    model = build(GPTConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                            n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                            fast_attention=cfg.FAST_ATTENTION), post_ln, cfg.SEED).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    batches = Batches(train_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED)  # same for both
    probe = Batches(val_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED).next()  # fixed batch
    gradients = {0: layer_gradient_norms(model, *probe)}
    losses, start = [], time.perf_counter()
    for step in range(cfg.MAX_ITERS):
        set_lr(optimizer, warmup_cosine(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                                        total_steps=cfg.MAX_ITERS, floor=cfg.MIN_LR_RATIO))
        losses.append(train_step(model, batches, optimizer, cfg))
        if (step + 1) % cfg.EVAL_INTERVAL == 0 or step + 1 == cfg.MAX_ITERS:
            gradients[step + 1] = layer_gradient_norms(model, *probe)
    print(f"{VARIANTS['post_ln' if post_ln else 'pre_ln']}: {cfg.MAX_ITERS} steps in "
          f"{time.perf_counter() - start:.0f} s")
    last = losses[-10:]
    return {"losses": losses, "train_loss": sum(last) / len(last),
            "val_loss": validation_loss(model, val_tokens, cfg, device), "gradients": gradients,
            "bottom_over_top": {step: bottom_over_top(norms) for step, norms in gradients.items()}}


def plot(results: dict, unigram_loss: float, png_path: Path) -> Path:
    """Left: each layer's gradient norm at initialisation and at the end. Right: the train loss curves."""
    fig = Figure(figsize=(14, 5))
    grads, losses = fig.subplots(1, 2)
    for (name, label), color in zip(VARIANTS.items(), ("tab:red", "tab:blue"), strict=True):
        gradients = results[name]["gradients"]
        last = max(gradients)
        layers = range(1, len(gradients[0]) + 1)
        grads.plot(layers, gradients[0], "--", color=color, label=f"{label}, at initialisation")
        grads.plot(layers, gradients[last], "o-", color=color, markersize=3, label=f"{label}, step {last}")
        curve = results[name]["losses"]
        losses.plot(range(1, len(curve) + 1), curve, color=color, label=label)
    grads.set(yscale="log", xlabel="layer (1 = nearest the embedding)", ylabel="gradient norm of the layer",
              title="where the gradient reaches")
    losses.axhline(unigram_loss, color="gray", linestyle="--", label="unigram baseline (ignores context)")
    losses.set(xlabel="step", ylabel="train loss (nats per token)", title="training")
    for ax in (grads, losses):
        ax.grid(alpha=0.3)
        ax.legend()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=120)
    return png_path


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex1_pre_vs_post_ln")
    cfg = load_config(config, [*SETTINGS, *settings])
    device = torch.device(cfg.DEVICE)
    data_dir = prepare(cfg)
    train_tokens, val_tokens = load_tokens(data_dir, "train"), load_tokens(data_dir, "val")
    vocab_size = load_tokenizer(data_dir).vocab_size
    results = {name: train_variant(name == "post_ln", cfg, vocab_size, train_tokens, val_tokens, device)
               for name in VARIANTS}
    unigram = unigram_cross_entropy(np.asarray(train_tokens), np.asarray(val_tokens), vocab_size)
    png = plot(results, unigram, out_dir / "pre_vs_post_ln.png")

    print("\ngradient norm of the bottom quarter of the layers / the top quarter's (medians), on one batch:")
    print(f"{'step':>6}" + "".join(f"{label:>18}" for label in VARIANTS.values()))
    for step in results["pre_ln"]["gradients"]:
        print(f"{step:>6}" + "".join(f"{results[name]['bottom_over_top'][step]:>18.1e}" for name in VARIANTS))
    print(f"\n{'':<18}{'train loss':>12}{'val loss':>10}   (nats per token; train: the last 10 steps)")
    for name, label in VARIANTS.items():
        print(f"{label:<18}{results[name]['train_loss']:>12.3f}{results[name]['val_loss']:>10.3f}")
    print(f"{'unigram baseline':<18}{'':>12}{unigram:>10.3f}   (ignores context)\nplot: {png}")
    return {**results, "unigram_loss": unigram, "plot": str(png)}


if __name__ == "__main__":
    main()
