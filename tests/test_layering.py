"""The layering rules of DESIGN.md, checked (issue 11, item 17).

* ruff's banned-api rules (``TID251``/``TID253`` in pyproject.toml) reject torch, networkx and
  built-in plugin imports in the core, and module-level torch imports even in the lazy places;
* this module reads every core module with :mod:`ast` for what per-file lint settings cannot say
  exactly (which file may import what, and where);
* no plugin (``backends/``, the example plugin) imports a private name of ``hipdnn_graph``;
* no built-in plugin imports another: each is written against ``hipdnn_graph``'s public API
  only, and what two of them share (which configurations have a defined math, the data checks
  of a run) lives in the core.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hipdnn_graph._moved import MOVED

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "hipdnn_graph"
PLUGINS = ("hipdnn_graph_numpy_reference", "hipdnn_graph_torch_rocm")

#: core files that may import torch inside functions (besides the hipdnn_graph/torch package)
LAZY_TORCH = {
    "hipdnn_graph/backend/variant_pack.py",
    "hipdnn_graph/backend/pack_guard.py",
    "hipdnn_graph/backend/buffers.py",
    "hipdnn_graph/backend/dlpack.py",
    "hipdnn_graph/backend/dtypes.py",
    "hipdnn_graph/graph/execution.py",
    "hipdnn_graph/graph/autotune_timing.py",
    "hipdnn_graph/testing/inputs.py",
    "hipdnn_graph/testing/conformance.py",
    "hipdnn_graph/cli/run.py",
    "hipdnn_graph/cli/exported_run.py",
}
#: a package whose every module may import torch lazily (hipDNN's Python API: device memory,
#: streams and DLPack)
LAZY_TORCH_PACKAGE = "hipdnn_graph/frontend/"
NETWORKX = {"hipdnn_graph/graph/ordering.py"}


def _lazy_torch_place(rel: str) -> bool:
    return rel in LAZY_TORCH or rel.startswith(LAZY_TORCH_PACKAGE)


def _imports(tree: ast.AST) -> Iterator[tuple[str, list[str], ast.stmt, bool, bool]]:
    """``(module, names, node, at module level, under TYPE_CHECKING)`` for every import."""

    def walk(
        node: ast.AST, top: bool, typing_only: bool
    ) -> Iterator[tuple[str, list[str], ast.stmt, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, [], child, top, typing_only
            elif isinstance(child, ast.ImportFrom):
                module = "." * child.level + (child.module or "")
                yield module, [a.name for a in child.names], child, top, typing_only
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from walk(child, top, True)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, False, typing_only)
            else:
                yield from walk(child, top, typing_only)

    yield from walk(tree, True, False)


def _root(module: str) -> str:
    return module.split(".")[0]


def core_violations(path: Path, source: str) -> list[str]:
    """Broken layering rules in one core module (``path`` relative to the repository)."""
    rel = path.as_posix()
    problems = []
    for module, _, node, top, typing_only in _imports(ast.parse(source)):
        root = _root(module)
        where = f"{rel}:{node.lineno}"
        if root in PLUGINS:
            problems.append(f"{where}: the core imports the plugin {module}")
        elif root == "networkx" and not typing_only and rel not in NETWORKX:
            problems.append(f"{where}: networkx outside ordering.py")
        elif root == "torch" and not typing_only:
            in_package = rel.startswith("hipdnn_graph/torch/")
            if top and not in_package:
                problems.append(f"{where}: torch imported at module level")
            elif not in_package and not _lazy_torch_place(rel):
                problems.append(f"{where}: torch imported outside the named lazy places")
    return problems


def private_imports(path: Path, source: str) -> list[str]:
    """Private names of ``hipdnn_graph`` that a plugin module imports or reaches."""
    problems = []
    aliases: set[str] = set()
    tree = ast.parse(source)
    for module, names, node, _, _ in _imports(tree):
        if _root(module) != "hipdnn_graph":
            continue
        where = f"{path.as_posix()}:{node.lineno}"
        parts = module.split(".")
        private = [p for p in parts if p.startswith("_")]
        private += [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private:
            problems.append(f"{where}: imports private {', '.join(private)} from {module}")
        if isinstance(node, ast.Import):
            aliases.update(a.asname or a.name for a in node.names if a.name == module)
        else:
            aliases.update(a.asname or a.name for a in node.names)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name | ast.Attribute)
            and ast.unparse(node.value).split(".")[0] in aliases
        ):
            problems.append(f"{path.as_posix()}:{node.lineno}: uses {ast.unparse(node)}")
    return problems


def plugin_imports(plugin: str, path: Path, source: str) -> list[str]:
    """Imports of another built-in plugin by a module of the built-in ``plugin``, anywhere in
    the module (lazily in a function or under ``TYPE_CHECKING`` too)."""
    return [
        f"{path.as_posix()}:{node.lineno}: {plugin} imports the plugin {module}"
        for module, _, node, _, _ in _imports(ast.parse(source))
        if _root(module) in PLUGINS and _root(module) != plugin
    ]


def _python_files(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*.py") if "fbs" not in p.parts)


def test_core_modules_follow_the_layering() -> None:
    problems = [
        problem
        for path in _python_files(CORE)
        for problem in core_violations(path.relative_to(ROOT), path.read_text())
    ]
    assert problems == []


#: the most modules the package root holds (issue 39): the rest live in rooms, the Graph core in
#: hipdnn_graph/graph/, its builder mixins in hipdnn_graph/graph/builders/, the command line in
#: hipdnn_graph/cli/
ROOT_MODULES_AT_MOST = 15


def test_the_package_root_holds_at_most_15_modules() -> None:
    modules = sorted(p.name for p in CORE.glob("*.py"))
    assert len(modules) <= ROOT_MODULES_AT_MOST, modules
    for room in ("graph", "graph/builders", "cli"):
        assert (CORE / room / "__init__.py").is_file(), room


#: the most lines a module of the package holds (issue 39; DESIGN.md: "no module over ~500 lines")
MODULE_LINES_AT_MOST = 500


def test_no_module_of_the_package_is_over_500_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in _python_files(CORE)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES_AT_MOST
    }
    assert long == {}


def test_public_import_paths_outlive_the_rooms() -> None:
    """``hg.Graph``, ``hipdnn_graph.graph.Graph`` and the console entry point still resolve."""
    import hipdnn_graph as hg
    from hipdnn_graph.cli import main
    from hipdnn_graph.graph import Graph

    assert hg.Graph is Graph
    assert main(["--version"]) == 0
    assert Graph.__module__ == "hipdnn_graph.graph"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_module_path_imports_the_moved_module(old: str) -> None:
    """Code written against the paths of before the rooms keeps importing (one module object)."""
    moved = importlib.import_module(f"hipdnn_graph.{old}")
    assert moved is importlib.import_module(f"hipdnn_graph.{MOVED[old]}")
    assert not (CORE / f"{old}.py").exists()  # the alias is the table's, not a module left over
    assert moved.__name__ == f"hipdnn_graph.{MOVED[old]}"
    # its own spec stays: one naming the old path made its relative imports raise ImportWarning
    # ("__package__ != __spec__.parent"), an error where warnings are errors
    assert moved.__spec__ is not None and moved.__spec__.name == moved.__name__
    assert moved.__spec__.parent == moved.__package__


def test_an_unknown_module_path_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hipdnn_graph.graph_nope")


def test_plugins_import_nothing_private_from_the_core() -> None:
    folders = [ROOT / "backends", ROOT / "examples" / "custom_backend"]
    problems = [
        problem
        for path in _python_files(*folders)
        for problem in private_imports(path.relative_to(ROOT), path.read_text())
    ]
    assert problems == []


def test_no_builtin_plugin_imports_another() -> None:
    problems = [
        problem
        for plugin in PLUGINS
        for path in _python_files(ROOT / "backends" / plugin)
        for problem in plugin_imports(plugin, path.relative_to(ROOT), path.read_text())
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("source", "count"),
    [
        ("from hipdnn_graph_numpy_reference.families.block_scale import x\n", 1),
        ("def f():\n    import hipdnn_graph_numpy_reference\n", 1),
        ("if TYPE_CHECKING:\n    import hipdnn_graph_numpy_reference\n", 1),
        ("from hipdnn_graph_torch_rocm.families import x\n", 0),
        ("from .families import x\n", 0),
        ("from hipdnn_graph.nodes.moe_math import moe_routes\n", 0),
    ],
)
def test_the_plugin_import_checker_finds_what_it_should(source: str, count: int) -> None:
    found = plugin_imports("hipdnn_graph_torch_rocm", Path("p.py"), source)
    assert len(found) == count


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch\n", ["x.py:1: torch imported at module level"]),
        ("def f():\n    import torch\n", ["x.py:2: torch imported outside the named lazy places"]),
        ("import networkx as nx\n", ["x.py:1: networkx outside ordering.py"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import networkx\n", []),
        (
            "def f():\n    from hipdnn_graph_torch_rocm import x\n",
            ["x.py:2: the core imports the plugin hipdnn_graph_torch_rocm"],
        ),
    ],
)
def test_the_core_checker_finds_what_it_should(source: str, expected: list[str]) -> None:
    assert core_violations(Path("x.py"), source) == expected


@pytest.mark.parametrize(
    ("source", "count"),
    [
        ("from hipdnn_graph.backend._impl import x\n", 1),
        ("from hipdnn_graph.backend import _private\n", 1),
        ("import hipdnn_graph as hg\nhg.backend._registry\n", 1),
        ("import hipdnn_graph._core\n", 1),
        ("from hipdnn_graph.backend import Support, __all__\n", 0),
        ("import hipdnn_graph as hg\nhg.Graph.__name__\n", 0),
    ],
)
def test_the_private_import_checker_finds_what_it_should(source: str, count: int) -> None:
    assert len(private_imports(Path("p.py"), source)) == count


def _ruff_codes(filename: str, source: str) -> list[str]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--output-format", "concise", "--select", "TID",
         "--stdin-filename", filename, "-"],
        input=source, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    return [
        line.split(": ", 1)[1].split(" ", 1)[0]
        for line in done.stdout.splitlines()
        if ": TID" in line
    ]


BANNED = "import networkx\nimport torch\nfrom hipdnn_graph_numpy_reference import x\n"


def test_lint_bans_torch_networkx_and_plugins_in_the_core() -> None:
    assert _ruff_codes("hipdnn_graph/new_module.py", BANNED) == [
        "TID251", "TID251", "TID253", "TID251",
    ]  # fmt: skip
    lazy = "def f():\n    import torch\n"
    assert _ruff_codes("hipdnn_graph/new_module.py", lazy) == ["TID251"]
    assert _ruff_codes("hipdnn_graph/cli/run.py", lazy) == []
    assert _ruff_codes("hipdnn_graph/cli/run.py", "import torch\n") == ["TID253"]
    assert _ruff_codes("hipdnn_graph/torch/op.py", BANNED) == []
    assert _ruff_codes("tests/test_new.py", BANNED) == []
    assert _ruff_codes("backends/hipdnn_graph_torch_rocm/new.py", BANNED) == []


#: words that name a node family (or one of its features)
_FAMILY_WORDS = (
    "sdpa", "attention", "dropout", "causal", "diagonal", "pointwise", "matmul", "convolution",
    "batchnorm", "layernorm", "rmsnorm", "reduction", "resample", "blockscale", "block_scale",
    "moe", "custom_op", "customop",
)  # fmt: skip


def _family_mentions(path: Path) -> list[str]:
    """Lines of ``path`` naming a family, skipping the two schema tables that list every
    family by hipDNN's names: the backend C API values (``enums.py``) and the ``NodeAttributes``
    union members (``NODE_KINDS``)."""
    if path.name == "enums.py":
        return []
    source = path.read_text()
    kinds = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(kinds):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NODE_KINDS" for t in node.targets
        ):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return [
        f"{path.name}:{number}: {line.strip()}"
        for number, line in enumerate(source.splitlines(), 1)
        if number not in skip and any(word in line.lower() for word in _FAMILY_WORDS)
    ]


def test_descriptors_name_no_family() -> None:
    """DESIGN.md: ``descriptors/`` knows no node type; families declare their specs beside
    their nodes, and the codecs are driven by those."""
    found = [m for p in sorted((CORE / "descriptors").glob("*.py")) for m in _family_mentions(p)]
    assert not found, "\n".join(found)


def test_the_family_grep_finds_what_it_should(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('NODE_KINDS = (\n    "SdpaAttributes",\n)\nX = "PointwiseMode"\n')
    assert _family_mentions(probe) == ['probe.py:4: X = "PointwiseMode"']


#: the modules that hand a graph's parts over and never import the Graph core (issue 39, item
#: 4): only the Graph side calls ``Graph.from_parts`` / ``Graph.to_parts``
PARTS_BRIDGES = ("hipdnn_graph/wire.py", "hipdnn_graph/lowering.py")


def graph_core_imports(rel: str, source: str) -> list[str]:
    """Imports of ``hipdnn_graph.graph`` (or of anything below it) by the module at ``rel``
    (a path relative to the repository), anywhere: at module level, under ``TYPE_CHECKING`` or
    inside a function; relative imports are resolved against the module's package."""
    package = rel.removesuffix(".py").split("/")[:-1]
    if rel.endswith("__init__.py"):
        package = rel.split("/")[:-1]
    found = []
    for module, names, node, _, _ in _imports(ast.parse(source)):
        name = module.lstrip(".")
        level = len(module) - len(name)
        if level:
            base = package[: len(package) - (level - 1)]
            module = ".".join([*base, name] if name else base)
        targets = [module, *(f"{module}.{n}" for n in names)]
        if any(t == "hipdnn_graph.graph" or t.startswith("hipdnn_graph.graph.") for t in targets):
            found.append(f"{rel}:{node.lineno}: imports {module} {names or ''}".rstrip())
    return found


