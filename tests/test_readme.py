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
    assert text.startswith("# hipdnn-graph\n\nA Python frontend that mirrors AMD's")
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


def test_readme_first_screen_says_what_the_project_is_then_the_two_commands() -> None:
    # the first screen was 35 lines of set-up before it said what the project is (issue 41)
    lines = README.read_text().splitlines()
    first_screen = "\n".join(lines[:20])
    intro = "\n".join(lines[: lines.index("## Quick start: two commands")])
    assert len(intro.splitlines()) <= 10
    assert "23 node families" in intro and "hipDNN" in intro and "engines" in intro
    assert "make demo   #" in first_screen and "make test   #" in first_screen
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("make ")]
    assert commands == ["make demo", "make test"]


def test_every_summary_presents_the_whole_library() -> None:
    import tomllib

    import hipdnn_graph as hg

    families = [t for t in hg.NodeType if t != hg.NodeType.UNKNOWN]
    assert len(families) == 23
    root = README.parent
    description = tomllib.loads((root / "pyproject.toml").read_text())["project"]["description"]
    site = next(
        line for line in (root / "mkdocs.yml").read_text().splitlines()
        if line.startswith("site_description:")
    )  # fmt: skip
    index = (root / "docs" / "index.md").read_text()
    for text in (description, site, index, README.read_text()):
        assert "23 node families" in text or "23 of hipDNN's node families" in text
        assert "The first nodes are SDPA" not in text and "SDPA forward/backward nodes" not in text
    for family in ("conv_fprop", "layernorm", "resample_bwd", "moe_grouped_matmul", "custom_op"):
        assert f"`{family}`" in index
    assert "830" not in README.read_text()
