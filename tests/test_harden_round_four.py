"""Issue 41 items 1-12: bad input gets a clear ``HipdnnError`` at ``validate()`` (or before any
allocation), never a hang, a foreign exception or NaN outputs computed from nonsense."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
        f"PointwiseNode: {member} must be a finite number that fits in float32, got {shown}",
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
        f"PointwiseNode: {member} must be a finite number that fits in float32, got inf",
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


# ----- item 1: a window far larger than the input, balanced by padding -------------------------


def _huge_window(mode: hg.ResampleMode) -> tuple[hg.Graph, hg.TensorAttributes]:
    g = _graph()
    x = g.tensor(name="x", dim=[1, 1, 4, 4])
    y, index = g.resample(
        x,
        resample_mode=mode,
        padding_mode=hg.PaddingMode.ZERO_PAD,
        window=[10**5, 10**5],
        stride=[1, 1],
        pre_padding=[0, 0],
        post_padding=[10**5, 10**5],
        generate_index=mode == hg.ResampleMode.MAXPOOL,
    )
    for t in (y, index):
        if t is not None:
            t.set_output(True)
    return g, y


def test_huge_window_maxpool_runs_on_the_numpy_reference_at_once() -> None:
    """The issue's case: the reference looped over 10^10 offsets and never returned."""
    g, y = _huge_window(hg.ResampleMode.MAXPOOL)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    assert y.get_dim() == [1, 1, 5, 5]
    xs = np.arange(1.0, 17.0, dtype=np.float32).reshape(1, 1, 4, 4)[:, :, ::-1, ::-1].copy()
    out = g.run({g.graph_inputs()[0]: xs})
    want = np.zeros((5, 5), np.float32)
    want[:4, :4] = xs[0, 0]  # window (h, w) holds x[h:, w:], whose largest is x[h, w]
    got = out[y][0, 0]
    np.testing.assert_array_equal(got, want)
    (index,) = (t for t in out if t is not y)
    want_index = np.full((5, 5), -1)
    want_index[:4, :4] = np.arange(16).reshape(4, 4)
    np.testing.assert_array_equal(out[index][0, 0], want_index)


def test_huge_window_average_runs_on_the_numpy_reference_at_once() -> None:
    g, y = _huge_window(hg.ResampleMode.AVGPOOL_INCLUDE_PADDING)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    xs = np.ones((1, 1, 4, 4), np.float32)
    got = g.run({g.graph_inputs()[0]: xs})[y][0, 0]
    rows = np.array([4, 3, 2, 1, 0], np.float64)
    np.testing.assert_allclose(got, np.outer(rows, rows) / 1e10, rtol=1e-6)


def test_huge_window_is_refused_by_the_torch_lowering() -> None:
    """torch padded X to 40 GB; it now leaves the graph to the reference."""
    pytest.importorskip("torch")
    g, _ = _huge_window(hg.ResampleMode.MAXPOOL)
    g.build()
    refusals = g.get_engine_refusals()
    assert (
        "a window of 10000000000 offsets over 16 input positions" in refusals["TORCH_EAGER_ENGINE"]
    )
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"


