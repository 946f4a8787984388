"""How the cpu preset was chosen: train each candidate setting for the same wall-clock time and compare how
far its [MASK]-position loss got below the unigram model's.

    uv run python phase1_foundation/project3_contextual_embeddings/sweep.py  # every candidate
    uv run python phase1_foundation/project3_contextual_embeddings/sweep.py --MINUTES=4 tiny-lr2e-3
    uv run python phase1_foundation/project3_contextual_embeddings/sweep.py --MINUTES=preset --SEEDS=1,2 \
        short-seq

On a laptop the question is which setting learns most per minute. Each candidate's step is timed once on a
quiet machine (--TIME_ONLY, kept in step_seconds.json), which fixes its number of steps in MINUTES, so runs
can then share the machine without changing what they compute; --MINUTES=preset gives each the time of the
cpu preset's run. Every final model is scored on the same validation text masked BERT's way, once per seed
with --SEEDS. README, "The `cpu` preset", has the runs and how they are compared.
"""

import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

from common.course.exercises import train_in_new_process
from common.errors import CourseError, run_main
from common.files import REPO_ROOT, in_repo
from common.training.metrics import read_metrics
from phase1_foundation.project3_contextual_embeddings.baselines import Baselines
from phase1_foundation.project3_contextual_embeddings.config import BERT_TRAINING, PRESETS
from phase1_foundation.project3_contextual_embeddings.download_data import load_split
from phase1_foundation.project3_contextual_embeddings.exercises import load_run
from phase1_foundation.project3_contextual_embeddings.objectives import evaluate, metrics, validation_batches

MODULE = "phase1_foundation.project3_contextual_embeddings.train"
PRESET_CANDIDATE = "no-dropout-mlm-only-mask30"  # the cpu preset's settings (config.PRESETS)
OUT_DIR = REPO_ROOT / "checkpoints" / "project3" / "sweep"
MINUTES = 10.0  # wall-clock budget of each candidate's training steps
PROBE_STEPS = 30  # steps run to time one step (the first five, slowed by warm-up, are not counted)
STEP_SHARE = 0.9  # of the budget, for training steps; the rest is start-up, validation and saving

SHAPES = {  # Turc et al. 2019's small BERTs: BERT-Tiny, BERT-Mini, and two between them
    "tiny": dict(N_LAYER=2, N_HEAD=2, N_EMBD=128),
    "narrow": dict(N_LAYER=4, N_HEAD=2, N_EMBD=128),
    "shallow": dict(N_LAYER=2, N_HEAD=4, N_EMBD=256),
    "mini": dict(N_LAYER=4, N_HEAD=4, N_EMBD=256),
}


def learned(**changes) -> dict:
    return {"POSITIONS": "learned", **BERT_TRAINING, **changes}


def rotary(**changes) -> dict:
    return {"POSITIONS": "rotary", **BERT_TRAINING, **changes}


