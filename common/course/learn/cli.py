"""`uv run learn`: write the course's key functions yourself, and find out whether they are right.

    uv run learn list                  every task: id, difficulty, your status, what it is, where
    uv run learn start 1.attention     replace that function's body with a stub for you to write
    uv run learn check 1.attention     compare yours with the course's, case by case, then the chapter's tests
    uv run learn hint 1.attention      one more hint each time
    uv run learn solution 1.attention  show the course's version (--apply puts it back)
    uv run learn reset 1.attention     put the course's version back; yours is saved in .learn/saved/ first

    uv run learn next                  the next task in the chapters' reading order that is not done
    uv run learn status                which commit is the course's version, and how far you are

The course's version of each function is fixed: the commit learn first ran at (HEAD then, kept in .learn/),
so your own commits never become the reference; after pulling the course's news, `learn status --update`
makes HEAD the course's version. `start` also keeps a copy of each function it replaces until
the task is reset. learn keeps its notes in .learn/ (ignored by git): the course's commit, the tasks under
way, the course's functions they replaced, the hints seen, the last check, and every version of yours it
replaced.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from common.course.learn.check import (
    NOT_WRITTEN,
    PROGRESS,
    STARS,
    Task,
    all_tasks,
    functions_of,
    with_functions,
)
from common.course.learn.source import added_top_level, get_function, replace_function, stub, with_imports
from common.errors import CourseError
from common.files import write_atomic

ROOT = Path(__file__).resolve().parents[3]  # the repository
NOTES = ROOT / ".learn"  # state.json, course/<task id>.json (the course's functions), saved/
TIMEOUTS = {"compare": 300, "tests": 1200}  # seconds; a function that never returns ends the check
COURSE_KEY = "course"  # state.json's entry for the course's commit, beside one entry per task id
COURSE: tuple[str, str] | None = None  # (commit, how it was chosen), set by main() from course_commit()


# --- the course's version of a file, and the learner's ----------------------------------------------------

def git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise CourseError("learn needs git, to keep the course's version of each function: install "
                          "git") from e
    if done.returncode:
        error = done.stderr.strip().splitlines()
        raise CourseError(error[-1] if error else f"git {' '.join(args)} failed")
    return done.stdout


def require_git() -> None:
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"], capture_output=True,
                      check=False).returncode:
        raise CourseError(f"{ROOT} is not a git checkout, and learn keeps the course's version of each "
                          "function in git: get the course with `git clone`, then run learn in the clone")


def kept(task: Task) -> Path:
    return NOTES / "course" / f"{task.id}.json"


def course_commit(state: "State", update: bool = False) -> tuple[str, str]:
    """(commit, how it was chosen): the commit learn first ran at, kept in `state`, so that commits of
    yours never become the course's version; `update` moves it to HEAD (after pulling the course's news)."""
    if update or "commit" not in state.data.get(COURSE_KEY, {}):
        state.data[COURSE_KEY] = {"commit": git("rev-parse", "HEAD").strip()}
        state.save()
        return state.data[COURSE_KEY]["commit"], "HEAD when learn first ran" if not update else "HEAD now"
    return state.data[COURSE_KEY]["commit"], "HEAD when learn first ran"


def course_text(path: str, tasks: list[Task]) -> str:
    """The course's version of a file: as it stands at course_commit(), with the functions of each task
    under way as they were when it started."""
    commit = (COURSE or course_commit(State()))[0]
    try:
        text = git("show", f"{commit}:./{path}")
    except CourseError as e:
        raise CourseError(f"the course's version (commit {commit[:12]}) has no {path}: after pulling the "
                          "course's news, `uv run learn status --update` makes HEAD the course's "
                          "version") from e
    for task in tasks:
        if task.file == path and kept(task).exists():
            text = with_functions(text, task, json.loads(kept(task).read_text(encoding="utf-8")))
    return text


def read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def yours(task: Task) -> dict[str, str]:
    """The task's functions as they stand in your file; one clear line if the file cannot be read as Python
    or no longer has them."""
    try:
        return functions_of(read(task.file), task)
    except SyntaxError as e:
        raise CourseError(f"{task.file} line {e.lineno}: {e.msg}; fix it, or `uv run learn reset {task.id}` "
                          "(which saves your file first)") from e
    except LookupError as e:
        raise CourseError(f"{task.file}: {e}; put it back, or `uv run learn reset {task.id}`") from e


def write(path: str, text: str) -> None:
    """Write a file of the course in one step (an editor watching it never sees half of it)."""
    write_atomic(ROOT / path, text)


def save_yours(task: Task, text: str) -> Path:
    """Keep a version of yours in .learn/saved/, never over an earlier one."""
    folder = NOTES / "saved"
    folder.mkdir(parents=True, exist_ok=True)
    stamp, n = time.strftime("%Y%m%d-%H%M%S"), 0
    while (path := folder / f"{task.id}-{stamp}{f'-{n}' if n else ''}.py").exists():
        n += 1
    path.write_text(f"# your {task.id}, from {task.file}\n\n{text}", encoding="utf-8")
    return path


def digest(sources: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()[:16]


class State:
    """.learn/state.json: the stubs learn wrote, the hints seen and the last check, per task."""

    def __init__(self):
        self.path = NOTES / "state.json"
        self.data = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}

    def task(self, task_id: str) -> dict:
        return self.data.setdefault(task_id, {})

    def save(self) -> None:
        NOTES.mkdir(exist_ok=True)
        write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=True))


def status(task: Task, state: State, tasks: list[Task]) -> str:
    try:
        mine = digest(yours(task))
    except CourseError:
        return "does not parse"
    notes = state.data.get(task.id, {})
    if notes.get("checked", {}).get("sources") == mine:
        return "✓" if notes["checked"]["passed"] else "✗"
    if notes.get("stub") == mine:
        return "started"
    if "stub" in notes or mine != digest(functions_of(course_text(task.file, tasks), task)):
        return "edited, not checked"
    return "not started"


# --- the commands -----------------------------------------------------------------------------------------

def where(task: Task) -> str:
    return f"{task.file}: {', '.join(task.functions)}"


def cmd_list(chosen: list[Task], state: State, tasks: list[Task], _args) -> int:
    chapter = None
    for task in chosen:
        if task.chapter != chapter:
            chapter = task.chapter
            print(f"\nchapter {chapter}  ({Path(task.file).parent.name})")
        print(f"{task.id:<18} {STARS[task.difficulty]:<4} {status(task, state, tasks):<20} {task.title}  "
              f"({Path(task.file).name}: {', '.join(task.functions)})")
    print("\nuv run learn start ID  gives you a stub to write; ★ about 5 minutes, ★★ 15, ★★★ 30")
    return 0


def cmd_start(chosen: list[Task], state: State, tasks: list[Task], _args) -> int:
    todo = []
    for task in chosen:  # every task is checked before any file is written
        mine = yours(task)
        if state.data.get(task.id, {}).get("stub") == digest(mine):
            print(f"{task.id}: already started, the stub is waiting in {where(task)}")
        elif mine != functions_of(course_text(task.file, tasks), task):
            raise CourseError(f"{task.id}: {where(task)} has edits of yours that learn did not make; "
                              f"`uv run learn reset {task.id}` saves them in .learn/saved/ and restores the "
                              "course's version, then start again")
        else:
            todo.append((task, mine))
    for task, course in todo:
        kept(task).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(kept(task), json.dumps(course))
        header = [f"learn {task.id}: {task.title} ({STARS[task.difficulty]})", *task.asks.splitlines(),
                  *textwrap.wrap(f"Hint: {task.hints[0]}", 100, subsequent_indent="  "),
                  "Write it all inside this function: learn checks it alone, in the course's file.",
                  f"Check: uv run learn check {task.id}   More hints: uv run learn hint {task.id}"]
        text = read(task.file)
        for qualname in task.functions:
            text = replace_function(text, qualname, stub(get_function(text, qualname), header,
                                                         f"{task.id}: {NOT_WRITTEN}"))
        write(task.file, text)
        notes = state.task(task.id)
        notes.update(stub=digest(functions_of(text, task)), hints=max(notes.get("hints", 0), 1))
        notes.pop("checked", None)
        state.save()
        print(f"{task.id}: write {', '.join(task.functions)} in {task.file}, then `uv run learn check "
              f"{task.id}`; until then, the chapter's code that calls it stops with NotImplementedError")
    return 0


def cmd_hint(chosen: list[Task], state: State, _tasks, _args) -> int:
    for task in chosen:
        notes = state.task(task.id)
        shown = min(notes.get("hints", 0) + 1, len(task.hints))
        notes["hints"] = shown
        print(f"{task.id}: {task.title}")
        for i, hint in enumerate(task.hints[:shown], 1):
            print(f"  hint {i} of {len(task.hints)}: {hint}")
        if shown == len(task.hints):
            print(f"  that is every hint; `uv run learn solution {task.id}` shows the course's version")
    state.save()
    return 0


def restore(task: Task, state: State, tasks: list[Task]) -> None:
    """Put the course's functions back, saving yours first when they are not the course's. A file that no
    longer parses, or lost the function, is saved whole and replaced by the course's whole file."""
    course = course_text(task.file, tasks)
    theirs = functions_of(course, task)
    try:
        mine = yours(task)
    except CourseError:
        print(f"{task.id}: {task.file} cannot be read as it is; your whole file is saved in "
              f"{save_yours(task, read(task.file)).relative_to(ROOT)}")
        write(task.file, course)
        for other in tasks:  # every task of that file is back to the course's
            if other.file == task.file:
                state.data.pop(other.id, None)
                kept(other).unlink(missing_ok=True)
        return
    if mine != theirs and state.data.get(task.id, {}).get("stub") != digest(mine):
        saved = save_yours(task, "\n".join(mine.values()))
        print(f"{task.id}: your version is saved in {saved.relative_to(ROOT)}")
    write(task.file, with_functions(read(task.file), task, theirs))
    state.data.pop(task.id, None)
    kept(task).unlink(missing_ok=True)
    print(f"{task.id}: the course's version is back in {where(task)}")


