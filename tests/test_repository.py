"""Repository-wide rules: lint-clean, chapters independent of each other, common/ independent of chapters."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is installed by `uv sync`")
def test_ruff_check_is_clean():
    result = subprocess.run(["ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_common_never_imports_a_chapter():
    for path in (ROOT / "common").rglob("*.py"):
        assert not any(m.startswith("phase1_foundation") for m in imported_modules(path)), path


def test_chapters_import_only_themselves_and_common():
    for chapter in (ROOT / "phase1_foundation").glob("project*"):
        own = f"phase1_foundation.{chapter.name}"
        for path in chapter.rglob("*.py"):
            for module in imported_modules(path):
                if module.startswith("phase1_foundation"):
                    assert module.startswith(own), f"{path} imports {module}"


ROOMS = ("data", "training", "course")  # common/'s rooms, in the order data flows


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def course_imports(path: Path) -> set[str]:
    """The course's modules `path` imports (anywhere in it): `from common.data import tokens` is tokens."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if (ROOT / (child.replace(".", "/") + ".py")).exists() else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("common", "phase1_foundation")}


def test_common_s_rooms_import_only_the_rooms_before_them_and_no_import_goes_round_in_a_circle():
    paths = [*(ROOT / "common").rglob("*.py"),
             *(p for p in (ROOT / "phase1_foundation").rglob("*.py") if "tests" not in p.parts)]
    graph = {module_of(path): course_imports(path) - {module_of(path)} for path in paths}
    def room(module: str) -> int:  # -1 for errors, files and progress, which every room uses
        parts = module.split(".")
        return ROOMS.index(parts[1]) if len(parts) > 2 and parts[1] in ROOMS else -1

    for module, imports in graph.items():
        if module.startswith("common."):
            for imported in imports:
                assert room(imported) <= room(module), f"{module} imports {imported}, from a later room"
    state = {}  # module -> "open" while its imports are walked, "done" after

    def walk(module, trail):
        if state.get(module) == "open":
            raise AssertionError("import circle: " + " -> ".join([*trail[trail.index(module):], module]))
        if state.get(module) != "done":
            state[module] = "open"
            for imported in sorted(graph.get(module, ())):
                walk(imported, [*trail, module])
            state[module] = "done"

    for module in sorted(graph):
        walk(module, [])
    assert {"common.data.tokens", "common.training.run", "common.course.learn.cli"} <= set(graph)


def test_every_script_ends_in_run_main_so_bad_input_is_one_line():
    """A CourseError that reaches a script's top would print a traceback; run_main prints its one line."""
    for path in [*(ROOT / "common").rglob("*.py"), *(ROOT / "phase1_foundation").rglob("*.py")]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                body = [ast.unparse(statement) for statement in node.body]
                allowed = ["run_main(main)"] if path.name != "cli.py" else ["entry()"]  # learn: exit status 2
                assert body == allowed, f"{path.relative_to(ROOT)}: {body}"


@pytest.mark.parametrize("how", ["script", "module"])
@pytest.mark.parametrize("chapter, paper", [("project1_gpt", "PAPER: GPT-1"),
                                            ("project2_gpt2", "PAPER: GPT-2"),
                                            ("project3_contextual_embeddings", "PAPER: BERT"),
                                            ("project4_scaling", "PAPER: Kaplan")])
