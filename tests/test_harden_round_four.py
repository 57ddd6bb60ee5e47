"""Issue 41 items 1-12: bad input gets a clear ``HipdnnError`` at ``validate()`` (or before any
allocation), never a hang, a foreign exception or NaN outputs computed from nonsense."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import hipdnn_graph as hg

INVALID = hg.ErrorCode.INVALID_VALUE
F = hg.DataType.FLOAT


def _graph() -> hg.Graph:
    return hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)


def _expect(g: hg.Graph, code: hg.ErrorCode, message: str) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert (info.value.code, info.value.message) == (code, message)
    assert not g.is_validated


# ----- item 3: custom_op's output count is capped as the wire caps tensors --------------------


def test_custom_op_output_count_above_the_wire_cap_is_refused_before_any_tensor() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[2])
    with pytest.raises(hg.HipdnnError) as info:
        g.custom_op([x], 10**7, custom_op_id="op")
    assert info.value.code == INVALID
    assert info.value.message == (
        "custom_op() takes at most 65536 outputs (the most tensors a graph holds on the wire), "
        "got 10000000"
    )
    assert g.nodes == []


def test_custom_op_output_count_at_the_wire_cap_is_accepted() -> None:
    g = _graph()
    outputs = g.custom_op([g.tensor(name="x", dim=[2])], 65_536, custom_op_id="op")
    assert len(outputs) == 65_536


# ----- item 4: epsilon constants are finite, non-negative float32 numbers ---------------------


def _layernorm(epsilon: float) -> hg.Graph:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3, 4])
    s, b = g.tensor(name="s", dim=[1, 3, 4]), g.tensor(name="b", dim=[1, 3, 4])
    eps = g.tensor(name="eps", dim=[1]).set_value(epsilon)
    y, _, _ = g.layernorm(x, s, b, epsilon=eps, forward_phase=hg.NormFwdPhase.INFERENCE)
    y.set_output(True)
    return g


def _rmsnorm(epsilon: float) -> hg.Graph:
    g = _graph()
    x, s = g.tensor(name="x", dim=[2, 3, 4]), g.tensor(name="s", dim=[1, 3, 4])
    eps = g.tensor(name="eps", dim=[1]).set_value(epsilon)
    y, _ = g.rmsnorm(x, s, epsilon=eps, forward_phase=hg.NormFwdPhase.INFERENCE)
    y.set_output(True)
    return g


def _batchnorm(epsilon: float, momentum: bool = False) -> hg.Graph:
    g = _graph()
    x = g.tensor(name="x", dim=[4, 3, 2, 2])
    s, b = g.tensor(name="s", dim=[1, 3, 1, 1]), g.tensor(name="b", dim=[1, 3, 1, 1])
    eps = g.tensor(name="eps", dim=[1]).set_value(epsilon)
    running = {}
    if momentum:
        running = {
            "prev_running_mean": g.tensor(name="rm", dim=[1, 3, 1, 1]),
            "prev_running_variance": g.tensor(name="rv", dim=[1, 3, 1, 1]),
            "momentum": g.tensor(name="m", dim=[1]).set_value(0.1),
        }
    for t in g.batchnorm(x, s, b, epsilon=eps, **running):
        if t is not None:
            t.set_output(True)
    return g


def _bn_inference_variance(epsilon: float) -> hg.Graph:
    g = _graph()
    x = g.tensor(name="x", dim=[4, 3, 2, 2])
    m, v, s, b = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("m", "v", "s", "b"))
    eps = g.tensor(name="eps", dim=[1]).set_value(epsilon)
    y = g.batchnorm_inference_variance_ext(x, m, v, s, b, eps)
    y.set_output(True)
    return g


_NORMS = {
    "BatchnormInferenceNodeVarianceExt": _bn_inference_variance,
    "BatchnormNode": _batchnorm,
    "LayerNormNode": _layernorm,
    "RMSNormNode": _rmsnorm,
}


@pytest.mark.parametrize("label", sorted(_NORMS))
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (-0.5, "-0.5"),
        (np.float64(1e39), "1e+39"),
    ],
)
def test_epsilon_constants_outside_finite_non_negative_float32_are_refused(
    label: str, value: float, shown: str
) -> None:
    """Each gave NaN or infinite outputs (a DOUBLE constant may hold 1e39; FLOAT cannot)."""
    _expect(
        _NORMS[label](value),
        INVALID,
        f"{label}: epsilon eps must be a finite, non-negative float32 number, got {shown}",
    )


@pytest.mark.parametrize("label", sorted(_NORMS))
@pytest.mark.parametrize("value", [0.0, 1e-5, 3.0e38])
def test_finite_non_negative_epsilons_pass(label: str, value: float) -> None:
    _NORMS[label](value).validate()


# ----- item 7: layernorm's normalized_dim_count is between 1 and X's rank (0: inferred) -------


def _layernorm_count(count: int, scale: list[int] | None = None) -> hg.Graph:
    g = _layernorm(1e-5)
    a = g.nodes[0].attributes
    assert isinstance(a, hg.LayernormAttributes)
    a.set_normalized_dim_count(count)
    if scale is not None:
        for t in (a.get_scale(), a.get_bias()):
            assert t is not None
            t.set_dim(scale).set_stride(hg.generate_strides(scale))
    return g


@pytest.mark.parametrize("count", [-1, 4, 5, 2**62])
def test_layernorm_normalized_dim_count_outside_the_rank_is_refused(count: int) -> None:
    _expect(
        _layernorm_count(count),
        INVALID,
        f"LayerNormNode: normalized_dim_count {count} must be in [1, 3] (X's rank), or 0 to "
        "infer it",
    )


def test_layernorm_count_inferred_from_a_scale_of_higher_rank_is_refused() -> None:
    _expect(
        _layernorm_count(0, [1, 1, 3, 4]),
        INVALID,
        "LayerNormNode: the normalized dim count 4 inferred from SCALE dims [1, 1, 3, 4] must "
        "be in [1, 3] (X's rank)",
    )


@pytest.mark.parametrize("count", [0, 1, 2, 3])
def test_layernorm_counts_in_range_pass(count: int) -> None:
    _layernorm_count(count).validate()


def test_layernorm_backward_count_outside_the_rank_is_refused() -> None:
    g = _graph()
    dy, x = g.tensor(name="dy", dim=[2, 3, 4]), g.tensor(name="x", dim=[2, 3, 4])
    s = g.tensor(name="s", dim=[1, 3, 4])
    m, v = g.tensor(name="m", dim=[2, 1, 1]), g.tensor(name="v", dim=[2, 1, 1])
    outs = g.layernorm_backward(dy, x, s, mean=m, inv_variance=v)
    for t in outs:
        t.set_output(True)
    g.validate()
    a = g.nodes[0].attributes
    assert isinstance(a, hg.LayernormBackwardAttributes)
    a.set_normalized_dim_count(7)
    _expect(
        g,
        INVALID,
        "LayernormBackwardNode: normalized_dim_count 7 must be in [1, 3] (X's rank), or 0 to "
        "infer it",
    )


# ----- item 9: batchnorm running statistics without a momentum ---------------------------------


def test_batchnorm_running_statistics_without_momentum_are_refused() -> None:
    g = _batchnorm(1e-5, momentum=True)
    g.validate()
    a = g.nodes[0].attributes
    assert isinstance(a, hg.BatchnormAttributes)
    a.set_momentum(None)
    _expect(
        g,
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "BatchnormNode: the running statistics need a momentum tensor (momentum_tensor_uid); "
        "none is set",
    )


def test_batchnorm_json_with_a_null_momentum_uid_is_refused_at_validate() -> None:
    """The issue's case: the JSON loaded, validated and failed in the engine (KeyError)."""
    g = _batchnorm(1e-5, momentum=True)
    g.build_operation_graph()
    doc = json.loads(g.to_json())
    (node,) = doc["nodes"]
    node_fields = node.get("attributes", node)
    assert "momentum_tensor_uid" in json.dumps(node_fields)
    text = json.dumps(doc).replace(
        f'"momentum_tensor_uid": {g.nodes[0].attributes.get_momentum().get_uid()}',
        '"momentum_tensor_uid": null',
    )
    assert text != json.dumps(doc)
    g2 = hg.Graph.from_json(text)
    with pytest.raises(hg.HipdnnError) as info:
        g2.validate()
    assert info.value.code == hg.ErrorCode.ATTRIBUTE_NOT_SET


