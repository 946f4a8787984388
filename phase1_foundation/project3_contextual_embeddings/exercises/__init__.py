"""Worked solutions of chapter 3's exercises.

Each takes the chapter's --NAME=value settings, plus --OUT_DIR.
"""

from pathlib import Path
from types import SimpleNamespace

import torch

from common.course.exercises import exercise_args, train_in_new_process
from common.training import checkpoint as ckpt
from common.training.device import device_here, settings_on
from common.training.run import checkpoint_data_dir
from phase1_foundation.project3_contextual_embeddings.download_data import load_split
from phase1_foundation.project3_contextual_embeddings.model import BERT, PREFIX
from phase1_foundation.project3_contextual_embeddings.objectives import evaluate, validation_batches
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer


def parse_args(argv: list[str] | None, name: str) -> tuple[Path, list[str]]:
    """This exercise's output folder (--OUT_DIR, else checkpoints/project3/exercises/<name>) and the settings
    passed on to the chapter."""
    return exercise_args(argv, "project3", name)


def train_chapter(settings: list[str], out_dir: Path) -> dict:
    """Run the chapter's train.py with `settings` into out_dir, exactly as from the shell, and return the
    summary it leaves there (val_mask_loss, val_mask_accuracy, the baselines', checkpoint, ...)."""
    return train_in_new_process("phase1_foundation.project3_contextual_embeddings.train", settings, out_dir)


def load_run(checkpoint: str | Path, device: str | None = None) -> tuple[BERT, SimpleNamespace, Path]:
    """A run's model (in eval mode, on `device`, else on device_here's choice: never on a device this
    machine lacks), its settings with that DEVICE, and its prepared-data folder."""
    model, state = BERT.from_checkpoint(checkpoint)
    here = device_here(state, device)
    return model.to(here), settings_on(state, here), checkpoint_data_dir(state, load_tokenizer)


def evaluate_run(checkpoint: str | Path, **changes) -> dict:
    """The validation metrics of a run's final model (val_mask_loss, val_mask_accuracy, ..., NSP's) and the
    number of targets of each kind (val_mask_count, ...), on pairs made with its own settings, except for
    `changes` (e.g. MLM_PROB=0.15): so two runs can be scored on the very same masks."""
    model, cfg, data_dir = load_run(checkpoint)
    cfg = SimpleNamespace(**{**vars(cfg), **changes})
    batches = validation_batches(load_split(data_dir, "val"), cfg, model.config.vocab_size,
                                 torch.device(cfg.DEVICE))
    metrics, counts = evaluate(model, batches, cfg.USE_NSP)
    return metrics | {f"val_{name}": value for name, value in counts.items() if name.endswith("_count")}


def find_or_train(cfg: SimpleNamespace, settings: list[str], out_dir: Path,
                  extra: tuple[str, ...] = ()) -> Path:
    """The BERT to study: --CHECKPOINT=path if given, else the newest one train.py left in the chapter's
    OUT_DIR, else a new run of train.py (with `extra` settings first, so yours win) into out_dir/bert."""
    if cfg.CHECKPOINT != "latest" or any(Path(cfg.OUT_DIR).glob(f"{PREFIX}_iter*.pt")):
        return ckpt.find_checkpoint(cfg.CHECKPOINT, Path(cfg.OUT_DIR), PREFIX)
    print(f"no checkpoint in {cfg.OUT_DIR} yet: training one first, into {out_dir / 'bert'}")
    return Path(train_chapter([*extra, *settings], out_dir / "bert")["checkpoint"])
