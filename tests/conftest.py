"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hipdnn_graph.backend import isolated_registry, register_backend
from hipdnn_graph_numpy_reference import create_backend as create_numpy_backend


@pytest.fixture
def only_numpy() -> Iterator[None]:
    """A registry holding just the NumPy reference backend (no other installed plugin)."""
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        yield
