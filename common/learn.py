"""`uv run learn`: write the course's key functions yourself, and find out whether they are right.

    uv run learn list                  every task: id, difficulty, what it asks, where, and your status
    uv run learn start 1.attention     replace that function's body with a stub for you to write
    uv run learn check 1.attention     compare yours with the course's, case by case, then the chapter's tests
    uv run learn hint 1.attention      one more hint each time
    uv run learn solution 1.attention  show the course's version (--apply puts it back)
    uv run learn reset 1.attention     put the course's version back; yours is saved in .learn/saved/ first

The course's version of each function is the one in git (the commit you cloned), so a stub never has to be
committed and `git status` shows what you changed. learn keeps its own notes in .learn/ (ignored by git):
which tasks you started, the hints you have seen, your last check, and every version of yours it replaced.
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

from common.learn_check import NOT_WRITTEN, STARS, Task, all_tasks, functions_of, with_functions
from common.learn_source import get_function, replace_function, stub

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / ".learn"  # state.json, course/ (the course's files as they were at `start`), saved/


class LearnError(Exception):
    """Ends the command with one line on stderr and exit status 2."""


# --- the course's version of a file, and the learner's ----------------------------------------------------

def git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise LearnError("learn needs git, to keep the course's version of each function: install git") from e
    if done.returncode:
        error = done.stderr.strip().splitlines()
        raise LearnError(error[-1] if error else f"git {' '.join(args)} failed")
    return done.stdout


def course_text(path: str) -> str:
    """The course's version of a file: as it was when you first started a task in it, else git's HEAD."""
    saved = NOTES / "course" / path
    if saved.exists():
        return saved.read_text(encoding="utf-8")
    if not (ROOT / ".git").exists():
        raise LearnError(f"{ROOT} is not a git checkout, and learn keeps the course's version of each "
                         "function in git: get the course with `git clone`, then run learn in the clone")
    return git("show", f"HEAD:./{path}")


def read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def write(path: str, text: str) -> None:
    """Write a file of the course in one step: a temporary file beside it, then renamed over it."""
    target = ROOT / path
    temporary = target.with_name(f".{target.name}.learn")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)


def digest(sources: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()[:16]


class State:
    """.learn/state.json: the stubs learn wrote, the hints seen and the last check, per task."""

    def __init__(self):
        self.path = NOTES / "state.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def task(self, task_id: str) -> dict:
        return self.data.setdefault(task_id, {})

    def save(self) -> None:
        NOTES.mkdir(exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True))


def status(task: Task, state: State) -> str:
    notes, mine = state.data.get(task.id, {}), digest(functions_of(read(task.file), task))
    if notes.get("checked", {}).get("sources") == mine:
        return "✓" if notes["checked"]["passed"] else "✗"
    if notes.get("stub") == mine:
        return "started"
    if "stub" in notes or mine != digest(functions_of(course_text(task.file), task)):
        return "edited, not checked"
    return "not started"


# --- the commands -----------------------------------------------------------------------------------------

def where(task: Task) -> str:
    return f"{task.file}: {', '.join(task.functions)}"


def cmd_list(tasks: list[Task], state: State, _args) -> int:
    chapter = None
    for task in tasks:
        if task.chapter != chapter:
            chapter = task.chapter
            print(f"\nchapter {chapter}  ({Path(task.file).parent.name})")
        print(f"{task.id:<18} {STARS[task.difficulty]:<4} {status(task, state):<20} {task.title}  "
              f"({Path(task.file).name}: {', '.join(task.functions)})")
    print("\nuv run learn start ID  gives you a stub to write; ★ about 5 minutes, ★★ 15, ★★★ 30")
    return 0


def cmd_start(tasks: list[Task], state: State, _args) -> int:
    for task in tasks:
        course, text = course_text(task.file), read(task.file)
        notes = state.task(task.id)
        mine = functions_of(text, task)
        if notes.get("stub") == digest(mine):
            print(f"{task.id}: already started, the stub is waiting in {where(task)}")
            continue
        if mine != functions_of(course, task):
            raise LearnError(f"{task.id}: {where(task)} has edits of yours that learn did not make; "
                             f"`uv run learn reset {task.id}` saves them in .learn/saved/ and restores the "
                             "course's version, then start again")
        saved = NOTES / "course" / task.file
        if not saved.exists():  # the course's text, kept in case you commit your own version
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(course, encoding="utf-8")
        header = [f"learn {task.id}: {task.title} ({STARS[task.difficulty]})", *task.asks.splitlines(),
                  *textwrap.wrap(f"Hint: {task.hints[0]}", 100, subsequent_indent="  "),
                  f"Check: uv run learn check {task.id}   More hints: uv run learn hint {task.id}"]
        for qualname in task.functions:
            text = replace_function(text, qualname, stub(get_function(text, qualname), header,
                                                         f"{task.id}: {NOT_WRITTEN}"))
        write(task.file, text)
        notes.update(stub=digest(functions_of(text, task)), hints=max(notes.get("hints", 0), 1))
        notes.pop("checked", None)
        print(f"{task.id}: write {', '.join(task.functions)} in {task.file}, then `uv run learn check "
              f"{task.id}`; until then, the chapter's code that calls it stops with NotImplementedError")
    state.save()
    return 0


def cmd_hint(tasks: list[Task], state: State, _args) -> int:
    for task in tasks:
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


def restore(task: Task, state: State, label: str) -> None:
    """Put the course's functions back, saving the learner's version first when it is not the course's."""
    course, text = course_text(task.file), read(task.file)
    mine, theirs = functions_of(text, task), functions_of(course, task)
    if mine != theirs and state.data.get(task.id, {}).get("stub") != digest(mine):
        saved = NOTES / "saved" / f"{task.id}-{time.strftime('%Y%m%d-%H%M%S')}.py"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(f"# your {task.id} from {task.file}\n\n" + "\n".join(mine.values()),
                         encoding="utf-8")
        print(f"{task.id}: your version is saved in {saved.relative_to(ROOT)}")
    write(task.file, with_functions(text, task, theirs))
    state.data.pop(task.id, None)
    saved = NOTES / "course" / task.file
    if saved.exists() and not any(t.file == task.file and "stub" in state.data.get(t.id, {})
                                  for t in all_tasks(ROOT)):
        saved.unlink()  # no task of that file is under way: git's version is the course's again
    print(f"{task.id}: {label} in {where(task)}")


