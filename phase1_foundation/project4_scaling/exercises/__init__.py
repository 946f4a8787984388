"""Worked solutions of chapter 4's exercises.

Each takes the chapter's --NAME=value settings, plus settings of its own that its docstring names. Exercises 1
and 2 train sweeps with the chapter's train.py into folders of their own (--OUT_DIR, by default under
checkpoints/project4/exercises/); like train.py, they skip the runs a folder already holds.
"""

import sys
from pathlib import Path

from common.config import REPO_ROOT, in_repo, parse_overrides
from common.metrics import run_training
from phase1_foundation.project4_scaling.results import SWEEP_FIELDS, read_results


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else a default) and the settings passed on to the chapter."""
    argv = sys.argv[1:] if argv is None else argv
    out_dir = REPO_ROOT / "checkpoints" / "project4" / "exercises" / name
    for arg in argv:
        if arg.startswith("--OUT_DIR="):
            out_dir = Path(arg.removeprefix("--OUT_DIR="))
    return out_dir, [arg for arg in argv if not arg.startswith("--OUT_DIR=")]


def own_settings(argv: list[str] | None, defaults: dict) -> tuple[dict, list[str]]:
    """The exercise's own settings (`defaults` names them; each --NAME=value is read as the type of its
    default, as config.py's are) and the rest of argv, for the chapter."""
    argv = sys.argv[1:] if argv is None else argv
    mine = [arg for arg in argv if arg.removeprefix("--").partition("=")[0] in defaults]
    return defaults | parse_overrides(mine, defaults), [arg for arg in argv if arg not in mine]


def sweep(settings: list[str], out_dir: Path) -> list[dict]:
    """Run the chapter's train.py with `settings` into out_dir, exactly as from the shell, and return the
    rows of the results file it leaves there, one per run. Finished runs are not trained again, so a second
    call only reads the file."""
    summary = run_training("phase1_foundation.project4_scaling.train", settings, out_dir)
    return read_results(in_repo(summary["results"]), fields=SWEEP_FIELDS)


def print_measured(text: str) -> None:
    """Print, after a run's own numbers, what the course measured when it ran the exercise, and why."""
    print(f"\nWhat the course measured (compare with your numbers above):\n{text.strip()}")