def cmd_solution(chosen: list[Task], state: State, tasks: list[Task], args) -> int:
    for task in chosen:
        if args.apply:
            restore(task, state, tasks)
        else:
            print(f"# {task.id}: the course's version, from {task.file}\n")
            print("\n".join(functions_of(course_text(task.file, tasks), task).values()))
    if not args.apply:
        print(f"# `uv run learn solution {' '.join(t.id for t in chosen)} --apply` puts it in place "
              "(yours is saved first)")
    state.save()
    return 0


def cmd_reset(chosen: list[Task], state: State, tasks: list[Task], _args) -> int:
    for task in chosen:
        restore(task, state, tasks)
    state.save()
    return 0


# --- check: the comparisons and the chapter's tests, in a copy of the course -------------------------------

def copy_course(tasks: list[Task], folder: Path) -> None:
    """The course in `folder`: what git tracks and your untracked files, with every file that holds a task
    as the course has it, so that each task is checked beside the course's code and nothing else. data/
    (downloads, prepared corpora) is linked, not copied."""
    listed = git("ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file() and not name.startswith(".learn/"):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, folder / name)
    for path in {task.file for task in tasks}:
        (folder / path).write_text(course_text(path, tasks), encoding="utf-8")
    if (ROOT / "data").is_dir():
        (folder / "data").symlink_to(ROOT / "data", target_is_directory=True)


def run_stage(folder: Path, stage: str, job: dict) -> tuple[object, str]:
    """One stage of the check (common/course/learn/check.py) in a fresh Python inside the copy: its results,
    and what your code printed. Each case is shown as it finishes (the stage writes them to PROGRESS)."""
    (folder / ".job.json").write_text(json.dumps(job), encoding="utf-8")
    progress = folder / PROGRESS
    progress.write_text("", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(folder)}
    limit = TIMEOUTS[stage] * max(1, len(job.get("sources", {})))  # the compare stage: per task
    shown, deadline = 0, time.monotonic() + limit
    with open(folder / ".stdout", "w", encoding="utf-8") as out, \
            open(folder / ".stderr", "w", encoding="utf-8") as err:
        command = [sys.executable, "-m", "common.course.learn.check", stage, ".job.json", ".out.json"]
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=err, text=True)
        finished = False
        while not finished:
            try:
                process.wait(timeout=0.2)
                finished = True
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    raise CourseError(f"the check did not finish within {limit} s: does a loop of "
                                      "yours never end?") from None
            lines = progress.read_bytes().split(b"\n")[:-1]  # whole lines only, decoded once whole
            for line in lines[shown:]:
                print(line.decode("utf-8"), flush=True)
            shown = len(lines)
    if process.returncode:
        stderr = (folder / ".stderr").read_text(encoding="utf-8")
        raise CourseError(f"the check itself failed:\n{stderr.strip()}")
    return (json.loads((folder / ".out.json").read_text(encoding="utf-8")),
            (folder / ".stdout").read_text(encoding="utf-8"))