def test_the_wire_lowering_and_descriptors_never_import_the_graph_core() -> None:
    paths = [ROOT / rel for rel in PARTS_BRIDGES] + _python_files(CORE / "descriptors")
    found = [
        problem
        for path in paths
        for problem in graph_core_imports(path.relative_to(ROOT).as_posix(), path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize(
    ("rel", "source", "count"),
    [
        ("hipdnn_graph/wire.py", "from .graph import Graph\n", 1),
        ("hipdnn_graph/wire.py", "if TYPE_CHECKING:\n    from .graph import Graph\n", 1),
        ("hipdnn_graph/wire.py", "def f():\n    from .graph.lifecycle import assign_uids\n", 1),
        ("hipdnn_graph/wire.py", "from . import graph\n", 1),
        ("hipdnn_graph/wire.py", "import hipdnn_graph.graph.prepared\n", 1),
        ("hipdnn_graph/descriptors/fb_read.py", "from ..graph import Graph\n", 1),
        ("hipdnn_graph/descriptors/fb_read.py", "from .graph_bits import x\n", 0),
        ("hipdnn_graph/wire.py", "from .graph_attributes import GraphAttributes\n", 0),
        ("hipdnn_graph/wire.py", "from .attributes.graph_attributes import G\n", 0),
    ],
)
def test_the_graph_core_import_checker_finds_what_it_should(
    rel: str, source: str, count: int
) -> None:
    assert len(graph_core_imports(rel, source)) == count
