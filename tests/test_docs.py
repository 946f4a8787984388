"""The theory pages in docs/: every page exists, every link and named code symbol resolves, and every
notebook runs, headless and offline, and draws the figures the pages show."""

import ast
import re
from pathlib import Path

import nbformat
import pytest
import regex
import torch
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NOTEBOOKS = DOCS / "notebooks"
CHAPTERS = ["01-transformer", "02-attention", "03-multi-head-attention", "04-positions", "05-encoder",
            "06-decoder", "07-gpt", "08-bert", "09-cost-of-attention"]
NOT_OURS = {".git", ".venv", "data", "checkpoints", "node_modules", ".pytest_cache", ".ruff_cache"}

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
CODE_REFERENCE = re.compile(r"`([\w./-]+\.py)::([\w.]+)`")
PRINTED = re.compile(r"<!-- printed by (notebooks/[\w.-]+\.ipynb) -->\n```text\n(.*?)\n```", re.S)


def markdown_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.md") if not NOT_OURS & set(p.relative_to(ROOT).parts)
                  and not any(part.endswith(".egg-info") for part in p.parts))


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def prose(text: str) -> str:
    """Markdown without its code: links and headings inside code blocks or `code` are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: the text lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return regex.sub(r"[^\p{L}\p{M}\p{N}\p{Pc} -]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    if path.suffix != ".md":
        return set()
    counts: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        found.add(base if base not in counts else f"{base}-{counts[base]}")
        counts[base] = counts.get(base, 0) + 1
    return found


def links(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        cells = nbformat.read(path, as_version=4).cells
        text = "\n\n".join(c.source for c in cells if c.cell_type == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    return LINK.findall(prose(text))


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... are not fetched
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and resolved.is_file() and anchor not in anchors(resolved):
            broken.append(f"{path.relative_to(ROOT)}: {target} (no heading with that anchor)")
    return broken


def test_every_markdown_link_in_the_repository_resolves():
    files = markdown_files() + notebooks()
    assert len(files) >= 6
    assert [b for path in files for b in broken_links(path)] == []


def test_the_slug_rule_matches_githubs():
    assert slug("Chapter 1 — GPT-1: generative pre-training") == "chapter-1--gpt-1-generative-pre-training"
    assert slug("What else is in `model.py`") == "what-else-is-in-modelpy"
    assert slug("80/10/10, vectorised") == "801010-vectorised"
    assert slug("Why `[UNK]` is gone") == "why-unk-is-gone"


def test_every_theory_chapter_exists_with_its_parts():
    for name in CHAPTERS:
        text = (DOCS / f"{name}.md").read_text(encoding="utf-8")
        words = len(FENCE.sub("", text).split())  # the prose: printed tables and diagrams are not words
        assert 800 <= words <= 1500, f"{name}.md has {words} words of prose; a chapter is 800-1,500"
        assert text.startswith(f"# {int(name[:2])}. "), f"{name}.md starts with its number and title"
        for section in ("## Why it was needed", "## A worked example", "## Pitfalls", "## Where the code is",
                        "## Sources"):
            assert section in text, f"{name}.md has no '{section}' section"
        assert "[All theory pages](README.md)" in text.strip().splitlines()[-1], f"{name}.md's last line"


def test_the_index_and_the_course_readme_link_every_chapter():
    for readme in (DOCS / "README.md", ROOT / "README.md"):
        targets = {Path(t.partition("#")[0]).name for t in links(readme)}
        missing = [name for name in CHAPTERS if f"{name}.md" not in targets]
        assert missing == [], f"{readme.relative_to(ROOT)} does not link {missing}"


def test_each_course_chapter_links_the_theory_it_relies_on():
    for readme in sorted(ROOT.glob("phase1_foundation/project*/README.md")):
        theory = [t for t in links(readme) if re.search(r"docs/0\d-[\w-]+\.md", t)]
        assert theory, f"{readme.relative_to(ROOT)} links no theory page"


def defined_names(path: Path) -> set[str]:
    """Module-level names, and for each class Class.name for its methods, class-level fields and the
    attributes its methods assign to self (self.wpe = ..., register_buffer("mask", ...))."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()

    def targets(node) -> list[ast.expr]:
        if isinstance(node, ast.Assign):
            return node.targets
        return [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else []

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        names.update(t.id for t in targets(node) if isinstance(t, ast.Name))
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(f"{node.name}.{item.name}")
            names.update(f"{node.name}.{t.id}" for t in targets(item) if isinstance(t, ast.Name))
        for inner in ast.walk(node):
            for t in targets(inner):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.add(f"{node.name}.{t.attr}")
            if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr in ("register_buffer", "register_parameter") and inner.args
                    and isinstance(inner.args[0], ast.Constant)):
                names.add(f"{node.name}.{inner.args[0].value}")
    return names


