"""How `uv run learn check` decides whether a learner's function is right.

A task (`Task`) names one function of a chapter, or a small group, and a check: a function that receives two
versions of the file, the course's and the learner's, loaded side by side as modules, and compares them
on random inputs, case by case. Each case ends ✓ or ✗ with the first difference in plain words: where the
outputs first differ, by how much, and the input that made them differ. When every case passes, the
chapter's own tests that exercise the function run against the learner's code (parity with `transformers`,
causality, masking statistics).

Each chapter lists its tasks in exercises/tasks.py; common/course/learn/cli.py is the command.
"""

import contextlib
import importlib
import io
import json
import linecache
import math
import os
import random
import re
import signal
import sys
import threading
import traceback
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from common.course.learn.source import get_function, replace_function, with_imports
from common.errors import CourseError, run_main

NOT_WRITTEN = "not written yet"
CASE_SECONDS = 60  # one case's time limit; a slower one is that case's ✗
PROGRESS = ".progress"  # where the compare stage writes each case as it finishes, in the check's folder
STARS = {1: "★", 2: "★★", 3: "★★★"}


@dataclass(frozen=True)
class Mistake:
    """A classic mistake, written as edits of the course's function: each `old` text becomes `new`.
    The course's tests write each one in and assert that the task's check reports ✗."""

    name: str  # what a learner did: "no 1/sqrt(hs) scaling"
    edits: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Task:
    """One function (or a small group) a learner writes, and how to check it."""

    id: str  # "<chapter>.<name>", e.g. "1.attention"
    title: str  # what it is, in a few words: "causal multi-head attention"
    file: str  # the file that holds it, relative to the repository: "phase1_foundation/project1_gpt/model.py"
    functions: tuple[str, ...]  # qualified names in that file: ("CausalSelfAttention.forward",)
    difficulty: int  # 1 to 3 stars: about 5, 15 or 30 minutes
    asks: str  # what to write, a few sentences: the stub shows it
    hints: tuple[str, ...]  # given one at a time by `learn hint`, the last nearly the answer
    check: Callable  # check(course, yours, case): compares the two modules, case by case
    tests: tuple[str, ...] = ()  # pytest node ids of the chapter's own tests that exercise the function
    mistakes: tuple[Mistake, ...] = ()  # at least two: the cases must catch each of them

    @property
    def chapter(self) -> int:
        return int(self.id.split(".")[0])


class Mismatch(AssertionError):
    """A case's outputs differ; the message says where and how, in plain words."""


@dataclass
class Result:
    name: str
    passed: bool
    message: str = ""


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)} ({x.dtype})"
    return f"{type(x).__name__} {x!r}"[:120]


