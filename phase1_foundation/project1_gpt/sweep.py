"""How the cpu preset was chosen: train each candidate setting for the same wall-clock time, with several
seeds, and compare how far below the bigram model each ended.

    # every candidate, one seed
    uv run python phase1_foundation/project1_gpt/sweep.py
    # time each candidate's step only, on an otherwise idle machine
    uv run python phase1_foundation/project1_gpt/sweep.py --TIME_ONLY
    # two of them, with three seeds each
    uv run python phase1_foundation/project1_gpt/sweep.py --SEEDS=1337,1,2 narrow-lr2e-3 no-dropout-lr1e-3

Each candidate's step is timed once on this machine (kept in step_seconds.json); every candidate then gets
the time that BUDGET's steps of the 4 x 256 model with GPT-1's dropout take, trains through train.py with a
warmup of a sixth of its steps, and is scored against the bigram model on its own validation windows.
Finished runs are skipped, so an interrupted sweep continues where it stopped.
README appendix, "How the cpu preset was chosen".
"""

import json
import statistics
import sys

from common.course.exercises import train_in_new_process
from common.errors import CourseError, run_main
from common.files import REPO_ROOT
from common.training.metrics import read_metrics
from phase1_foundation.project1_gpt.config import PRESETS

MODULE = "phase1_foundation.project1_gpt.train"
OUT_DIR = REPO_ROOT / "checkpoints" / "project1" / "sweep"
PROBE_STEPS = 25  # steps run to time one step (the first five, slowed by warm-up, are not counted)
WARMUP_SHARE = 1 / 6  # of a candidate's steps, as the preset's 250 of 1,500

CANDIDATES = {  # name: changes to GPT-1's settings; everything else is the cpu preset's
    "gpt1-dropout": dict(N_LAYER=4, N_HEAD=4, N_EMBD=256, DROPOUT=0.1, LEARNING_RATE=6e-4),
    "gpt1-dropout-lr1e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=256, DROPOUT=0.1, LEARNING_RATE=1e-3),
    "no-dropout": dict(N_LAYER=4, N_HEAD=4, N_EMBD=256, DROPOUT=0.0, LEARNING_RATE=6e-4),
    "no-dropout-lr1e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=256, DROPOUT=0.0, LEARNING_RATE=1e-3),
    "narrow-lr1e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=128, DROPOUT=0.0, LEARNING_RATE=1e-3),
    "narrow-lr2e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=128, DROPOUT=0.0, LEARNING_RATE=2e-3),
    "narrow-lr3e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=128, DROPOUT=0.0, LEARNING_RATE=3e-3),
    "narrow-dropout-lr2e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=128, DROPOUT=0.1, LEARNING_RATE=2e-3),
    "shallow-lr1e-3": dict(N_LAYER=2, N_HEAD=4, N_EMBD=256, DROPOUT=0.0, LEARNING_RATE=1e-3),
    "narrow-vocab2048-lr2e-3": dict(N_LAYER=4, N_HEAD=4, N_EMBD=128, DROPOUT=0.0, LEARNING_RATE=2e-3,
                                    VOCAB_SIZE=2048),
}
PRESET_CANDIDATE = "narrow-lr2e-3"  # the cpu preset's settings (config.PRESETS)
BUDGET = ("gpt1-dropout", 600)  # every candidate's time: what 600 steps of this one take on the machine


def settings(name: str) -> list[str]:
    return ["--PRESET=cpu", *(f"--{key}={value}" for key, value in CANDIDATES[name].items())]


def size(name: str) -> str:
    """What a step's time depends on: the candidate's settings but its learning rate."""
    return " ".join(s for s in settings(name) if not s.startswith("--LEARNING_RATE="))


