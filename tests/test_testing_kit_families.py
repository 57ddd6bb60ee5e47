"""The conformance kit over every family: per-family generators, check_engine(families=...) on
the reference and on engines for one family (refused families skipped with the engine's reason,
wrong results failed)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import Support, isolated_registry
from hipdnn_graph.testing import (
    FAMILIES,
    GraphCase,
    assert_engine_conforms,
    check_engine,
    generate_family_cases,
    make_inputs,
    random_family_case,
    runtime_inputs,
)

ALL_IO = (hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16, hg.DataType.DOUBLE)


T = hg.NodeType
#: the node types a graph of each single family may hold
NODE_TYPES: dict[str, set[hg.NodeType]] = {
    "pointwise": {T.POINTWISE},
    "matmul": {T.MATMUL},
    "reduction": {T.REDUCTION},
    "convolution": {T.CONVOLUTION_FPROP, T.CONVOLUTION_DGRAD, T.CONVOLUTION_WGRAD},
    "resample": {T.RESAMPLE_FWD, T.RESAMPLE_BWD},
    "batchnorm": {T.BATCHNORM, T.BATCHNORM_INFERENCE, T.BATCHNORM_INFERENCE_VARIANCE_EXT,
                  T.BATCHNORM_BACKWARD},
    "layernorm": {T.LAYER_NORM, T.LAYERNORM_BACKWARD},
    "rmsnorm": {T.RMS_NORM, T.RMS_NORM_BACKWARD},
    "moe": {T.MOE_GROUPED_MATMUL, T.MOE_GROUPED_MATMUL_BWD},
    "block_scale": {T.BLOCK_SCALE_QUANTIZE, T.BLOCK_SCALE_DEQUANTIZE},
}  # fmt: skip
#: the node types of each graph "mixed" draws
CHAINS = [
    [T.MATMUL, T.POINTWISE, T.POINTWISE],
    [T.MATMUL, T.POINTWISE, T.POINTWISE, T.REDUCTION],
    [T.CONVOLUTION_FPROP, T.BATCHNORM_INFERENCE, T.POINTWISE],
    [T.RMS_NORM, T.MATMUL, T.POINTWISE],
]
NEW_FAMILIES = (
    "convolution",
    "resample",
    "batchnorm",
    "layernorm",
    "rmsnorm",
    "moe",
    "block_scale",
    "mixed",
)


def test_every_family_generates_valid_reproducible_graphs() -> None:
    assert FAMILIES == ("sdpa", "pointwise", "matmul", "reduction", "convolution", "resample",
                        "batchnorm", "layernorm", "rmsnorm", "moe", "mixed",
                        "block_scale")  # fmt: skip
    cases = generate_family_cases(4 * len(FAMILIES), seed=3, io_types=ALL_IO)
    assert [c.family for c in cases[: len(FAMILIES)]] == list(FAMILIES)
    cases += generate_family_cases(40 * len(NEW_FAMILIES), seed=4, families=NEW_FAMILIES)
    kinds_seen: dict[str, set[hg.NodeType]] = {}
    chains_seen = set()
    for case in cases:
        assert case.graph.is_validated
        kinds = [n.get_node_type() for n in case.graph.nodes]
        if case.family == "mixed":
            assert kinds in CHAINS
            chains_seen.add(tuple(kinds))
        elif case.family == "block_scale":  # one node, or quantize -> dequantize
            assert kinds in ([T.BLOCK_SCALE_QUANTIZE], [T.BLOCK_SCALE_DEQUANTIZE],
                             [T.BLOCK_SCALE_QUANTIZE, T.BLOCK_SCALE_DEQUANTIZE])  # fmt: skip
        elif case.family != "sdpa":
            assert len(kinds) == 1 and kinds[0] in NODE_TYPES[case.family]
        kinds_seen.setdefault(case.family, set()).update(kinds)
    for family in NEW_FAMILIES[:-1]:  # every node type of each family is drawn
        assert kinds_seen[family] == NODE_TYPES[family], family
    assert chains_seen == {tuple(chain) for chain in CHAINS}
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
        "NUMPY_REFERENCE_ENGINE", cases=3 * len(FAMILIES), seed=4, families=FAMILIES,
        io_types=ALL_IO,
    )  # fmt: skip
    assert report.by_family() == dict.fromkeys(FAMILIES, (3, 0, 0))
    assert "  matmul: 3 passed, 0 skipped, 0 failed" in report.details()


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


# ----- the families beyond attention, matmul, pointwise and reduction -----
@pytest.mark.parametrize("family", NEW_FAMILIES)
def test_the_reference_runs_every_graph_of_the_new_families(family: str) -> None:
    """Sanity: every generated graph validates, gets valid inputs and runs on the reference
    (which refuses invalid MoE routes and offsets with INVALID_VALUE: a failed case)."""
    report = assert_engine_conforms("NUMPY_REFERENCE_ENGINE", cases=12, seed=5,
                                    families=[family], io_types=ALL_IO)  # fmt: skip
    assert len(report.passed) == 12, report.details()


def test_moe_inputs_are_valid_routes_drawn_from_the_node() -> None:
    """The input maker gives each MoE graph offsets and routes valid for its dims and mode."""
    seen = set()
    for case in generate_family_cases(40, seed=6, families=["moe"]):
        node = case.graph.nodes[0]
        slots = node.attributes.tensors_by_slot()
        pack = make_inputs(case.graph, np.random.default_rng(case.seed))
        value = {slot: np.asarray(pack[t]).reshape(-1) for slot, t in slots.items() if t in pack}
        tokens = slots["TOKEN"].dim[1]
        mode = "BWD" if "DOUTPUT" in slots else node.attributes.get_mode().name
        seen.add(mode)
        offsets = value["FIRST_TOKEN_OFFSET"]
        routed = value["TOKEN_INDEX"].size if mode == "GATHER" else tokens
        assert np.all(np.diff(offsets) >= 0) and offsets.min() >= 0 and offsets.max() <= routed
        assert offsets[0] == 0  # also valid for a backward node reading the same offsets
        if mode == "GATHER":
            assert value["TOKEN_INDEX"].min() >= 0 and value["TOKEN_INDEX"].max() < tokens
        if mode == "SCATTER":
            top_k = node.attributes.get_top_k()
            assert value["TOKEN_KS"].min() >= 0 and value["TOKEN_KS"].max() < top_k
            rows = value["TOKEN_INDEX"] * top_k + value["TOKEN_KS"]
            assert sorted(rows.tolist()) == list(range(tokens))  # distinct rows of OUTPUT
    assert seen == {"NONE", "GATHER", "SCATTER", "BWD"}


def test_maxpool_backward_index_names_an_element_of_each_window() -> None:
    """The input maker gives a MAXPOOL backward's INDEX the flat index of an element of X in
    each output's window (or -1 with ZERO_PAD), cast to its type, so DY reaches X."""
    seen = set()
    for case in generate_family_cases(60, seed=9, families=["resample"]):
        node = case.graph.nodes[0]
        a, slots = node.attributes, node.attributes.tensors_by_slot()
        if "INDEX" not in slots or "DY" not in slots:
            continue
        index = np.asarray(make_inputs(case.graph, np.random.default_rng(1))[slots["INDEX"]])
        inner, outer = slots["DX"].dim[2:], index.shape
        seen.add((a.padding_mode, slots["INDEX"].data_type))
        for o in np.ndindex(*outer):
            windows = [
                range(max(q * s - p, 0), min(q * s - p + w, size))
                for q, s, p, w, size in zip(
                    o[2:], a.stride, a.pre_padding, a.window, inner, strict=True
                )
            ]
            flats = {int(np.ravel_multi_index(pos, inner)) for pos in itertools.product(*windows)}
            allowed = set(np.array(sorted(flats)).astype(index.dtype).tolist())  # INT8 wraps
            if a.padding_mode == hg.PaddingMode.ZERO_PAD:
                allowed.add(-1)
            assert int(index[o]) in allowed, (case.label, o, int(index[o]), sorted(flats))
    assert {p for p, _ in seen} == {hg.PaddingMode.ZERO_PAD, hg.PaddingMode.NEG_INF_PAD}
    assert {t for _, t in seen} == {hg.DataType.INT8, hg.DataType.INT32}