def test_chapter_scripts_run_from_any_folder(chapter, paper, how, tmp_path):
    """`python phase1_foundation/<chapter>/train.py` and `python -m phase1_foundation.<chapter>.train`
    both work."""
    target = ROOT / f"phase1_foundation/{chapter}/train.py"
    command = [sys.executable, str(target)] if how == "script" else [
        sys.executable, "-m", f"phase1_foundation.{chapter}.train"]
    result = subprocess.run([*command, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--SEED=" in result.stdout and paper in result.stdout


def long_functions(path: Path, limit: int) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > limit]


def test_common_and_the_training_recipes_have_no_function_over_80_lines():
    """A function a reader can hold in their head; a training loop that grows past this wants a helper."""
    paths = [*(ROOT / "common").rglob("*.py"), *(ROOT / "phase1_foundation").glob("project*/train.py")]
    assert [f for path in paths for f in long_functions(path, 80)] == []


EXERCISES = sorted((ROOT / "phase1_foundation").glob("project*/exercises/ex*.py"))


@pytest.mark.parametrize("path", EXERCISES, ids=lambda path: f"{path.parents[1].name}/{path.name}")
def test_every_exercise_asks_before_it_tells(path):
    """The docstring asks the question to predict; the answer is WHAT_WE_MEASURED, printed by main() after
    the run's own numbers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree)
    assert docstring and "?" in docstring and "What you should see" not in docstring
    answers = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
               and [getattr(target, "id", None) for target in node.targets] == ["WHAT_WE_MEASURED"]
               and isinstance(node.value, ast.Constant)]
    assert len(answers) == 1 and isinstance(answers[0], str) and answers[0].strip()
    main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
    assert any(isinstance(node, ast.Name) and node.id == "WHAT_WE_MEASURED" for node in ast.walk(main))


def test_only_tests_import_a_chapters_train_py():
    """Scripts and exercises load a model with Model.from_checkpoint and run training as a program, so
    train.py stays the recipe and nothing else depends on what it happens to define."""
    for chapter in (ROOT / "phase1_foundation").glob("project*"):
        train = f"phase1_foundation.{chapter.name}.train"
        for path in chapter.rglob("*.py"):
            if "tests" not in path.relative_to(chapter).parts:
                modules = imported_modules(path)
                names = {f"{m}.{alias.name}" for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                         if isinstance(node, ast.ImportFrom) and (m := node.module) for alias in node.names}
                assert train not in modules | names, f"{path} imports {train}"


def code_blocks(readme: Path) -> list[tuple[int, str]]:
    """The ```python blocks of a README, each with the line it starts on."""
    blocks, lines = [], readme.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.strip() == "```python":
            end = next(i for i in range(number + 1, len(lines)) if lines[i].strip() == "```")
            blocks.append((number + 1, "\n".join(lines[number + 1 : end])))
    return blocks


@pytest.mark.parametrize("readme", sorted(ROOT.glob("phase1_foundation/*/README.md")),
                         ids=lambda path: path.parent.name)
def test_code_a_readme_shows_is_the_repositorys_code(readme):
    """A block that shows the course's code is a copy of it: every run of lines between `...` elisions stands,
    line for line (indentation aside), in one .py file of the chapter or of common/. A block that begins with
    an import is not an excerpt but code for the learner to run, and is left out."""
    files = [*readme.parent.rglob("*.py"), *(ROOT / "common").rglob("*.py")]
    sources = ["\n".join(line.strip() for line in path.read_text(encoding="utf-8").splitlines())
               for path in files]
    for start, block in code_blocks(readme):
        if block.lstrip().startswith(("import ", "from ")):
            continue
        segment: list[str] = []
        for line in [*block.splitlines(), "..."]:
            if line.strip() not in ("...", "# ..."):
                segment.append(line.strip())
                continue
            wanted = "\n".join(segment).strip("\n")
            assert not wanted or any(f"\n{wanted}\n" in f"\n{source}\n" for source in sources), (
                f"{readme.relative_to(ROOT)}:{start}: these lines are not in any .py file of the chapter or "
                f"common/:\n{wanted}")
            segment = []


LESSON_ORDER = ("What you will build", "Run it", "The idea", "The code", "What your run shows", "Exercises",
                "What's next", "Appendix: how we know")
WORD_BUDGET = 5_500  # above the appendix, tables and code included: a lesson, with its evidence behind it


@pytest.mark.parametrize("chapter", sorted(ROOT.glob("phase1_foundation/project*")),
                         ids=lambda path: path.name)
def test_each_chapter_is_a_lesson_in_order_within_its_word_budget(chapter):
    text = (chapter / "README.md").read_text(encoding="utf-8")
    headings = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
    assert [h for h in headings if h in LESSON_ORDER] == list(LESSON_ORDER), headings
    lesson = text.split("\n## Appendix: how we know", 1)[0]
    assert len(lesson.split()) <= WORD_BUDGET, f"{len(lesson.split()):,} words above the appendix"
    assert "<summary>What the course measured</summary>" in lesson  # experiments' answers come folded


SECTION_POINTER = re.compile(r'(?<!\x27s )(root )?README(?: appendix)?, "([^"]+)"')  # not "nanoGPT's README"


def test_every_section_the_code_points_to_exists():
    """A comment that sends the reader to a README section must name one that is there (sections move)."""
    root_headings, missing = headings_of(ROOT / "README.md"), []
    for path in [*(ROOT / "common").rglob("*.py"), *(ROOT / "phase1_foundation").rglob("*.py")]:
        chapter = next((p for p in path.parents if p.parent.name == "phase1_foundation"), None)
        own = headings_of(chapter / "README.md") if chapter else root_headings
        for match in SECTION_POINTER.finditer(path.read_text(encoding="utf-8")):
            name = " ".join(match.group(2).replace("#", " ").replace("`", "").split())  # may wrap over lines
            if not any(h.startswith(name) for h in (root_headings if match.group(1) or not chapter else own)):
                missing.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert missing == [], "\n".join(missing)


def headings_of(readme: Path) -> list[str]:
    lines = readme.read_text(encoding="utf-8").splitlines()
    return [line.lstrip("#").strip().replace("`", "") for line in lines if line.startswith("#")]
