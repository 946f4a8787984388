"""`uv run learn`: every task's check passes the course's code and a second correct implementation, reports a
stub as "not written yet", and catches each classic mistake listed beside the task; the command's loop
(start, check, hint, solution, reset) works in a git clone and loses nothing.

The checks here run in memory, on the course's files as they are; the command runs in a copy of the course
in a temporary folder. Nothing here writes into the checkout.
"""

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from common.course.learn import check as learn_check
from common.course.learn import cli as learn_command
from common.course.learn.check import NOT_WRITTEN, all_tasks, compare, diagnose, functions_of
from common.course.learn.source import get_function, replace_function, stub

ROOT = Path(__file__).resolve().parents[1]
TASKS = all_tasks(ROOT)
BY_ID = {task.id: task for task in TASKS}


def second_ways() -> dict[str, dict[str, str]]:
    """Each chapter's tests/second_ways.py: a correct implementation of each task, written differently."""
    ways = {}
    for path in sorted(ROOT.glob("phase1_foundation/*/tests/second_ways.py")):
        spec = importlib.util.spec_from_file_location(f"second_ways_{path.parent.parent.name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        ways.update(module.SECOND_WAYS)
    return ways


SECOND_WAYS = second_ways()


def course(task):
    text = (ROOT / task.file).read_text(encoding="utf-8")
    return text, functions_of(text, task)


def with_mistake(sources: dict[str, str], mistake) -> dict[str, str]:
    for old, new in mistake.edits:
        assert any(old in source for source in sources.values()), f"{mistake.name}: no {old!r} in the code"
        sources = {name: source.replace(old, new) for name, source in sources.items()}
    return sources


# --- the task lists ---------------------------------------------------------------------------------------

def test_five_tasks_or_more_per_chapter_and_twenty_seven_in_all():
    chapters = [task.chapter for task in TASKS]
    assert all(chapters.count(chapter) >= 5 for chapter in (1, 2, 3, 4)) and len(TASKS) >= 27
    assert len(BY_ID) == len(TASKS), "task ids are unique"


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_a_task_says_what_to_write_and_where(task):
    chapter = task.file.split("/")[1]
    assert task.id.split(".")[0] == chapter.removeprefix("project")[0] and task.difficulty in (1, 2, 3)
    assert task.title and task.asks and len(task.hints) >= 2 and len(task.mistakes) >= 2
    text = (ROOT / task.file).read_text(encoding="utf-8")
    for qualname in task.functions:
        assert "NotImplementedError" not in get_function(text, qualname), "the course holds a stub"
    for node in task.tests:
        path, _, name = node.partition("::")
        assert path.startswith(f"phase1_foundation/{chapter}/")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8")


# --- the checks, in memory --------------------------------------------------------------------------------

@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_the_course_passes_and_a_stub_is_not_written_yet(task):
    text, sources = course(task)
    assert [r for r in compare(task, text, sources) if not r.passed] == []
    stubs = {name: stub(source, ["write me"], f"{task.id}: {NOT_WRITTEN}") for name, source in
             sources.items()}
    assert {r.message for r in compare(task, text, stubs)} == {NOT_WRITTEN}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_a_second_correct_implementation_passes(task):
    text, sources = course(task)
    assert SECOND_WAYS[task.id].keys() == sources.keys()
    assert all(SECOND_WAYS[task.id][name].strip() != sources[name].strip() for name in sources)
    assert [r for r in compare(task, text, SECOND_WAYS[task.id]) if not r.passed] == []


@pytest.mark.parametrize("task, mistake", [(t, m) for t in TASKS for m in t.mistakes],
                         ids=lambda x: getattr(x, "id", None) or getattr(x, "name", ""))
def test_each_classic_mistake_is_caught_and_named(task, mistake):
    text, sources = course(task)
    wrong = with_mistake(sources, mistake)
    results = compare(task, text, wrong)
    assert any(not r.passed for r in results), f"{task.id}: '{mistake.name}' passed every case"
    assert all(r.message != NOT_WRITTEN for r in results)
    # the diagnosis names this mistake, or one listed before it that no case tells apart from it
    named, listed = diagnose(task, text, wrong, results), [m.name for m in task.mistakes]
    assert named in listed[: listed.index(mistake.name) + 1], f"{task.id}: {mistake.name!r} named {named!r}"


def test_a_failure_no_mistake_explains_is_not_given_a_name():
    task = BY_ID["1.block"]
    text, sources = course(task)
    doubled = {name: source.replace("x = self.ln_1(x + self.attn(x))", "x = self.ln_1(x + 2 * self.attn(x))")
               for name, source in sources.items()}
    results = compare(task, text, doubled)
    assert any(not r.passed for r in results) and diagnose(task, text, doubled, results) is None


# --- the command, in a git clone of the course in a temporary folder ----------------------------------------
# learn runs in this process with its root moved to the clone; `check` starts its own processes there.

@pytest.fixture
def learn(monkeypatch, capsys):
    def run(folder: Path, *args: str) -> subprocess.CompletedProcess:
        monkeypatch.setattr(learn_command, "ROOT", folder)
        monkeypatch.setattr(learn_command, "NOTES", folder / ".learn")
        code = learn_command.main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def copy_course(folder: Path, git: bool = True) -> Path:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
                            "-z"], capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes((ROOT / name).read_bytes())
    if git:
        for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=learner", "-c", "user.email=l@x",
                                                        "commit", "-qm", "the course"]):
            subprocess.run(["git", "-C", str(folder), *command], check=True, capture_output=True)
    return folder


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return copy_course(tmp_path_factory.mktemp("clone"))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {task.file: (folder / task.file).read_bytes() for task in TASKS}


