"""Override shapes (hipDNN's RFC 0008): ``set_override_shape_enabled`` and ``execute`` with
override uids, shapes and strides.

One graph built at its largest shape runs smaller shapes: the results equal those of a graph
built at the smaller shape (NumPy reference, several families and SDPA; the torch math and
eager engines on the CPU). Wrong overrides get hipDNN's code and message; engines whose plans
serve one shape refuse the graph when plans are ranked, naming override shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import Support
from hipdnn_graph.graph import overrides as ov
from hipdnn_graph.graph.overrides import OverrideEntry

REFERENCE = "NUMPY_REFERENCE_ENGINE"
F = hg.DataType.FLOAT

Builder = Callable[[hg.Graph, dict[str, int]], None]


def _graph(flag: bool) -> hg.Graph:
    g = hg.Graph(io_data_type=F, intermediate_data_type=F, compute_data_type=F, name="g")
    return g.set_override_shape_enabled(True) if flag else g


def _pointwise(g: hg.Graph, n: dict[str, int]) -> None:
    x = g.tensor(name="x", dim=[n["b"], 6])
    bias = g.tensor(name="bias", dim=[1, 6])
    g.pointwise(x, bias, mode=hg.PointwiseMode.ADD, name="add").set_output(True)


def _matmul(g: hg.Graph, n: dict[str, int]) -> None:
    a = g.tensor(name="a", dim=[n["b"], n["s"], 8])
    w = g.tensor(name="w", dim=[1, 8, 5])
    g.matmul(a, w, name="mm").set_output(True)


def _layernorm(g: hg.Graph, n: dict[str, int]) -> None:
    x = g.tensor(name="x", dim=[n["b"], n["s"], 8])
    scale, bias = g.tensor(name="s", dim=[1, 1, 8]), g.tensor(name="bias", dim=[1, 1, 8])
    outs = g.layernorm(x, scale, bias, forward_phase=hg.NormFwdPhase.TRAINING, epsilon=1e-5)
    for t in outs:
        assert t is not None
        t.set_output(True)


def _reduction(g: hg.Graph, n: dict[str, int]) -> None:
    x = g.tensor(name="x", dim=[n["b"], 6])
    y = g.tensor(name="y", dim=[1, 6])
    g.reduction(x, y, mode=hg.ReductionMode.ADD, name="sum").set_output(True)


def _conv(g: hg.Graph, n: dict[str, int]) -> None:
    x = g.tensor(name="x", dim=[n["b"], 3, n["s"], n["s"]])
    w = g.tensor(name="w", dim=[4, 3, 3, 3])
    y = g.conv_fprop(x, w, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                     dilation=[1, 1], name="conv")  # fmt: skip
    y.set_output(True)


def _sdpa_forward(g: hg.Graph, n: dict[str, int]) -> None:
    q = g.tensor(name="Q", dim=[n["b"], 2, n["s"], 8])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True,
                      attn_scale=0.35)  # fmt: skip
    assert stats is not None
    o.set_output(True)
    stats.set_output(True)


def _sdpa_backward(g: hg.Graph, n: dict[str, int]) -> None:
    q = g.tensor(name="Q", dim=[n["b"], 2, n["s"], 8])
    k, v, o, do = (g.tensor_like(q, name) for name in ("K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[n["b"], 2, n["s"], 1])
    for t in g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True):
        t.set_output(True)


FAMILIES: dict[str, Builder] = {
    "pointwise": _pointwise,
    "matmul": _matmul,
    "layernorm": _layernorm,
    "reduction": _reduction,
    "conv_fprop": _conv,
    "sdpa_forward": _sdpa_forward,
    "sdpa_backward": _sdpa_backward,
}
BIG = {"b": 3, "s": 12}
SMALL = {"b": 2, "s": 7}


def _built(build: Builder, dims: dict[str, int], flag: bool, engine: str = REFERENCE) -> hg.Graph:
    g = _graph(flag)
    build(g, dims)
    g.set_preferred_engine_id_ext(engine)
    g.build()
    assert g.get_plan_name() == engine
    return g


def _arguments(small: hg.Graph) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """Every packed tensor's uid, dims and strides in ``small`` (declared like the big graph, so
    the uids are the same)."""
    real = [t for t in small.graph_tensors() if _in_pack(t)]
    return [t.uid for t in real], [t.dim for t in real], [t.stride for t in real]  # type: ignore[misc]


def _in_pack(t: hg.TensorAttributes) -> bool:
    """Real and not a constant: a tensor the variant pack holds."""
    return not t.is_virtual and (t.value is None or t.is_pass_by_value)


def _pack(small: hg.Graph, seed: int = 0) -> dict[int, Any]:
    rng = np.random.default_rng(seed)
    produced = {id(t) for node in small.nodes for t in node.outputs()}
    pack: dict[int, Any] = {}
    for t in small.graph_tensors():
        if not _in_pack(t):
            continue
        if id(t) in produced:
            pack[t.get_uid()] = np.full(t.dim, np.nan, np.float32)
        else:
            pack[t.get_uid()] = rng.standard_normal(t.dim).astype(np.float32)
    return pack


def _outputs(small: hg.Graph, pack: dict[int, Any]) -> dict[int, Any]:
    produced = {t.get_uid() for node in small.nodes for t in node.outputs() if not t.is_virtual}
    return {uid: pack[uid] for uid in produced}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_reference_at_override_shapes_equals_a_graph_built_at_them(family: str) -> None:
    build = FAMILIES[family]
    big = _built(build, BIG, True)
    small = _built(build, SMALL, False)
    uids, shapes, strides = _arguments(small)
    expected_pack = _pack(small)
    small.execute(expected_pack)
    got_pack = _pack(small)
    big.execute(got_pack, override_uids=uids, override_shapes=shapes, override_strides=strides)
    for uid, expected in _outputs(small, expected_pack).items():
        assert not np.isnan(expected).any()
        np.testing.assert_array_equal(got_pack[uid], expected, err_msg=f"uid {uid}")
    # the declared shapes still run, and the map form is the same call
    declared = _pack(_built(build, BIG, False))
    big.execute(declared)
    again = _pack(small)
    entries = {u: OverrideEntry(s, t) for u, s, t in zip(uids, shapes, strides, strict=True)}
    big.execute(again, overrides=entries)
    for uid, expected in _outputs(small, expected_pack).items():
        np.testing.assert_array_equal(again[uid], expected)


def test_a_shape_seen_before_reuses_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    big = _built(_sdpa_forward, BIG, True)
    small = _built(_sdpa_forward, SMALL, False)
    uids, shapes, strides = _arguments(small)
    calls: list[int] = []
    copy = ov.graph_at_shapes

    def counted(graph: hg.Graph, shapes: Any) -> hg.Graph:
        calls.append(1)
        return copy(graph, shapes)

    monkeypatch.setattr(ov, "graph_at_shapes", counted)
    blob = big.serialize()
    for _ in range(3):
        big.execute(_pack(small), override_uids=uids, override_shapes=shapes,
                    override_strides=strides)  # fmt: skip
    assert calls == [1]
    assert big.serialize() == blob  # the graph itself keeps its declared shapes
    # tensors as override keys name the same uids
    tensors = {t.get_uid(): t for t in big.graph_tensors()}
    big.execute(_pack(small), override_uids=[tensors[u] for u in uids],
                override_shapes=shapes, override_strides=strides)  # fmt: skip
    assert calls == [1]
    # the declared shapes as overrides: the plan itself, no copy
    declared = _built(_sdpa_forward, BIG, False)
    d_uids, d_shapes, d_strides = _arguments(declared)
    big.execute(_pack(declared), override_uids=d_uids, override_shapes=d_shapes,
                override_strides=d_strides)  # fmt: skip
    assert calls == [1]


def test_a_plan_keeps_a_bounded_number_of_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ov, "MAX_SHAPE_VARIANTS", 2)
    big = _built(_pointwise, {"b": 8}, True)
    for b in (1, 2, 3, 4):
        small = _built(_pointwise, {"b": b}, False)
        uids, shapes, strides = _arguments(small)
        big.execute(_pack(small), override_uids=uids, override_shapes=shapes,
                    override_strides=strides)  # fmt: skip
    assert [sig[1][0][0] for sig in big._state.active.variants] == [3, 4]  # type: ignore[union-attr]


def test_empty_overrides_run_the_declared_shapes() -> None:
    big = _built(_pointwise, BIG, False)  # no flag needed: nothing is overridden
    pack = _pack(big)
    big.execute(pack, override_uids=[], override_shapes=[], override_strides=[])
    assert not np.isnan(pack[3]).any()


# ----- hipDNN's rules and messages -----
def _relu(flag: bool = True) -> hg.Graph:
    """hipDNN's own test graph: X (uid 1) -> RELU -> Y (uid 2), dims [1, 3, 4, 4]."""
    g = _graph(flag)
    x = g.tensor(name="X", dim=[1, 3, 4, 4], uid=1)
    g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="relu").set_output(True).set_uid(2)
    return g.set_preferred_engine_id_ext(REFERENCE).build()