def test_statistics_and_scalars_are_drawn_in_range() -> None:
    for case in generate_family_cases(30, seed=7, families=["batchnorm"]):
        inputs = set(runtime_inputs(case.graph))
        slots = {s: t for s, t in case.graph.nodes[0].attributes.tensors_by_slot().items()
                 if t in inputs}  # fmt: skip
        pack = make_inputs(case.graph, np.random.default_rng(case.seed))
        for slot in ("VARIANCE", "INV_VARIANCE", "PREV_RUNNING_VARIANCE"):
            if slot in slots:
                assert np.asarray(pack[slots[slot]], dtype=np.float64).min() > 0
        for slot, (low, high) in {"EPSILON": (1e-5, 1e-2), "MOMENTUM": (0.05, 0.5)}.items():
            if slot in slots and slots[slot] in pack:
                assert isinstance(pack[slots[slot]], float)
                assert low <= pack[slots[slot]] < high


# ----- the cross-check: the torch eager engine against the NumPy reference, on CPU -----
CPU_IO = (hg.DataType.FLOAT, hg.DataType.DOUBLE)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "sdpa"])
def test_the_torch_eager_engine_agrees_with_the_reference(family: str) -> None:
    """Two independent implementations of every family, compared over random graphs; none
    skipped (the MoE nodes were, before the torch engines lowered them)."""
    pytest.importorskip("torch")
    report = check_engine("TORCH_EAGER_ENGINE", cases=24, seed=8, families=[family],
                          io_types=CPU_IO, device="cpu")  # fmt: skip
    assert report.ok and not report.skipped, report.details()
    assert len(report.passed) == 24


