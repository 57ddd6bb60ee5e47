"""The documentation: examples run and print what the pages show, generated tables carry the
exact messages of the code, the committed diagram is what to_mermaid() draws, every ErrorCode
has an anchor, and every page is in the navigation. (`make docs` builds the site strictly.)"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

import hipdnn_graph as hg

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SNIPPETS = sorted((DOCS / "snippets").glob("*.py"))
PAGES = sorted(p for p in DOCS.rglob("*.md") if "notes" not in p.parts)
INCLUDE = re.compile(r'^--8<-- "([^":]+)(?::([\w-]+))?"$', re.MULTILINE)
OUTPUT_BLOCK = re.compile(r'```text title="Output"\n(.*?)\n```', re.DOTALL)


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _load(DOCS / "hooks" / "hipdnn_docs.py", "hipdnn_docs_hook")
#: runs a snippet as ``python SNIPPET``, then every graph it built (see its docstring)
RUNNER = Path(__file__).resolve().parent / "docs_snippet_runner.py"
_OUTPUTS: dict[Path, str] = {}
_GRAPHS: dict[Path, list[dict[str, str]]] = {}

#: snippet graphs that validate but are shown not to run on the built-in engines, with the
#: reason they are refused (checked: the graph must still be refused so, or leave this table)
NOT_RUN = {
    ("custom_op.py", "rope"): "custom op 'example.rope' is plugin-defined",
    ("resample.py", ""): "Unsupported resample mode",  # rules: NEAREST has no hipDNN number
}


def _run(path: Path) -> str:
    if path not in _OUTPUTS:
        with tempfile.TemporaryDirectory() as folder:  # scripts may write files where they run
            report = Path(folder) / "graphs.json"
            result = subprocess.run(
                [sys.executable, str(RUNNER), str(path), str(report)],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=folder,
            )
            assert result.returncode == 0, f"{path.name} failed:\n{result.stderr}"
            _GRAPHS[path] = json.loads(report.read_text())
        _OUTPUTS[path] = result.stdout
    return _OUTPUTS[path]


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_snippet_runs(path: Path) -> None:
    _run(path)


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_snippet_graphs_run(path: Path) -> None:
    """Every graph a snippet builds that validates also builds a plan and executes (on random
    inputs, the NumPy reference preferred), unless :data:`NOT_RUN` says why not."""
    _run(path)
    refused = [e for e in _GRAPHS[path] if e["outcome"] == "refused"]
    for entry in refused:
        reason = NOT_RUN.get((path.name, entry["graph"]))
        assert reason is not None and reason in entry["detail"], (path.name, entry)
    assert {e["outcome"] for e in _GRAPHS[path]} <= {"ran", "refused", "invalid", "empty"}
    listed = {graph for snippet, graph in NOT_RUN if snippet == path.name}
    assert listed <= {e["graph"] for e in refused}, f"NOT_RUN lists graphs {path.name} runs"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_includes_exist_and_outputs_match(page: Path) -> None:
    """Every --8<-- include exists (with its section); every Output block is what the last
    included script prints."""
    text = page.read_text()
    events = sorted(
        [(m.start(), "include", m) for m in INCLUDE.finditer(text)]
        + [(m.start(), "output", m) for m in OUTPUT_BLOCK.finditer(text)],
        key=lambda e: e[0],
    )
    last: Path | None = None
    for _, kind, match in events:
        if kind == "include":
            path = ROOT / match.group(1)
            assert path.is_file(), f"{page.name} includes missing {match.group(1)}"
            section = match.group(2)
            if section:
                assert f"--8<-- [start:{section}]" in path.read_text(), (page.name, section)
            last = path
        else:
            assert last is not None and last.suffix == ".py", f"{page.name}: output of what?"
            _assert_printed(page.name, last.name, match.group(1).splitlines(), _run(last))


def _assert_printed(page: str, script: str, shown: list[str], stdout: str) -> None:
    """Each line a page shows is a whole line the script prints, in the page's order (``True``
    must not match inside ``... True`` printed by another call, nor a line printed earlier)."""
    printed = stdout.splitlines()
    at = 0
    for line in shown:
        assert line in printed[at:], f"{page}: {line!r} is not a line {script} prints (in order)"
        at = printed.index(line, at) + 1


def test_output_lines_are_compared_whole_and_in_order() -> None:
    stdout = "OPERATIONGRAPH ['X']\nFalse\nNUMPY True\n"
    _assert_printed("p", "s", ["OPERATIONGRAPH ['X']", "False"], stdout)
    for shown in (["True"], ["OPERATIONGRAPH"], ["False", "OPERATIONGRAPH ['X']"]):
        with pytest.raises(AssertionError):
            _assert_printed("p", "s", shown, stdout)


def test_committed_diagram_is_what_to_mermaid_draws() -> None:
    module = _load(DOCS / "snippets" / "fwd_bwd_graph.py", "docs_fwd_bwd_graph")
    graph = module.build_graph()
    committed = (DOCS / "diagrams" / "fwd_bwd.mmd").read_text()
    assert committed == graph.to_mermaid(), (
        "regenerate: python docs/snippets/fwd_bwd_graph.py > docs/diagrams/fwd_bwd.mmd"
    )
    text = (DOCS / "concepts.md").read_text()
    assert '```mermaid\n--8<-- "docs/diagrams/fwd_bwd.mmd"\n```' in text


def test_home_page_draws_the_graph_its_example_builds() -> None:
    """The picture under the quick start is the quick start's own graph (issue 11, item 14)."""
    with contextlib.redirect_stdout(io.StringIO()):
        namespace = runpy.run_path(str(DOCS / "snippets" / "quickstart.py"))
    committed = (DOCS / "diagrams" / "quickstart.mmd").read_text()
    assert committed == namespace["g"].to_mermaid(), (
        "regenerate docs/diagrams/quickstart.mmd from docs/snippets/quickstart.py's g.to_mermaid()"
    )
    text = (DOCS / "index.md").read_text()
    assert '--8<-- "docs/snippets/quickstart.py"' in text
    assert '```mermaid\n--8<-- "docs/diagrams/quickstart.mmd"\n```' in text