@pytest.mark.parametrize("mode", [hg.ResampleMode.MAXPOOL, hg.ResampleMode.AVGPOOL_EXCLUDE_PADDING])
@pytest.mark.parametrize("padding", [hg.PaddingMode.ZERO_PAD, hg.PaddingMode.NEG_INF_PAD])
def test_scanning_positions_matches_scanning_offsets(
    mode: hg.ResampleMode, padding: hg.PaddingMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both scans give the same Y, INDEX (ties and the padding's zero included) and DX."""
    from hipdnn_graph_numpy_reference.families import resample as reference

    rng = np.random.default_rng(7)
    d = hg.DataType.DOUBLE
    members = {"window": [5, 4], "stride": [1, 2], "pre_padding": [3, 1], "post_padding": [4, 3]}
    g = hg.Graph(io_data_type=d, compute_data_type=d, intermediate_data_type=d)
    x = g.tensor(name="x", dim=[2, 1, 3, 2])
    g.resample(x, resample_mode=mode, padding_mode=padding, generate_index=True, **members)
    g.validate()
    xs = rng.integers(-2, 3, size=(2, 1, 3, 2)).astype(float)  # ties and zeros
    runs = []
    for by_position in (False, True):
        monkeypatch.setattr(reference._Geometry, "by_position", by_position)
        fwd = reference.run_resample_fwd(g.nodes[0], {"X": xs})
        inputs = {"DY": np.random.default_rng(8).normal(size=fwd["Y"].shape)}
        inputs.update({"INDEX": fwd["INDEX"]} if "INDEX" in fwd else {})
        gb = hg.Graph(io_data_type=d, compute_data_type=d, intermediate_data_type=d)
        dy = gb.tensor(name="dy", dim=list(fwd["Y"].shape))
        index = None
        if "INDEX" in fwd:
            index = gb.tensor(name="i", dim=list(fwd["Y"].shape), data_type=hg.DataType.INT32)
        gb.resample_bwd(dy, index=index, resample_mode=mode, padding_mode=padding, **members)
        gb.validate()
        runs.append((fwd, reference.run_resample_bwd(gb.nodes[0], inputs)["DX"]))
    (fwd0, dx0), (fwd1, dx1) = runs
    assert fwd0.keys() == fwd1.keys()
    for key in fwd0:
        np.testing.assert_array_equal(fwd0[key], fwd1[key])
    np.testing.assert_allclose(dx0, dx1, rtol=1e-12)


# ----- items 9, 10: resample geometry checked at validate() ------------------------------------


def _pool_bwd(**members: list[int]) -> hg.Graph:
    g = _graph()
    dy = g.tensor(name="dy", dim=[1, 1, 2, 2])
    dx = g.resample_bwd(
        dy,
        resample_mode=hg.ResampleMode.AVGPOOL_INCLUDE_PADDING,
        padding_mode=hg.PaddingMode.ZERO_PAD,
        **{"window": [2, 2], "stride": [2, 2], "pre_padding": [0, 0], "post_padding": [0, 0]}
        | members,
    )
    dx.set_dim([1, 1, 4, 4]).set_stride([16, 16, 4, 1]).set_output(True)
    return g


@pytest.mark.parametrize(
    ("members", "counts"),
    [
        ({"window": [2]}, "2, 2, 2 and 1"),
        ({"stride": [2, 2, 2]}, "2, 2, 3 and 2"),
        ({"pre_padding": [0, 0, 0]}, "3, 2, 2 and 2"),
    ],
)
def test_resample_backward_members_of_different_lengths_are_refused(
    members: dict[str, list[int]], counts: str
) -> None:
    """Item 10: they validated and ``testing.make_inputs`` raised ``ValueError``."""
    _expect(
        _pool_bwd(**members),
        INVALID,
        "ResampleBwdNode: pre_padding, post_padding, stride and window must each hold one value "
        f"per spatial dimension (2), got {counts} values",
    )


def test_resample_backward_zero_window_is_refused() -> None:
    _expect(
        _pool_bwd(window=[2, 0]),
        INVALID,
        "ResampleBwdNode: stride and window must be positive, got stride [2, 2], window [2, 0]",
    )


def test_resample_forward_y_of_another_batch_is_refused() -> None:
    """Item 9: explicit Y dims the engines cannot pair with X failed inside them."""
    g = _graph()
    x = g.tensor(name="x", dim=[1, 1, 4, 4])
    y, _ = g.resample(
        x,
        resample_mode=hg.ResampleMode.MAXPOOL,
        padding_mode=hg.PaddingMode.NEG_INF_PAD,
        window=[2, 2],
        stride=[2, 2],
        pre_padding=[0, 0],
        post_padding=[0, 0],
    )
    y.set_dim([2, 1, 2, 2]).set_stride([4, 4, 2, 1]).set_output(True)
    _expect(
        g,
        INVALID,
        "ResampleFwdNode: Y dims [2, 1, 2, 2] and X dims [1, 1, 4, 4] must share their rank, N "
        "and C",
    )


def test_resample_backward_index_of_other_dims_is_refused() -> None:
    g = _graph()
    dy = g.tensor(name="dy", dim=[1, 1, 2, 2])
    index = g.tensor(name="i", dim=[1, 1, 3, 3], data_type=hg.DataType.INT32)
    dx = g.resample_bwd(
        dy,
        index=index,
        resample_mode=hg.ResampleMode.MAXPOOL,
        padding_mode=hg.PaddingMode.NEG_INF_PAD,
        window=[2, 2],
        stride=[2, 2],
        pre_padding=[0, 0],
        post_padding=[0, 0],
    )
    dx.set_output(True)
    _expect(
        g,
        INVALID,
        "ResampleBwdNode: Index dims [1, 1, 3, 3] must equal DY dims [1, 1, 2, 2]",
    )


# ----- item 2: the allocation bound ------------------------------------------------------------


def _matmul(m: int, n: int) -> hg.Graph:
    g = _graph()
    c = g.matmul(g.tensor(name="a", dim=[1, m, 1]), g.tensor(name="b", dim=[1, 1, n]))
    c.set_output(True)
    return g


def test_a_matmul_output_of_4_tib_is_refused_before_any_engine_builds() -> None:
    g = _matmul(2**20, 2**20)
    with pytest.raises(hg.HipdnnError) as info:
        g.build()
    assert info.value.code == INVALID
    assert info.value.message == (
        "Running graph '<unnamed>' may allocate 4.0 TiB (4398054899712 bytes; the largest part "
        "is tensor 'Matmul_0::C' [1, 1048576, 1048576], 4.0 TiB), more than the limit of "
        "64.0 GiB; set HIPDNN_GRAPH_MAX_ALLOCATION (bytes, or e.g. 256GiB) to raise it"
    )


def test_make_inputs_checks_the_bound_before_allocating() -> None:
    from hipdnn_graph.testing import make_inputs

    g = _matmul(2**20, 2**20)
    g.validate()
    with pytest.raises(hg.HipdnnError) as info:
        make_inputs(g, np.random.default_rng(0))
    assert info.value.code == INVALID
    assert info.value.message.startswith("Making inputs for graph '<unnamed>' may allocate 4.0 TiB")


def test_a_conv_padding_of_2_pow_31_is_refused_for_its_padded_input() -> None:
    """The issue's conv: 64 bytes of input, padding and stride 2^31: small tensors, a padded
    copy of X far beyond the limit."""
    g = _graph()
    x, w = g.tensor(name="x", dim=[1, 1, 2, 2]), g.tensor(name="w", dim=[1, 1, 1, 1])
    big = [2**31, 2**31]
    g.conv_fprop(x, w, pre_padding=big, post_padding=big, stride=big, dilation=[1, 1]).set_output(
        True
    )
    with pytest.raises(hg.HipdnnError) as info:
        g.build()
    assert info.value.code == INVALID
    assert "the largest part is the padded X of 'ConvolutionFprop_0'" in info.value.message


def test_a_broadcast_into_a_reduction_is_bounded_by_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """512 KiB of input broadcast to 16 GiB: refused under a lower limit, built under the
    default (64 GiB) without allocating anything."""
    g = _graph()
    a = g.tensor(name="a", dim=[2**17, 1])
    b = g.tensor(name="b", dim=[1, 2**15])
    s = g.pointwise(a, b, mode=hg.PointwiseMode.ADD)
    s.set_dim([2**17, 2**15]).set_stride([2**15, 1])
    r = g.reduction(s, mode=hg.ReductionMode.ADD)
    r.set_dim([2**17, 1]).set_stride([1, 1]).set_output(True)
    monkeypatch.setenv("HIPDNN_GRAPH_MAX_ALLOCATION", "8GiB")
    with pytest.raises(hg.HipdnnError) as info:
        g.build()
    assert info.value.code == INVALID
    assert "more than the limit of 8.0 GiB" in info.value.message
    monkeypatch.setenv("HIPDNN_GRAPH_MAX_ALLOCATION", "17179869184 ")
    with pytest.raises(hg.HipdnnError):
        g.build()  # 16 GiB of sum plus the inputs and output
    monkeypatch.delenv("HIPDNN_GRAPH_MAX_ALLOCATION")
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()


@pytest.mark.parametrize("text", ["lots", "-1", "1.5GiB", "12 GB", "GiB"])
def test_a_limit_that_is_not_a_size_is_refused(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIPDNN_GRAPH_MAX_ALLOCATION", text)
    with pytest.raises(hg.HipdnnError) as info:
        _matmul(2, 2).build()
    assert (info.value.code, info.value.message) == (
        INVALID,
        f"HIPDNN_GRAPH_MAX_ALLOCATION={text!r}: expected a number of bytes, optionally followed "
        "by KiB, MiB, GiB or TiB",
    )


def test_tensor_bytes_counts_what_strides_span() -> None:
    from hipdnn_graph.backend.allocation import graph_allocation_bytes, tensor_bytes

    t = hg.TensorAttributes(dim=[2, 3], stride=[1000, 1], data_type=hg.DataType.DOUBLE)
    assert tensor_bytes(t) == (1 + 1000 + 2) * 8
    g = _matmul(4, 2)
    g.validate()
    assert graph_allocation_bytes(g) == (4 + 2 + 8) * 4


# ----- item 11: FP8 outputs of non-packed strides ---------------------------------------------


@pytest.mark.parametrize(
    "data_type",
    [hg.DataType.FP8_E5M2, hg.DataType.FP8_E4M3, hg.DataType.BFLOAT16, hg.DataType.FP4_E2M1],
    ids=lambda t: t.name,
)
def test_strided_buffers_keep_their_ml_dtypes_type(data_type: hg.DataType) -> None:
    """``as_strided`` turned FP8_E5M2 into ``'<f1'`` (a bare ``TypeError``)."""
    from hipdnn_graph.backend.dtypes import numpy_dtype, numpy_empty_strided

    a = numpy_empty_strided([2, 3], [1, 2], data_type)
    assert (a.dtype, a.shape, a.flags.writeable) == (numpy_dtype(data_type), (2, 3), True)
    assert a.strides == (a.itemsize, 2 * a.itemsize)
    b = numpy_empty_strided([2, 3], [-3, 1], data_type)
    b[...] = 1.0
    assert b.dtype == numpy_dtype(data_type) and b.strides[0] < 0


def test_batchnorm_backward_with_an_fp8_dscale_runs() -> None:
    """The issue's case: ``Graph.run()`` raised a bare ``TypeError``."""
    from hipdnn_graph.testing import make_inputs

    g = _graph()
    dy, x = g.tensor(name="dy", dim=[4, 3, 2, 2]), g.tensor(name="x", dim=[4, 3, 2, 2])
    s, m, v = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("s", "m", "v"))
    dx, dscale, dbias = g.batchnorm_backward(dy, x, s, mean=m, inv_variance=v)
    for t in (dx, dscale, dbias):
        t.set_output(True)
    dscale.set_data_type(hg.DataType.FP8_E5M2)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    out = g.run(make_inputs(g, np.random.default_rng(0)))
    assert str(out[dscale].dtype) == "float8_e5m2"
    assert np.isfinite(out[dscale].astype(np.float32)).all()


# ----- item 12: trailing bytes after a blob's tables -------------------------------------------


@pytest.mark.parametrize("tail", [b"\0" * 8, bytes(range(8)), b"\xff" * 13])
def test_trailing_bytes_load_as_hipdnn_loads_them_and_are_not_written_back(tail: bytes) -> None:
    """hipDNN verifies a blob with flatbuffers' Verifier over the whole buffer, which accepts
    bytes past the tables it references; serialization.md now says they are not written back."""
    g = _layernorm(1e-5)
    g.build_operation_graph()
    blob = g.serialize()
    loaded = hg.Graph.deserialize(blob + tail)
    assert loaded.serialize() == blob
    assert loaded.to_json() == g.to_json()


def test_serialization_page_states_what_happens_to_trailing_bytes() -> None:
    page = (Path(__file__).parents[1] / "docs" / "serialization.md").read_text()
    assert "whatever loads writes back byte for byte" not in page
    assert "`serialize()` of a blob with 8 bytes appended gives the\nblob without them" in page


# ----- item 9: a constant fed as a data input ---------------------------------------------------


def test_a_constant_fed_to_a_convolution_input_is_refused() -> None:
    """It validated, then failed inside the engines (``AttributeError``: a float has no
    ``is_cuda``)."""
    g = _graph()
    x = g.tensor(name="x").set_value(1.0)
    x.set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1])
    w = g.tensor(name="w", dim=[1, 1, 1, 1])
    g.conv_fprop(x, w, pre_padding=[0, 0], post_padding=[0, 0], stride=[1, 1], dilation=[1, 1])
    g.nodes[0].outputs()[0].set_output(True)
    _expect(
        g,
        INVALID,
        "ConvolutionFpropNode: X tensor x holds a constant value, but X reads a tensor in memory "
        "(the slots that take scalars: none)",
    )


