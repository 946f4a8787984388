"""What every chapter's exercise scripts share: where a run goes, and the answer printed after it."""

import sys
from pathlib import Path

from common.config import REPO_ROOT


def exercise_args(argv: list[str] | None, chapter: str, name: str) -> tuple[Path, list[str]]:
    """An exercise's output folder (--OUT_DIR, else checkpoints/<chapter>/exercises/<name>) and the rest of
    argv: the settings it passes on to the chapter's scripts."""
    argv = sys.argv[1:] if argv is None else argv
    out_dir = REPO_ROOT / "checkpoints" / chapter / "exercises" / name
    for arg in argv:
        if arg.startswith("--OUT_DIR="):
            out_dir = Path(arg.removeprefix("--OUT_DIR="))
    return out_dir, [arg for arg in argv if not arg.startswith("--OUT_DIR=")]


def print_measured(text: str) -> None:
    """Print, after a run's own numbers, what the course measured when it ran the exercise, and why: the
    learner predicts first, runs, and only then reads the answer."""
    print(f"\nWhat the course measured (compare with your numbers above):\n{text.strip()}")
