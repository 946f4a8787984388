"""Checkpoints that survive crashes, resume exactly, and refuse to load into the wrong model.

A checkpoint is one dict saved with torch.save, for example

    {"kind": "project1/gpt", "model": ..., "optimizer": ..., "scaler": ..., "config": {NAME: value},
     "step": 5000, "rng": rng_state(), "batches": ..., "metrics": {...},
     "data_dir": "data/project1/wiki-sample-bpe4096", "tokenizer_files": {"tokenizer.model": b"..."}}

Four promises:

* A crash, Ctrl-C or full disk while saving never destroys the previous checkpoint: we write a
  temporary file in the same folder and rename it over the target only once it is safely on disk.
* Loading uses torch.load(weights_only=True), which cannot run code hidden in a pickle, so every value
  we store is a tensor, a number, a string, or a list/tuple/dict of those.
* Every mistake a learner can make (no file, a truncated file, another chapter's checkpoint, a model
  of another shape) ends in a single line that says what to do, not in a traceback.
* A checkpoint is self-contained: it carries its tokenizer's files, and records paths relative to the
  repository, so it works after the clone moves, in another clone, or on another machine.
"""

import os
import random
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from common.config import in_repo, portable, portable_settings
from common.device import pick_device
from common.errors import CourseError
from common.tokenizers import Tokenizer

# Prefixes that wrappers add to every parameter name: torch.compile keeps the original module as
# `_orig_mod`, DistributedDataParallel keeps it as `module`. A checkpoint should not depend on either.
WRAPPER_PREFIXES = ("_orig_mod.", "module.")


def checkpoint_path(out_dir: Path, prefix: str, step: int, loss: float) -> Path:
    """The file name records the step (to find the latest) and the loss (for the reader's eyes)."""
    return Path(out_dir) / f"{prefix}_iter{step}_loss{loss:.4f}.pt"


def save_checkpoint(path: Path, state: dict) -> Path:
    """Write `state` to `path` atomically: afterwards `path` holds either the old or the new checkpoint.

    The temporary file lives in the same folder because os.replace is only atomic within one file
    system. fsync on the file makes its bytes durable before the rename; fsync on the folder makes
    the rename itself durable, so a power cut cannot leave a name pointing at nothing.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A leading dot and a .tmp suffix keep half-written files out of find_checkpoint's sight.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        # Given a name, torch.save writes the file from C++. Given a Python file object, a second Ctrl-C
        # could land inside one of its writes and come out of C++ as a RuntimeError, read here as a full disk.
        torch.save(state, tmp_name)
        fd = os.open(tmp_name, os.O_RDWR)  # read-write: Windows will not fsync a read-only handle
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp_name, path)
    except (OSError, RuntimeError) as e:  # torch.save reports a full disk as a RuntimeError
        raise CourseError(
            f"error: could not write checkpoint {path} ({_first_line(e)}); the previous checkpoint is "
            "untouched: check the free disk space and the folder's permissions"
        ) from None
    finally:  # also on Ctrl-C; after a successful os.replace the temporary name no longer exists
        Path(tmp_name).unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable. Windows cannot open a folder for fsync (and needs no such step)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _first_line(error: Exception) -> str:
    """Errors from torch can span many lines; our messages must stay on one."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


class UnusableCheckpoint(Exception):
    """A file that is not a checkpoint of the kind asked for: `reason` says why, `fix` what to do."""

    def __init__(self, reason: str, fix: str):
        super().__init__(reason)
        self.reason, self.fix = reason, fix


def read_checkpoint(path: Path, *, kind: str, map_location="cpu") -> dict:
    """The checkpoint in the file `path`, checked to belong to this chapter; else UnusableCheckpoint.

    `kind` (e.g. "project1/gpt") guards against resuming a GPT run from a BERT checkpoint, which would
    otherwise fail much later with a wall of missing and unexpected parameter names.
    """
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a damaged file can trip any error inside the unpickler, not one known type
        raise UnusableCheckpoint(f"not a readable checkpoint ({type(e).__name__}: truncated or corrupt)",
                                 "delete it and resume from an earlier checkpoint") from None
    if not isinstance(state, dict) or "kind" not in state:
        raise UnusableCheckpoint("not a checkpoint of this course", f"pass a {kind} checkpoint")
    if state["kind"] != kind:
        raise UnusableCheckpoint(f"written by {state['kind']}, not {kind}", f"pass a {kind} checkpoint")
    return state


def load_checkpoint(path: Path, *, kind: str, map_location="cpu") -> dict:
    """read_checkpoint(), for a program: a file that is no checkpoint of `kind` ends it with one line."""
    path = Path(path)
    if not path.is_file():
        raise CourseError(
            f"error: no checkpoint at {path}; train first or pass the path of an existing .pt file"
        )
    try:
        return read_checkpoint(path, kind=kind, map_location=map_location)
    except UnusableCheckpoint as e:
        raise CourseError(f"error: {path} is {e.reason}; {e.fix}") from None


