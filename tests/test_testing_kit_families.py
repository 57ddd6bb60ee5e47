"""The conformance kit over every family: per-family generators, check_engine(families=...) on
the reference and on engines for one family (refused families skipped with the engine's reason,
wrong results failed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import Support, isolated_registry
from hipdnn_graph.testing import (
    FAMILIES,
    assert_engine_conforms,
    check_engine,
    generate_family_cases,
    random_family_case,
)

ALL_IO = (hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16, hg.DataType.DOUBLE)


def test_every_family_generates_valid_reproducible_graphs() -> None:
    assert FAMILIES == ("sdpa", "pointwise", "matmul", "reduction", "mixed")
    cases = generate_family_cases(40, seed=3, io_types=ALL_IO)
    assert [c.family for c in cases[:5]] == list(FAMILIES)
    for case in cases:
        assert case.graph.is_validated
        kinds = {n.get_node_type() for n in case.graph.nodes}
        if case.family == "mixed":
            assert {hg.NodeType.MATMUL, hg.NodeType.POINTWISE} <= kinds
        elif case.family != "sdpa":
            assert hg.NodeType[case.family.upper()] in kinds
    again = random_family_case(cases[7].seed, cases[7].family, io_types=ALL_IO, index=7)
    assert again.label == cases[7].label


def test_unknown_families_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown families"):
        generate_family_cases(2, families=("pointwise", "conv"))
    with pytest.raises(ValueError, match="unknown family"):
        random_family_case(0, "conv")
    with pytest.raises(ValueError, match="no family"):
        generate_family_cases(2, families=())


def test_the_reference_conforms_on_every_family() -> None:
    report = assert_engine_conforms(
        "NUMPY_REFERENCE_ENGINE", cases=25, seed=4, families=FAMILIES, io_types=ALL_IO
    )
    assert report.by_family() == dict.fromkeys(FAMILIES, (5, 0, 0))
    assert "  matmul: 5 passed, 0 skipped, 0 failed" in report.details()


class _PointwisePlan:
    engine_name = "SWAPPED_SUB"
    workspace_size = 0

    def __init__(self, graph: hg.Graph, swapped: bool) -> None:
        node = graph.nodes[0]
        self.ins = [t.get_uid() for t in node.attributes.input_tensors()]
        self.out = node.attributes.get_output_0().get_uid()
        self.swapped = swapped

    def execute(self, pack: Mapping[int, Any], workspace: Any) -> None:
        x, b = (np.asarray(pack[u], dtype=np.float64) for u in self.ins)
        np.copyto(pack[self.out], (b - x) if self.swapped else (x - b), casting="unsafe")


class _SubEngine:
    """Runs single SUB nodes; ``swapped`` computes b - x (wrong)."""

    priority = 1
    array_kind = "numpy"
    node_types = frozenset({hg.NodeType.POINTWISE})

    def __init__(self, name: str, swapped: bool) -> None:
        self.name, self.swapped = name, swapped

    def check(self, graph: hg.Graph) -> Support:
        nodes = graph.nodes
        if len(nodes) != 1 or nodes[0].attributes.mode != hg.PointwiseMode.SUB:
            return Support.no("SUB nodes only")
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> _PointwisePlan:
        return _PointwisePlan(graph, self.swapped)


class _Backend:
    name = "sub_engines"

    def engines(self) -> list[_SubEngine]:
        return [_SubEngine("RIGHT_SUB", False), _SubEngine("SWAPPED_SUB", True)]


def _sub_cases(count: int) -> list[Any]:
    cases = []
    seed = 0
    while len(cases) < count:
        case = random_family_case(seed, "pointwise")
        if case.graph.nodes[0].attributes.mode == hg.PointwiseMode.SUB:
            cases.append(case)
        seed += 1
    return cases


def test_an_engine_for_one_family_is_checked_on_it_and_skipped_elsewhere() -> None:
    with isolated_registry() as registry:
        registry.register(_Backend())
        right = check_engine("RIGHT_SUB", cases=_sub_cases(3))
        assert right.ok and len(right.passed) == 3
        wrong = check_engine("SWAPPED_SUB", cases=_sub_cases(3))
        assert len(wrong.failed) == 3 and "exceeds" in wrong.failed[0].reason
        mixed = check_engine("RIGHT_SUB", cases=10, seed=1, families=FAMILIES)
        assert mixed.ok
        reasons = {r.case.family: r.reason for r in mixed.skipped}
        assert reasons["matmul"] == "does not run MATMUL nodes (node 'mm'); it runs POINTWISE"
        assert reasons["sdpa"].startswith("does not run SDPA_")
