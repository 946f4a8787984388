"""Exercise 2: what the scaled initialisation of the residual projections does to the residual stream.

GPT-2 §2.3 starts every c_proj (the last matrix of each sub-block, whose output is added to the residual
stream) at N(0, 0.02 / sqrt(2 * n_layer)) instead of N(0, 0.02). Build untrained models of 6, 12, 24 and 48
layers, with the scaling and without, run one batch of random tokens through them, and measure the residual
stream's standard deviation after every block. The curves go to OUT_DIR/scaled_init.png; after the run's
numbers the script prints what the course measured (README, "Experiments").

    uv run python phase1_foundation/project2_gpt2/exercises/ex2_scaled_init.py
    uv run python phase1_foundation/project2_gpt2/exercises/ex2_scaled_init.py --N_EMBD=768 --N_HEAD=12

Predict before you run it: without the scaling, how many times the 6-layer model's variance will the stream
have after the last block of the 48-layer model: about 1, about 2.8 (the square root of 8) or about 8? And
with the scaling?
"""

from pathlib import Path

import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from common.course.exercises import print_measured
from common.errors import run_main
from common.training.config import load_config
from common.training.device import seed_everything
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.config import GPT2_VOCAB
from phase1_foundation.project2_gpt2.exercises import parse_args
from phase1_foundation.project2_gpt2.model import GPT, GPTConfig

DEPTHS = (6, 12, 24, 48)  # n_layer; GPT-2's four models have 12, 24, 36 and 48
INITS = {"scaled": "0.02 / sqrt(2 n_layer)", "unscaled": "0.02"}  # the std of c_proj's weights (GPT-2, GPT-1)


def build(config: GPTConfig, scaled: bool, seed: int) -> GPT:
    """An untrained GPT as model.py initialises it, or with every c_proj drawn at N(0, 0.02) instead."""
    seed_everything(seed)
    model = GPT(config).eval()  # eval: no dropout, so the stream is the weights' doing alone
    if not scaled:
        for name, param in model.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02)
    return model


@torch.no_grad()
def residual_stds(model: GPT, idx: Tensor) -> list[float]:
    """The standard deviation of the residual stream (B, T, C) after the embedding and after each block."""
    stds = []

    def record(module: nn.Module, inputs: tuple, output: Tensor) -> None:
        stds.append(output.std().item())

    # model.drop receives the token + position embedding, the start of the stream; each block returns it
    hooks = [module.register_forward_hook(record) for module in (model.drop, *model.blocks)]
    model(idx)
    for hook in hooks:
        hook.remove()
    return stds


def plot(stds: dict, png_path: Path) -> None:
    """Left: the stream's std after each block, per depth. Right: the variance at the top against depth."""
    fig = Figure(figsize=(14, 5))
    along, top = fig.subplots(1, 2)
    for depth, color in zip(DEPTHS, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False):
        for init, style in (("unscaled", "--"), ("scaled", "-")):
            along.plot(range(depth + 1), stds[init][depth], style, color=color,
                       label=f"{depth} layers, {init}")
    for init, style in (("unscaled", "o--"), ("scaled", "o-")):
        variances = [stds[init][depth][-1] ** 2 for depth in DEPTHS]
        top.plot(DEPTHS, [v / variances[0] for v in variances], style, color="black",
                 label=f"c_proj at N(0, {INITS[init]})")
    top.plot(DEPTHS, [depth / DEPTHS[0] for depth in DEPTHS], ":", color="gray",
             label="proportional to depth")
    along.set(xlabel="blocks passed (0 = the embedding)", ylabel="std of the residual stream",
              title="the residual stream at initialisation")
    top.set(xlabel="n_layer", ylabel=f"variance after the last block / at {DEPTHS[0]} layers", xticks=DEPTHS,
            ylim=(0, None), title="the stream's variance at the top of the stack")
    for ax in (along, top):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex2_scaled_init")
    cfg = load_config(config, settings)
    generator = torch.Generator().manual_seed(cfg.SEED)
    idx = torch.randint(GPT2_VOCAB, (cfg.BATCH_SIZE, cfg.BLOCK_SIZE), generator=generator)  # (B, T)
    stds = {init: {} for init in INITS}
    for depth in DEPTHS:
        model_config = GPTConfig(vocab_size=GPT2_VOCAB, block_size=cfg.BLOCK_SIZE, n_layer=depth,
                                 n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                                 fast_attention=cfg.FAST_ATTENTION)
        for init in INITS:
            stds[init][depth] = residual_stds(build(model_config, init == "scaled", cfg.SEED), idx)
    png = out_dir / "scaled_init.png"
    plot(stds, png)

    print(f"\nstd of the residual stream after the last block ({cfg.N_EMBD} wide; after the embedding: "
          f"{stds['scaled'][DEPTHS[0]][0]:.4f}), c_proj initialised at")
    print(f"{'n_layer':>8}" + "".join(f"{f'N(0, {INITS[init]})':>30}" for init in INITS))
    for depth in DEPTHS:
        print(f"{depth:>8}" + "".join(f"{stds[init][depth][-1]:>30.4f}" for init in INITS))
    growth = {init: (stds[init][DEPTHS[-1]][-1] / stds[init][DEPTHS[0]][-1]) ** 2 for init in INITS}
    print(f"variance at {DEPTHS[-1]} layers / at {DEPTHS[0]}: scaled {growth['scaled']:.2f}, "
          f"unscaled {growth['unscaled']:.2f} (the depth grew {DEPTHS[-1] // DEPTHS[0]}x)\nplot: {png}")
    print_measured(WHAT_WE_MEASURED)
    return {"stds": stds, "variance_growth": growth, "plot": str(png)}


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
The default command on a two-core CPU (about half a minute): with the scaling, the stream's final standard
deviation is 0.067, 0.067, 0.067 and 0.068 at 6, 12, 24 and 48 layers; without it 0.233, 0.336, 0.514 and
0.710. The variance grows about in proportion to the number of blocks: 9.3 times from 6 layers to 48, where
the scaled model's grows 1.03 times. A pre-LN block never changes x, it adds to it: x + attn(ln_1(x)),
then + mlp(ln_2(x)). The LayerNorm in front hands each sub-block an input of unit variance however large x has
grown, so every sub-block adds about the same variance v, and random initial weights make the additions
roughly independent: after N of them the variance is that of the embedding plus N * v. Scaling c_proj's
weights by 1/sqrt(N) scales each addition's variance by 1/N, so the N of them add up to about v at any depth.
"""


if __name__ == "__main__":
    run_main(main)
