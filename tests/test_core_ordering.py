"""Spec §3 step 2: stable topological order (producer first, ties keep insertion order), and
hipDNN's cycle / disconnected-component messages."""

from __future__ import annotations

from collections import deque
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hipdnn_graph import ErrorCode, HipdnnError
from hipdnn_graph.graph.ordering import (
    CYCLE_MESSAGE,
    DISCONNECTED_MESSAGE,
    dependency_edges,
    stable_topological_order,
    to_networkx,
)

CYCLE = "Graph contains a cycle, cannot be sorted."
DISCONNECTED = (
    "Graph contains multiple disconnected components, please split the graph into individual graphs"
)


def expect(count: int, edges: list[tuple[int, int]], message: str) -> None:
    with pytest.raises(HipdnnError) as info:
        stable_topological_order(count, edges)
    assert info.value.code is ErrorCode.INVALID_VALUE
    assert info.value.message == message == str(info.value)


def test_message_constants_are_hipdnn_text() -> None:
    assert CYCLE_MESSAGE == CYCLE
    assert DISCONNECTED_MESSAGE == DISCONNECTED


@pytest.mark.parametrize(
    ("count", "edges", "order"),
    [
        (0, [], []),
        (1, [], [0]),
        (2, [(0, 1)], [0, 1]),
        (2, [(1, 0)], [1, 0]),
        (3, [(2, 0), (2, 1)], [2, 0, 1]),
        (3, [(2, 1), (1, 0)], [2, 1, 0]),
        (4, [(0, 1), (0, 2), (0, 3)], [0, 1, 2, 3]),
        (4, [(3, 0), (3, 1), (3, 2)], [3, 0, 1, 2]),
        (4, [(1, 0), (3, 2), (1, 2)], [1, 3, 0, 2]),
        (4, [(2, 0), (2, 1), (2, 3), (3, 1)], [2, 0, 3, 1]),
        # FIFO, as hipDNN: both sources first (0, 2), then what they freed (1), then 3
        (4, [(0, 1), (1, 3), (2, 3)], [0, 2, 1, 3]),
        (5, [(0, 4), (1, 2), (2, 4), (3, 4)], [0, 1, 3, 2, 4]),
        (4, [(0, 3), (0, 1), (1, 2)], [0, 1, 3, 2]),
    ],
)
def test_stable_order(count: int, edges: list[tuple[int, int]], order: list[int]) -> None:
    assert stable_topological_order(count, edges) == order


def test_duplicate_edges_are_harmless() -> None:
    assert stable_topological_order(2, [(1, 0), (1, 0)]) == [1, 0]


@pytest.mark.parametrize(
    ("count", "edges"),
    [
        (2, [(0, 1), (1, 0)]),
        (3, [(0, 1), (1, 2), (2, 0)]),
        (1, [(0, 0)]),
        (4, [(0, 1), (1, 2), (2, 1), (2, 3)]),
    ],
)
def test_cycle(count: int, edges: list[tuple[int, int]]) -> None:
    expect(count, edges, CYCLE)


@pytest.mark.parametrize(
    ("count", "edges"),
    [(2, []), (3, [(0, 1)]), (4, [(0, 1), (2, 3)]), (3, [(1, 2)])],
)
def test_disconnected(count: int, edges: list[tuple[int, int]]) -> None:
    expect(count, edges, DISCONNECTED)


def test_weakly_connected_is_connected() -> None:
    # 0 → 2 ← 1: connected although neither 0 nor 1 reaches the other
    assert stable_topological_order(3, [(0, 2), (1, 2)]) == [0, 1, 2]


def test_dependency_edges_through_shared_tensors() -> None:
    a, b, c, x = object(), object(), object(), object()
    # node 0 reads x, writes a; node 1 reads a, writes b; node 2 reads a and b, writes c
    edges = dependency_edges([[x], [a], [a, b, a]], [[a], [b], [c]])
    assert edges == [(0, 1), (0, 2), (1, 2)]


def test_dependency_edges_shared_input_is_no_edge() -> None:
    x = object()
    assert dependency_edges([[x], [x]], [[object()], [object()]]) == []


def test_dependency_edges_use_identity_not_equality() -> None:
    class Same:
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 0

    produced, read = Same(), Same()
    assert dependency_edges([[], [read]], [[produced], []]) == []
    assert dependency_edges([[], [produced]], [[produced], []]) == [(0, 1)]


def test_to_networkx_labels() -> None:
    g = to_networkx(["fwd", "bwd"], [(0, 1, "fwd::O"), (0, 1, "fwd::Stats")])
    assert isinstance(g, nx.DiGraph)
    assert list(g.nodes) == ["fwd", "bwd"]
    assert g.edges["fwd", "bwd"]["tensors"] == ["fwd::O", "fwd::Stats"]
    assert g.nodes["fwd"]["index"] == 0 and g.nodes["bwd"]["index"] == 1


def _reference_order(count: int, edges: list[tuple[int, int]]) -> list[int]:
    """hipDNN's sort: Kahn's algorithm with a FIFO queue; sources enter in index order and each
    producer frees its consumers in ascending consumer order (its adjacency list is built by
    walking consumers in insertion order)."""
    succ: list[list[int]] = [[] for _ in range(count)]
    indeg = [0] * count
    for u, v in sorted(edges, key=lambda e: e[1]):
        succ[u].append(v)
        indeg[v] += 1
    queue = deque(i for i in range(count) if indeg[i] == 0)
    out = []
    while queue:
        u = queue.popleft()
        out.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    return out


@st.composite
def connected_dags(draw: Any) -> tuple[int, list[tuple[int, int]]]:
    count = draw(st.integers(1, 9))
    rank = draw(st.permutations(range(count)))  # a hidden valid order
    edges: set[tuple[int, int]] = set()
    for i in range(1, count):  # a spanning tree keeps it connected
        j = draw(st.integers(0, i - 1))
        edges.add((rank[j], rank[i]))
    for _ in range(draw(st.integers(0, 10))):
        i, j = sorted(draw(st.lists(st.integers(0, count - 1), min_size=2, max_size=2)))
        if i != j:
            edges.add((rank[i], rank[j]))
    return count, sorted(edges)


@settings(max_examples=150, deadline=None)
@given(connected_dags())
def test_order_is_topological_and_stable(dag: tuple[int, list[tuple[int, int]]]) -> None:
    count, edges = dag
    order = stable_topological_order(count, edges)
    assert sorted(order) == list(range(count))
    pos = {n: i for i, n in enumerate(order)}
    assert all(pos[u] < pos[v] for u, v in edges)
    assert order == _reference_order(count, edges)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8))
def test_declared_in_valid_order_is_left_as_declared(count: int) -> None:
    chain = [(i, i + 1) for i in range(count - 1)]
    assert stable_topological_order(count, chain) == list(range(count))
    star = [(0, i) for i in range(1, count)]
    assert stable_topological_order(count, star) == list(range(count))


def test_a_single_node_graph_validates_without_importing_networkx() -> None:
    """networkx is loaded only when there is something to sort (a fresh interpreter)."""
    import subprocess
    import sys

    script = (
        "import sys, hipdnn_graph as hg\n"
        "g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,\n"
        "             intermediate_data_type=hg.DataType.FLOAT)\n"
        "q = g.tensor(name='Q', dim=[1, 1, 4, 8])\n"
        "o, _ = g.sdpa(q, g.tensor_like(q, 'K'), g.tensor_like(q, 'V'), generate_stats=False)\n"
        "o.set_output(True)\n"
        "g.validate()\n"
        "print('networkx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