def test_every_moe_node_and_routing_mode_runs_on_torch_in_every_io_type() -> None:
    """The MoE grouped matmul lowerings (forward NONE, GATHER, SCATTER and the weight gradient)
    on TORCH_EAGER_ENGINE against the NumPy reference, with FLOAT, HALF, BFLOAT16 and DOUBLE
    tokens and weights (computed in FLOAT or DOUBLE, as hipDNN's references compute)."""
    pytest.importorskip("torch")
    report = check_engine("TORCH_EAGER_ENGINE", cases=40, seed=6, families=["moe"],
                          io_types=ALL_IO, device="cpu")  # fmt: skip
    assert report.ok and not report.skipped and len(report.passed) == 40, report.details()
    seen = set()
    for result in report.passed:
        (node,) = result.case.graph.nodes
        seen.add("BWD" if "DOUTPUT" in node.attributes.tensors_by_slot()
                 else node.attributes.get_mode().name)  # fmt: skip
    assert seen == {"NONE", "GATHER", "SCATTER", "BWD"}
    assert {r.case.io_data_type for r in report.passed} == set(ALL_IO)


def test_every_block_scale_graph_runs_on_torch_in_every_io_type() -> None:
    """The kit's block-scale family (quantize, dequantize, the round trip; FP8 and INT8 with
    E8M0 and FLOAT scales) on TORCH_EAGER_ENGINE against the NumPy reference, NumPy FP8 buffers
    handed over as torch views of their bits, none skipped."""
    pytest.importorskip("torch")
    report = check_engine("TORCH_EAGER_ENGINE", cases=40, seed=9, families=["block_scale"],
                          io_types=ALL_IO, device="cpu")  # fmt: skip
    assert report.ok and not report.skipped and len(report.passed) == 40, report.details()
    features = set().union(*(r.case.features for r in report.passed))
    assert {"quantize", "dequantize", "round_trip", "FP8_E4M3", "FP8_E5M2", "INT8",
            "FP8_E8M0", "FLOAT", "negative_scale"} <= features  # fmt: skip
    assert {r.case.io_data_type for r in report.passed} == set(ALL_IO)


def test_the_norm_backward_nodes_run_on_torch_and_agree_with_the_reference() -> None:
    """The layer-norm and RMSNorm backward lowerings (no longer skipped): every generated
    backward node runs on TORCH_EAGER_ENGINE and matches the NumPy reference."""
    pytest.importorskip("torch")
    report = check_engine("TORCH_EAGER_ENGINE", cases=24, seed=3, families=["layernorm", "rmsnorm"],
                          io_types=CPU_IO, device="cpu")  # fmt: skip
    assert report.ok and not report.skipped, report.details()
    kinds = {n.get_node_type() for c in report.passed for n in c.case.graph.nodes}
    assert {hg.NodeType.LAYERNORM_BACKWARD, hg.NodeType.RMS_NORM_BACKWARD} <= kinds


def test_the_resample_nodes_run_on_torch_and_agree_with_the_reference() -> None:
    """Every generated pooling and pooling backward (each mode and padding, 1-3 spatial dims,
    INDEX of both types) runs on TORCH_EAGER_ENGINE, none skipped, and matches the NumPy
    reference, in every io type."""
    pytest.importorskip("torch")
    report = check_engine("TORCH_EAGER_ENGINE", cases=60, seed=10, families=["resample"],
                          io_types=ALL_IO, device="cpu")  # fmt: skip
    assert report.ok and not report.skipped and len(report.passed) == 60, report.details()
    features = set().union(*(r.case.features for r in report.passed))
    assert {"fwd", "bwd", "MAXPOOL", "AVGPOOL_EXCLUDE_PADDING", "AVGPOOL_INCLUDE_PADDING",
            "NEG_INF_PAD", "ZERO_PAD", "spatial=1", "spatial=2", "spatial=3", "index=INT8",
            "index=INT32", "channels_last"} <= features  # fmt: skip
    assert {r.case.io_data_type for r in report.passed} == set(ALL_IO)


def test_layer_norm_normalizes_over_its_normalized_dim_count_on_torch() -> None:
    """hipDNN's CPU reference normalizes over the node's last ``normalized_dim_count`` dims; the
    torch lowering took every dim after the first beside a SCALE of lower rank (fixed)."""
    pytest.importorskip("torch")
    f = hg.DataType.FLOAT
    g = hg.Graph(name="ln", io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    x = g.tensor(name="X", dim=[2, 3, 5])
    scale, bias = g.tensor(name="SCALE", dim=[5]), g.tensor(name="BIAS", dim=[5])
    eps = hg.TensorAttributes().set_value(1e-5)
    y, _, _ = g.layernorm(x, scale, bias, forward_phase=hg.NormFwdPhase.INFERENCE, epsilon=eps,
                          normalized_dim_count=1)  # fmt: skip
    y.set_output(True)
    g.validate()
    case = GraphCase(0, 0, "layernorm", frozenset(), f, g, family="layernorm")
    report = check_engine("TORCH_EAGER_ENGINE", cases=[case], device="cpu")
    assert len(report.passed) == 1, report.details()