def run_tests(folder: Path, chosen: list[Task], sources: dict[str, dict[str, str]], tasks: list[Task],
              imports: dict[str, list[str]]) -> dict[str, list[dict]]:
    """The chapter's tests of each chosen task with your functions in place: all together first; if some
    fail and more than one task was in, each task alone, so that a failure is blamed on the right one."""
    def with_yours(group: list[Task]) -> list[dict]:
        texts = {task.file: course_text(task.file, tasks) for task in group}
        for task in group:
            texts[task.file] = with_imports(with_functions(texts[task.file], task, sources[task.id]),
                                            imports.get(task.id, []))
        for path, text in texts.items():
            (folder / path).write_text(text, encoding="utf-8")
        try:
            return run_stage(folder, "tests", {"tests": sorted({t for task in group for t in task.tests})})[0]
        finally:
            for path in texts:
                (folder / path).write_text(course_text(path, tasks), encoding="utf-8")

    together = with_yours(chosen)
    if len(chosen) == 1 or all(r["passed"] for r in together):
        return {task.id: [r for r in together if _belongs(r["name"], task)] for task in chosen}
    return {task.id: with_yours([task]) for task in chosen}


def _belongs(node: str, task: Task) -> bool:
    return any(node == t or node.startswith(t + "[") or node.startswith(t + "::") for t in task.tests)