def test_defined_names_finds_what_a_page_may_name():
    names = defined_names(ROOT / "phase1_foundation/project1_gpt/model.py")
    assert {"GPT", "GPT.wpe", "GPT.hidden_states", "GPTConfig.pre_ln", "CausalSelfAttention.mask", "IGNORE"
            } <= names
    assert "GPT.position_embedding" not in names


def test_every_code_symbol_a_page_names_exists():
    references = [(page, file, symbol) for page in sorted(DOCS.glob("*.md"))
                  for file, symbol in CODE_REFERENCE.findall(page.read_text(encoding="utf-8"))]
    assert len(references) >= 2 * len(CHAPTERS)
    missing = []
    for page, file, symbol in references:
        path = ROOT / file
        if not path.is_file() or symbol not in defined_names(path):
            missing.append(f"{page.name}: {file}::{symbol}")
    assert missing == []


def test_every_figure_is_drawn_by_one_notebook_and_shown_by_a_page():
    figures = sorted(p.name for p in (DOCS / "figures").glob("*.png"))
    assert figures
    sources = {nb.name: code(nbformat.read(nb, as_version=4)) for nb in notebooks()}
    shown = {Path(t).name for page in DOCS.glob("*.md") for t in links(page)}
    for figure in figures:
        drawn_by = [name for name, source in sources.items() if figure in source]
        assert len(drawn_by) == 1, f"{figure} is drawn by {drawn_by or 'no notebook'}"
        assert figure in shown, f"docs/figures/{figure} is shown by no page"


def test_notebooks_are_committed_without_outputs():
    assert {nb.stem for nb in notebooks()} >= {"02-attention", "03-multi-head-attention", "04-positions",
                                              "06-decoder", "09-cost-of-attention"}
    for path in notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has saved outputs"


def printed_output(nb) -> list[str]:
    return [line.rstrip() for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
            if out.output_type == "stream" and out.name == "stdout" for line in out.text.splitlines()]


def in_order(lines: list[str], output: list[str]) -> bool:
    remaining = iter(output)
    return all(line in remaining for line in lines)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_and_draws_its_figures(path, tmp_path, monkeypatch):
    """Executed as a learner's Jupyter would, at the small size; the assertions inside (changing a token moves
    no earlier output, a permuted sentence without positions gives the same outputs, ...) must hold."""
    figures, checkpoints = tmp_path / "figures", tmp_path / "no-checkpoints"
    checkpoints.mkdir()
    monkeypatch.setenv("DOCS_SMALL", "1")
    monkeypatch.setenv("DOCS_FIGURES", str(figures))
    monkeypatch.setenv("DOCS_CHECKPOINTS", str(checkpoints))  # no chapter 1 checkpoint: the tiny model
    nb = nbformat.read(path, as_version=4)
    run_here = {"metadata": {"path": str(NOTEBOOKS)}}  # the kernel's working folder, as in Jupyter
    NotebookClient(nb, timeout=300, kernel_name="python3", resources=run_here).execute()

    expected = {p.name for p in (DOCS / "figures").glob("*.png") if p.name in code(nb)}
    assert expected and {p.name for p in figures.glob("*.png")} >= expected

    output = printed_output(nb)
    for page in DOCS.glob("*.md"):
        for notebook, block in PRINTED.findall(page.read_text(encoding="utf-8")):
            if notebook == f"notebooks/{path.name}":
                lines = [line.rstrip() for line in block.splitlines()]
                assert in_order(lines, output), f"{page.name} quotes output that {path.name} did not print"


