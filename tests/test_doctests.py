"""Run every docstring example in the ``hipdnn_graph`` package and the two built-in backend
packages, and require zero failures.

Modules whose import needs an optional dependency (torch, mkdocs, ...) are skipped, as is the
generated FlatBuffers package ``hipdnn_graph.descriptors.fbs``.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import hipdnn_graph
import hipdnn_graph_numpy_reference
import hipdnn_graph_torch_rocm

#: top-level distributions that are optional extras, not runtime dependencies
OPTIONAL_DEPENDENCIES = frozenset({"torch", "mkdocs", "mkdocstrings", "griffe", "triton", "cupy"})
SKIPPED_PACKAGES = ("hipdnn_graph.descriptors.fbs",)


def _module_names() -> list[str]:
    names = []
    for package in (hipdnn_graph, hipdnn_graph_numpy_reference, hipdnn_graph_torch_rocm):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if any(info.name == p or info.name.startswith(p + ".") for p in SKIPPED_PACKAGES):
                continue
            names.append(info.name)
    return sorted(names)


MODULES = _module_names()


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing in OPTIONAL_DEPENDENCIES:
            pytest.skip(f"{name} needs the optional dependency {missing!r}")
        raise


def test_package_walk_found_the_core_modules() -> None:
    for core in ("hipdnn_graph.tensor", "hipdnn_graph.graph", "hipdnn_graph.graph.ordering"):
        assert core in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = _import(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for test in finder.find(module, name):
        runner.run(test, out=report.append)
    failed = runner.summarize(verbose=False).failed
    assert failed == 0, f"{failed} doctest failure(s) in {name}:\n" + "".join(report)