def _report(task: Task, cases: list[dict], tests: list[dict], mistake: str | None = None) -> bool:
    """Print one task's cases and tests, and the classic mistake that explains a failure when one does;
    True when all pass."""
    print(f"\n{task.id}  {task.title}  ({where(task)})")
    written = [r for r in cases if r["message"] != NOT_WRITTEN]
    passed = all(r["passed"] for r in cases)
    for r in cases if written else []:  # each case was shown as it finished; the failures again, with why
        if not r["passed"]:
            print(f"  ✗ {r['name']}: {r['message']}")
    if mistake:
        print(f"  → every case gives what the course's code gives with a classic mistake: {mistake}")
    if not passed and task.tests and written:
        print("  · the chapter's tests run once every case passes")
    for r in tests:
        skipped = r["message"].startswith("skipped")
        print(f"  {'-' if skipped else '✓' if r['passed'] else '✗'} test {r['name'].split('/')[-1]}"
              + (f": {r['message']}" if r["message"] else ""))
    ran = [r for r in tests if not r["message"].startswith("skipped")]
    ok = passed and all(r["passed"] for r in tests)
    if ok:
        print(f"✓ {task.id}: all {len(cases)} cases and {len(ran)} of the chapter's tests pass"
              + (f" ({len(tests) - len(ran)} skipped)" if len(ran) < len(tests) else "")
              + f". They catch {'; '.join(m.name for m in task.mistakes)}.")
    elif not written:
        print(f"✗ {task.id}: {NOT_WRITTEN}: {', '.join(task.functions)} still "
              f"{'raises' if len(task.functions) == 1 else 'raise'} NotImplementedError")
    else:
        print(f"✗ {task.id}: {sum(r['passed'] for r in cases)} of {len(cases)} cases pass"
              + (f", {sum(r['passed'] for r in ran)} of {len(ran)} tests" if tests else ""))
    return ok


def added(task: Task, tasks: list[Task]) -> list[str]:
    """The imports you added at the top of the task's file, carried into its check; the helpers you added
    there are not (the check puts only the task's functions into the course's file), and one line says so."""
    imports, helpers = added_top_level(course_text(task.file, tasks), read(task.file))
    if helpers:
        print(f"{task.id}: {task.file} adds {', '.join(helpers)} at its top level, which the check leaves "
              f"out (it takes {', '.join(task.functions)} and your imports): move it inside your function")
    return imports