def test_a_constant_fed_to_a_norm_scale_is_refused_and_epsilon_still_takes_one() -> None:
    g = _rmsnorm(1e-5)
    a = g.nodes[0].attributes
    assert isinstance(a, hg.RMSNormAttributes)
    scale = a.get_scale()
    assert scale is not None
    scale.set_value(2.0)
    scale.set_dim([1, 3, 4]).set_stride([12, 4, 1])
    _expect(
        g,
        INVALID,
        "RMSNormNode: SCALE tensor s holds a constant value, but SCALE reads a tensor in memory "
        "(the slots that take scalars: EPSILON)",
    )


def test_pointwise_of_constants_alone_is_refused() -> None:
    """torch's engine raised ``TypeError`` (``exp()`` of a float)."""
    g = _graph()
    y = g.pointwise(g.tensor(name="c").set_value(2.0), mode=hg.PointwiseMode.EXP)
    y.set_output(True)
    _expect(
        g,
        INVALID,
        "PointwiseNode: every input holds a constant value; at least one must be a tensor in "
        "memory",
    )


def test_a_pointwise_constant_beside_a_tensor_still_runs() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3])
    y = g.pointwise(x, g.tensor(name="c").set_value(2.0), mode=hg.PointwiseMode.MUL)
    y.set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(g.run({x: xs})[y], xs * 2)


