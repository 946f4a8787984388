""""Is my loss right?": a finished run's validation loss beside the course's, for the same preset and device.

Every chapter keeps `reference.json` beside its `train.py`: for each preset and device kind, the final
validation loss a default run of the course's own code reached, the command that measured it, and the band a
correct but differently written model lands in. At the end of a run, `train.py` prints one line:

    reference, cpu preset on cpu: 4.933 at step 1,500 — yours: 4.933, the same

On a CPU like the one that measured it, at the default seed, the course's code reproduces its reference to the
last digit. Code that computes the same mathematics in another order (einsum for a matmul, a mask added
rather than filled in) rounds differently, and so does the same code on a CPU with other vector instructions;
training carries those differences to a loss a little above or below: the band, measured, not assumed.

The course writes these files from real runs, never by hand:

    uv run python phase1_foundation/project1_gpt/train.py --OUT_DIR=/tmp/ref/ch1
    uv run python -m common.course.reference record phase1_foundation/project1_gpt --OUT_DIR=/tmp/ref/ch1
    # the same command in a copy of the repository with one function of model.py written another way
    # (PYTHONPATH=the copy, so that its modules come first), then, from this clone:
    uv run python -m common.course.reference alternative phase1_foundation/project1_gpt \\
        --OUT_DIR=/tmp/alt/ch1 --WHAT="attention with torch.einsum"
"""

import importlib
import json
import math
import platform
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import torch

from common.errors import CourseError, run_main
from common.files import REPO_ROOT, portable
from common.training.config import settings
from common.training.metrics import save_summary

# Settings that cannot change a train.py run's numbers: where things go, what is resumed, what other
# scripts (sampling, fine-tuning, zero-shot, embed.py, laws.py, emergence.py) read. Any other setting that
# differs from the preset makes the run one that no reference was measured for.
NEUTRAL = {"DEVICE", "PRESET", "OUT_DIR", "RESUME", "DATA_DIR", "KEEP_CHECKPOINTS", "CHECKPOINT", "HF_DIR",
           "DRY_RUN", "ONLY", "PROMPT", "SAMPLE_TOKENS", "TEMPERATURE", "TOP_K", "TOP_P", "STOP", "USE_CACHE",
           "TEXT", "WORD", "CONTEXTS", "RESAMPLES", "DATA", "TASK", "TASK_FILE"}
NEUTRAL_PREFIXES = ("FT_", "ZS_", "EM_", "PLAN_")
DIGITS = 3  # losses are printed, and compared, to this many decimals
MIN_BAND = 0.005  # the narrowest band stated, however close the alternatives measured came
BAND_SAYS = "a correct but differently written model lands in"
HINT = "your model may differ from the course's: `uv run learn check` tests it function by function"


def counted(values: dict) -> dict:
    """The settings that decide a run's numbers, as JSON stores them (tuples become lists)."""
    kept = {name: value for name, value in values.items()
            if name not in NEUTRAL and not name.startswith(NEUTRAL_PREFIXES)}
    return json.loads(json.dumps(kept))


def describe_run(config: ModuleType, cfg: SimpleNamespace, summary: dict) -> dict:
    """What a reference is looked up by: preset, device kind, data, the settings that count and which of them
    the run changed from its preset, and the loss (or, for a sweep, the losses) it ended with."""
    preset = {**settings(config), **config.PRESETS[cfg.PRESET]}
    values = counted(vars(cfg))
    run = {"preset": cfg.PRESET, "device": torch.device(cfg.DEVICE).type,
           "data": Path(summary["data_dir"]).name, "settings": values,
           "changed": sorted(name for name, value in values.items() if counted(preset).get(name) != value)}
    if "val_losses" in summary:  # a sweep: every run's final validation loss, by name
        run["val_losses"], run["trained"] = summary["val_losses"], summary.get("trained")
    else:
        run["val_loss"], run["step"] = summary["val_loss"], summary["steps"]
    run.update(where())
    script = Path(sys.argv[0])
    if script.name == "train.py":  # run from the shell, not from a test or an exercise
        run["command"] = " ".join(["uv run python", portable(script), *sys.argv[1:]])
    return run


def where() -> dict:
    """What the numbers also depend on: the same code rounds differently on a CPU with other vector
    instructions (AVX2 against AVX-512), so a reference says what it was measured with."""
    return {"torch": torch.__version__, "machine": platform.machine(),
            "cpu": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}