def cmd_solution(tasks: list[Task], state: State, args) -> int:
    for task in tasks:
        if args.apply:
            restore(task, state, "the course's version is back")
            continue
        print(f"# {task.id}: the course's version, from {task.file}\n")
        print("\n".join(functions_of(course_text(task.file), task).values()))
    if not args.apply:
        print(f"# `uv run learn solution {' '.join(t.id for t in tasks)} --apply` puts it in place "
              "(yours is saved first)")
    state.save()
    return 0


def cmd_reset(tasks: list[Task], state: State, _args) -> int:
    for task in tasks:
        restore(task, state, "the course's version is back")
    state.save()
    return 0


# --- check: the comparisons and the chapter's tests, in a copy of the course -------------------------------

def copy_course(tasks: list[Task], folder: Path) -> None:
    """The course's files in `folder`: what git tracks and your untracked files, with every file that holds
    a task as the course has it, so that each task is checked beside the course's code and nothing else."""
    listed = git("ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file() and not name.startswith(".learn/"):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, folder / name)
    for path in {task.file for task in tasks}:
        (folder / path).write_text(course_text(path), encoding="utf-8")


def run_stage(folder: Path, stage: str, job: dict) -> object:
    """One stage of the check (common/learn_check.py) in a fresh Python, inside the copy."""
    (folder / ".job.json").write_text(json.dumps(job), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "-m", "common.learn_check", stage, ".job.json", ".out.json"],
                          cwd=folder, env=env, check=False, capture_output=True, text=True)
    if done.returncode:
        raise LearnError(f"the check itself failed:\n{done.stderr.strip()}")
    return json.loads((folder / ".out.json").read_text(encoding="utf-8"))


