"""Worked solutions of chapter 1's exercises.

Each takes the chapter's --NAME=value settings, plus --OUT_DIR.
"""

from pathlib import Path

from common.exercises import exercise_args
from common.metrics import run_training


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else checkpoints/project1/exercises/<name>) and the settings
    passed on to the chapter."""
    return exercise_args(argv, "project1", name)


def run_train(settings: list[str], out_dir: Path) -> dict:
    """Run the chapter's train.py with `settings` into out_dir, exactly as from the shell, and return the
    summary it leaves there (val_loss, unigram_loss, checkpoint, ...)."""
    return run_training("phase1_foundation.project1_gpt.train", settings, out_dir)
