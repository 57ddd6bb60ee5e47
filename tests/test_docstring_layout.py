"""Docstring examples are laid out as one block: within a run of example lines, every ``>>>``
prompt stands at the indentation of the one before it (a prompt out of line still runs under
doctest but renders broken in the API reference).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hipdnn_graph", "backends")


def _misplaced_prompts(source: str) -> list[str]:
    """The ``>>>`` lines of ``source``'s docstrings indented unlike the example line above."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        doc = ast.get_docstring(node, clean=False)
        previous = None
        for line in (doc or "").splitlines():
            text = line.lstrip()
            if not text.startswith((">>>", "...")):
                previous = None if not text else previous
                continue
            indent = len(line) - len(text)
            if text.startswith(">>>") and previous is not None and indent != previous:
                found.append(f"{getattr(node, 'name', '<module>')}: {text}")
            previous = indent
    return found


def test_the_check_finds_a_prompt_out_of_line() -> None:
    source = 'def f():\n    """Example:\n        >>> a = 1\n    >>> a\n        1\n    """\n'
    assert _misplaced_prompts(source) == ["f: >>> a"]


def test_docstring_prompts_line_up() -> None:
    bad = [
        f"{path.relative_to(ROOT)}: {where}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for where in _misplaced_prompts(path.read_text(encoding="utf-8"))
    ]
    assert not bad, "\n".join(bad)