def test_start_check_paste_check_for_every_task(clone, learn):
    before = snapshot(clone)
    ids = [task.id for task in TASKS]
    started = learn(clone, "start", *ids)
    assert started.returncode == 0, started.stderr
    for task in TASKS:
        text = (clone / task.file).read_text(encoding="utf-8")
        for qualname in task.functions:
            assert f"{task.id}: {NOT_WRITTEN}" in get_function(text, qualname)
    checked = learn(clone, "check", *ids)
    assert checked.returncode == 1
    for task in TASKS:
        assert f"✗ {task.id}: {NOT_WRITTEN}" in checked.stdout

    # the learner pastes the course's bodies in: every case and every chapter test passes
    for task in TASKS:
        path = clone / task.file
        text = path.read_text(encoding="utf-8")
        for qualname, source in functions_of(before[task.file].decode(), task).items():
            text = replace_function(text, qualname, source)
        path.write_text(text, encoding="utf-8")
    assert snapshot(clone) == before
    checked = learn(clone, "check", *ids)
    assert checked.returncode == 0, checked.stdout[-3000:]
    for task in TASKS:
        assert f"✓ {task.id}: all " in checked.stdout
    listed = [line for line in learn(clone, "list").stdout.splitlines() if line.split()[:1] in
              [[i] for i in ids]]
    assert len(listed) == len(ids) and all(" ✓ " in line for line in listed)


def test_the_second_ways_pass_the_chapter_tests_too(clone, learn):
    before = snapshot(clone)
    try:
        for task in TASKS:
            path = clone / task.file
            text = path.read_text(encoding="utf-8")
            for qualname, source in SECOND_WAYS[task.id].items():
                text = replace_function(text, qualname, source)
            path.write_text(text, encoding="utf-8")
        checked = learn(clone, "check", *BY_ID)
        assert checked.returncode == 0, checked.stdout[-3000:]
        assert checked.stdout.count("✓ test ") >= len(TASKS)
    finally:
        for path, data in before.items():
            (clone / path).write_bytes(data)


