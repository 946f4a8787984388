"""The chapter's results files, read and written in one place: one JSON object per line, one line per run.

train.py's sweep writes results.jsonl and emergence.py writes emergence.jsonl; laws.py and the exercises read
them. Every row carries the settings it was made with, so a file never mixes two experiments: a row made
under other settings is refused with one line that says what changed. A file is rewritten whole and
atomically after each run, so a stop at any moment leaves the old file or the new one, never half a line.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace


def settings_of(cfg: SimpleNamespace, names: tuple[str, ...], **extra) -> dict:
    """The settings a row's numbers depend on, as the file will give them back (tuples become lists)."""
    return json.loads(json.dumps({name: getattr(cfg, name) for name in names} | extra))


def read_results(path: str | Path, fields: tuple[str, ...] = (), settings: dict | None = None,
                 missing_ok: bool = False, made_by: str = "train.py") -> list[dict]:
    """The rows of `path`, each holding `fields`, and made with `settings` when those are given.

    A missing file is [] with missing_ok (a sweep about to start), else one line naming the command that
    makes it (`made_by`); so is a file without rows, a line that is not JSON, or a row without a field.
    """
    path = Path(path)
    command = f"uv run python phase1_foundation/project4_scaling/{made_by}"
    if not path.is_file():
        if missing_ok:
            return []
        raise SystemExit(f"error: no results at {path}; run {command} first, or pass --OUT_DIR=<its folder>")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise SystemExit(f"error: line {number} of {path} is not JSON; delete that line and run "
                             f"{command} again to remake its run") from None
        missing = [name for name in fields if name not in row]
        if missing:
            raise SystemExit(f"error: line {number} of {path} has no {', '.join(missing)}; it was not "
                             f"written by this version of {made_by} ({command} --OUT_DIR=<a new folder>)")
        if settings is not None and row.get("settings") != settings:
            saved = row.get("settings") or {}
            changed = [f"{key} {saved.get(key)!r} (now {value!r})" for key, value in settings.items()
                       if saved.get(key) != value]
            raise SystemExit(f"error: {path} holds runs made with other settings ({', '.join(changed)}); "
                             f"pass --OUT_DIR=<a new folder> for a new experiment, or delete {path}")
        rows.append(row)
    if not rows and not missing_ok:
        raise SystemExit(f"error: {path} holds no runs yet; run {command} first")
    return rows


def write_results(path: str | Path, rows: list[dict]) -> None:
    """The whole file again, atomically: a stop at any moment leaves the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    os.replace(tmp, path)