PACKED = [48, 16, 4, 1]
RULE = " (RFC 0008 §4.2.1 rule {})."
REJECTED = [
    ([1], [[1, 3, 4, 4]], [PACKED, PACKED],
     "Override arrays have inconsistent sizes: override_uids.size()=1, "
     "override_shapes.size()=1, override_strides.size()=2" + RULE.format(1)),
    ([1, 1], [[1, 3, 4, 4]] * 2, [PACKED] * 2, "Duplicate UID 1 in override_uids" + RULE.format(2)),
    ([999], [[1, 3, 4, 4]], [PACKED],
     "Override UID 999 does not identify any graph tensor" + RULE.format(3)),
    ([1], [[1, 3, 4]], [PACKED],
     "Override rank mismatch for UID 1: declared rank=4, override shape rank=3, override "
     "stride rank=4" + RULE.format(4)),
    ([1], [[1, 3, 0, 4]], [PACKED],
     "Override shape value for UID 1 axis 2 must be positive: 0" + RULE.format(5)),
    ([1], [[1, 3, 4, 4]], [[48, 16, 0, 1]],
     "Override stride value for UID 1 axis 2 must be positive: 0" + RULE.format(6)),
    ([1], [[1, 3, 5, 4]], [[60, 20, 4, 1]],
     "Override shape for UID 1 axis 2 exceeds declared max: override=5, declared=4"
     + RULE.format(7)),
    ([1], [[1, 3, 4, 4]], [[48, 1, 12, 3]],
     "Override stride permutation for UID 1 does not match declared stride order"
     + RULE.format(8)),
]  # fmt: skip


