"""Worked solutions of chapter 1's exercises.

Each takes the chapter's --NAME=value settings, plus --OUT_DIR.
"""

from pathlib import Path

from common.course.exercises import exercise_args, train_in_new_process
from common.training import checkpoint as ckpt
from phase1_foundation.project1_gpt.config import OUT_DIR
from phase1_foundation.project1_gpt.model import PREFIX


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else checkpoints/project1/exercises/<name>) and the settings
    passed on to the chapter."""
    return exercise_args(argv, "project1", name)


def train_chapter(settings: list[str], out_dir: Path) -> dict:
    """Run the chapter's train.py with `settings` into out_dir, exactly as from the shell, and return the
    summary it leaves there (val_loss, unigram_loss, checkpoint, ...)."""
    return train_in_new_process("phase1_foundation.project1_gpt.train", settings, out_dir)


def pretrained_checkpoint(settings: list[str], out_dir: Path) -> tuple[str, list[str]]:
    """The checkpoint an exercise fine-tunes, and the settings without --CHECKPOINT: the one --CHECKPOINT
    names ("latest": train.py's newest in its default folder), else that of a new run in out_dir/pretrain."""
    asked = next((s.removeprefix("--CHECKPOINT=") for s in settings if s.startswith("--CHECKPOINT=")), None)
    rest = [s for s in settings if not s.startswith("--CHECKPOINT=")]
    if asked is None:
        return str(train_chapter(rest, out_dir / "pretrain")["checkpoint"]), rest
    return str(ckpt.find_checkpoint(asked, Path(OUT_DIR), PREFIX)), rest