def _close(a: float, b: float, atol: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= atol + rtol * abs(b)


class Case:
    """What a check compares within one case: `case.close(yours, course)` for numbers and tensors,
    `case.equal(yours, course)` for what must match exactly (token ids, lists, masks)."""

    def __init__(self, given: str = ""):
        self.given = given  # the input, in words, added to any difference reported

    def fail(self, message: str):
        raise Mismatch(message + (f" (input: {self.given})" if self.given else ""))

    def close(self, yours, course, what: str = "the output", atol: float = 1e-5, rtol: float = 1e-5):
        """Equal within atol + rtol * |course|, element by element; tuples and lists item by item."""
        if isinstance(course, tuple | list):
            if not isinstance(yours, tuple | list) or len(yours) != len(course):
                self.fail(f"{what} is {_describe(yours)}; the course's is {_describe(course)}")
            for i, (a, b) in enumerate(zip(yours, course, strict=True)):
                self.close(a, b, f"{what}[{i}]", atol, rtol)
            return
        if not isinstance(course, torch.Tensor):
            if isinstance(yours, torch.Tensor) and yours.numel() == 1:
                yours = yours.item()
            if not isinstance(yours, int | float | np.number) or not _close(yours, course, atol, rtol):
                self.fail(f"{what} is {_describe(yours)}; the course's is {_describe(course)}")
            return
        if not isinstance(yours, torch.Tensor):
            self.fail(f"{what} is {_describe(yours)}; the course's is {_describe(course)}")
        if yours.shape != course.shape:
            self.fail(f"{what} has shape {tuple(yours.shape)}; the course's has shape {tuple(course.shape)}")
        if yours.dtype.is_floating_point != course.dtype.is_floating_point:
            self.fail(f"{what} has dtype {yours.dtype}; the course's has {course.dtype}")
        a, b = yours.detach().double().cpu(), course.detach().double().cpu()
        bad = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if (a.isnan() & ~b.isnan()).any():
            self.fail(f"{what} holds NaN, first at index {(a.isnan() & ~b.isnan()).nonzero()[0].tolist()}, "
                      "where the course's is a number")
        if bad.any():
            where = tuple(bad.nonzero()[0].tolist())
            gap = (a - b).abs().nan_to_num(float("inf"))
            self.fail(f"{what} differs first at index {list(where)}: yours {a[where].item():.6g}, the "
                      f"course's {b[where].item():.6g}; {int(bad.sum()):,} of {bad.numel():,} values differ, "
                      f"by up to {gap.max().item():.3g}")

    def equal(self, yours, course, what: str = "the output"):
        """Exactly equal: tensors element by element, anything else by ==."""
        if isinstance(course, torch.Tensor):
            if not isinstance(yours, torch.Tensor):
                self.fail(f"{what} is {_describe(yours)}; the course's is {_describe(course)}")
            if yours.shape != course.shape:
                self.fail(f"{what} has shape {tuple(yours.shape)}; the course's has shape "
                          f"{tuple(course.shape)}")
            bad = yours.cpu() != course.cpu()
            if bad.any():
                where = tuple(bad.nonzero()[0].tolist())
                self.fail(f"{what} differs first at index {list(where)}: yours {yours[where].item()}, the "
                          f"course's {course[where].item()}; {int(bad.sum()):,} of {bad.numel():,} differ")
            return
        if isinstance(course, list | tuple) and isinstance(yours, list | tuple) and len(yours) == len(course):
            for i, (a, b) in enumerate(zip(yours, course, strict=True)):
                if a != b:
                    self.fail(f"{what} differs first at item {i}: yours {a!r}, the course's {b!r}")
        if yours != course:
            self.fail(f"{what} is {_describe(yours)}; the course's is {_describe(course)}")

    def true(self, condition: bool, message: str):
        """A property the output must have, e.g. rows that sum to 1; `message` says what went wrong."""
        if not condition:
            self.fail(message)


class StopCases(Exception):
    """Ends a task's check at the first case whose result differs from the one expected (Cases(expect=...)):
    a diagnosis needs no more."""


class CaseTimeout(BaseException):
    """A case ran past CASE_SECONDS. Not an Exception, so that an `except Exception` in your code cannot
    swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise CaseTimeout in the code inside once `seconds` have passed, where the platform has interval
    timers (not Windows) and this is the main thread; elsewhere, no limit but the whole check's."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum, _frame):
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Cases:
    """Runs a task's cases, each from the same seeds and within CASE_SECONDS, and keeps a ✓ or ✗ for each;
    with `progress`, also writes each one there as it finishes (`learn check` shows them as they come)."""

    def __init__(self, yours_filename: str, expect: list[Result] | None = None, progress: Path | None = None,
                 label: str = ""):
        self.yours_filename = yours_filename
        self.expect = expect
        self.progress, self.label = progress, label
        self.results: list[Result] = []

    @contextlib.contextmanager
    def __call__(self, name: str, given: str = "") -> Iterator[Case]:
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        try:
            with time_limit(CASE_SECONDS):
                yield Case(given)
        except CaseTimeout:
            self.results.append(Result(name, False, f"took longer than {CASE_SECONDS} s: does a loop of "
                                                    "yours never end?"))
            raise StopCases from None  # the task's other cases would wait as long: its check ends here
        except NotImplementedError as e:
            written = not str(e).endswith(NOT_WRITTEN)  # the stub's, or another (nn.Module's without forward)
            self.results.append(Result(name, False, self._raised(e) if written else NOT_WRITTEN))
        except Mismatch as e:
            self.results.append(Result(name, False, str(e)))
        except Exception as e:  # the learner's code raised: say what and where in their function
            self.results.append(Result(name, False, self._raised(e)))
        else:
            self.results.append(Result(name, True))
        if self.progress is not None:
            result = self.results[-1]
            with self.progress.open("a", encoding="utf-8") as out:
                out.write(f"  {self.label} {'✓' if result.passed else '✗'} {result.name}\n")
        if self.expect is not None and self.results != self.expect[: len(self.results)]:
            raise StopCases

    def _raised(self, error: Exception) -> str:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == self.yours_filename]
        where = f" at `{frames[-1].line}`" if frames and frames[-1].line else ""
        return f"raised {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}{where}"


def load_module(text: str, filename: str, name: str) -> types.ModuleType:
    """Run a module's source under a name of its own, so that two versions of one file can live side by
    side. Its imports resolve as usual, to the course's other files."""
    module = types.ModuleType(name)
    module.__file__ = filename
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)  # tracebacks can then show its lines
    sys.modules[name] = module  # dataclasses look their module up here
    try:
        exec(compile(text, filename, "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def with_functions(course_text: str, task: Task, sources: dict[str, str]) -> str:
    """The course's file with the task's functions replaced by `sources` (qualified name -> source)."""
    text = course_text
    for qualname in task.functions:
        text = replace_function(text, qualname, sources[qualname])
    return text


def functions_of(text: str, task: Task) -> dict[str, str]:
    return {qualname: get_function(text, qualname) for qualname in task.functions}


def compare(task: Task, course_text: str, sources: dict[str, str], imports: tuple[str, ...] = (),
            progress: Path | None = None) -> list[Result]:
    """The task's cases, the course's file against the same file holding `sources` for the task's
    functions (and the import statements you added, `imports`); each case's ✓ or ✗ also written to
    `progress` as it finishes. Nothing else is written to disk."""
    yours = with_imports(with_functions(course_text, task, sources), list(imports))
    return run_cases(task, course_text, yours, progress=progress)


def run_cases(task: Task, reference_text: str, yours_text: str, expect: list[Result] | None = None,
              tag: str = "yours", progress: Path | None = None) -> list[Result]:
    """The task's check with `reference_text` as the course's file and `yours_text` as yours; with `expect`,
    stopped at the first result that differs from it."""
    path = task.file
    yours_filename = f"{path} (yours)"
    course = load_module(reference_text, path, f"_learn_course_{task.id.replace('.', '_')}")
    cases = Cases(yours_filename, expect, progress, task.id)
    try:
        yours = load_module(yours_text, yours_filename, f"_learn_{tag}_{task.id.replace('.', '_')}")
    except Exception as e:  # a syntax error, or code at the top level of the file that raised
        return [Result("your file loads", False, f"{type(e).__name__}: {e}")]
    with torch.random.fork_rng(), warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # a wrong function may overflow; its case says so as ✗
        with contextlib.suppress(StopCases):
            task.check(course, yours, cases)
    if not cases.results:
        raise RuntimeError(f"task {task.id}'s check ran no case")
    return cases.results


def diagnose(task: Task, course_text: str, sources: dict[str, str], results: list[Result]) -> str | None:
    """The classic mistake that explains a failing version: the first of the task's mistakes whose code (the
    course's with that mistake written in) gets, case by case, the very results `sources` got (`results`:
    the same ✓ and ✗, the same differences); None if none does."""
    course = functions_of(course_text, task)
    for mistake in task.mistakes:
        mutated = dict(course)
        for old, new in mistake.edits:
            mutated = {name: source.replace(old, new) for name, source in mutated.items()}
        if mutated == course:
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            theirs = run_cases(task, course_text, with_functions(course_text, task, mutated), expect=results,
                               tag="mistake")
        if theirs == results:
            return mistake.name
    return None


class _Collector:
    """A pytest plugin that keeps each test's outcome and the first line of its failure."""

    def __init__(self):
        self.results: dict[str, Result] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            message = ""
            if report.failed:
                text = report.longreprtext.strip().splitlines()
                errors = [line for line in text if line.startswith("E ")]
                message = (errors[0][1:].strip() if errors else text[-1] if text else "failed")[:300]
            if report.skipped:
                reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
                message = "skipped: " + reason.removeprefix("Skipped: ")
            previous = self.results.get(report.nodeid)
            if previous is None or previous.passed:
                self.results[report.nodeid] = Result(report.nodeid, report.passed or report.skipped, message)


def run_tests(node_ids: list[str]) -> list[Result]:
    """Run the given tests of the chapter with pytest in this process, quietly, and return each outcome."""
    import pytest

    collector = _Collector()
    args = ["-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=--import-mode=importlib",
            *node_ids]
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        code = pytest.main(args, plugins=[collector])
    results = list(collector.results.values())
    if code not in (0, 1) or not results:  # collection failed: a test file did not import, a node is missing
        results.append(Result("the chapter's tests could be collected", False, f"pytest exited {int(code)}"))
    return results


STUB = re.compile(r"^\s*raise NotImplementedError\(['\"](\d+\.\w+): " + NOT_WRITTEN, re.MULTILINE)


def refuse_stubs(package: str) -> None:
    """Raise CourseError, before a run starts, if a learn task in the loaded modules of `package`
    ("phase1_foundation.project1_gpt") is still a stub: the run would stop there after minutes."""
    found = set()
    for name, module in list(sys.modules.items()):
        if name.startswith(package + ".") and getattr(module, "__file__", None):
            found |= set(STUB.findall(Path(module.__file__).read_text(encoding="utf-8")))
    if stubs := sorted(found):
        raise CourseError(f"error: {', '.join(stubs)} {'is' if len(stubs) == 1 else 'are'} still a "
                          f"stub, which this run would call: write it and `uv run learn check {stubs[0]}`, "
                          f"or put the course's back with `uv run learn solution {stubs[0]} --apply`")


def all_tasks(root) -> list[Task]:
    """Every chapter's tasks, from phase1_foundation/<chapter>/exercises/tasks.py, in chapter order. The
    files are found by their path, as pytest finds tests: common/ names no chapter."""
    tasks = []
    for path in sorted(root.glob("phase1_foundation/*/exercises/tasks.py")):
        tasks += importlib.import_module(".".join(path.relative_to(root).with_suffix("").parts)).TASKS
    return sorted(tasks, key=lambda task: task.chapter)


def main(argv: list[str] | None = None) -> None:
    """`python -m common.course.learn.check compare|tests JOB OUT`, which `learn check` runs in a fresh
    process inside a copy of the course, so that the imports of the course's other files find the course's
    code.

    compare: JOB holds {"sources": {task id: {function: source}}}; the course's text is the file on disk.
    tests: JOB holds {"tests": [node ids]}, run against the files on disk (where the learner's code now is).
    """
    stage, job, out = argv or sys.argv[1:]
    spec = json.loads(Path(job).read_text(encoding="utf-8"))
    if stage == "compare":
        tasks = {task.id: task for task in all_tasks(Path.cwd())}
        results = {}
        for task_id, sources in spec["sources"].items():
            course_text = Path(tasks[task_id].file).read_text(encoding="utf-8")
            cases = compare(tasks[task_id], course_text, sources, spec["imports"].get(task_id, ()),
                            progress=Path(PROGRESS))
            written = any(r.message != NOT_WRITTEN for r in cases)
            failed = not all(r.passed for r in cases)
            failed &= not any(r.message.startswith("took longer than") for r in cases)  # no diagnosis: slow
            results[task_id] = {"cases": [vars(r) for r in cases],
                                "mistake": diagnose(tasks[task_id], course_text, sources, cases)
                                if written and failed else None}
    else:
        results = [vars(r) for r in run_tests(spec["tests"])]
    Path(out).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    run_main(main)