def cmd_check(chosen: list[Task], state: State, tasks: list[Task], _args) -> int:
    sources = {task.id: yours(task) for task in chosen}
    imports = {task.id: added(task, tasks) for task in chosen}
    with tempfile.TemporaryDirectory(prefix="learn-") as tmp:
        folder = Path(tmp)
        copy_course(tasks, folder)
        print(f"checking {', '.join(task.id for task in chosen)}: each case as it finishes", flush=True)
        compared, printed = run_stage(folder, "compare", {"sources": sources, "imports": imports})
        passed = [task for task in chosen if all(r["passed"] for r in compared[task.id]["cases"])]
        testable = [task for task in passed if task.tests]
        if testable:
            print(f"running the chapter's tests of {', '.join(task.id for task in testable)}", flush=True)
        tested = run_tests(folder, testable, sources, tasks, imports) if testable else {}
    if printed.strip():
        lines = printed.rstrip().splitlines()
        print("your code printed, during the cases:\n  " + "\n  ".join(lines[:20])
              + (f"\n  ... ({len(lines) - 20} more lines)" if len(lines) > 20 else ""))
    all_passed = True
    for task in chosen:
        ok = _report(task, compared[task.id]["cases"], tested.get(task.id, []), compared[task.id]["mistake"])
        state.task(task.id)["checked"] = {"sources": digest(sources[task.id]), "passed": ok}
        all_passed &= ok
    state.save()
    return 0 if all_passed else 1


def cmd_next(chosen: list[Task], state: State, tasks: list[Task], _args) -> int:
    """The first task, in the chapters' reading order (each tasks.py's order), that has not passed."""
    for task in chosen:
        if status(task, state, tasks) != "✓":
            print(f"next: {task.id} {STARS[task.difficulty]}  {task.title}  ({where(task)})\n"
                  f"  uv run learn start {task.id}")
            return 0
    print("every task has passed its check")
    return 0


def cmd_status(chosen: list[Task], state: State, tasks: list[Task], _args) -> int:
    commit, how = COURSE
    done = [task for task in chosen if status(task, state, tasks) == "✓"]
    print(f"the course's version: commit {commit[:12]} ({how})")
    print(f"{len(done)} of {len(chosen)} tasks pass their check; `uv run learn next` names the next one")
    return 0


COMMANDS = {"list": cmd_list, "start": cmd_start, "check": cmd_check, "hint": cmd_hint,
            "solution": cmd_solution, "reset": cmd_reset, "next": cmd_next, "status": cmd_status}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="learn", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("ids", nargs="*", help="task ids, e.g. 1.attention (list: all when none is given)")
    parser.add_argument("--apply", action="store_true", help="solution: put the course's version in place")
    parser.add_argument("--update", action="store_true",
                        help="status: make HEAD the course's version (after pulling the course's news)")
    args = parser.parse_args(argv)
    try:
        tasks = all_tasks(ROOT)
        known = {task.id: task for task in tasks}
        unknown = [i for i in args.ids if i not in known]
        if unknown:
            raise CourseError(f"no task {unknown[0]}; `uv run learn list` shows the ids")
        if not args.ids and args.command not in ("list", "next", "status"):
            raise CourseError(f"say which task: `uv run learn {args.command} 1.attention`; "
                              "`uv run learn list` shows them all")
        if args.apply and args.command != "solution":
            raise CourseError("--apply goes with `solution`")
        if args.update and args.command != "status":
            raise CourseError("--update goes with `status`")
        state = State()
        global COURSE
        COURSE = None
        if args.command != "hint":
            require_git()
            COURSE = course_commit(state, update=args.update)
        chosen = [known[i] for i in args.ids] if args.ids else tasks
        code = COMMANDS[args.command](chosen, state, tasks, args)
    except CourseError as e:
        print(e if str(e).startswith("error: ") else f"error: {e}", file=sys.stderr)  # one prefix
        return 2
    except LookupError as e:  # a task's function, newer than the course's version learn keeps
        print(f"error: the course's version (commit {COURSE[0][:12] if COURSE else '?'}) has no {e}: after "
              "pulling the course's news, `uv run learn status --update` makes HEAD the course's version",
              file=sys.stderr)
        return 2
    return code


def entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `uv run learn list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