# ----- item 4: an attention scale that overflows every score -----------------------------------


def _sdpa(scale: float, head_dim: int = 8) -> hg.Graph:
    g = _graph()
    q = g.tensor(name="Q", dim=[1, 1, 4, head_dim])
    o, _ = g.sdpa(
        q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False, attn_scale=scale
    )
    o.set_output(True)
    return g


def test_an_attention_scale_that_overflows_unit_scores_is_refused() -> None:
    """``attn_scale_value=3e38`` validated and gave all-NaN outputs, whatever the data."""
    g = _sdpa(3e38)
    a = g.nodes[0].attributes
    assert isinstance(a, hg.SdpaAttributes)
    stored = a.attn_scale_value
    _expect(
        g,
        INVALID,
        f"SdpaFwdNode: attn_scale_value {stored} overflows float32 scores for Q and K of "
        "magnitude 1 (head dim 8): abs(scale) x head dim must be at most 3.4028234663852886e+38",
    )


def test_the_largest_scale_that_keeps_unit_scores_finite_runs() -> None:
    g = _sdpa(4e37)  # x 8 = 3.2e38, below float32's largest
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ones = np.full((1, 1, 4, 8), 1.0, np.float32)
    (out,) = g.run(dict.fromkeys(g.graph_inputs(), ones)).values()
    np.testing.assert_array_equal(out, ones)


