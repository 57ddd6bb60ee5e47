"""Issue 11 item 2: validate() is linear in the graph's size, and one tensor has one producer."""

from __future__ import annotations

import gc
import time

import pytest
from sdpa_graph_cases import forward_backward, new_graph

import hipdnn_graph as hg
from hipdnn_graph.graph.ordering import dependency_edges
from hipdnn_graph.graph.rules import PAUSE_COLLECTOR_NODES, collector_paused


def _many_backward_nodes(count: int) -> hg.Graph:
    """One forward node and ``count`` backward nodes reading its O and Stats (the issue's
    denial-of-service graph), built through the public API."""
    g = new_graph("many")
    q, k, v = (g.tensor(name=n, dim=[1, 2, 8, 16]) for n in "QKV")
    o, stats = g.sdpa(q, k, v, name="fwd")
    assert stats is not None
    do = g.tensor(name="dO", dim=[1, 2, 8, 16])
    for i in range(count):
        g.sdpa_backward(q, k, v, o, do, stats, name=f"bwd{i}")
    return g


def _validate_seconds(g: hg.Graph) -> float:
    """CPU seconds of ``g.validate()`` (CPU time: other processes may share the machine)."""
    start = time.process_time()
    g.validate()
    return time.process_time() - start


def test_validation_time_is_linear_in_the_number_of_nodes() -> None:
    """1 forward + 65,535 backward nodes took 150 s (a quadratic edge list); now each node costs
    about the same in a graph of 65,536 nodes as in one of 4,096 (a quadratic step would make
    it 16 times as much). benchmarks/validate_scale.py prints the figures."""
    small, large = _many_backward_nodes(4_095), _many_backward_nodes(65_535)
    per_node_small = _validate_seconds(small) / 4_096
    elapsed = _validate_seconds(large)
    assert large.is_validated and len(large.nodes) == 65_536
    assert [n.name for n in large.nodes[:3]] == ["fwd", "bwd0", "bwd1"]
    assert large.nodes[-1].attributes.get_dv().get_dim() == [1, 2, 8, 16]
    ratio = elapsed / 65_536 / per_node_small
    assert ratio < 3.0, f"per-node cost grew {ratio:.1f} times from 4,096 to 65,536 nodes"
    assert elapsed < 10.0, f"validate() of 65,536 nodes took {elapsed:.2f} s of CPU"


def test_dependency_edges_are_listed_once_in_consumer_order() -> None:
    a, b, c = (hg.TensorAttributes(name=n) for n in "abc")
    # node 1 reads b twice; node 2 reads b and c; node 3 reads what no node produces
    edges = dependency_edges([[a], [b, b], [b, c], [a]], [[b], [c], [], []])
    assert edges == [(0, 1), (0, 2), (1, 2)]


def test_dependency_edges_take_the_last_producer_like_hipdnn() -> None:
    shared, x = hg.TensorAttributes(name="t"), hg.TensorAttributes(name="x")
    assert dependency_edges([[x], [x], [shared]], [[shared], [shared], []]) == [(1, 2)]


def test_dependency_edges_of_one_producer_and_many_consumers() -> None:
    out = hg.TensorAttributes(name="o")
    count = 50_000
    edges = dependency_edges([[], *([[out, out]] * count)], [[out], *([[]] * count)])
    assert edges == [(0, i) for i in range(1, count + 1)]


def _two_producers() -> tuple[hg.Graph, hg.TensorAttributes]:
    g = forward_backward()
    fwd_q = g.nodes[0].attributes.get_q()
    bwd = g.nodes[1].attributes
    o, stats, do = bwd.get_o(), bwd.get_stats(), bwd.get_do()
    k, v = bwd.get_k(), bwd.get_v()
    dq, _, _ = g.sdpa_backward(fwd_q, k, v, o, do, stats, name="bwd2")
    first_dq = bwd.get_dq()
    assert first_dq is not None
    g.nodes[2].attributes.set_dq(first_dq)  # bwd2 now writes bwd's dQ too
    return g, dq


def test_two_nodes_writing_one_tensor_fail_validation() -> None:
    g, _ = _two_producers()
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert info.value.message == (
        "Tensor bwd::dQ is an output of more than one node (bwd and bwd2); "
        "each tensor must have a single producer"
    )
    assert not g.is_validated


def test_hipdnn_rules_are_reported_before_the_producer_check() -> None:
    g, _ = _two_producers()
    g.nodes[2].attributes.set_k(g.tensor(name="K2", dim=[2, 4, 16, 4]))  # head dim 4, not 8
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert info.value.message == "SdpaBwdNode: head_dim mismatch between Q and K: 8 vs 4"


def test_the_collector_pause_moves_what_the_pass_made_to_the_oldest_generation() -> None:
    """A large graph's inferred dims and strides skip the young collections, the collector runs
    again afterwards (also when validation fails), and objects the process froze stay frozen."""
    assert gc.isenabled()
    with collector_paused(PAUSE_COLLECTOR_NODES + 1):
        assert not gc.isenabled()
        made = [[i] for i in range(10)]
    assert gc.isenabled()
    oldest = set(map(id, gc.get_objects(2)))
    assert all(id(m) in oldest for m in made)
    with pytest.raises(hg.HipdnnError), collector_paused(PAUSE_COLLECTOR_NODES + 1):
        raise hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, "a rule failed")
    assert gc.isenabled()
    gc.freeze()
    try:
        # nothing of the process's is released: the pause never unfreezes. (The freeze count is
        # no witness: a frozen object that dies, a thread's, say, leaves it at once.)
        unfreezes: list[None] = []
        real_unfreeze = gc.unfreeze
        gc.unfreeze = lambda: unfreezes.append(None)  # type: ignore[assignment]
        try:
            with collector_paused(PAUSE_COLLECTOR_NODES + 1):
                pass
        finally:
            gc.unfreeze = real_unfreeze  # type: ignore[assignment]
        assert unfreezes == [] and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    with collector_paused(PAUSE_COLLECTOR_NODES):  # a small graph: the collector is left alone
        assert gc.isenabled()