def reference_path(config: ModuleType) -> Path:
    return Path(config.__file__).with_name("reference.json")


def load(config: ModuleType) -> dict:
    path = reference_path(config)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _f(loss: float) -> str:
    return f"{loss:.{DIGITS}f}"


def verdict(run: dict, entry: dict | None, preset_settings: dict) -> str:
    """The line a run ends with. `preset_settings` are the counted settings of the preset today: a reference
    measured under others is out of date."""
    head = f"reference, {run['preset']} preset on {run['device']}"
    yours = _f(run["val_loss"]) if "val_loss" in run else None
    if entry is None:
        return f"{head}: not measured yet" + (f" — yours: {yours}" if yours else "")
    if "val_loss" in entry:
        head += f": {_f(entry['val_loss'])} at step {entry['step']:,}"
    else:
        head += f": {len(entry['val_losses'])} runs' final validation losses"
    if run["changed"]:
        changed = run["changed"]
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        return f"{head} — none for this run, which changed {', '.join(changed[:4])}{more}"
    if entry["settings"] != preset_settings:
        was = entry["settings"]
        stale = sorted(name for name, value in preset_settings.items() if was.get(name) != value)
        return f"{head} — measured before the preset changed {', '.join(stale)}; none for this run yet"
    if entry["data"] != run["data"]:
        return f"{head} — measured on {entry['data']}; none yet for this run's {run['data']}"

    if "val_loss" in entry:
        difference, mine, same = run["val_loss"] - entry["val_loss"], yours, f"{yours},"
        identical = yours == _f(entry["val_loss"])  # the same printed digits
        entry_loss = entry["val_loss"]
    else:
        names = [name for name in entry["val_losses"] if name in run["val_losses"]]
        if not names:
            return f"{head} — this sweep shares none of its runs"
        worst = max(names, key=lambda name: abs(run["val_losses"][name] - entry["val_losses"][name]))
        entry_loss = entry["val_losses"][worst]
        difference = run["val_losses"][worst] - entry_loss
        reused = len(names) - run["trained"] if run.get("trained") is not None else 0
        reused = f" ({reused} of them from results.jsonl, not this command)" if reused > 0 else ""
        same = f"{len(names)} runs{reused}, every one"
        identical = all(_f(run["val_losses"][name]) == _f(entry["val_losses"][name]) for name in names)
        mine = (f"{len(names)} runs{reused}, the furthest {worst}: {_f(run['val_losses'][worst])} against "
                f"{_f(entry['val_losses'][worst])}")
    if identical:
        return f"{head} — yours: {same} the same"
    if run["device"] == "cpu" and entry.get("cpu", run.get("cpu")) != run.get("cpu"):
        mine += f" (the reference's CPU computed with {entry['cpu']}, yours with {run['cpu']})"
    band = entry.get("band")
    if band and abs(difference) <= band:
        return f"{head} — yours: {mine}, within the band (±{band}) {BAND_SAYS}"
    shown = abs(float(_f(entry_loss + difference)) - float(_f(entry_loss)))  # as the printed losses differ
    apart = f"{_f(shown)} {'above' if difference > 0 else 'below'} the reference"
    if not band:
        return f"{head} — yours: {mine}, {apart} (no band measured yet)"
    return f"{head} — yours: {mine}, {apart}, outside the band (±{band}): {HINT}"


def report(config: ModuleType, cfg: SimpleNamespace, summary: dict) -> str:
    """Print the run's reference line and keep what it was decided from in summary.json, from where
    `record` can make it the reference. Called by each chapter's train.py as its last step."""
    run = describe_run(config, cfg, summary)
    entry = load(config).get(run["preset"], {}).get(run["device"])
    preset = counted({**settings(config), **config.PRESETS[cfg.PRESET]})
    line = verdict(run, entry, preset)
    print(line)
    save_summary(Path(cfg.OUT_DIR), {**summary, "reference": {**run, "line": line}})
    return line


# --- writing the reference files, from finished runs ------------------------------------------------------

