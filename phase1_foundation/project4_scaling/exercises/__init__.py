"""Worked solutions of chapter 4's exercises.

Each takes the chapter's --NAME=value settings, plus settings of its own that its docstring names. Exercises 1
and 2 train sweeps with the chapter's train.py into folders of their own (--OUT_DIR, by default under
checkpoints/project4/exercises/); like train.py, they skip the runs a folder already holds.
"""

import sys
from pathlib import Path

from common.course.exercises import exercise_args, train_in_new_process
from common.files import in_repo
from common.training.config import parse_overrides
from phase1_foundation.project4_scaling.results import SWEEP_FIELDS, read_results


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else checkpoints/project4/exercises/<name>) and the settings
    passed on to the chapter."""
    return exercise_args(argv, "project4", name)


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
    summary = train_in_new_process("phase1_foundation.project4_scaling.train", settings, out_dir)
    return read_results(in_repo(summary["results"]), fields=SWEEP_FIELDS)