# messages of HIPDNN_SPEC.md §2, §4 and §5, written out here independently of the code
SPEC_BWD = [
    "SdpaBwdNode missing Q input",
    "SdpaBwdNode missing Stats input",
    "SdpaBwdNode missing dV output",
    "SdpaBwdNode: Query tensor Q must be rank-4, got rank=<",
    "SdpaBwdNode: batch size mismatch between Q and V: <",
    "SdpaBwdNode: head_dim mismatch between Q and K: <",
    "SdpaBwdNode: seq_kv mismatch between K and V: <",
    "SdpaBwdNode: num_heads_k must be positive, got <",
    "SdpaBwdNode: num_heads must be divisible by num_heads_v for GQA/MQA. num_heads=<",
    "SdpaBwdNode: dO must be rank-4, got rank=<",
    "SdpaBwdNode: dO head_dim mismatch with O",
    "SdpaBwdNode: ATTN_MASK rank must be <= 4, got rank=<",
    "SdpaBwdNode: ATTN_MASK second-to-last dim must equal seq_q (<",
    "SdpaBwdNode: DROPOUT_MASK dim[3] must equal seq_kv (<",
    "SdpaBwdNode: padding_mask=true requires seq_len_kv tensor to be set",
    "SdpaBwdNode: seq_len_kv dim[2] must be 1, got <",
    "SdpaBwdNode: seq_len_q must have INT32 data type",
    "SdpaBwdNode: attn_scale tensor and attn_scale_value cannot both be set",
    "dimensions are not set",
    "must be a scalar (single element), but has <",
    "must be a pass-by-value tensor",
]
SPEC_FWD = [
    "SdpaFwdNode missing O output",
    "SdpaFwdNode: Output O must be rank-4, got rank=<",
    "SdpaFwdNode: Output O batch mismatch: expected <",
    "SdpaFwdNode: Output O head_dim must match V head_dim: expected <",
]
SPEC_TENSOR = [
    "Tensor <name> does not have a data type set",
    "Tensor <name> cannot be virtual and runtime pass by value",
    "Tensor <name> cannot be virtual and pass by value",
    "Tensor <name> dims and strides have different sizes",
    "Tensor <name> dims must be non-empty",
    "Tensor <name> must have only positive dimensions",
    "Tensor <name> alignment must be >= 1",
]


def test_generated_rule_tables_carry_the_spec_messages() -> None:
    bwd, fwd = HOOK.rules_table("SdpaBwdNode"), HOOK.rules_table("SdpaFwdNode")
    for message in SPEC_BWD:
        assert message in bwd, message
    for message in SPEC_FWD + [m.replace("SdpaBwdNode", "SdpaFwdNode") for m in SPEC_BWD[3:8]]:
        assert message in fwd, message
    tensor = HOOK.tensor_rules_table()
    rows = [line for line in tensor.splitlines() if line.startswith("| ") and "`" in line]
    assert [r.split("`")[3] for r in rows] == SPEC_TENSOR
    post = HOOK.post_rules_table("SdpaBwdNode")
    assert "Node <node name> does not have a compute_data_type set" in post
    assert "| `ATTRIBUTE_NOT_SET` | `SdpaBwdNode missing Q input` |" in bwd


def test_rule_messages_match_what_validation_raises() -> None:
    """A generated message with its placeholders filled matches the real error."""
    g = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[2, 4, 8, 16])
    k = g.tensor(name="K", dim=[2, 3, 8, 16])  # 4 heads not divisible by 3
    g.sdpa(q, k, g.tensor_like(k, "V"), name="fwd")
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    table = HOOK.rules_table("SdpaFwdNode")
    templates = re.findall(r"\| `(\w+)` \| `([^`]*num_heads_k for GQA[^`]*)` \|", table)
    assert len(templates) == 1
    code, template = templates[0]
    pattern = "".join(
        ".+" if part.startswith("<") else re.escape(part)
        for part in re.split(r"(<[^>]*>)", template)
        if part
    )
    assert info.value.code.name == code
    assert re.fullmatch(pattern, str(info.value)), (pattern, str(info.value))