def _finished_run(config: ModuleType, out_dir: str | None) -> dict:
    path = Path(out_dir or settings(config)["OUT_DIR"]) / "summary.json"
    if not path.is_file():
        raise CourseError(f"error: no {path}; run the chapter's train.py into that folder first")
    run = json.loads(path.read_text(encoding="utf-8")).get("reference")
    if run is None:
        raise CourseError(f"error: {path} has no reference block; it was written before train.py "
                          f"reported one")
    if run["changed"]:
        raise CourseError(f"error: that run changed {', '.join(run['changed'])}; a reference is a "
                          f"default run")
    if "command" not in run:
        raise CourseError("error: that run was not started from the shell as train.py; a reference names the "
                          "command that measured it")
    return run


def _losses(run: dict) -> dict:
    return ({"val_losses": run["val_losses"]} if "val_losses" in run
            else {"val_loss": run["val_loss"], "step": run["step"]})


def _deviation(entry: dict, alternative: dict) -> float:
    if "val_loss" in entry:
        return abs(alternative["val_loss"] - entry["val_loss"])
    return max(abs(alternative["val_losses"][name] - loss) for name, loss in entry["val_losses"].items())


def _band(entry: dict) -> None:
    """The band: twice the largest deviation the alternatives showed, rounded up, and never below MIN_BAND."""
    deviations = [_deviation(entry, alternative) for alternative in entry["alternatives"]]
    largest = max(deviations)
    entry["band"] = max(MIN_BAND, math.ceil(2 * largest * 10**DIGITS - 1e-9) / 10**DIGITS)
    entry["band_how"] = (f"{len(deviations)} run(s) of the reference's command by a correct model computed "
                         f"another way (alternatives, each saying how): the largest deviation from the "
                         f"reference was {largest:.2g}; the band is twice that, rounded up, and at least "
                         f"{MIN_BAND}")


def _save(config: ModuleType, references: dict) -> Path:
    path = reference_path(config)
    path.write_text(json.dumps(references, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def record(config: ModuleType, out_dir: str | None = None) -> dict:
    """Make the default run in out_dir the reference for its preset and device kind. Alternatives measured
    against a reference of the same settings and data are kept, and the band recomputed from them."""
    run = _finished_run(config, out_dir)
    references = load(config)
    old = references.get(run["preset"], {}).get(run["device"], {})
    entry = {**_losses(run), "data": run["data"], "settings": run["settings"], "command": run["command"],
             **{key: run.get(key, value) for key, value in where().items()}}
    if old.get("alternatives") and (old["settings"], old["data"]) == (run["settings"], run["data"]):
        entry["alternatives"] = old["alternatives"]
        _band(entry)
    references.setdefault(run["preset"], {})[run["device"]] = entry
    print(f"{_save(config, references)}: {run['preset']} preset on {run['device']}: "
          f"{_f(run['val_loss']) if 'val_loss' in run else str(len(run['val_losses'])) + ' runs'}")
    return entry


def alternative(config: ModuleType, out_dir: str, what: str) -> dict:
    """Add the default run in out_dir, made by a correct but differently written model, to the reference's
    alternatives, and recompute the band from them."""
    run = _finished_run(config, out_dir)
    references = load(config)
    entry = references.get(run["preset"], {}).get(run["device"])
    if entry is None or (entry["settings"], entry["data"]) != (run["settings"], run["data"]):
        raise CourseError("error: record the reference for this preset, device and data first")
    measured = {"what": what, **_losses(run), "command": run["command"]}
    entry["alternatives"] = [a for a in entry.get("alternatives", []) if a["what"] != what] + [measured]
    _band(entry)
    _save(config, references)
    print(f"{what}: deviation {_deviation(entry, measured):.4f}; band now ±{entry['band']}")
    return entry


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    usage = ("usage: python -m common.course.reference record CHAPTER_DIR [--OUT_DIR=...]\n       "
             "python -m common.course.reference alternative CHAPTER_DIR --OUT_DIR=... "
             "--WHAT='how it differs'")
    if len(args) < 2 or args[0] not in ("record", "alternative"):
        raise CourseError(usage)
    chapter = Path(args[1]).resolve().relative_to(REPO_ROOT)
    config = importlib.import_module(".".join(chapter.parts) + ".config")
    options = dict(arg[2:].split("=", 1) for arg in args[2:] if arg.startswith("--") and "=" in arg)
    if args[0] == "record":
        record(config, options.get("OUT_DIR"))
    elif "OUT_DIR" in options and "WHAT" in options:
        alternative(config, options["OUT_DIR"], options["WHAT"])
    else:
        raise CourseError(usage)


if __name__ == "__main__":
    run_main(main)
