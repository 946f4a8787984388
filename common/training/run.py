"""A training run: its folder of checkpoints, what it keeps of its data, and what happens after each step.

`train.py` builds a TrainingRun to save and resume; a checkpoint's data record makes it usable in a clone
that never prepared that data.
"""

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import torch

from common.data.tokenizers import Tokenizer
from common.errors import CourseError
from common.files import in_repo, portable, portable_settings
from common.training.checkpoint import (
    check_compatible,
    checkpoint_path,
    checkpoints_of,
    clean_state_dict,
    newest_checkpoint,
    open_checkpoint,
    prune_checkpoints,
    rng_state,
    save_checkpoint,
    set_rng_state,
)

DATA_SETTINGS = ("CORPUS", "TEXT_FILE", "TOKENIZER", "VOCAB_SIZE", "VAL_FRACTION")  # what prepares the data


def data_record(data_dir: Path, tokenizer: Tokenizer) -> dict:
    """What a checkpoint keeps of the data its model was trained on: the prepared-data folder, portable()
    (relative to the repository), and the tokenizer's own files, which are small (a few hundred kB) and all
    that using the model needs, so a checkpoint samples in a clone that never prepared that data."""
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save(Path(folder))
        files = {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir())}
    return {"data_dir": portable(data_dir), "tokenizer_files": files}


def checkpoint_tokenizer(state: dict, load_tokenizer: Callable[[Path], Tokenizer]) -> Tokenizer:
    """The tokenizer a checkpoint's model was trained with, read by the chapter's `load_tokenizer` from the
    files the checkpoint carries."""
    with tempfile.TemporaryDirectory() as folder:
        for name, data in state["tokenizer_files"].items():
            (Path(folder) / name).write_bytes(data)
        return load_tokenizer(Path(folder))


def checkpoint_data_dir(state: dict, load_tokenizer: Callable[[Path], Tokenizer]) -> Path:
    """The prepared-data folder a checkpoint's model was trained on, in this clone, for scripts that read its
    token files or held-out documents; checked to hold the checkpoint's own tokenizer, since data prepared
    again with other settings would feed the model ids it never learned."""
    folder = in_repo(state["data_dir"])
    settings = " ".join(f"--{name}={value}" for name, value in state.get("config", {}).items()
                        if name in DATA_SETTINGS and value is not None)
    if not folder.is_dir():
        raise CourseError(f"error: the data this model was trained on ({state['data_dir']}) is not in this "
                          f"clone; prepare it with the chapter's download_data.py {settings}")
    if data_record(folder, load_tokenizer(folder))["tokenizer_files"] != state["tokenizer_files"]:
        raise CourseError(f"error: {folder} was prepared with another tokenizer than this model's; prepare "
                          f"its data again with the chapter's download_data.py {settings}")
    return folder


def set_aside_previous_run(out_dir: Path, prefix: str, extra_files: Sequence[str] = ()) -> Path | None:
    """Move an earlier run's checkpoints (and files such as its metrics) into out_dir/previous/<N>/.

    A fresh run in a folder that already holds one must neither delete it (nothing is lost) nor mix with it:
    `latest` and keep-K go by iteration number, so an older, longer run would win over the new one.
    """
    out_dir = Path(out_dir)
    old = [path for _, path in checkpoints_of(out_dir, prefix)]
    old += [out_dir / name for name in extra_files if (out_dir / name).exists()]
    if not old:
        return None
    previous = out_dir / "previous"
    earlier_runs = len(list(previous.iterdir())) if previous.exists() else 0
    target = previous / str(earlier_runs + 1)
    target.mkdir(parents=True)
    for path in old:
        path.rename(target / path.name)
    return target


RUN_FILES = ("metrics.jsonl", "loss.png", "summary.json")  # what a run leaves beside its checkpoints


