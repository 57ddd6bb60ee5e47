"""Packaging (issue 11, item 12): the wheel imports without test-only packages, the `dev` extra
holds everything the tests import, and `make docs` installs no test tools (no torch)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
TEST_ONLY = ("flatbuffers", "hypothesis", "jsonschema", "pytest", "mypy")
#: modules that may need the optional `torch` extra (the torch plugin's insides, the torch layer)
TORCH_EXTRA = ("hipdnn_graph_torch_rocm.", "hipdnn_graph.torch.")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    wheels = list(out.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(f"cannot build the wheel here: {done.stderr[-500:]}")
    return wheels[0]


def test_every_module_of_the_wheel_imports_without_test_only_packages(
    wheel: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path)
        modules = sorted(
            name[:-3].replace("/", ".").removesuffix(".__init__")
            for name in archive.namelist()
            if name.endswith(".py") and ".dist-info" not in name
        )
    assert "hipdnn_graph.cli" in modules and "hipdnn_graph_torch_rocm._engines" in modules
    assert "hipdnn_graph.graph.builders.base" in modules and "hipdnn_graph.cli.run" in modules
    code = textwrap.dedent(
        f"""
        import importlib, sys
        sys.path.insert(0, {str(tmp_path)!r})
        for name in {TEST_ONLY!r} + ("torch",):  # as if not installed: imports fail
            sys.modules[name] = None
        failed = []
        for module in {modules!r}:
            try:
                mod = importlib.import_module(module)
                assert mod.__file__.startswith({str(tmp_path)!r}), mod.__file__
            except Exception as exc:
                needs_torch = "import of torch halted" in str(exc)
                if not ((module + ".").startswith({TORCH_EXTRA!r}) and needs_torch):
                    failed.append(f"{{module}}: {{type(exc).__name__}}: {{exc}}")
        # without torch the torch plugin still loads, and its engines refuse with a reason
        import hipdnn_graph as hg
        backend = importlib.import_module("hipdnn_graph_torch_rocm").create_backend()
        g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                     compute_data_type=hg.DataType.FLOAT)
        q = g.tensor(name="Q", dim=[1, 1, 4, 8])
        g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
        g.validate()
        reasons = {{e.check(g).reason for e in backend.engines()}}
        print("\\n".join(failed) or "ok", sorted(reasons))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok ['torch is not installed']"


def _unguarded_imports(path: Path) -> set[str]:
    """Top-level modules a test file imports at module level outside ``try``."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_dev_extra_holds_what_the_tests_import() -> None:
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")}
    first_party = {"hipdnn_graph", "hipdnn_graph_numpy_reference", "hipdnn_graph_torch_rocm"}
    declared = {
        _requirement_name(r)
        for r in PYPROJECT["project"]["dependencies"]
        + PYPROJECT["project"]["optional-dependencies"]["dev"]
    }
    # ruff is run as a program (tests/test_layering.py), mypy as a module
    assert {"ruff", "mypy"} <= declared
    distributions = metadata.packages_distributions()
    missing = {}
    for path in [*sorted((ROOT / "tests").rglob("test_*.py")), ROOT / "tests" / "conftest.py"]:
        for module in _unguarded_imports(path) - local - first_party:
            if module in sys.stdlib_module_names or module == "__future__":
                continue
            dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
            if not dists & declared:
                missing.setdefault(module, []).append(path.name)
    assert missing == {}
    # and what tests skip without (importorskip) is declared too (the docs tests need the docs
    # extra), except torch (the CPU pin of requirements-test.txt)
    docs = {_requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["docs"]}
    for path in (ROOT / "tests").rglob("*.py"):
        for name in re.findall(r"importorskip\(\"(\w+)\"\)", path.read_text()):
            assert name == "torch" or name in declared | docs, (path.name, name)


def test_docs_requirements_match_the_docs_extra() -> None:
    lines = (ROOT / "requirements-docs.txt").read_text().splitlines()
    listed = {_requirement_name(x) for x in lines if x.strip() and not x.startswith("#")}
    extra = {_requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["docs"]}
    assert listed == extra


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_docs_installs_no_test_tools() -> None:
    done = subprocess.run(
        ["make", "-n", "-B", "docs"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    commands = done.stdout
    assert "mkdocs build --strict" in commands
    assert "requirements-docs.txt" in commands
    assert "requirements-test.txt" not in commands and "[dev]" not in commands
    assert "torch" not in commands