# ----- items 5, 6: float members finite in binary32 (every family's, from its NodeSpec) --------


def _relu(**members: float) -> hg.Graph:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3])
    y = g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, **members)
    y.set_output(True)
    return g


@pytest.mark.parametrize("member", ["relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope"])
@pytest.mark.parametrize(
    ("value", "shown"), [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")]
)
def test_relu_clips_that_are_nan_or_infinite_are_refused(
    member: str, value: float, shown: str
) -> None:
    """Item 5: the engines disagreed (input or NaN against NaN or inf); such clips are refused."""
    _expect(
        _relu(**{member: value}),
        INVALID,
        f"PointwiseNode: {member} must be a finite number that fits in float32 (the wire stores "
        f"binary32), got {shown}",
    )


@pytest.mark.parametrize("member", ["swish_beta", "elu_alpha", "softplus_beta"])
def test_float_members_beyond_binary32_are_refused(member: str) -> None:
    """Item 6: 1e39 was stored as inf and validated."""
    mode = {"swish_beta": "SWISH_FWD", "elu_alpha": "ELU_FWD", "softplus_beta": "SOFTPLUS_FWD"}
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3])
    g.pointwise(x, mode=hg.PointwiseMode[mode[member]], **{member: 1e39}).set_output(True)
    _expect(
        g,
        INVALID,
        f"PointwiseNode: {member} must be a finite number that fits in float32 (the wire stores "
        "binary32), got inf",
    )


