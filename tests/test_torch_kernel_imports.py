"""The torch backend's layering, checked without a GPU.

* Every kernel module imports in a fresh interpreter where pydantic cannot be imported (a
  ``sys.meta_path`` finder refuses it), and pulls in neither pydantic nor ``hipdnn_graph``: the
  kernels run on a machine that has torch alone (the GPU machine has no pydantic).
* The package itself imports its engines (and so ``hipdnn_graph``) only on first use.
* Imports between the kernel modules follow the call graph: all at module level (no deferred
  imports holding a cycle together) and acyclic.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import hipdnn_graph_torch_rocm
import hipdnn_graph_torch_rocm.kernels as kernels

KERNEL_DIR = Path(kernels.__file__).parent
KERNEL_MODULES = sorted(
    f"{kernels.__name__}.{info.name}" for info in pkgutil.iter_modules(kernels.__path__)
)
MODULES = [
    hipdnn_graph_torch_rocm.__name__,
    f"{hipdnn_graph_torch_rocm.__name__}.replay",
    kernels.__name__,
    *KERNEL_MODULES,
]

_BLOCKED_IMPORT = """
import importlib, sys

class RefusePydantic:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pydantic":
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, RefusePydantic())
importlib.import_module(sys.argv[1])
heavy = ("pydantic", "hipdnn_graph", "networkx")
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def _import_blocked(module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_IMPORT, module],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_kernel_module_is_listed() -> None:
    names = {m.rsplit(".", 1)[1] for m in KERNEL_MODULES}
    assert {
        "call",
        "math",
        "fused",
        "probe",
        "flex",
        "_flex_mods",
        "_flex_compiled",
        "_fused_rules",
        "_fused_ops",
    } <= names


@pytest.mark.parametrize("module", MODULES)
def test_imports_without_pydantic(module: str) -> None:
    res = _import_blocked(module)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "", f"{module} pulled in {res.stdout.strip()}"


def test_the_blocker_blocks() -> None:
    """The same interpreter set-up refuses what does need pydantic (so the test can fail);
    ``import hipdnn_graph`` alone loads its names on first use, so the graph module is named."""
    res = _import_blocked("hipdnn_graph.graph")
    assert res.returncode != 0
    assert "pydantic is blocked in this test" in res.stderr


def test_engines_load_on_first_use() -> None:
    script = (
        "import sys, hipdnn_graph_torch_rocm as t\n"
        "before = 'hipdnn_graph' in sys.modules\n"
        "names = [e.name for e in t.create_backend().engines()]\n"
        "print(before, 'hipdnn_graph' in sys.modules, t.TorchSdpaEngine.__name__, names[-1])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "True", "TorchSdpaEngine", "TORCH_EAGER_ENGINE"]


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = hipdnn_graph_torch_rocm.nope


def _relative_imports(path: Path) -> tuple[set[str], list[str]]:
    """(sibling modules imported at module level, those imported inside a function or class)."""
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    nested: list[str] = []

    def targets(node: ast.ImportFrom) -> list[str]:
        if node.level != 1:
            return []
        if node.module:
            return [node.module.split(".")[0]]
        return [alias.name for alias in node.names]

    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            top.update(targets(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom):
                    nested += targets(sub)
    return top, nested


def test_kernel_imports_follow_the_call_graph() -> None:
    edges: dict[str, set[str]] = {}
    for path in sorted(KERNEL_DIR.glob("*.py")):
        top, nested = _relative_imports(path)
        assert not nested, f"{path.name} imports {nested} inside a function"
        edges[path.stem] = top
    # depth-first search for a cycle
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(edges.get(name, ())):
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join([*trail, name, nxt])}"
            if nxt not in state:
                visit(nxt, [*trail, name])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [])
    assert edges["call"] == set(), "the call description is a leaf"
    assert edges["_fused_rules"] == {"call"}, "the rules read the call description only"


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str) -> None:
    """The backend's docstring examples run (the core's doctest test covers hipdnn_graph only)."""
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