def test_unsupported_tables_list_every_setter() -> None:
    bwd = HOOK.unsupported_table("SdpaBackwardAttributes")
    for setter in (
        "set_score_mod",
        "set_rng_dump",
        "set_dsink_token",
        "set_deterministic_algorithm",
    ):
        assert f"`{setter}`" in bwd
    assert "Deterministic SDPA backward is unsupported by hipDNN" in bwd
    assert "SDPA paged attention is unsupported by hipDNN" in HOOK.unsupported_table(
        "SdpaAttributes"
    )


def test_every_error_code_has_an_anchor() -> None:
    text = (DOCS / "errors.md").read_text()
    for code in hg.ErrorCode:
        assert f"## {code.name} {{#{code.name}}}" in text, code.name


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for page in PAGES:
        rel = page.relative_to(DOCS).as_posix()
        if rel.startswith(("hooks/", "snippets/")):
            continue
        assert rel in config, f"{rel} is not in mkdocs.yml's nav"


def test_notes_are_added_to_the_nav(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "docs" / "notes"
    notes.mkdir(parents=True)
    (notes / "numpy_engine.md").write_text("# The NumPy engine\n\ntext\n")
    monkeypatch.setattr(HOOK, "ROOT", tmp_path)
    config = {"nav": [{"Home": "index.md"}]}
    HOOK.on_config(config)
    assert config["nav"][-1] == {"Notes": [{"The NumPy engine": "notes/numpy_engine.md"}]}


def test_include_if_exists() -> None:
    assert HOOK.include_if_exists("examples/conformance.py").startswith(
        '```python title="examples/conformance.py"'
    )
    assert "Not in this checkout yet" in HOOK.include_if_exists("examples/nope.py")


def test_docs_config_needs_no_network() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "font: false" in config
    assert "import:" not in config and "inventories:" not in config


def test_cli_page_examples_replay(tmp_path: Path) -> None:
    """Every `$ ...` command of the Command line page runs in a fresh folder and prints the
    lines shown (timings, checksums and the stderr progress bar excepted)."""
    page = (DOCS / "cli.md").read_text()
    block = page[page.index("```console\n") + len("```console\n") :]
    block = block[: block.index("```")]
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif line and commands:
            commands[-1][1].append(line)
    assert len(commands) >= 7
    env_path = str(Path(sys.executable).parent)
    for command, expected in commands:
        command = command.replace("python ", f"{sys.executable} ", 1)
        command = command.replace("docs/snippets/", f"{DOCS / 'snippets'}/")
        if "| dot" in command and not shutil.which("dot"):
            continue
        result = subprocess.run(
            f"set -o pipefail; {command}",
            shell=True,
            executable="/bin/bash",
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={"PATH": f"{env_path}:/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        shown = result.stdout + result.stderr
        fails = any(line.startswith("hipdnn-graph: error:") for line in expected)
        assert result.returncode == (2 if fails else 0), f"$ {command}: exit {result.returncode}"
        for line in expected:
            if line.startswith("[") or "median" in line or "sum=" in line:
                continue
            assert line in shown, f"$ {command}: {line!r} not in:\n{shown}"
    if shutil.which("dot"):
        assert "<svg" in (tmp_path / "attn.svg").read_text()


def test_plugin_page_documents_every_feature_and_problem_field() -> None:
    """Plugin authors find each conformance-kit feature name and each SdpaProblem field and
    property (``uses_dropout`` included) explained on the plugin page, and in the API docs."""
    import dataclasses
    import inspect

    from hipdnn_graph.backend import SdpaProblem
    from hipdnn_graph.testing import FEATURES

    text = (DOCS / "plugins.md").read_text()
    section = text.split("## Reading a node: `SdpaProblem`", 1)[1].split("\n## ", 1)[0]
    for feature in FEATURES:
        assert f"`{feature}`" in section, feature
    names = [f.name for f in dataclasses.fields(SdpaProblem) if f.name != "name"]
    for name in [*names, "uses_dropout"]:
        assert f"p.{name}" in section, name
    documented = (inspect.getdoc(SdpaProblem) or "").split("Attributes:", 1)[-1]
    for name in [f.name for f in dataclasses.fields(SdpaProblem)]:
        assert f"\n{name}: " in "\n" + documented.replace("\n    ", "\n"), name
    for name, member in vars(SdpaProblem).items():
        if not name.startswith("_") and callable(getattr(member, "fget", member)):
            assert inspect.getdoc(getattr(SdpaProblem, name)), name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_snippet_includes_are_not_mangled(page: Path) -> None:
    """An include in a plain ``python`` fence is reformatted by ``ruff format`` into
    ``--8 < --"..."``, which neither renders nor is checked: includes sit in ``{ .python }``
    fences, and Output blocks are titled so that the test above compares them."""
    text = page.read_text()
    assert "--8 < --" not in text, f"{page.name}: a mangled snippet include"
    assert not re.search(r"^Output:\n\n```text", text, re.MULTILINE), (
        f'{page.name}: an untitled Output block (use ```text title="Output")'
    )
