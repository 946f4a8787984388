"""How the cpu preset was chosen: train each candidate setting for the same wall-clock time and compare how
far its [MASK]-position loss got below the unigram model's.

    # every candidate, 10 minutes each
    uv run python phase1_foundation/project3_contextual_embeddings/sweep.py
    # one of them, 4 minutes
    uv run python phase1_foundation/project3_contextual_embeddings/sweep.py --MINUTES=4 tiny-lr2e-3

On a laptop the question is not which model is best but which learns most per minute: a smaller model takes
more steps in the same time, a larger learning rate moves further per step until post-LN training diverges
or stalls (chapter 1, exercise 1). Every candidate first runs a few steps to time one step on this machine;
then each trains, through train.py itself, for as many steps as fit in MINUTES (schedule included: warmup
is a share of those steps, and the linear decay ends at the last one). The timings are kept in
step_seconds.json: taken once on a quiet machine (`--TIME_ONLY`), they fix each candidate's number of steps,
so the training runs can then share the machine, or run side by side with one thread each, without
changing what they compute. [MASK] loss is compared as the gap below the unigram cross-entropy on the same
validation targets, so that candidates with different vocabularies are compared fairly. Finished
candidates are skipped: an interrupted sweep continues where it stopped.
"""

import json
import statistics
import sys

from common.config import REPO_ROOT
from common.metrics import read_metrics, run_training

MODULE = "phase1_foundation.project3_contextual_embeddings.train"
OUT_DIR = REPO_ROOT / "checkpoints" / "project3" / "sweep"
MINUTES = 10.0  # wall-clock budget of each candidate's training steps
PROBE_STEPS = 8  # steps run to time one step (the first two, slowed by warm-up, are not counted)
STEP_SHARE = 0.9  # of the budget, for training steps; the rest is start-up, validation and saving

SHAPES = {  # Turc et al. 2019's small BERTs: BERT-Tiny, BERT-Mini, and two between them
    "tiny": dict(N_LAYER=2, N_HEAD=2, N_EMBD=128),
    "narrow": dict(N_LAYER=4, N_HEAD=2, N_EMBD=128),
    "shallow": dict(N_LAYER=2, N_HEAD=4, N_EMBD=256),
    "mini": dict(N_LAYER=4, N_HEAD=4, N_EMBD=256),
}
def learned(**changes) -> dict:
    return {"POSITIONS": "learned", **changes}


def rotary(**changes) -> dict:
    return {"POSITIONS": "rotary", **changes}


CANDIDATES = {  # name: (shape, changes to the cpu preset, warmup as a share of the steps)
    # BERT's learned position table (10 minutes each): those trained stayed on the plateau (README appendix)
    "mini-lr1e-3-w100": ("mini", learned(LEARNING_RATE=1e-3), None),  # 100 warmup steps
    "mini-lr2e-3": ("mini", learned(LEARNING_RATE=2e-3), 0.1),
    "shallow-lr2e-3": ("shallow", learned(LEARNING_RATE=2e-3), 0.1),
    "narrow-lr2e-3": ("narrow", learned(LEARNING_RATE=2e-3), 0.1),
    "tiny-lr1e-3": ("tiny", learned(LEARNING_RATE=1e-3), 0.1),
    "tiny-lr2e-3": ("tiny", learned(LEARNING_RATE=2e-3), 0.1),
    "tiny-lr5e-3": ("tiny", learned(LEARNING_RATE=5e-3), 0.1),
    "tiny-lr2e-3-batch16": ("tiny", learned(LEARNING_RATE=2e-3, BATCH_SIZE=16), 0.1),
    "tiny-lr2e-3-block64": ("tiny", learned(LEARNING_RATE=2e-3, BLOCK_SIZE=64), 0.1),
    "tiny-lr5e-3-block64": ("tiny", learned(LEARNING_RATE=5e-3, BLOCK_SIZE=64), 0.1),
    "tiny-lr2e-3-block32": ("tiny", learned(LEARNING_RATE=2e-3, BLOCK_SIZE=32), 0.1),
    "tiny-lr1e-2-block64": ("tiny", learned(LEARNING_RATE=1e-2, BLOCK_SIZE=64), 0.1),
    "tiny-lr2e-3-vocab2048": ("tiny", learned(LEARNING_RATE=2e-3, VOCAB_SIZE=2048), 0.1),
    # Rotary positions, the presets' (five minutes each, --MINUTES=5)
    "rotary-tiny-lr1e-3": ("tiny", rotary(LEARNING_RATE=1e-3), 0.1),
    "rotary-tiny-lr2e-3": ("tiny", rotary(LEARNING_RATE=2e-3), 0.1),
    "rotary-tiny-lr5e-3": ("tiny", rotary(LEARNING_RATE=5e-3), 0.1),
    "rotary-shallow-lr2e-3": ("shallow", rotary(LEARNING_RATE=2e-3), 0.1),
}


