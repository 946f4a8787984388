"""The chapter's results files, read and written in one place: one JSON object per line, one line per run.

train.py's sweep writes results.jsonl and emergence.py writes emergence.jsonl; laws.py and the exercises read
them. Every row carries the settings it was made with, so a file never mixes two experiments: a row made
under other settings is refused with one line that says what changed. A file is rewritten whole and
atomically after each run, so a stop at any moment leaves the old file or the new one, never half a line.

The sweep's file holds two sweeps, one per way of counting a model's size N and a run's compute C: each
run was planned under one `counting` (COUNTINGS), at that counting's budgets. Sweep holds one counting's
runs as columns, with N and C read as that counting reads them: what every fit in laws.py starts from.
"""

import json
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from common.errors import CourseError
from common.files import write_atomic

# What the fits read from each row of results.jsonl; a row without one of these was made by an older train.py
SWEEP_FIELDS = ("name", "counting", "budget", "params", "params_total", "tokens", "flops", "flops_chinchilla",
                "val_loss")

# The two ways the papers count N and C; a row's `counting` is the one its run was planned under
COUNTINGS = {
    "kaplan": "non-embedding N, C = 6ND (Kaplan)",
    "chinchilla": "all parameters, C = App. F FLOPs (Chinchilla)",
}
# Which of a row's fields are N and C under each counting. PAPER: Kaplan et al. 2020, §2.1: N leaves out the
# embeddings, C = 6ND. PAPER: Hoffmann et al. 2022 count every parameter, and App. F every matmul's FLOPs
# (model.flops_per_token(config, "chinchilla") x tokens). D is the tokens trained on under both.
COUNTING_COLUMNS = {"kaplan": ("params", "flops"), "chinchilla": ("params_total", "flops_chinchilla")}


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
        raise CourseError(f"error: no results at {path}; run {command} first, or pass --OUT_DIR=<its folder>")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise CourseError(f"error: line {number} of {path} is not JSON; delete that line and run "
                              f"{command} again to remake its run") from None
        missing = [name for name in fields if name not in row]
        if missing:
            raise CourseError(f"error: line {number} of {path} has no {', '.join(missing)}; it was not "
                              f"written by this version of {made_by} ({command} --OUT_DIR=<a new folder>)")
        if settings is not None and row.get("settings") != settings:
            saved = row.get("settings") or {}
            changed = [f"{key} {saved.get(key)!r} (now {value!r})" for key, value in settings.items()
                       if saved.get(key) != value]
            raise CourseError(f"error: {path} holds runs made with other settings ({', '.join(changed)}); "
                              f"pass --OUT_DIR=<a new folder> for a new experiment, or delete {path}")
        rows.append(row)
    if not rows and not missing_ok:
        raise CourseError(f"error: {path} holds no runs yet; run {command} first")
    return rows


def write_results(path: str | Path, rows: list[dict]) -> None:
    """The whole file again, atomically: a stop at any moment leaves the old file or the new one."""
    write_atomic(Path(path), "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8"))


def countings_in(rows: list[dict]) -> list[str]:
    """The countings the rows were planned under, in COUNTINGS' order; one line for a counting not known."""
    present = {row["counting"] for row in rows}
    unknown = sorted(present - set(COUNTINGS))
    if unknown:
        raise CourseError(f"error: runs of an unknown counting ({', '.join(map(str, unknown))}); a run's "
                          f"counting is one of {', '.join(COUNTINGS)}")
    return [counting for counting in COUNTINGS if counting in present]


@dataclass(frozen=True)
class Sweep:
    """One counting's runs as columns, one entry per run, N and C as that counting counts them."""

    counting: str  # "kaplan" or "chinchilla" (COUNTINGS): how the runs were planned
    budget: np.ndarray  # the FLOP budget C the run was planned for, in the planning counting's FLOPs
    n: np.ndarray  # parameters N: non-embedding (counted as kaplan) or all of them (chinchilla)
    d: np.ndarray  # tokens trained on D
    flops: np.ndarray  # compute C actually spent: 6·N·D (kaplan) or App. F FLOPs per token x D (chinchilla)
    loss: np.ndarray  # final validation loss, nats per token
    counted_as: str = ""  # how n and flops count N and C, when not as planned (from_rows says)

    def __post_init__(self):
        if not self.counted_as:
            object.__setattr__(self, "counted_as", self.counting)

    @classmethod
    def from_rows(cls, rows: list[dict], counting: str, counted_as: str | None = None) -> "Sweep":
        """The runs planned under `counting`, with N and C as `counted_as` counts them (the same counting
        unless told): the kaplan sweep read with every parameter and App. F FLOPs, say, to see what the
        counting alone does to the fits. The noise measurement's repeats (other seeds) are left out: each
        point of the design once. One line when there are no runs."""
        counted_as = counted_as or counting
        for name in (counting, counted_as):
            if name not in COUNTINGS:
                raise ValueError(f"counting must be one of {', '.join(COUNTINGS)}, not {name!r}")
        if any("counting" not in row for row in rows):
            raise CourseError("error: these runs have no counting: they were made by an older "
                              "train.py; train "
                              "the sweep again into a new --OUT_DIR")
        mine = [row for row in rows if row["counting"] == counting and not row.get("repeat")]
        if not mine:
            raise CourseError(f"error: no runs of the {counting} counting here (only "
                              f"{', '.join(sorted({str(row['counting']) for row in rows})) or 'none'})")
        n_key, c_key = COUNTING_COLUMNS[counted_as]

        def column(key):
            return np.array([float(row[key]) for row in mine])

        return cls(counting, column("budget"), column(n_key), column("tokens"), column(c_key),
                   column("val_loss"), counted_as)

    def take(self, index: np.ndarray) -> "Sweep":
        return Sweep(self.counting, self.budget[index], self.n[index], self.d[index], self.flops[index],
                     self.loss[index], self.counted_as)

    def with_loss(self, loss: np.ndarray) -> "Sweep":
        return replace(self, loss=np.asarray(loss, dtype=float))

    def budgets(self) -> np.ndarray:
        return np.unique(self.budget)