def step_seconds(names: list[str]) -> dict[str, float]:
    """Seconds per training step of each candidate on this machine, from short runs of train.py, kept in
    step_seconds.json: a candidate of a size timed before is not timed again."""
    path = OUT_DIR / "step_seconds.json"
    timings = json.loads(path.read_text()) if path.is_file() else {}
    for name in names:
        if size(name) not in timings:
            probe = OUT_DIR / "probe" / name
            train_in_new_process(MODULE, [*settings(name), f"--MAX_ITERS={PROBE_STEPS}", "--EVAL_ITERS=1",
                                  "--WARMUP_ITERS=1", f"--EVAL_INTERVAL={PROBE_STEPS}"], probe)
            tokens = PRESETS["cpu"]["BATCH_SIZE"] * PRESETS["cpu"]["BLOCK_SIZE"]
            timings[size(name)] = statistics.median(tokens / r["tokens_per_second"]
                                                    for r in read_metrics(probe / "metrics.jsonl")[5:])
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(timings, indent=1))
    return {name: timings[size(name)] for name in names}


def run(name: str, steps: int, seed: int) -> dict:
    """Train one candidate for its steps with one seed (or read the result it left) and return its summary."""
    out_dir = OUT_DIR / f"{name}-seed{seed}"
    if (out_dir / "summary.json").is_file():
        summary = json.loads((out_dir / "summary.json").read_text())
        if summary["steps"] != steps:  # timed again since: the budget is no longer that many steps
            raise CourseError(f"error: {out_dir} holds a run of {summary['steps']} steps, where the budget "
                              f"now gives {steps}; move it away to train again")
        return summary
    warmup = max(round(steps * WARMUP_SHARE), 1)
    print(f"{name}, seed {seed}: {steps} steps ({warmup} warmup)")
    schedule = [f"--MAX_ITERS={steps}", f"--WARMUP_ITERS={warmup}", f"--EVAL_INTERVAL={max(steps // 6, 1)}",
                f"--SEED={seed}"]
    return train_in_new_process(MODULE, [*settings(name), *schedule], out_dir)


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    seeds = next(([int(s) for s in a.split("=", 1)[1].split(",")] for a in argv if a.startswith("--SEEDS=")),
                 [1337])
    names = [a for a in argv if not a.startswith("--")] or list(CANDIDATES)
    unread = [a for a in argv if a.startswith("--") and not a.startswith(("--SEEDS=", "--TIME_ONLY"))]
    if unread:
        raise CourseError(f"error: sweep.py takes candidate names, --SEEDS= and --TIME_ONLY, not {unread[0]}")
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        raise CourseError(f"error: no candidate {unknown[0]!r}; the candidates are {', '.join(CANDIDATES)}")
    timings = step_seconds(sorted({*names, BUDGET[0]}))
    if "--TIME_ONLY" in argv:
        print(json.dumps(timings, indent=1))
        return timings
    budget = BUDGET[1] * timings[BUDGET[0]]  # seconds
    steps = {name: round(budget / timings[name]) for name in names}
    results = {(name, seed): run(name, steps[name], seed) for name in names for seed in seeds}
    report(results, names, seeds, budget)
    return results


def report(results: dict[tuple[str, int], dict], names: list[str], seeds: list[int], budget: float) -> None:
    """Each candidate's gap below the bigram model, per seed and in the mean, best first."""
    def gap(summary: dict) -> float:
        return summary["bigram_loss"] - summary["val_loss"]

    print(f"\n{budget / 60:.1f} minutes of steps each; gap = bigram loss - model loss on the run's own "
          f"validation targets (positive: below the bigram)")
    print(f"{'candidate':<26}{'steps':>7}{'loss':>8}{'bigram':>8}{'mean gap':>10}   gap per seed "
          f"({', '.join(map(str, seeds))})")
    mean_gap = {name: statistics.mean(gap(results[name, seed]) for seed in seeds) for name in names}
    for name in sorted(names, key=lambda n: -mean_gap[n]):
        runs = [results[name, seed] for seed in seeds]
        print(f"{name:<26}{runs[0]['steps']:>7}{statistics.mean(r['val_loss'] for r in runs):>8.3f}"
              f"{statistics.mean(r['bigram_loss'] for r in runs):>8.3f}{mean_gap[name]:>+10.3f}   "
              + "  ".join(f"{gap(r):+.3f}" for r in runs))


if __name__ == "__main__":
    run_main(main)