@pytest.mark.parametrize(("uids", "shapes", "strides", "message"), REJECTED)
def test_overrides_breaking_a_rule_get_hipdnns_message(
    uids: list[int], shapes: list[list[int]], strides: list[list[int]], message: str
) -> None:
    g = _relu()
    x = np.zeros((1, 3, 4, 4), np.float32)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({1: x, 2: x.copy()}, override_uids=uids, override_shapes=shapes,
                  override_strides=strides)  # fmt: skip
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == message


def test_overrides_on_a_graph_without_the_flag_are_refused() -> None:
    g = _relu(flag=False)
    x = np.zeros((1, 3, 4, 4), np.float32)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({1: x, 2: x.copy()}, override_uids=[1], override_shapes=[[1, 3, 4, 4]],
                  override_strides=[PACKED])  # fmt: skip
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == (
        "Graph::execute override overload called on a graph that did not call "
        "set_override_shape_enabled(true). The override flag must be set at build time before "
        "per-execute overrides are supplied."
    )


def test_clearing_the_flag_refuses_overrides_seen_before() -> None:
    g = _relu()
    x = np.zeros((1, 3, 2, 4), np.float32)
    args: dict[str, Any] = {"override_uids": [1, 2], "override_shapes": [[1, 3, 2, 4]] * 2,
                            "override_strides": [[24, 8, 4, 1]] * 2}  # fmt: skip
    g.execute({1: x, 2: x.copy()}, **args)
    g.set_override_shape_enabled(False)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({1: x, 2: x.copy()}, **args)
    assert err.value.message == ov.FLAG_MISSING_MESSAGE