def test_a_wrong_function_is_reported_refused_a_stub_and_saved_on_reset(clone, learn):
    task = BY_ID["1.attention"]
    path = clone / task.file
    before = path.read_bytes()
    try:
        text = path.read_text(encoding="utf-8")
        (qualname, source), = with_mistake(functions_of(text, task), task.mistakes[0]).items()
        path.write_text(replace_function(text, qualname, source), encoding="utf-8")
        checked = learn(clone, "check", task.id)
        assert checked.returncode == 1
        assert "differs first at index" in checked.stdout and "(input: x = torch.randn(" in checked.stdout
        assert f"a classic mistake: {task.mistakes[0].name}" in checked.stdout
        assert "\n  1.attention ✓ explicit path, T = 1\n" in checked.stdout  # each case as it finished
        assert "\n  1.attention ✗ " in checked.stdout
        assert "the chapter's tests run once every case passes" in checked.stdout

        refused = learn(clone, "start", task.id)  # the learner's edits are never overwritten by a stub
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "learn reset" in refused.stderr
        assert path.read_text(encoding="utf-8") == replace_function(text, qualname, source)

        reset = learn(clone, "reset", task.id)  # saved first, then the course's version, byte for byte
        assert reset.returncode == 0 and path.read_bytes() == before
        saved = sorted((clone / ".learn" / "saved").glob("1.attention-*.py"))
        assert saved and source.strip() in saved[-1].read_text(encoding="utf-8")
    finally:
        path.write_bytes(before)


def test_hints_come_one_at_a_time_and_the_solution_round_trips(clone, learn):
    task = BY_ID["1.block"]
    path = clone / task.file
    before = path.read_bytes()
    assert learn(clone, "start", task.id).returncode == 0
    stubbed = path.read_text(encoding="utf-8")
    assert task.hints[0][:40] in stubbed and task.hints[1][:40] not in stubbed  # the stub has the first
    for shown in range(2, len(task.hints) + 1):  # the stub showed the first
        hint = learn(clone, "hint", task.id).stdout
        assert task.hints[shown - 1] in hint and ("that is every hint" in hint) == (shown == len(task.hints))

    shown = learn(clone, "solution", task.id)
    assert get_function(before.decode(), "Block.forward") in shown.stdout
    assert path.read_text(encoding="utf-8") == stubbed  # showing changes nothing
    assert learn(clone, "solution", task.id, "--apply").returncode == 0
    assert path.read_bytes() == before
    assert not list((clone / ".learn" / "saved").glob("1.block-*"))  # an untouched stub is not worth saving
    assert learn(clone, "start", task.id).returncode == 0 and learn(clone, "reset", task.id).returncode == 0
    assert path.read_bytes() == before


def test_bad_requests_end_in_one_line(clone, learn, tmp_path):
    for args, words in ((["check", "1.atention"], "no task 1.atention"), (["start"], "say which task")):
        result = learn(clone, *args)
        assert result.returncode == 2 and words in result.stderr and result.stderr.count("\n") == 1
    result = learn(copy_course(tmp_path, git=False), "start", "1.block")
    assert result.returncode == 2 and "not a git checkout" in result.stderr and "git clone" in result.stderr
    assert result.stderr.count("\n") == 1


def test_uv_run_learn_is_the_command():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, function = scripts["learn"].partition(":")
    assert module == "common.course.learn.cli" and callable(getattr(learn_command, function))


def test_the_committed_course_holds_no_stub():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.py"], capture_output=True, text=True,
                             check=True).stdout.split()
    for name in tracked:
        assert f"{NOT_WRITTEN}')" not in (ROOT / name).read_text(encoding="utf-8"), name


def test_the_readmes_list_the_tasks_and_the_loop():
    course = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("list", "start", "check", "hint", "reset"):
        assert f"uv run learn {command}" in course
    for task in TASKS:
        chapter = (ROOT / task.file).parent / "README.md"
        assert f"| `{task.id}` |" in chapter.read_text(encoding="utf-8")
    for chapter in sorted({(ROOT / task.file).parent for task in TASKS}):  # in reading order, as `learn next`
        text = (chapter / "README.md").read_text(encoding="utf-8")
        ids = [task.id for task in TASKS if (ROOT / task.file).parent == chapter]
        assert sorted(ids, key=lambda i: text.index(f"| `{i}` |")) == ids
    assert "not written yet" in (ROOT / "AGENTS.md").read_text(encoding="utf-8")


