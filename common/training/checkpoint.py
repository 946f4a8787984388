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

import random
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from common.errors import CourseError
from common.files import in_repo, write_atomic

# Prefixes that wrappers add to every parameter name: torch.compile keeps the original module as
# `_orig_mod`, DistributedDataParallel keeps it as `module`. A checkpoint should not depend on either.
WRAPPER_PREFIXES = ("_orig_mod.", "module.")


def checkpoint_path(out_dir: Path, prefix: str, step: int, loss: float) -> Path:
    """The file name records the step (to find the latest) and the loss (for the reader's eyes)."""
    return Path(out_dir) / f"{prefix}_iter{step}_loss{loss:.4f}.pt"


def save_checkpoint(path: Path, state: dict) -> Path:
    """Write `state` to `path` atomically and durably: the file holds the old checkpoint or the new one."""
    try:
        # Given a name, torch.save writes the file from C++. Given a Python file object, a second Ctrl-C
        # could land inside one of its writes and come out of C++ as a RuntimeError, read here as a full disk.
        return write_atomic(path, lambda tmp: torch.save(state, tmp), durable=True)
    except (OSError, RuntimeError) as e:  # torch.save reports a full disk as a RuntimeError
        raise CourseError(
            f"error: could not write checkpoint {path} ({_first_line(e)}); the previous checkpoint is "
            "untouched: check the free disk space and the folder's permissions"
        ) from None


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


def checkpoints_of(out_dir: Path, prefix: str) -> list[tuple[int, Path]]:
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
    found = checkpoints_of(out_dir, prefix)
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
    candidates = [path for _, path in reversed(checkpoints_of(out_dir, prefix))]
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
    for _, path in checkpoints_of(out_dir, prefix)[:-keep]:
        path.unlink()
    for orphan in Path(out_dir).glob(f".{prefix}_iter*.tmp"):
        orphan.unlink()


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