def test_setting_the_flag_after_build_does_not_enable_the_built_plan() -> None:
    g = _relu(flag=False)
    g.set_override_shape_enabled(True)
    assert g.get_plan_name() == REFERENCE  # the built plan stays, as in hipDNN
    x = np.zeros((1, 3, 2, 4), np.float32)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({1: x, 2: x.copy()}, override_uids=[1, 2], override_shapes=[[1, 3, 2, 4]] * 2,
                  override_strides=[[24, 8, 4, 1]] * 2)  # fmt: skip
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == ov.PLAN_WITHOUT_FLAG_MESSAGE
    g.build_plans()  # built again, with the flag
    y = np.full((1, 3, 2, 4), np.nan, np.float32)
    g.execute({1: x, 2: y}, override_uids=[1, 2], override_shapes=[[1, 3, 2, 4]] * 2,
              override_strides=[[24, 8, 4, 1]] * 2)  # fmt: skip
    assert (y == 0).all()


def test_an_override_uid_missing_from_the_pack_is_named() -> None:
    g = _relu()
    x = np.zeros((1, 3, 4, 4), np.float32)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({1: x}, override_uids=[2], override_shapes=[[1, 3, 4, 4]],
                  override_strides=[PACKED])  # fmt: skip
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == "Override UID 2 is not present in the variant pack."


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"override_uids": "12", "override_shapes": [], "override_strides": []},
         "override_uids must be a list, got '12'"),
        ({"override_uids": [1.5], "override_shapes": [[1]], "override_strides": [[1]]},
         "An override uid must be an integer, got 1.5"),
        ({"override_uids": [1], "override_shapes": [[1, "3"]], "override_strides": [[1, 1]]},
         "An override shape must be an integer, got '3'"),
        ({"override_uids": [1], "overrides": {1: ([1], [1])}},
         "Give overrides either as override_uids/override_shapes/override_strides or as "
         "overrides={uid: OverrideEntry(shape, stride)}, not both"),
    ],
)  # fmt: skip
def test_malformed_override_arguments_are_invalid_values(
    kwargs: dict[str, Any], message: str
) -> None:
    g = _relu()
    x = np.zeros((1, 3, 4, 4), np.float32)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({1: x, 2: x.copy()}, **kwargs)
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == message


def test_the_graphs_rules_run_again_at_the_override_shapes() -> None:
    big = _built(_sdpa_forward, BIG, True)
    small = _built(_sdpa_forward, {"b": BIG["b"], "s": 7}, False)
    by_name = {t.name: t for t in small.graph_tensors()}
    named = [by_name[n] for n in ("Q", "K", "V")]
    with pytest.raises(hg.HipdnnError) as err:  # Q, K, V shorter; O left at its declared shape
        big.execute(_pack(small), override_uids=[t.get_uid() for t in named],
                    override_shapes=[t.get_dim() for t in named],
                    override_strides=[t.get_stride() for t in named])  # fmt: skip
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == "SdpaFwdNode: Output O seq_q mismatch: expected 7 got 12"


def test_the_variant_pack_is_checked_against_the_override_shapes() -> None:
    big = _built(_pointwise, BIG, True)
    small = _built(_pointwise, SMALL, False)
    uids, shapes, strides = _arguments(small)
    pack = _pack(big)  # buffers of the declared shapes
    with pytest.raises(hg.HipdnnError) as err:
        big.execute(pack, override_uids=uids, override_shapes=shapes, override_strides=strides)
    assert err.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert "[2, 6]" in err.value.message


# ----- engines -----
class _OneShape:
    """An engine that runs any graph but serves one shape per plan."""

    name = "ONE_SHAPE_ENGINE"
    priority = 1
    array_kind = "numpy"
    override_shapes_reason = "it compiles a kernel for each shape"

    def check(self, graph: hg.Graph) -> Support:
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> Any:
        raise AssertionError("never built for an override-shape graph")


