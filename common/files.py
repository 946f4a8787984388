"""Files: one way to write them so a crash never leaves half of one, and paths that survive a moved clone."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_UMASK = os.umask(0o022)  # read once (os.umask only reads by setting), then put back
os.umask(_UMASK)


def write_atomic(path: Path, content: bytes | str | Callable[[Path], None], *, durable: bool = False) -> Path:
    """Write `path` so that afterwards it holds either the old file or the new one, never half of one.

    `content` is the bytes or text, or a function that writes the file at the path it is given (torch.save,
    a stream). It goes to a temporary file in the same folder, since os.replace is atomic only within one
    file system; a leading dot keeps it out of a folder's listings. `durable` also fsyncs the file before
    the rename and the folder after it, so a power cut cannot undo a checkpoint.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        if callable(content):
            content(Path(tmp))
        elif isinstance(content, str):
            Path(tmp).write_text(content, encoding="utf-8")
        else:
            Path(tmp).write_bytes(content)
        # mkstemp's file is private: give it the old file's mode, or a new file's (umask applied)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_UMASK)
        if durable:
            _fsync(tmp, os.O_RDWR)  # read-write: Windows will not fsync a read-only handle
        os.replace(tmp, path)
    finally:  # also on Ctrl-C; after os.replace the temporary name no longer exists
        Path(tmp).unlink(missing_ok=True)
    if durable and hasattr(os, "O_DIRECTORY"):  # Windows cannot open a folder (and needs no such step)
        _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    return path


def _fsync(path: str | Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def portable(path: str | Path) -> str:
    """A path as the files a run leaves (checkpoints, summary.json) record it: relative to the repository when
    it lies inside, so the record still points at the right file after the clone is moved, renamed or copied
    to another machine. A path outside the repository is recorded whole."""
    path = Path(path).resolve()
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


def in_repo(recorded: str | Path) -> Path:
    """The path portable() recorded, in this clone (a path recorded whole comes back as it was)."""
    return REPO_ROOT / recorded


def portable_settings(values: dict) -> dict:
    """A run's settings as its checkpoint keeps them: every absolute path among them made portable()."""
    return {name: portable(value) if isinstance(value, str) and Path(value).is_absolute() else value
            for name, value in values.items()}