def test_every_float32_member_of_every_family_is_checked() -> None:
    """The list is derived from the node specs (one place): each ``Kind.F32_OPT`` scalar."""
    from hipdnn_graph.descriptors.node_spec import Kind, node_specs

    for spec in node_specs().values():
        floats = tuple(s.name for s in spec.scalars if s.kind is Kind.F32_OPT)
        assert spec.float32_members == floats
    assert hg.PointwiseNode.spec.float32_members == (
        "relu_lower_clip",
        "relu_upper_clip",
        "relu_lower_clip_slope",
        "swish_beta",
        "elu_alpha",
        "softplus_beta",
    )


def _run_on(g: hg.Graph, engine: str, x: np.ndarray) -> np.ndarray:
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    (out,) = g.run({g.graph_inputs()[0]: x}).values()
    return np.asarray(out)


@pytest.mark.parametrize(
    ("lower", "upper", "expected"),
    [
        (-3.4e38, 3.4e38, [[-2.0, 0.5, 3.0e38], [-3.4e38, 0.0, 7.0]]),
        (1.0, 2.0, [[1.0, 1.0, 2.0], [1.0, 1.0, 2.0]]),
        (3.0e38, 3.4e38, [[3.0e38, 3.0e38, 3.0e38], [3.0e38, 3.0e38, 3.0e38]]),
    ],
)
def test_relu_clips_at_the_float32_extremes_agree_on_numpy_and_torch(
    lower: float, upper: float, expected: list[list[float]]
) -> None:
    """Item 5's one answer: ``min(max(x, lower), upper)`` in float32, on every CPU engine."""
    pytest.importorskip("torch")
    x = np.array([[-2.0, 0.5, 3.0e38], [-3.4e38, 0.0, 7.0]], np.float32)
    want = np.array(expected, np.float32)
    for engine in ("NUMPY_REFERENCE_ENGINE", "TORCH_EAGER_ENGINE"):
        got = _run_on(_relu(relu_lower_clip=lower, relu_upper_clip=upper), engine, x)
        np.testing.assert_array_equal(got, want, err_msg=engine)


# ----- item 8: GEN_INDEX's axis is one of OUT_0's dims -----------------------------------------


def _gen_index(axis: int | None) -> hg.Graph:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3, 4])
    members = {} if axis is None else {"axis": axis}
    y = g.pointwise(x, mode=hg.PointwiseMode.GEN_INDEX, **members)
    y.set_output(True)
    return g


@pytest.mark.parametrize("axis", [-1, 3, 5, 2**62, 2**63 - 1, 2**63])
def test_gen_index_axis_outside_the_output_rank_is_refused(axis: int) -> None:
    """``axis=2**63`` validated, then ``serialize()`` raised ``struct.error``; ``axis=5`` on
    rank 3 failed inside the torch engine with ``IndexError``."""
    _expect(
        _gen_index(axis),
        INVALID,
        f"PointwiseNode: GEN_INDEX axis {axis} must be in [0, 3) (OUT_0's rank)",
    )


def test_gen_index_without_an_axis_is_refused() -> None:
    _expect(
        _gen_index(None), hg.ErrorCode.ATTRIBUTE_NOT_SET, "PointwiseNode: GEN_INDEX needs an axis"
    )


def test_gen_index_in_range_runs_on_numpy_and_torch() -> None:
    pytest.importorskip("torch")
    x = np.zeros((2, 3, 4), np.float32)
    for engine in ("NUMPY_REFERENCE_ENGINE", "TORCH_EAGER_ENGINE"):
        got = _run_on(_gen_index(2), engine, x)
        np.testing.assert_array_equal(got, np.broadcast_to(np.arange(4.0), (2, 3, 4)))