def test_engines_without_override_support_refuse_with_a_reason() -> None:
    from hipdnn_graph.backend.contract import checked_support, override_shapes_refusal

    g = _graph(True)
    _pointwise(g, BIG)
    g.validate()
    assert checked_support(_OneShape(), g) == (
        False,
        "does not support override shapes (the graph called set_override_shape_enabled(True)): "
        "it compiles a kernel for each shape",
    )
    assert override_shapes_refusal(_OneShape(), g.set_override_shape_enabled(False)) is None


def test_override_graphs_rank_only_engines_that_support_them() -> None:
    g = _graph(True)
    _pointwise(g, BIG)
    g.build_operation_graph().create_execution_plans()
    refusals = g.get_engine_refusals()
    assert REFERENCE in g.get_engine_names()
    fusion = refusals.get("TORCH_FUSION_ENGINE")
    if fusion is not None:  # torch installed: the compiled engine refuses, naming the reason
        assert fusion.startswith("does not support override shapes")
        assert "torch.compile" in fusion
        assert "TORCH_EAGER_ENGINE" in g.get_engine_names()


def test_sdpa_engines_declare_their_override_support() -> None:
    pytest.importorskip("torch")
    from hipdnn_graph_torch_rocm._engines import create_engines
    from hipdnn_graph_torch_rocm.cudnn_fe.engine import CudnnFrontendEngine

    support = {e.name: e.supports_override_shapes for e in create_engines()}
    assert support == {
        "TORCH_SDPA_CUDNN_ENGINE": True,
        "TORCH_SDPA_FLASH_ENGINE": True,
        "TORCH_SDPA_EFFICIENT_ENGINE": True,
        "TORCH_SDPA_FLEX_ENGINE": False,
        "TORCH_SDPA_MATH_ENGINE": True,
    }
    assert CudnnFrontendEngine.supports_override_shapes is False
    g = _graph(True)
    _sdpa_forward(g, BIG)
    g.build_operation_graph().create_execution_plans()
    flex = g.get_engine_refusals()["TORCH_SDPA_FLEX_ENGINE"]
    assert flex == (
        "does not support override shapes (the graph called set_override_shape_enabled(True)): "
        "FlexAttention compiles its Triton kernels and block masks for the graph's shapes in "
        "build_plans; every new override shape would compile again"
    )


@pytest.mark.parametrize(
    ("family", "engine"),
    [("sdpa_forward", "TORCH_SDPA_MATH_ENGINE"), ("sdpa_backward", "TORCH_SDPA_MATH_ENGINE"),
     ("layernorm", "TORCH_EAGER_ENGINE"), ("matmul", "TORCH_EAGER_ENGINE")],
)  # fmt: skip
def test_cpu_torch_engines_at_override_shapes_equal_a_plan_built_there(
    family: str, engine: str
) -> None:
    torch = pytest.importorskip("torch")
    build = FAMILIES[family]
    big = _built(build, BIG, True, engine)
    small = _built(build, SMALL, False, engine)
    uids, shapes, strides = _arguments(small)
    expected = {u: torch.from_numpy(a) for u, a in _pack(small).items()}
    small.execute(expected)
    got = {u: torch.from_numpy(a) for u, a in _pack(small).items()}
    big.execute(got, override_uids=uids, override_shapes=shapes, override_strides=strides)
    for uid, value in _outputs(small, expected).items():
        assert not torch.isnan(value).any()
        torch.testing.assert_close(got[uid], value, rtol=0, atol=0)


