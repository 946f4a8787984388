"""Exercise 3: what the KV cache buys, as the sequence grows.

Generate greedily from a one-token prompt to 64, 128, 256 and 512 tokens, with the KV cache and without,
and measure the tokens per second of each; the model has the chapter's shape, GPT-2's 50,257-token vocabulary
and untrained weights. Both ways must give the same tokens. On a busy CPU run it with OMP_NUM_THREADS=1. The
table is also drawn as OUT_DIR/kv_cache_speed.png; after the run's numbers the script prints what the course
measured (README, "Experiments", and "The KV cache" for why).

    uv run python phase1_foundation/project2_gpt2/exercises/ex3_kv_cache_speed.py
    uv run python phase1_foundation/project2_gpt2/exercises/ex3_kv_cache_speed.py --BLOCK_SIZE=1024

Predict before you run it: docs/09-cost-of-attention.md measured the cache with a 256-token vocabulary; will
GPT-2's 50,257 tokens make the speed-ups larger or smaller? On a CPU, how many times faster will the cache
make generation at 64 tokens, and at 512: about 1.5, 5 or 50? Is there work in a step that no cache can save?
"""

import time
from pathlib import Path

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from common.course.exercises import print_measured
from common.errors import CourseError, run_main
from common.training.config import load_config
from common.training.device import seed_everything, synchronize
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.config import GPT2_VOCAB
from phase1_foundation.project2_gpt2.exercises import parse_args
from phase1_foundation.project2_gpt2.generate import generate
from phase1_foundation.project2_gpt2.model import GPT, GPTConfig

SETTINGS = ["--BLOCK_SIZE=512"]  # your own --NAME=value settings come after this one, so they win
FRACTIONS = (8, 4, 2, 1)  # total lengths BLOCK_SIZE / 8, / 4, / 2 and BLOCK_SIZE


def timed_generate(model: GPT, prompt: torch.Tensor, new_tokens: int, use_cache: bool
                   ) -> tuple[torch.Tensor, float]:
    """Greedy continuation of prompt (1, T) by new_tokens tokens, and the seconds it took."""
    synchronize(prompt.device)
    start = time.perf_counter()
    out = generate(model, prompt, new_tokens, temperature=0, use_cache=use_cache)  # (1, T + new_tokens)
    synchronize(prompt.device)
    return out, time.perf_counter() - start


def plot(lengths: list[int], speeds: dict, png_path: Path) -> None:
    """Tokens per second against total length, with and without the cache, on log-log axes."""
    fig = Figure(figsize=(7, 5))
    ax = fig.subplots()
    for use_cache, label in ((True, "with the KV cache"), (False, "without (the whole sequence again)")):
        ax.plot(lengths, speeds[use_cache], "o-", label=label)
    ax.set_xscale("log", base=2)  # each length is twice the last
    ax.set_yscale("log")
    ax.xaxis.set_minor_locator(NullLocator())  # the measured lengths alone are marked
    ax.set(xticks=lengths, xticklabels=[str(n) for n in lengths], xlabel="total length (tokens)",
           ylabel="generated tokens per second", title="greedy generation")
    ax.grid(alpha=0.3)
    ax.legend()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex3_kv_cache_speed")
    cfg = load_config(config, [*SETTINGS, *settings])
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    model = GPT(GPTConfig(vocab_size=GPT2_VOCAB, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                          n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                          fast_attention=cfg.FAST_ATTENTION)).to(device).eval()
    print(f"model: {cfg.N_LAYER} layers x {cfg.N_EMBD}, {model.num_parameters():,} parameters, on {device}")
    prompt = torch.randint(GPT2_VOCAB, (1, 1), generator=torch.Generator().manual_seed(cfg.SEED)).to(device)
    for use_cache in (True, False):  # the first calls pay for memory allocation and kernel set-up
        timed_generate(model, prompt, 8, use_cache)

    lengths = [cfg.BLOCK_SIZE // n for n in FRACTIONS]
    speeds = {True: [], False: []}
    print(f"\n{'total length':>12}{'tokens/s without':>18}{'with the cache':>16}{'speed-up':>10}")
    for length in lengths:
        outputs = {}
        for use_cache in (False, True):
            outputs[use_cache], seconds = timed_generate(model, prompt, length - 1, use_cache)
            speeds[use_cache].append((length - 1) / seconds)
        if not torch.equal(outputs[True], outputs[False]):
            raise CourseError(f"error: at length {length} the cached and uncached greedy outputs differ")
        print(f"{length:>12}{speeds[False][-1]:>18,.0f}{speeds[True][-1]:>16,.0f}"
              f"{speeds[True][-1] / speeds[False][-1]:>9.1f}x")
    png = out_dir / "kv_cache_speed.png"
    plot(lengths, speeds, png)
    print(f"greedy outputs identical with and without the cache at every length\nplot: {png}")
    print_measured(WHAT_WE_MEASURED)
    return {"lengths": lengths, "with_cache": speeds[True], "without_cache": speeds[False],
            "speedup": [a / b for a, b in zip(speeds[True], speeds[False], strict=True)], "plot": str(png)}


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
One thread on a two-core CPU, tokens/s without -> with the cache: 239 -> 376 at 64 tokens (1.6x), 172 -> 396
at 128 (2.3x), 108 -> 376 at 256 (3.5x), 60 -> 360 at 512 (6.0x), and the same tokens both ways (about a
minute, the other core idle). Without the cache the speed falls as the length grows, and faster the longer it
gets, since each new token reprocesses everything before it; with it the speed barely moves, since only the
new token's query meets the cached keys. The speed-up starts small because both ways pay for the output head
on the newest position: one position scored against 50,257 tokens costs 50,257 * 192 multiply-adds, 5.5 times
the 4 * 12 * 192^2 of the four blocks' weight matrices, and no cache can save that. On a GPU, which runs such
small single-token steps far below its capacity, we expect the speed-up at these lengths to be smaller; this
exercise has not been run on one.
"""


if __name__ == "__main__":
    run_main(main)
