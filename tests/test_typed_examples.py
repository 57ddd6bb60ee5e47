"""Code users copy type-checks (issue 11, item 11): the README's example, docs/snippets and
examples/ pass ``mypy --strict`` against the installed package, and every installed package,
the built-in plugins included, ships its ``py.typed`` marker (PEP 561)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_readme_snippets_and_examples_pass_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks
    files = []
    for i, block in enumerate(blocks):
        path = tmp_path / f"readme_block_{i}.py"
        path.write_text(block)
        files.append(str(path))
    files += sorted(str(p) for p in (ROOT / "docs" / "snippets").glob("*.py"))
    files += sorted(str(p) for p in (ROOT / "examples").glob("*.py"))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", *files],
        capture_output=True,
        text=True,
        cwd=ROOT,
        # the example plugin is not installed (tests install it for their own process): its
        # source types examples/conformance.py's import of it
        env={**os.environ, "MYPYPATH": str(ROOT / "examples" / "custom_backend")},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "package", ["hipdnn_graph", "hipdnn_graph_numpy_reference", "hipdnn_graph_torch_rocm"]
)
def test_every_installed_package_is_marked_typed(package: str) -> None:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    assert (folder / "py.typed").is_file()