@pytest.fixture(scope="module")
def chapter_1_run(corpus_file, tmp_path_factory, one_thread_for_module):
    """The folder of a tiny chapter 1 run, trained once for this module."""
    from phase1_foundation.project1_gpt import train

    folder = tmp_path_factory.mktemp("chapter_1")
    checkpoints = folder / "checkpoints"
    train.main([f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={folder / 'data'}", f"--OUT_DIR={checkpoints}",
                "--DEVICE=cpu", "--PRESET=cpu", "--VOCAB_SIZE=512", "--N_LAYER=2", "--N_HEAD=2",
                "--N_EMBD=32", "--BLOCK_SIZE=32", "--BATCH_SIZE=4", "--MAX_ITERS=10", "--WARMUP_ITERS=2",
                "--EVAL_INTERVAL=5", "--EVAL_ITERS=1", "--SAMPLE_TOKENS=5"])
    return checkpoints


def test_trained_gpt_looks_inside_chapter_1s_newest_checkpoint(chapter_1_run, monkeypatch):
    """The suite runs the notebooks on the tiny fallback model; the path a learner with a chapter 1 checkpoint
    takes (the model and the tokenizer its checkpoint names, and the weights it used) is checked here."""
    monkeypatch.setenv("DOCS_CHECKPOINTS", str(chapter_1_run))
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    from trained_gpt import attention_weights, outputs_moved, trained_gpt

    model, tokenizer, about = trained_gpt()
    assert about.startswith("chapter 1 checkpoint gpt_iter10_") and not model.training
    idx = torch.tensor([tokenizer.encode("The history of the city")])  # (1, T)
    T = idx.shape[1]
    weights = attention_weights(model, idx)
    assert [w.shape for w in weights] == [(1, 2, T, T)] * 2
    for w in weights:
        torch.testing.assert_close(w.sum(dim=-1), torch.ones(1, 2, T))
        assert (w.triu(1) == 0).all()
    assert torch.equal(outputs_moved(model, idx), torch.ones(T, T, dtype=torch.bool).triu())  # causal


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_trained_gpt_reads_a_checkpoint_trained_on_a_gpu_on_the_cpu(chapter_1_run, from_gpu, device,
                                                                    monkeypatch):
    """A learner trains chapter 1 on a GPU and reads the theory pages on a laptop: the notebooks' model is
    loaded onto the CPU, whatever device its checkpoint records."""
    monkeypatch.setenv("DOCS_CHECKPOINTS", str(from_gpu(chapter_1_run, device)))
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    from trained_gpt import trained_gpt

    model, tokenizer, about = trained_gpt()
    assert about.startswith("chapter 1 checkpoint gpt_iter10_")
    assert {t.device for t in [*model.parameters(), *model.buffers()]} == {torch.device("cpu")}
    assert model(torch.tensor([tokenizer.encode("The history")]))[0].isfinite().all()


def test_the_copy_models_induction_circuit_is_a_circuit(monkeypatch):
    """What page 03 states from notebook 03's full run, at full size (half a minute): removing the layer-1
    heads takes the layer-2 heads' weight off the induction key and the copy with it, removing the layer-2
    heads takes the copy away, and the layer-2 heads' OV circuits copy."""
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    from copy_task import (
        CHANCE,
        COPY,
        VOCAB,
        copy_gpt,
        copying_score,
        head_scores,
        heads_removed,
        in_context_score,
        repeated,
    )
    from trained_gpt import attention_weights

    model, _ = copy_gpt()
    x, y, period = repeated(256, VOCAB, COPY["block_size"], torch.Generator().manual_seed(2))

    def measure(heads):
        with heads_removed(model, heads):
            second, first = in_context_score(model, x, y, period)
            return second, first, head_scores(attention_weights(model, x)[1], period)[1]

    second, first, induction = measure([])
    assert second < 0.1 * CHANCE and second - first < -0.5 * CHANCE and induction.min() > 0.5
    without_layer_1 = measure([(0, 0), (0, 1)])
    assert without_layer_1[2].max() < 0.2 and without_layer_1[0] > 0.5 * CHANCE
    assert measure([(1, 0), (1, 1)])[0] > 0.5 * CHANCE
    assert min(copying_score(model, 1, head) for head in range(2)) > 10 / VOCAB
    assert measure([])[0] == second  # the hooks are gone once each block ends