CANDIDATES = {  # name: (shape, changes to the cpu preset, warmup as a share of the steps); BERT's dropout,
    # tasks and masking rate unless a candidate changes them
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
    # Changes to BERT's training of the best of those, rotary-tiny-lr2e-3, in the preset's time
    # (--MINUTES=preset --SEEDS=1337,1): no dropout (Cramming, Geiping & Goldstein 2022), MLM only (RoBERTa),
    # 30% masked (Wettig et al. 2023; the preset), a larger learning rate, and BERT's own 10% of short pairs
    # (create_pretraining_data.py)
    "no-dropout": ("tiny", rotary(LEARNING_RATE=2e-3, DROPOUT=0.0), 0.1),
    "no-dropout-mlm-only": ("tiny", rotary(LEARNING_RATE=2e-3, DROPOUT=0.0, USE_NSP=False), 0.1),
    "no-dropout-mlm-only-mask30": ("tiny", rotary(LEARNING_RATE=2e-3, DROPOUT=0.0, USE_NSP=False,
                                                  MLM_PROB=0.3), 0.1),
    "no-dropout-mlm-only-lr3e-3": ("tiny", rotary(LEARNING_RATE=3e-3, DROPOUT=0.0, USE_NSP=False), 0.1),
    "short-seq": ("tiny", rotary(LEARNING_RATE=2e-3, SHORT_SEQ_PROB=0.1), 0.1),
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
            train_in_new_process(MODULE, [*settings(name), *extra, f"--MAX_ITERS={PROBE_STEPS}",
                                          "--EVAL_ITERS=1", "--WARMUP_ITERS=1"], probe)
            records = read_metrics(probe / "metrics.jsonl")[5:]
            timings[size(name)] = statistics.median(r["step_seconds"] for r in records)
            path.write_text(json.dumps(timings, indent=1))
    return {name: timings[size(name)] for name in names}


def run(name: str, seconds: float, minutes: float, budget: str, extra: list[str],
        seed: int | None = None) -> dict:
    """Train one candidate for the budget (or read the result it left) and return its summary."""
    out_dir = OUT_DIR / budget / (name if seed is None else f"{name}-seed{seed}")
    extra = extra if seed is None else [*extra, f"--SEED={seed}"]
    steps = max(int(minutes * 60 * STEP_SHARE / seconds + 1e-6), 10)
    if (out_dir / "summary.json").is_file():
        summary = json.loads((out_dir / "summary.json").read_text())
        if summary["steps"] != steps:  # timed again since: this budget is no longer that many steps
            raise CourseError(f"error: {out_dir} holds a run of {summary['steps']} steps, where {minutes:g} "
                              f"minutes now give {steps}; move it away to train again")
        return summary | shared_targets(summary, out_dir)
    warmup = 100 if CANDIDATES[name][2] is None else max(int(steps * CANDIDATES[name][2]), 1)
    print(f"{name}: {seconds:.3f} s/step here, so {steps} steps ({warmup} warmup) in {minutes:g} min")
    schedule = [f"--MAX_ITERS={steps}", f"--WARMUP_ITERS={warmup}", f"--EVAL_INTERVAL={max(steps // 5, 1)}"]
    summary = train_in_new_process(MODULE, [*settings(name), *extra, *schedule], out_dir)
    return summary | shared_targets(summary, out_dir)


SHARED = dict(USE_NSP=False, MLM_PROB=0.15, MASK_TOKEN_SHARE=0.8, RANDOM_TOKEN_SHARE=0.1)


def shared_targets(summary: dict, out_dir: Path) -> dict:
    """The run's final model and the baselines on validation targets every candidate shares: contiguous text
    (no NotNext pairs) masked BERT's way, 15% and 80/10/10, drawn with the run's seed. A run's own
    validation pairs follow its settings (a 30% masking rate is a harder task; an NSP run's pairs are half
    mismatched), so the candidates are compared here. Kept in the summary: worked out once."""
    if "shared_mask_loss" in summary:
        return {}
    model, cfg, data_dir = load_run(in_repo(summary["checkpoint"]))
    cfg = SimpleNamespace(**{**vars(cfg), **SHARED})
    batches = validation_batches(load_split(data_dir, "val"), cfg, model.config.vocab_size,
                                 next(model.parameters()).device)
    scores = evaluate(model, batches, use_nsp=False)[0]
    scores |= metrics(Baselines.for_run(load_split(data_dir, "train"), cfg, model.config.vocab_size)
                      .measure(batches), "val")
    shared = {f"shared_{key[4:]}": value for key, value in scores.items()
              if key.startswith(("val_mask_", "val_unigram_mask_", "val_bigram_mask_"))}
    (out_dir / "summary.json").write_text(json.dumps(summary | shared, indent=1))
    return shared


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    minutes = next((a.split("=", 1)[1] for a in argv if a.startswith("--MINUTES=")), str(MINUTES))
    seeds = next(([int(s) for s in a.split("=", 1)[1].split(",")] for a in argv if a.startswith("--SEEDS=")),
                 None)
    names = [a for a in argv if not a.startswith("--")] or list(CANDIDATES)
    ours = ("--MINUTES=", "--SEEDS=", "--TIME_ONLY")
    extra = [a for a in argv if a.startswith("--") and not a.startswith(ours)]
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        raise CourseError(f"error: no candidate {unknown[0]!r}; the candidates are {', '.join(CANDIDATES)}")
    timings = step_seconds(sorted({*names, PRESET_CANDIDATE} if minutes == "preset" else set(names)), extra)
    if "--TIME_ONLY" in argv:
        return timings
    if minutes == "preset":  # the time of the preset's own steps here
        minutes = PRESETS["cpu"]["MAX_ITERS"] * timings[PRESET_CANDIDATE] / STEP_SHARE / 60
    minutes = float(minutes)
    budget = f"{minutes:g}min"
    if seeds is None:
        results = {name: run(name, timings[name], minutes, budget, extra) for name in names}
    else:
        results = {f"{name} seed {seed}": run(name, timings[name], minutes, budget, extra, seed)
                   for name in names for seed in seeds}
    report(results, minutes)
    if seeds is not None:
        report_seeds(results, names, seeds)
    return results


def report(results: dict[str, dict], minutes: float) -> None:
    """The candidates, best first: how far below the unigram model each got at the [MASK] positions."""
    def below_unigram(summary: dict) -> float:
        return summary["shared_unigram_mask_loss"] - summary["shared_mask_loss"]

    print(f"\n{minutes:g} minutes each; [MASK] positions of contiguous validation text masked 15%, 80/10/10")
    print(f"{'candidate':<36}{'steps':>7}{'loss':>8}{'below unigram':>15}{'bigram':>8}{'accuracy':>10}"
          f"{'x most frequent':>17}{'NSP':>7}")
    for name, s in sorted(results.items(), key=lambda item: -below_unigram(item[1])):
        times_most_frequent = s["shared_mask_accuracy"] / s["shared_unigram_mask_accuracy"]
        print(f"{name:<36}{s['steps']:>7}{s['shared_mask_loss']:>8.3f}{below_unigram(s):>15.3f}"
              f"{s['shared_bigram_mask_loss']:>8.3f}{s['shared_mask_accuracy']:>10.1%}"
              f"{times_most_frequent:>17.1f}{s.get('val_nsp_accuracy', float('nan')):>7.1%}")


def report_seeds(results: dict[str, dict], names: list[str], seeds: list[int]) -> None:
    """Each candidate's mean over the seeds, and the spread between them, of the gap below each baseline."""
    print(f"\nmean over seeds {', '.join(map(str, seeds))} (min .. max); a positive gap: below the baseline")
    print(f"{'candidate':<28}{'below unigram':>24}{'below bigram':>24}{'accuracy %':>24}{'NSP':>8}")
    for name in names:
        runs = [results[f"{name} seed {seed}"] for seed in seeds]
        columns = ([r["shared_unigram_mask_loss"] - r["shared_mask_loss"] for r in runs],
                   [r["shared_bigram_mask_loss"] - r["shared_mask_loss"] for r in runs],
                   [100 * r["shared_mask_accuracy"] for r in runs])
        cells = "".join(f"{statistics.mean(c):>8.3f} ({min(c):>6.3f} .. {max(c):>6.3f})" for c in columns)
        nsp = [r["val_nsp_accuracy"] for r in runs if "val_nsp_accuracy" in r]
        print(f"{name:<28}{cells}{statistics.mean(nsp) if nsp else float('nan'):>8.1%}")


if __name__ == "__main__":
    run_main(main)
