"""Worked solutions of chapter 2's exercises.

Each takes the chapter's --NAME=value settings, plus --OUT_DIR.
"""

from pathlib import Path
from types import SimpleNamespace

from common.course.exercises import exercise_args, train_in_new_process
from common.training import checkpoint as ckpt
from phase1_foundation.project2_gpt2.model import PREFIX


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else checkpoints/project2/exercises/<name>) and the settings
    passed on to the chapter."""
    return exercise_args(argv, "project2", name)


def train_chapter(settings: list[str], out_dir: Path) -> dict:
    """Run the chapter's train.py with `settings` into out_dir, exactly as from the shell, and return the
    summary it leaves there (val_loss, unigram_loss, checkpoint, ...)."""
    return train_in_new_process("phase1_foundation.project2_gpt2.train", settings, out_dir)


def find_or_train(cfg: SimpleNamespace, settings: list[str], out_dir: Path) -> Path:
    """The GPT-2 to study: --CHECKPOINT=path if given; else the newest one train.py left in the chapter's
    OUT_DIR; else the one an earlier run of this exercise trained into out_dir/gpt2; else a new run of
    train.py with your settings, into out_dir/gpt2."""
    if cfg.CHECKPOINT != "latest":
        return ckpt.find_checkpoint(cfg.CHECKPOINT, Path(cfg.OUT_DIR), PREFIX)
    for folder in (Path(cfg.OUT_DIR), out_dir / "gpt2"):
        if any(folder.glob(f"{PREFIX}_iter*.pt")):
            return ckpt.find_checkpoint("latest", folder, PREFIX)
    print(f"no checkpoint in {cfg.OUT_DIR} yet: training one first, into {out_dir / 'gpt2'}")
    return Path(train_chapter(settings, out_dir / "gpt2")["checkpoint"])
