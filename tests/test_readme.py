"""The README's example runs as written."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_and_prints_what_the_readme_shows() -> None:
    text = README.read_text()
    assert text.startswith("# hipdnn-graph\n\n## Quick start: two commands")
    code = re.search(r"```python\n(.*?)```", text, re.S)
    shown = re.search(r'```python\n.*?```\n\n```text title="Output"\n(.*?)\n```', text, re.S)
    assert code is not None and shown is not None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.group(1), str(README), "exec"), {})
    expected = shown.group(1).splitlines()
    if importlib.util.find_spec("torch") is None:  # `make demo`: the README names this case
        without_torch = "NUMPY_REFERENCE_ENGINE (1, 4, 128, 64)"
        assert f"`{without_torch}`" in text
        expected = [without_torch]
    assert printed.getvalue().splitlines() == expected