def settings(name: str) -> list[str]:
    shape, changes, _ = CANDIDATES[name]
    return ["--PRESET=cpu", *(f"--{key}={value}" for key, value in {**SHAPES[shape], **changes}.items())]


def size(name: str) -> str:
    """What a step's time depends on: the candidate's settings but its learning rate."""
    return " ".join(s for s in settings(name) if not s.startswith("--LEARNING_RATE="))


def step_seconds(names: list[str], extra: list[str]) -> dict[str, float]:
    """Seconds per training step of each candidate on this machine, from short runs of train.py, kept in
    step_seconds.json: a candidate of a size timed before is not timed again."""
    path = OUT_DIR / "step_seconds.json"
    timings = json.loads(path.read_text()) if path.is_file() else {}
    for name in names:
        if size(name) not in timings:
            probe = OUT_DIR / "probe" / name
            run_training(MODULE, [*settings(name), *extra, f"--MAX_ITERS={PROBE_STEPS}", "--EVAL_ITERS=1",
                                  "--WARMUP_ITERS=1"], probe)
            records = read_metrics(probe / "metrics.jsonl")[2:]
            timings[size(name)] = statistics.median(r["step_seconds"] for r in records)
            path.write_text(json.dumps(timings, indent=1))
    return {name: timings[size(name)] for name in names}


def run(name: str, seconds: float, minutes: float, extra: list[str]) -> dict:
    """Train one candidate for the budget (or read the result it left) and return its summary."""
    out_dir = OUT_DIR / f"{minutes:g}min" / name
    if (out_dir / "summary.json").is_file():
        return json.loads((out_dir / "summary.json").read_text())
    steps = max(int(minutes * 60 * STEP_SHARE / seconds), 10)
    warmup = 100 if CANDIDATES[name][2] is None else max(int(steps * CANDIDATES[name][2]), 1)
    print(f"{name}: {seconds:.3f} s/step here, so {steps} steps ({warmup} warmup) in {minutes:g} min")
    return run_training(MODULE, [*settings(name), *extra, f"--MAX_ITERS={steps}", f"--WARMUP_ITERS={warmup}",
                                 f"--EVAL_INTERVAL={max(steps // 5, 1)}"], out_dir)


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    minutes = next((float(a.split("=", 1)[1]) for a in argv if a.startswith("--MINUTES=")), MINUTES)
    names = [a for a in argv if not a.startswith("--")] or list(CANDIDATES)
    extra = [a for a in argv if a.startswith("--") and not a.startswith(("--MINUTES=", "--TIME_ONLY"))]
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        raise SystemExit(f"error: no candidate {unknown[0]!r}; the candidates are {', '.join(CANDIDATES)}")
    timings = step_seconds(names, extra)
    if "--TIME_ONLY" in argv:
        return timings
    results = {name: run(name, timings[name], minutes, extra) for name in names}
    report(results, minutes)
    return results


def report(results: dict[str, dict], minutes: float) -> None:
    """The candidates, best first: how far below the unigram model each got at the [MASK] positions."""
    def below_unigram(summary: dict) -> float:
        return summary["val_unigram_mask_loss"] - summary["val_mask_loss"]

    print(f"\n{minutes:g} minutes each; [MASK] positions of the validation pairs")
    print(f"{'candidate':<24}{'steps':>7}{'loss':>8}{'below unigram':>15}{'bigram':>8}{'accuracy':>10}"
          f"{'x most frequent':>17}{'NSP':>7}")
    for name, s in sorted(results.items(), key=lambda item: -below_unigram(item[1])):
        times_most_frequent = s["val_mask_accuracy"] / s["val_unigram_mask_accuracy"]
        print(f"{name:<24}{s['steps']:>7}{s['val_mask_loss']:>8.3f}{below_unigram(s):>15.3f}"
              f"{s['val_bigram_mask_loss']:>8.3f}{s['val_mask_accuracy']:>10.1%}{times_most_frequent:>17.1f}"
              f"{s.get('val_nsp_accuracy', float('nan')):>7.1%}")


if __name__ == "__main__":
    main()