def run_tests(folder: Path, chosen: list[Task], sources: dict[str, dict[str, str]]) -> dict[str, list[dict]]:
    """The chapter's tests of each chosen task with the learner's functions in place: all together first;
    if some fail and more than one task was in, each task alone, so a failure is blamed on the right one."""
    def with_yours(group: list[Task]) -> list[dict]:
        texts = {task.file: course_text(task.file) for task in group}
        for task in group:
            texts[task.file] = with_functions(texts[task.file], task, sources[task.id])
        for path, text in texts.items():
            (folder / path).write_text(text, encoding="utf-8")
        try:
            return run_stage(folder, "tests", {"tests": sorted({t for task in group for t in task.tests})})
        finally:
            for path in texts:
                (folder / path).write_text(course_text(path), encoding="utf-8")

    together = with_yours(chosen)
    if len(chosen) == 1 or all(r["passed"] for r in together):
        return {task.id: [r for r in together if _belongs(r["name"], task)] for task in chosen}
    return {task.id: with_yours([task]) for task in chosen}


def _belongs(node: str, task: Task) -> bool:
    return any(node == t or node.startswith(t + "[") or node.startswith(t + "::") for t in task.tests)


def cmd_check(tasks: list[Task], state: State, _args) -> int:
    sources = {task.id: functions_of(read(task.file), task) for task in tasks}
    all_passed = True
    with tempfile.TemporaryDirectory(prefix="learn-") as tmp:
        folder = Path(tmp)
        copy_course(all_tasks(ROOT), folder)
        compared = run_stage(folder, "compare", {"sources": sources})
        passed = [task for task in tasks if all(r["passed"] for r in compared[task.id])]
        testable = [task for task in passed if task.tests]
        tested = run_tests(folder, testable, sources) if testable else {}
    for task in tasks:
        cases, tests = compared[task.id], tested.get(task.id, [])
        print(f"\n{task.id}  {task.title}  ({where(task)})")
        written = [r for r in cases if r["message"] != NOT_WRITTEN]
        for r in cases if written else []:
            print(f"  {'✓' if r['passed'] else '✗'} {r['name']}"
                  + ("" if r["passed"] else f": {r['message']}"))
        if task not in passed and task.tests and written:
            print("  · the chapter's tests run once every case passes")
        for r in tests:
            mark = "-" if r["message"].startswith("skipped") else "✓" if r["passed"] else "✗"
            print(f"  {mark} test {r['name'].split('/')[-1]}" + (f": {r['message']}" if r["message"] else ""))
        ok = task in passed and all(r["passed"] for r in tests)
        if ok:
            print(f"✓ {task.id}: all {len(cases)} cases and {len(tests)} of the chapter's tests pass. "
                  f"They catch {'; '.join(m.name for m in task.mistakes)}.")
        elif not written:
            print(f"✗ {task.id}: {NOT_WRITTEN}: {', '.join(task.functions)} still "
                  f"{'raises' if len(task.functions) == 1 else 'raise'} NotImplementedError")
        else:
            print(f"✗ {task.id}: {sum(r['passed'] for r in cases)} of {len(cases)} cases pass"
                  + (f", {sum(r['passed'] for r in tests)} of {len(tests)} tests" if tests else ""))
        state.task(task.id)["checked"] = {"sources": digest(sources[task.id]), "passed": ok}
        all_passed &= ok
    state.save()
    return 0 if all_passed else 1


COMMANDS = {"list": cmd_list, "start": cmd_start, "check": cmd_check, "hint": cmd_hint,
            "solution": cmd_solution, "reset": cmd_reset}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="learn", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("ids", nargs="*", help="task ids, e.g. 1.attention (list: none)")
    parser.add_argument("--apply", action="store_true", help="solution: put the course's version in place")
    args = parser.parse_args(argv)
    try:
        tasks = all_tasks(ROOT)
        known = {task.id: task for task in tasks}
        if args.command == "list":
            chosen = tasks
        elif not args.ids:
            raise LearnError(f"say which task: `uv run learn {args.command} 1.attention`; "
                             "`uv run learn list` shows them all")
        else:
            unknown = [i for i in args.ids if i not in known]
            if unknown:
                raise LearnError(f"no task {unknown[0]}; `uv run learn list` shows the ids")
            chosen = [known[i] for i in args.ids]
        code = COMMANDS[args.command](chosen, State(), args)
    except LearnError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    return code


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