def test_a_learner_who_commits_their_version_is_still_checked_against_the_courses(clone, learn):
    task = BY_ID["1.block"]
    path = clone / task.file
    before = path.read_bytes()
    git = ["git", "-C", str(clone), "-c", "user.name=learner", "-c", "user.email=l@x"]
    try:
        assert learn(clone, "start", task.id).returncode == 0
        text = path.read_text(encoding="utf-8")
        wrong = with_mistake(functions_of(before.decode(), task), task.mistakes[0])
        path.write_text(replace_function(text, "Block.forward", wrong["Block.forward"]), encoding="utf-8")
        subprocess.run([*git, "commit", "-qam", "my block"], check=True, capture_output=True)
        assert learn(clone, "check", task.id).returncode == 1  # HEAD is theirs now; the course's is kept
        assert learn(clone, "reset", task.id).returncode == 0 and path.read_bytes() == before
        assert not (clone / ".learn" / "course" / f"{task.id}.json").exists()
    finally:
        subprocess.run([*git, "reset", "-q", "--hard", "HEAD~1"], check=False, capture_output=True)
        path.write_bytes(before)


def test_a_file_that_does_not_parse_is_named_and_reset_whole(clone, learn):
    task = BY_ID["1.loss"]
    path = clone / task.file
    before = path.read_bytes()
    try:
        path.write_text(before.decode().replace("def lm_loss(", "def lm_loss((", 1), encoding="utf-8")
        checked = learn(clone, "check", task.id)
        assert checked.returncode == 2 and f"{task.file} line " in checked.stderr
        assert checked.stderr.count("\n") == 1 and "learn reset 1.loss" in checked.stderr
        assert learn(clone, "reset", task.id).returncode == 0 and path.read_bytes() == before
        saved = sorted((clone / ".learn" / "saved").glob("1.loss-*.py"))
        assert "def lm_loss((" in saved[-1].read_text(encoding="utf-8")
    finally:
        path.write_bytes(before)


def test_start_of_several_tasks_writes_nothing_when_one_is_refused(clone, learn):
    block, attention = BY_ID["1.block"], BY_ID["1.attention"]
    path = clone / block.file
    before = path.read_bytes()
    try:
        text = before.decode()
        wrong = with_mistake(functions_of(text, block), block.mistakes[0])["Block.forward"]
        path.write_text(replace_function(text, "Block.forward", wrong), encoding="utf-8")
        edited = path.read_bytes()
        refused = learn(clone, "start", attention.id, block.id)
        assert refused.returncode == 2 and "1.block" in refused.stderr and path.read_bytes() == edited
        assert learn(clone, "reset", block.id).returncode == 0 and path.read_bytes() == before
    finally:
        path.write_bytes(before)


def test_a_function_committed_without_learn_start_never_becomes_the_reference(clone, learn, tmp_path):
    task = BY_ID["1.block"]
    git = ["-c", "user.name=learner", "-c", "user.email=l@x"]
    course_head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True,
                                 text=True, check=True).stdout.strip()
    # a learner's clone, with the course as origin, and a copy without a remote: both keep the course's commit
    cloned = tmp_path / "cloned"
    subprocess.run(["git", "clone", "-q", str(clone), str(cloned)], check=True, capture_output=True)
    for folder, how in ((cloned, "HEAD when learn first ran"), (clone, "HEAD when learn first ran")):
        first = learn(folder, "status")
        assert first.returncode == 0 and f"commit {course_head[:12]} ({how}" in first.stdout
        path = folder / task.file
        before = path.read_bytes()
        try:
            text = path.read_text(encoding="utf-8")
            wrong = with_mistake(functions_of(text, task), task.mistakes[1])
            path.write_text(replace_function(text, "Block.forward", wrong["Block.forward"]), encoding="utf-8")
            subprocess.run(["git", "-C", str(folder), *git, "commit", "-qam", "my block, no learn start"],
                           check=True, capture_output=True)
            checked = learn(folder, "check", task.id)
            assert checked.returncode == 1 and f"✗ {task.id}" in checked.stdout
            assert f"commit {course_head[:12]}" in learn(folder, "status").stdout
            if folder == cloned:  # the learner says HEAD is the course's now: their commit becomes it
                mine = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=True).stdout.strip()
                assert f"commit {mine[:12]} (HEAD now)" in learn(folder, "status", "--update").stdout
        finally:
            subprocess.run(["git", "-C", str(folder), "reset", "-q", "--hard", course_head], check=False,
                           capture_output=True)
            path.write_bytes(before)