def test_huge_window_blob_runs_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 1 from a serialized blob through ``hipdnn-graph run``: it never returned."""
    from hipdnn_graph.cli import main

    g, _ = _huge_window(hg.ResampleMode.MAXPOOL)
    g.build_operation_graph()
    path = tmp_path / "pool.hdg"
    path.write_bytes(g.serialize())
    assert main(["run", str(path), "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "engine NUMPY_REFERENCE_ENGINE" in out
    assert "non_finite" not in out


def test_a_graph_above_the_bound_is_refused_by_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hipdnn_graph.cli import main

    g = _matmul(2**20, 2**20)
    g.build_operation_graph()
    path = tmp_path / "big.json"
    path.write_text(g.to_json())
    assert main(["run", str(path)]) != 0
    err = capsys.readouterr().err
    assert "may allocate 4.0 TiB" in err and "HIPDNN_GRAPH_MAX_ALLOCATION" in err


def test_a_runtime_scalar_fed_to_a_matmul_input_is_refused() -> None:
    """A one-element pass-by-value tensor is bound as a Python number: as matmul's A it failed
    inside the engines (``ValueError`` on NumPy, ``AttributeError`` on torch)."""
    g = _graph()
    a = g.tensor(name="a", dim=[1, 1, 1], is_pass_by_value=True)
    g.matmul(a, g.tensor(name="b", dim=[1, 1, 3])).set_output(True)
    _expect(
        g,
        INVALID,
        "MatmulNode: A tensor a is a pass-by-value scalar, but A reads a tensor in memory (the "
        "slots that take scalars: none)",
    )