class TrainingRun:
    """One training run's checkpoints, in the folder cfg.OUT_DIR:

        run = TrainingRun(cfg, "gpt", "project1/gpt", model=model, optimizer=optimizer, scaler=scaler,
                          batches=batches, data_dir=data_dir, tokenizer=tokenizer)
        step = run.resume(shape_keys)  # cfg.RESUME's step, or 0 for a fresh run
        path = run.save(step, loss)  # a checkpoint resume() restores exactly (the newest few are kept)

    A checkpoint holds everything a run needs to continue as if it had never stopped: the weights, the
    optimizer's moments, the gradient scaler, the batch sampler's position (`batches`: anything with
    state_dict() and load_state_dict()) and every random generator; plus the model's config (a dataclass,
    model.config), so a script can rebuild the model without knowing the settings that made it, the run's
    settings, its data (data_record: the prepared-data folder and the tokenizer's files), and what the
    chapter adds in `extra`.
    """

    def __init__(self, cfg: SimpleNamespace, prefix: str, kind: str, *, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, batches, data_dir: Path,
                 tokenizer: Tokenizer, extra: dict | None = None):
        self.out_dir, self.prefix, self.kind = Path(cfg.OUT_DIR), prefix, kind
        self.spec, self.keep = cfg.RESUME, cfg.KEEP_CHECKPOINTS
        self.model, self.optimizer, self.scaler, self.batches = model, optimizer, scaler, batches
        self.extra = {"config": portable_settings(vars(cfg)), **data_record(data_dir, tokenizer),
                      **(extra or {})}

    def newest(self) -> Path | None:
        """The newest checkpoint on disk: what a resume starts from."""
        return newest_checkpoint(self.out_dir, self.prefix)

    def save(self, step: int, loss: float, rng: dict | list[dict] | None = None) -> Path:
        """Save this step. A data-parallel run passes `rng`, every process's rng_state() in rank order
        (gathered by the caller), since each process draws its own dropout masks."""
        path = checkpoint_path(self.out_dir, self.prefix, step, loss)
        save_checkpoint(path, {
            "kind": self.kind, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(), "model_config": asdict(self.model.config), "step": step,
            "rng": rng_state() if rng is None else rng, "batches": self.batches.state_dict(),
            "metrics": {"loss": loss}, **self.extra,
        })
        prune_checkpoints(self.out_dir, self.prefix, self.keep)
        return path

    def resume(self, shape_keys: Sequence[str], rank: int = 0) -> int:
        """Continue from the checkpoint cfg.RESUME names ("latest" or a path) and return its step; without
        one, start a fresh run at step 0.

        A checkpoint of another model shape (`shape_keys` of model.config) is refused with a line that names
        the fix. A fresh run first moves an earlier run in the same folder out of the way
        (set_aside_previous_run), so the two never mix; in a data-parallel run only rank 0 touches files,
        and each process restores its own random generators.
        """
        if not self.spec:
            if rank == 0 and (previous := set_aside_previous_run(self.out_dir, self.prefix, RUN_FILES)):
                print(f"{self.out_dir} held an earlier run: moved it to {previous} "
                      "(use --RESUME=latest to continue a run)")
            return 0
        path, state = open_checkpoint(self.spec, self.out_dir, self.prefix, kind=self.kind,
                                      map_location=next(self.model.parameters()).device)
        check_compatible(state["model_config"], asdict(self.model.config), shape_keys)
        self.model.load_state_dict(clean_state_dict(state["model"]))
        kernels = [{key: group.get(key) for key in ("fused", "foreach")}
                   for group in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state["optimizer"])
        for group, chosen in zip(self.optimizer.param_groups, kernels, strict=True):
            group.update(chosen)  # this device's AdamW kernel, not the one of the machine that saved it
        if state["scaler"]:  # empty when the saving run had no fp16 to scale (bf16, MPS or CPU)
            self.scaler.load_state_dict(state["scaler"])
        self.batches.load_state_dict(state["batches"])
        rng = state["rng"]  # a list, one per process, when a data-parallel run saved it
        set_rng_state(rng[min(rank, len(rng) - 1)] if isinstance(rng, list) else rng)
        print(f"resumed from {path} at step {state['step']}")
        return state["step"]