def test_next_names_the_first_task_in_reading_order_that_has_not_passed(clone, learn):
    shown = learn(clone, "next")
    assert shown.returncode == 0 and shown.stdout.startswith("next: ")
    first = shown.stdout.split()[1]
    assert first in BY_ID and "uv run learn start " + first in shown.stdout
    listed = [line.split()[0] for line in learn(clone, "list").stdout.splitlines()
              if line.split()[:1] and line.split()[0] in BY_ID]
    assert listed == [task.id for task in TASKS]


def test_a_chapters_train_py_refuses_to_start_on_a_stub_in_one_line(clone):
    """train.py runs for minutes before it reaches a sampling function: a stub must stop it at the start."""
    task = BY_ID["1.sampling"]
    path = clone / task.file
    before = path.read_text(encoding="utf-8")
    try:
        (name, source), = functions_of(before, task).items()
        stubbed = stub(source, ["write me"], f"{task.id}: {NOT_WRITTEN}")
        path.write_text(replace_function(before, name, stubbed), encoding="utf-8")
        run = subprocess.run([sys.executable, "phase1_foundation/project1_gpt/train.py", "--DEVICE=cpu"],
                             cwd=clone, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(clone)})
        assert run.returncode == 1 and run.stdout == ""
        assert run.stderr.strip().count("\n") == 0
        assert run.stderr.startswith("error: 1.sampling is still a stub")
        assert "uv run learn check 1.sampling" in run.stderr
    finally:
        path.write_text(before, encoding="utf-8")
    for chapter in ("project1_gpt", "project2_gpt2", "project3_contextual_embeddings", "project4_scaling"):
        assert f'refuse_stubs("phase1_foundation.{chapter}")' in (ROOT / "phase1_foundation" / chapter /
                                                                "train.py").read_text(encoding="utf-8")


def test_imports_you_add_are_carried_into_the_check_and_a_helper_is_named(clone, learn):
    task = BY_ID["1.block"]
    path = clone / task.file
    before = path.read_text(encoding="utf-8")
    try:
        text = before.replace("import math\n", "import math\nimport operator\n", 1)
        text += "\n\ndef _residual(x, y):\n    return x + y\n"
        (name, source), = functions_of(text, task).items()
        mine = source.replace("x = self.ln_1(x + self.attn(x))",
                              "x = self.ln_1(operator.add(x, self.attn(x)))")
        assert mine != source
        path.write_text(replace_function(text, name, mine), encoding="utf-8")
        checked = learn(clone, "check", task.id)
        assert checked.returncode == 0, checked.stdout[-2000:]
        assert f"✓ {task.id}: all " in checked.stdout
        assert ("adds _residual at its top level, which the check leaves out" in checked.stdout
                and checked.stdout.count("_residual") == 1)
    finally:
        path.write_text(before, encoding="utf-8")


def test_a_case_that_never_ends_is_that_cases_cross(monkeypatch):
    monkeypatch.setattr(learn_check, "CASE_SECONDS", 1)
    task = BY_ID["1.block"]
    text, sources = course(task)
    (name, source), = sources.items()
    endless = source.replace("x = self.ln_1(x + self.attn(x))", "while True:\n                pass")
    assert endless != source
    results = compare(task, text, {name: endless})
    assert results and all(not r.passed for r in results[:1])
    assert results[0].message == "took longer than 1 s: does a loop of yours never end?"