def _checkpoints(out_dir: Path, prefix: str) -> list[tuple[int, Path]]:
    """All `prefix` checkpoints in `out_dir` as (step, path), oldest first.

    We sort by the step in the name, not by modification time: copying a folder resets the times.
    """
    pattern = re.compile(rf"{re.escape(prefix)}_iter(\d+)_loss.*\.pt")
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    found = []
    for path in out_dir.iterdir():
        match = pattern.fullmatch(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def newest_checkpoint(out_dir: Path, prefix: str) -> Path | None:
    """The `prefix` checkpoint of the highest step in `out_dir`, or None."""
    found = _checkpoints(out_dir, prefix)
    return found[-1][1] if found else None


def find_checkpoint(spec: str, out_dir: Path, prefix: str) -> Path:
    """Turn a --RESUME style value into a file: "latest" means the highest step in `out_dir`; a relative path
    is looked for from the current folder, then from the repository's (as summary.json records it)."""
    if spec == "latest":
        newest = newest_checkpoint(out_dir, prefix)
        if newest is None:
            raise CourseError(
                f"error: no {prefix}_iter*.pt checkpoints in {out_dir}; train first or pass a checkpoint path"
            )
        return newest
    path = Path(spec)
    if not path.is_file() and in_repo(path).is_file():
        path = in_repo(path)
    if not path.is_file():
        raise CourseError(f"error: no checkpoint at {path}; pass an existing .pt file or 'latest'")
    return path


def open_checkpoint(spec: str, out_dir: Path, prefix: str, *, kind: str, map_location="cpu"
                    ) -> tuple[Path, dict]:
    """The checkpoint a --RESUME or --CHECKPOINT value names, loaded, and its path.

    With "latest", a newest file that does not load (a copy cut short, a disk that filled up under another
    program) is skipped with a line that says why, and the newest one that loads serves instead.
    """
    path = find_checkpoint(spec, out_dir, prefix)
    if spec != "latest":
        return path, load_checkpoint(path, kind=kind, map_location=map_location)
    candidates = [path for _, path in reversed(_checkpoints(out_dir, prefix))]
    for path in candidates:
        try:
            return path, read_checkpoint(path, kind=kind, map_location=map_location)
        except UnusableCheckpoint as e:
            print(f"skipped {path}: {e.reason}")
    raise CourseError(f"error: none of the {len(candidates)} checkpoints in {out_dir} loads (each is named "
                     "above); start a new run without --RESUME")


def prune_checkpoints(out_dir: Path, prefix: str, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints, plus temporary files left by a killed save.

    A run killed with SIGKILL or by a power cut mid-save cannot clean up after itself, and each
    orphan is as large as a checkpoint.
    """
    if keep < 1:
        raise CourseError(f"error: asked to keep {keep} checkpoints; keep at least 1 so training can resume")
    for _, path in _checkpoints(out_dir, prefix)[:-keep]:
        path.unlink()
    for orphan in Path(out_dir).glob(f".{prefix}_iter*.tmp"):
        orphan.unlink()


def set_aside_previous_run(out_dir: Path, prefix: str, extra_files: Sequence[str] = ()) -> Path | None:
    """Move an earlier run's checkpoints (and files such as its metrics) into out_dir/previous/<N>/.

    A fresh run in a folder that already holds one must neither delete it (nothing is lost) nor mix with it:
    `latest` and keep-K go by iteration number, so an older, longer run would win over the new one.
    """
    out_dir = Path(out_dir)
    old = [path for _, path in _checkpoints(out_dir, prefix)]
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


def rng_state() -> dict:
    """Every random generator training touches, in types that torch.load(weights_only=True) accepts.

    Restoring them on resume gives the same dropout masks and random draws as a run that never
    stopped. numpy's state holds an array, which weights_only refuses, so we store it as a list.
    """
    name, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    return {
        "python": random.getstate(),  # (version, tuple of 625 ints, None)
        "numpy": (name, keys.tolist(), pos, has_gauss, cached_gaussian),
        "torch": torch.get_rng_state(),  # ByteTensor
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],  # one ByteTensor per GPU
    }


def set_rng_state(state: dict) -> None:
    """Restore what rng_state() captured.

    The tensors may come back on a GPU when the checkpoint was loaded with map_location="cuda", but
    the setters want CPU tensors. A checkpoint moved to a machine with fewer (or no) GPUs restores
    the generators that exist there.
    """
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached_gaussian))
    torch.set_rng_state(state["torch"].cpu())
    if torch.cuda.is_available():
        cuda_states = [s.cpu() for s in state["cuda"][: torch.cuda.device_count()]]
        torch.cuda.set_rng_state_all(cuda_states)


def clean_state_dict(sd: dict) -> dict:
    """Drop the `_orig_mod.` / `module.` prefixes that torch.compile and DDP put on every key.

    A prefix is removed only when every key carries it, so a submodule that happens to be called
    `module` keeps its name. Wrappers can nest (DDP around a compiled model), hence the loop.
    """
    sd = dict(sd)
    stripped = True
    while sd and stripped:
        stripped = False
        for prefix in WRAPPER_PREFIXES:
            if all(key.startswith(prefix) for key in sd):
                sd = {key.removeprefix(prefix): value for key, value in sd.items()}
                stripped = True
    return sd


def check_compatible(saved_config: dict, config: dict, keys: Sequence[str]) -> None:
    """Refuse to resume when the model's shape changed, naming the settings that would fix it.

    Without this check, load_state_dict fails with a size-mismatch report for every layer, which
    hides the simple cause (say, --N_LAYER=6 on the command line of a 12-layer run).
    """
    differing = [key for key in keys if saved_config.get(key) != config.get(key)]
    if differing:
        changes = ", ".join(f"{key} {saved_config.get(key)!r} -> {config.get(key)!r}" for key in differing)
        # settings are UPPER_CASE: a model config's n_layer is --N_LAYER on the command line
        fix = " ".join(f"--{key.upper()}={saved_config.get(key)}" for key in differing)
        raise CourseError(
            f"error: the checkpoint's model differs from this configuration ({changes}); "
            f"resume with {fix} or start a new run without resuming"
        )


# --- where a checkpoint's model runs ------------------------------------------------------------------------

def device_here(state: dict, device: str | None = None) -> torch.device:
    """Where a checkpoint's model runs on this machine: `device` when one is asked for (a script's --DEVICE),
    else the device that trained it when this machine has it and it works, else the best one this machine
    has. A checkpoint trained on a GPU is read on a laptop all the time."""
    if device is not None:
        return pick_device(device)
    trained_on = state["config"]["DEVICE"]
    try:
        return pick_device(trained_on)
    except CourseError:
        here = pick_device("auto")
        print(f"the checkpoint was trained on {trained_on}, which this machine cannot use: running on {here}")
        return here


def settings_on(state: dict, device: torch.device) -> SimpleNamespace:
    """A checkpoint's run settings for work on `device`: DEVICE (which decides where batches go and whether
    autocast runs) becomes this machine's, and the rest is the run's."""
    return SimpleNamespace(**{**state["config"], "DEVICE": str(device)})


# --- what a checkpoint knows of its data --------------------------------------------------------------------

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
    files the checkpoint carries (a checkpoint written before they were carried: from its data folder)."""
    if "tokenizer_files" not in state:
        return load_tokenizer(checkpoint_data_dir(state, load_tokenizer))
    with tempfile.TemporaryDirectory() as folder:
        for name, data in state["tokenizer_files"].items():
            (Path(folder) / name).write_bytes(data)
        return load_tokenizer(Path(folder))


