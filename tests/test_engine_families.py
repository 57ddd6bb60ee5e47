"""Engines declare the node families they run; a graph of another family is refused by name
(the registry, check_support, the conformance kit), before an engine's own check runs."""

from __future__ import annotations

from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import Support, isolated_registry, node_type_refusal
from hipdnn_graph.backend.contract import checked_support
from hipdnn_graph.testing import check_engine


def _pointwise_graph() -> hg.Graph:
    g = hg.Graph(name="pw", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 4])
    y = g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    y.set_output(True)
    return g


class _Engine:
    """An engine that counts its check() calls; ``node_types`` optional."""

    priority = 1
    array_kind = "numpy"

    def __init__(self, name: str, node_types: Any = None) -> None:
        self.name = name
        self.calls = 0
        if node_types is not None:
            self.node_types = node_types

    def check(self, graph: hg.Graph) -> Support:
        self.calls += 1
        return Support.no("check() ran")

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> Any:
        raise AssertionError("never built")


class _Backend:
    def __init__(self, *engines: _Engine) -> None:
        self.name = "families"
        self._engines = list(engines)

    def engines(self) -> list[_Engine]:
        return self._engines


def test_declared_families_refuse_before_check() -> None:
    g = _pointwise_graph()
    attention = _Engine("ATTENTION_ONLY", frozenset({hg.NodeType.SDPA_FWD, hg.NodeType.SDPA_BWD}))
    assert checked_support(attention, g) == (
        False,
        "does not run POINTWISE nodes (node 'relu'); it runs SDPA_FWD, SDPA_BWD",
    )
    assert attention.calls == 0
    pointwise = _Engine("POINTWISE", [hg.NodeType.POINTWISE])
    assert checked_support(pointwise, g) == (False, "check() ran") and pointwise.calls == 1
    undeclared = _Engine("ANY")
    assert node_type_refusal(undeclared, g) is None
    assert checked_support(undeclared, g) == (False, "check() ran")


def test_a_broken_declaration_is_a_refusal_not_a_crash() -> None:
    broken = _Engine("BROKEN", [99])
    accepted, reason = checked_support(broken, _pointwise_graph())
    assert not accepted and reason.startswith("node_types raised ValueError")


def test_no_engine_for_the_family_raises_not_supported_naming_it() -> None:
    g = _pointwise_graph()
    with isolated_registry(load_entry_points=False) as registry:
        registry.register(_Backend(_Engine("ATTN", frozenset({hg.NodeType.SDPA_FWD}))))
        with pytest.raises(hg.NotSupportedError) as info:
            g.build_operation_graph()
            g.create_execution_plans()
            g.check_support()
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert "ATTN: does not run POINTWISE nodes (node 'relu')" in info.value.message


def test_the_reference_runs_pointwise_and_the_attention_engines_refuse_it_by_family() -> None:
    g = _pointwise_graph()
    g.build_operation_graph()
    g.create_execution_plans()
    g.check_support()
    refusals = g.get_engine_refusals()
    assert "NUMPY_REFERENCE_ENGINE" not in refusals
    assert refusals["TORCH_SDPA_MATH_ENGINE"] == (
        "does not run POINTWISE nodes (node 'relu'); it runs SDPA_FWD, SDPA_BWD"
    )


def test_the_reference_declares_its_families_from_its_records() -> None:
    from hipdnn_graph_numpy_reference.engine import NumpyReferenceEngine
    from hipdnn_graph_numpy_reference.families import REFERENCE_FAMILY_OF

    declared = NumpyReferenceEngine().node_types
    assert declared == {hg.NodeType.SDPA_FWD, hg.NodeType.SDPA_BWD, *REFERENCE_FAMILY_OF}


def test_the_reference_refuses_a_family_without_a_runner_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hipdnn_graph_numpy_reference.engine import NumpyReferenceEngine
    from hipdnn_graph_numpy_reference.families import REFERENCE_FAMILY_OF

    monkeypatch.delitem(REFERENCE_FAMILY_OF, hg.NodeType.POINTWISE)
    g = _pointwise_graph()
    g.validate()
    support = NumpyReferenceEngine().check(g)
    assert not support and support.reason == "node 'relu': POINTWISE nodes have no NumPy reference"


def test_sdpa_engines_refuse_pointwise_by_family_and_the_torch_family_engine_runs_it() -> None:
    pytest.importorskip("torch")
    from hipdnn_graph_torch_rocm import create_backend

    g = _pointwise_graph()
    g.build_operation_graph()
    with isolated_registry(load_entry_points=False) as registry:
        registry.register(create_backend())
        g.create_execution_plans()
        refusals = dict(g.get_engine_refusals())
        assert refusals["TORCH_SDPA_MATH_ENGINE"] == (
            "does not run POINTWISE nodes (node 'relu'); it runs SDPA_FWD, SDPA_BWD"
        )
        g.build_plans()
        assert g.get_plan_name() == "TORCH_EAGER_ENGINE"


def test_conformance_kit_checks_attention_engines_as_before() -> None:
    report = check_engine("NUMPY_REFERENCE_ENGINE", cases=2, seed=0)
    assert report.ok and report.passed
