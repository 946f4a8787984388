"""The code excerpts in the chapter's README are copied from its code, so they cannot drift away from it."""

import re
from pathlib import Path

CHAPTER = Path(__file__).resolve().parents[1]


def lines_of(text: str) -> list[str]:
    """The non-blank lines of a text, without their indentation."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def readme_excerpts() -> list[list[str]]:
    """Each ```python block of the README as runs of lines; a line "..." marks code left out."""
    readme = (CHAPTER / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", readme, flags=re.M | re.S)
    return [lines_of(run) for block in blocks for run in re.split(r"^\.\.\.$", block, flags=re.M)
            if lines_of(run)]


def test_every_code_excerpt_in_the_readme_is_in_the_chapters_code():
    sources = [lines_of(path.read_text(encoding="utf-8")) for path in CHAPTER.rglob("*.py")]
    excerpts = readme_excerpts()
    assert len(excerpts) >= 3
    for run in excerpts:
        assert any(source[i : i + len(run)] == run for source in sources for i in range(len(source))), (
            "not in the chapter's code:\n" + "\n".join(run))