def checkpoint_data_dir(state: dict, load_tokenizer: Callable[[Path], Tokenizer]) -> Path:
    """The prepared-data folder a checkpoint's model was trained on, in this clone, for scripts that read its
    token files or held-out documents; checked to hold the checkpoint's own tokenizer, since data prepared
    again with other settings would feed the model ids it never learned.

    Checkpoints written before paths were recorded portably hold an absolute "tokenizer" folder; when the
    clone has moved since, the same folder is looked for under this repository.
    """
    recorded = state["data_dir"] if "data_dir" in state else state["tokenizer"]
    folder = in_repo(recorded)
    parts = Path(recorded).parts
    for start in range(1, len(parts) - 1):  # /old/clone/data/project1/x -> data/project1/x here
        if folder.is_dir():
            break
        folder = in_repo(Path(*parts[start:]))
    settings = " ".join(f"--{name}={value}" for name, value in state.get("config", {}).items()
                        if name in DATA_SETTINGS and value is not None)
    if not folder.is_dir():
        raise CourseError(f"error: the data this model was trained on ({recorded}) is not in this clone; "
                         f"prepare it with the chapter's download_data.py {settings}")
    carried = state.get("tokenizer_files")
    if carried is not None and data_record(folder, load_tokenizer(folder))["tokenizer_files"] != carried:
        raise CourseError(f"error: {folder} was prepared with another tokenizer than this model's; prepare "
                         f"its data again with the chapter's download_data.py {settings}")
    return folder


# --- a training run: what train.py saves, and what --RESUME restores ----------------------------------------

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
