"""Worked solutions of chapter 1's exercises.

Each takes the chapter's --NAME=value settings, plus --OUT_DIR.
"""

import sys
from pathlib import Path

from common.config import REPO_ROOT
from common.metrics import run_training


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else a default) and the settings passed on to the chapter."""
    argv = sys.argv[1:] if argv is None else argv
    out_dir = REPO_ROOT / "checkpoints" / "project1" / "exercises" / name
    for arg in argv:
        if arg.startswith("--OUT_DIR="):
            out_dir = Path(arg.removeprefix("--OUT_DIR="))
    return out_dir, [arg for arg in argv if not arg.startswith("--OUT_DIR=")]


def run_train(settings: list[str], out_dir: Path) -> dict:
    """Run the chapter's train.py with `settings` into out_dir, exactly as from the shell, and return the
    summary it leaves there (val_loss, unigram_loss, checkpoint, ...)."""
    return run_training("phase1_foundation.project1_gpt.train", settings, out_dir)


def print_measured(text: str) -> None:
    """Print, after a run's own numbers, what the course measured when it ran the exercise, and why."""
    print(f"\nWhat the course measured (compare with your numbers above):\n{text.strip()}")
