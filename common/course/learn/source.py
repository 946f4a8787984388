"""Functions as text: find one in a source file by its qualified name, cut it out, put another in its place,
and write the stub a learner starts from.

`uv run learn` (common/course/learn/cli.py) edits a learner's files with these, line by line, so that
everything outside the function stays byte for byte as it was.
"""

import ast
import textwrap


def _find(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    """The def named `qualname` ("generate", "Block.forward") among the module's top-level statements."""
    body, node = tree.body, None
    for part in qualname.split("."):
        defs = (n for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == part)
        node = next(defs, None)
        if node is None:
            raise LookupError(f"no {qualname} here")
        body = node.body
    if not isinstance(node, ast.FunctionDef):
        raise LookupError(f"{qualname} is a class, not a function")
    return node


def span(text: str, qualname: str) -> tuple[int, int]:
    """The function's lines as a 0-based half-open range, its decorators included."""
    node = _find(ast.parse(text), qualname)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return first - 1, node.end_lineno


def get_function(text: str, qualname: str) -> str:
    """The function's source exactly as it stands in the file, indentation and final newline included."""
    start, end = span(text, qualname)
    return "".join(text.splitlines(keepends=True)[start:end])


def replace_function(text: str, qualname: str, source: str) -> str:
    """`text` with the function replaced by `source`, which is re-indented to the original's depth."""
    lines = text.splitlines(keepends=True)
    start, end = span(text, qualname)
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    first = source.lstrip("\n")
    if first[: len(first) - len(first.lstrip())] == indent:  # at the right depth already: as it is, so that
        new = first  # a multi-line string in it keeps its lines exactly
    else:
        new = textwrap.indent(textwrap.dedent(source).lstrip("\n"), indent, lambda line: line.strip() != "")
    if not new.endswith("\n"):
        new += "\n"
    return "".join(lines[:start]) + new + "".join(lines[end:])


def stub(source: str, header: list[str], message: str) -> str:
    """The function with its body replaced: the signature and docstring kept, then `header` as comments
    and a `raise NotImplementedError(message)`."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(textwrap.dedent(source))
    node = tree.body[0]
    first = node.body[0]
    has_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)
    keep = first.end_lineno if has_docstring else first.lineno - 1  # lines of the signature (and docstring)
    body_line = lines[first.lineno - 1]
    indent = body_line[: len(body_line) - len(body_line.lstrip())]
    comments = [f"{indent}# {line}".rstrip() + "\n" for line in header]
    return "".join(lines[:keep] + comments + [f"{indent}raise NotImplementedError({message!r})\n"])


def added_top_level(course: str, yours: str) -> tuple[list[str], list[str]]:
    """What your file adds at its top level that the course's file does not have: (the import statements, as
    source lines; the names of the other definitions: functions, classes, assignments)."""
    def imports(tree: ast.Module, text: str) -> list[str]:
        return [ast.get_source_segment(text, node) for node in tree.body
                if isinstance(node, ast.Import | ast.ImportFrom)]

    def names(tree: ast.Module) -> set[str]:
        found = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                found.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found |= {t.id for t in targets if isinstance(t, ast.Name)}
        return found

    theirs, mine = ast.parse(course), ast.parse(yours)
    known = set(imports(theirs, course))
    return ([line for line in imports(mine, yours) if line not in known],
            sorted(names(mine) - names(theirs)))


def with_imports(text: str, lines: list[str]) -> str:
    """`text` with import statements added after its last top-level import (or at its top)."""
    if not lines:
        return text
    tree = ast.parse(text)
    last = max((node.end_lineno for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)),
               default=0)
    rows = text.splitlines(keepends=True)
    return "".join(rows[:last] + [line + "\n" for line in lines] + rows[last:])
