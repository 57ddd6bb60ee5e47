"""Fixtures shared by several test modules."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from example_plugin import plugin_path

from hipdnn_graph.backend import isolated_registry, register_backend
from hipdnn_graph_numpy_reference import create_backend as create_numpy_backend


@pytest.fixture
def only_numpy() -> Iterator[None]:
    """A registry holding just the NumPy reference backend (no other installed plugin)."""
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        yield


@pytest.fixture
def example_plugin(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[Path]]:
    """The example plugin (``examples/custom_backend``) installed for this test only (see
    ``tests/example_plugin.py``), in a fresh registry that loads the entry points; yields the
    ``sys.path`` entries that install it (for a subprocess's ``PYTHONPATH``)."""
    entries = plugin_path(tmp_path_factory.mktemp("example_plugin"))
    for entry in reversed(entries):
        monkeypatch.syspath_prepend(str(entry))
    for module in [m for m in sys.modules if m.split(".")[0] == "hipdnn_custom_backend"]:
        monkeypatch.delitem(sys.modules, module)  # imported from elsewhere: import it afresh
    with isolated_registry():
        yield entries