# ----- the flag on the wire -----
def test_the_flag_travels_in_bytes_json_and_descriptors() -> None:
    plain = _graph(False)
    _sdpa_forward(plain, BIG)
    flagged = _graph(True)
    _sdpa_forward(flagged, BIG)
    blob = flagged.serialize()
    assert blob != plain.serialize()
    assert hg.Graph.deserialize(blob).is_override_shape_enabled()
    text = flagged.to_json()
    assert '"is_override_shape_enabled":true' in text
    assert hg.Graph.from_json(text).is_override_shape_enabled()
    assert hg.Graph.from_json(text).serialize() == blob
    flagged.build_operation_graph()
    lifted = hg.Graph.from_operation_graph_descriptor(flagged.get_operation_graph_descriptor())
    assert lifted.is_override_shape_enabled()
    # unset again: byte-identical to a graph that never set it
    flagged.set_override_shape_enabled(False)
    assert flagged.serialize() == plain.serialize()
    assert '"is_override_shape_enabled":false' in flagged.to_json()


def test_the_flag_takes_only_a_bool() -> None:
    with pytest.raises(hg.HipdnnError) as err:
        hg.Graph().set_override_shape_enabled(1)  # type: ignore[arg-type]
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == "set_override_shape_enabled() expects a bool, got 1"


# ----- hipDNN's Python surface -----
def test_frontend_graph_executes_override_shapes_and_returns_errors() -> None:
    import hipdnn_graph.frontend as hipdnn

    g = hipdnn.Graph().set_io_data_type(F).set_compute_data_type(F)
    _ = g.set_intermediate_data_type(F)
    assert g.set_override_shape_enabled(True) is g and g.is_override_shape_enabled()
    x = hipdnn.Tensor.create([4, 6], F).set_uid(1)
    y = g.pointwise(x, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.RELU_FWD))
    y.set_output(True).set_uid(2)
    handle = hipdnn.create_handle()
    steps = (g.validate(), g.build_operation_graph(handle), g.create_execution_plans(),
             g.check_support(), g.build_plans())  # fmt: skip
    assert all(step.is_good() for step in steps)
    xs = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6)
    ys = np.full((2, 6), np.nan, np.float32)
    args = ([1, 2], [[2, 6], [2, 6]], [[6, 1], [6, 1]])
    assert g.execute(handle, {1: xs, 2: ys}, 0, *args).is_good()
    np.testing.assert_array_equal(ys, np.maximum(xs, 0))
    # addresses are read at the override layout
    ys[...] = np.nan
    assert g.execute(handle, {1: xs.ctypes.data, 2: ys.ctypes.data}, 0, *args).is_good()
    np.testing.assert_array_equal(ys, np.maximum(xs, 0))
    error = g.execute(handle, {1: xs, 2: ys}, 0, [1], [[5, 6]], [[6, 1]])
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
    assert error.get_message() == (
        "Override shape for UID 1 axis 0 exceeds declared max: override=5, declared=4"
        + RULE.format(7)
    )


@pytest.mark.parametrize("flag", [False, True])
def test_fused_engines_defer_to_flex_only_when_flex_can_take_the_graph(
    flag: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bias sends the memory-efficient engine to flex (measured faster), except on an
    override-shape graph, which flex refuses (device rules stood in for, as on a GPU)."""
    torch = pytest.importorskip("torch")
    from hipdnn_graph_torch_rocm import _sdpa_support
    from hipdnn_graph_torch_rocm._engines import TorchSdpaEngine
    from hipdnn_graph_torch_rocm.kernels import fused

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(fused, "check", lambda op, problem: None)
    monkeypatch.setattr(_sdpa_support, "flex_accepts", lambda p, io: True)
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=F,
                 compute_data_type=F).set_override_shape_enabled(flag)  # fmt: skip
    q = g.tensor(name="Q", dim=[1, 2, 16, 16])
    bias = g.tensor(name="Bias", dim=[1, 2, 16, 16])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd", bias=bias,
                  generate_stats=False)  # fmt: skip
    o.set_output(True)
    g.validate()
    support = TorchSdpaEngine("TORCH_SDPA_EFFICIENT_ENGINE", "efficient", 30).check(g)
    if flag:
        assert support.ok, support.reason
    else:
        assert support.reason.startswith(
            "node 'fwd': efficient defers to TORCH_SDPA_FLEX_ENGINE: with a bias"
        )
