"""The resample lowerings against the NumPy reference, which defines their math: every
configuration the reference runs (MAXPOOL with its INDEX and both averages, NEG_INF_PAD and
ZERO_PAD, 1-3 spatial dims, forward and backward) through ``Graph.execute`` on
``TORCH_EAGER_ENGINE`` (one node) and ``TORCH_FUSION_ENGINE`` (a pooling and its backward in one
graph), in every floating io type; the edges the reference defines (windows of padding alone,
NaN, ``-inf``, ties with a zero of the padding, negative pre padding, Y dims the formula does not
give, INT8 indices that wrap); and the configurations refused, with their reasons."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch_family_cases as cases  # noqa: E402
from family_reference_cases import stored  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.backend import isolated_registry, register_backend  # noqa: E402
from hipdnn_graph.testing import empty_for, graph_outputs, poison  # noqa: E402
from hipdnn_graph.testing.draw_common import layout_strides  # noqa: E402
from hipdnn_graph_numpy_reference import create_backend as numpy_backend  # noqa: E402
from hipdnn_graph_torch_rocm import TorchEagerEngine, TorchFusionEngine  # noqa: E402
from hipdnn_graph_torch_rocm.families import lower, refusal, torch_family  # noqa: E402

M, P, D = hg.ResampleMode, hg.PaddingMode, hg.DataType
FUSION, EAGER, REFERENCE = "TORCH_FUSION_ENGINE", "TORCH_EAGER_ENGINE", "NUMPY_REFERENCE_ENGINE"
#: (io, compute): every floating io type hipDNN allows, FLOAT compute (DOUBLE for DOUBLE)
TYPES = [(D.FLOAT, D.FLOAT), (D.HALF, D.FLOAT), (D.BFLOAT16, D.FLOAT), (D.DOUBLE, D.DOUBLE)]
TYPE_IDS = ["fp32", "fp16", "bf16", "fp64"]
#: relative error allowed on an average: the io type's rounding of a sum taken in another order
RTOL = {D.FLOAT: 1e-5, D.HALF: 1e-3, D.BFLOAT16: 8e-3, D.DOUBLE: 1e-12}

Build = Callable[[], tuple[hg.Graph, dict[str, hg.TensorAttributes]]]


class _Backend:
    name = "torch-resample-test"

    def __init__(self, *engines: Any) -> None:
        self._engines = list(engines)

    def engines(self) -> list[Any]:
        return self._engines


@pytest.fixture
def engines() -> Iterator[None]:
    """The NumPy reference, and both torch engines (the fusion engine compiling with
    ``aot_eager``: the trace Inductor would compile, without a C++ build per graph)."""
    with isolated_registry(load_entry_points=False):
        register_backend(numpy_backend())
        register_backend(_Backend(TorchFusionEngine(backend="aot_eager", autotune=False),
                                  TorchEagerEngine()))  # fmt: skip
        yield


def _graph(io: hg.DataType, compute: hg.DataType) -> hg.Graph:
    inter = D.DOUBLE if io == D.DOUBLE else D.FLOAT
    return hg.Graph(io_data_type=io, compute_data_type=compute, intermediate_data_type=inter)


def _members(spatial: int) -> dict[str, Any]:
    return cases.resample_members(spatial)


def forward(dims: list[int], mode: hg.ResampleMode, padding: hg.PaddingMode,
            members: dict[str, Any], io: hg.DataType, compute: hg.DataType, *,
            index_type: hg.DataType = D.INT32, y_dims: list[int] | None = None,
            channels_last: bool = False) -> Build:  # fmt: skip
    """One resample forward node (with INDEX for MAXPOOL)."""

    def build() -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
        g = _graph(io, compute)
        x = g.tensor(name="x", dim=dims, stride=layout_strides(dims, channels_last))
        y, index = g.resample(x, name="pool", resample_mode=mode, padding_mode=padding,
                              generate_index=mode == M.MAXPOOL, **members)  # fmt: skip
        y.set_output(True)
        if y_dims is not None:
            y.set_dim(y_dims)
        named = {"X": x, "Y": y}
        if index is not None:
            index.set_data_type(index_type).set_output(True)
            named["INDEX"] = index
        g.validate()
        return g, named

    return build


def backward(dy_dims: list[int], dx_dims: list[int], mode: hg.ResampleMode,
             padding: hg.PaddingMode, members: dict[str, Any], io: hg.DataType,
             compute: hg.DataType, *, index_type: hg.DataType = D.INT32,
             channels_last: bool = False) -> Build:  # fmt: skip
    """One resample backward node (reading an INDEX for MAXPOOL)."""

    def build() -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
        g = _graph(io, compute)
        dy_strides = layout_strides(dy_dims, channels_last)
        dy = g.tensor(name="dy", dim=dy_dims, stride=dy_strides)
        named = {"DY": dy}
        index = None
        if mode == M.MAXPOOL:
            index = g.tensor(name="index", dim=dy_dims, stride=dy_strides, data_type=index_type)
            named["INDEX"] = index
        dx = g.resample_bwd(dy, name="pool_bwd", index=index, resample_mode=mode,
                            padding_mode=padding, **members)  # fmt: skip
        dx.set_dim(dx_dims).set_stride(layout_strides(dx_dims, channels_last)).set_output(True)
        named["DX"] = dx
        g.validate()
        return g, named

    return build


def round_trip(
    dims: list[int],
    mode: hg.ResampleMode,
    padding: hg.PaddingMode,
    members: dict[str, Any],
    io: hg.DataType,
    compute: hg.DataType,
) -> Build:
    """A pooling and its backward in one graph: the backward reads Y as its DY and (MAXPOOL)
    the forward's INDEX, a virtual tensor."""  # fmt: skip

    def build() -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
        g = _graph(io, compute)
        x = g.tensor(name="x", dim=dims)
        y, index = g.resample(x, name="pool", resample_mode=mode, padding_mode=padding,
                              generate_index=mode == M.MAXPOOL, **members)  # fmt: skip
        y.set_output(True)
        dx = g.resample_bwd(y, name="pool_bwd", index=index, resample_mode=mode,
                            padding_mode=padding, **members)  # fmt: skip
        dx.set_dim(dims).set_output(True)
        g.validate()
        return g, {"X": x, "Y": y, "DX": dx}

    return build


def execute(build: Build, engine: str, values: dict[str, Any]) -> dict[str, np.ndarray]:
    """Build a fresh graph on ``engine``, execute it on ``values`` (by slot name, rounded to
    each tensor's type; outputs poisoned) and return every output by slot name, asserting
    that no input was written."""
    g, named = build()
    g.set_preferred_engine_id_ext(engine)
    g.build()
    assert g.get_plan_name() == engine
    written = {id(t) for t in graph_outputs(g)}
    outputs = {s: t for s, t in named.items() if id(t) in written}
    pack: dict[Any, Any] = {named[s]: stored(v, named[s]) for s, v in values.items()}
    before = {t: np.array(v, copy=True) for t, v in pack.items()}
    pack.update({t: poison(empty_for(t)) for t in outputs.values()})
    g.execute(pack)
    for t, old in before.items():
        assert np.array_equal(pack[t], old, equal_nan=True), f"input {t.name} written"
    return {s: np.asarray(pack[t]) for s, t in outputs.items()}


def agree(
    build: Build, engine: str, values: dict[str, Any], mode: hg.ResampleMode, io: hg.DataType
) -> dict[str, np.ndarray]:
    """``engine`` and the NumPy reference on the same graph and values: MAXPOOL exactly (the
    same element wins and is routed, its sums taken in the same order), the averages to the io
    type's rounding. Returns the reference's outputs."""  # fmt: skip
    want = execute(build, REFERENCE, values)
    got = execute(build, engine, values)
    assert set(got) == set(want)
    for slot, ref in want.items():
        out = got[slot]
        assert out.dtype == ref.dtype, slot
        if mode == M.MAXPOOL:
            assert np.array_equal(out, ref, equal_nan=True), (slot, out.ravel(), ref.ravel())
        else:
            ref64, out64 = ref.astype(np.float64), out.astype(np.float64)
            finite = np.isfinite(ref64)
            assert np.array_equal(np.isfinite(out64), finite), slot  # NaN and inf where due
            scale = max(float(np.abs(ref64[finite]).max(initial=0.0)), 1.0)
            np.testing.assert_allclose(out64, ref64, rtol=0, atol=RTOL[io] * scale)
    return want


def _random(dims: list[int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(dims)


@pytest.mark.usefixtures("engines")
@pytest.mark.parametrize(("io", "compute"), TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("padding", cases.PADDING_MODES, ids=lambda p: p.name)
@pytest.mark.parametrize("mode", cases.RESAMPLE_MODES, ids=lambda m: m.name)
def test_eager_engine_agrees_with_the_reference(mode: hg.ResampleMode, padding: hg.PaddingMode,
                                                spatial: int, io: hg.DataType,
                                                compute: hg.DataType) -> None:  # fmt: skip
    """The forward node (Y, INDEX) and the backward node (DX from the reference's INDEX) of
    every configuration, X and DY in the channels-last layout for 2-D."""
    dims = cases.RESAMPLE_GEOMETRY[spatial][0]
    members, layout = _members(spatial), spatial == 2
    x = _random(dims, spatial)
    if mode == M.MAXPOOL:
        x = np.round(x * 2) / 2  # ties, within windows and with a zero of the padding
    fwd = forward(dims, mode, padding, members, io, compute, channels_last=layout)
    out = agree(fwd, EAGER, {"X": x}, mode, io)
    y_dims = list(out["Y"].shape)
    bwd = backward(y_dims, dims, mode, padding, members, io, compute, channels_last=layout)
    values = {"DY": _random(y_dims, spatial + 10)}
    if mode == M.MAXPOOL:
        values["INDEX"] = out["INDEX"]
    agree(bwd, EAGER, values, mode, io)


#: the fusion engine's cases: every mode, padding and rank, the io types taking turns
ROUND_TRIPS = [
    (mode, padding, spatial, *TYPES[(3 * i + 2 * j + spatial) % len(TYPES)])
    for i, mode in enumerate(cases.RESAMPLE_MODES)
    for j, padding in enumerate(cases.PADDING_MODES)
    for spatial in (1, 2, 3)
]


@pytest.mark.usefixtures("engines")
@pytest.mark.parametrize(("mode", "padding", "spatial", "io", "compute"), ROUND_TRIPS,
                         ids=lambda v: getattr(v, "name", str(v)))  # fmt: skip
def test_fusion_engine_runs_a_pooling_and_its_backward(mode: hg.ResampleMode,
                                                       padding: hg.PaddingMode, spatial: int,
                                                       io: hg.DataType,
                                                       compute: hg.DataType) -> None:  # fmt: skip
    dims = cases.RESAMPLE_GEOMETRY[spatial][0]
    x = np.round(_random(dims, 3 + spatial) * 2) / 2
    agree(round_trip(dims, mode, padding, _members(spatial), io, compute), FUSION, {"X": x},
          mode, io)  # fmt: skip


def test_every_configuration_runs_on_both_engines() -> None:
    """The two tests above cover each mode, padding and rank on the fusion engine, and on the
    eager engine also each io type."""
    assert {(m, p, s) for m, p, s, _, _ in ROUND_TRIPS} == {
        (m, p, s) for m in cases.RESAMPLE_MODES for p in cases.PADDING_MODES for s in (1, 2, 3)
    }
    assert {(io, c) for *_, io, c in ROUND_TRIPS} == set(TYPES)


#: (x dims, members, Y dims or None): windows of padding alone (pre padding past the window),
#: negative pre padding (windows start inside X), Y longer than the formula gives (windows past
#: X and its post padding), one window over everything
EDGES = [
    ([1, 2, 2, 4], {"window": [2, 2], "stride": [2, 2], "pre_padding": [2, 0],
                    "post_padding": [0, 0]}, None),
    ([2, 1, 7], {"window": [3], "stride": [2], "pre_padding": [-1], "post_padding": [2]}, None),
    ([1, 1, 5, 3], {"window": [2, 2], "stride": [2, 1], "pre_padding": [0, 1],
                    "post_padding": [0, 0]}, [1, 1, 5, 4]),
    ([1, 3, 3, 2, 2], {"window": [3, 2, 2], "stride": [1, 1, 1], "pre_padding": [0, 0, 0],
                       "post_padding": [0, 0, 0]}, None),
]  # fmt: skip


@pytest.mark.usefixtures("engines")
@pytest.mark.parametrize("edge", range(len(EDGES)))
@pytest.mark.parametrize("padding", cases.PADDING_MODES, ids=lambda p: p.name)
@pytest.mark.parametrize("mode", cases.RESAMPLE_MODES, ids=lambda m: m.name)
def test_edges_the_reference_defines(mode: hg.ResampleMode, padding: hg.PaddingMode,
                                     edge: int) -> None:  # fmt: skip
    """NaN (never selected), -inf and +inf, ties (the first in scan order wins), and the
    geometries of :data:`EDGES`, forward and backward, against the reference."""
    dims, members, y_dims = EDGES[edge]
    x = np.round(_random(dims, edge) * 2) / 2
    flat = x.reshape(-1)
    flat[::5] = np.nan
    flat[1::7] = -np.inf
    flat[3::11] = np.inf
    fwd = forward(dims, mode, padding, members, D.FLOAT, D.FLOAT, y_dims=y_dims)
    out = agree(fwd, EAGER, {"X": x}, mode, D.FLOAT)
    dy_dims = list(out["Y"].shape)
    values = {"DY": _random(dy_dims, edge + 1)}
    if mode == M.MAXPOOL:
        values["INDEX"] = out["INDEX"]
    agree(backward(dy_dims, dims, mode, padding, members, D.FLOAT, D.FLOAT), EAGER, values, mode,
          D.FLOAT)  # fmt: skip


def test_maxpool_edges_give_the_reference_values() -> None:
    """A window of padding alone gives the lowest finite value and INDEX -1 with NEG_INF_PAD,
    0 and -1 with ZERO_PAD; NaN is never selected; ties go to the first maximum."""
    members = {"window": [2, 2], "stride": [2, 2], "pre_padding": [2, 0], "post_padding": [0, 0]}
    x = torch.tensor([[[[1.0, 1.0, -3.0, float("nan")], [1.0, 0.5, -4.0, -2.0]]]])
    lowest = torch.finfo(torch.float32).min
    for padding, first in ((P.NEG_INF_PAD, lowest), (P.ZERO_PAD, 0.0)):
        g, _ = forward([1, 1, 2, 4], M.MAXPOOL, padding, members, D.FLOAT, D.FLOAT)()
        out = lower(g.nodes[0], {"X": x})
        assert out["Y"].ravel().tolist() == [first, first, 1.0, -2.0]
        assert out["INDEX"].ravel().tolist() == [-1, -1, 0, 7]


@pytest.mark.usefixtures("engines")
def test_int8_index_wraps_as_the_reference_casts_it() -> None:
    """Flat index 143 is -113 in an INT8 INDEX; the backward compares the wrapped values, so
    DY reaches every position whose index wraps to the same value."""
    dims, members = [1, 2, 12, 12], {"window": [12, 12], "stride": [12, 12],
                                     "pre_padding": [0, 0], "post_padding": [0, 0]}  # fmt: skip
    x = np.zeros(dims)
    x[0, 0, 11, 11] = 1.0
    x[0, 1, 0, 3] = 1.0
    fwd = forward(dims, M.MAXPOOL, P.NEG_INF_PAD, members, D.FLOAT, D.FLOAT, index_type=D.INT8)
    out = agree(fwd, EAGER, {"X": x}, M.MAXPOOL, D.FLOAT)
    assert out["INDEX"].dtype == np.int8 and out["INDEX"].ravel().tolist() == [-113, 3]
    bwd = backward([1, 2, 1, 1], dims, M.MAXPOOL, P.NEG_INF_PAD, members, D.FLOAT, D.FLOAT,
                   index_type=D.INT8)  # fmt: skip
    dx = agree(bwd, EAGER, {"DY": np.ones((1, 2, 1, 1)), "INDEX": out["INDEX"]}, M.MAXPOOL,
               D.FLOAT)["DX"]  # fmt: skip
    assert dx[0, 0, 11, 11] == 1.0 and dx[0, 0].sum() == 1.0  # 143 is the only -113 below 144
    assert dx[0, 1].sum() == 1.0 and dx[0, 1, 0, 3] == 1.0


def test_the_fusion_engine_compiles_with_inductor() -> None:
    """A MAXPOOL with ties and its backward compiled by Inductor (a C++ build on the CPU):
    the same INDEX and DX as the reference."""
    import shutil

    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("Inductor on the CPU needs a C++ compiler")
    with isolated_registry(load_entry_points=False):
        register_backend(numpy_backend())
        register_backend(_Backend(TorchFusionEngine(backend="inductor", autotune=False),
                                  TorchEagerEngine()))  # fmt: skip
        dims = [2, 3, 9, 10]
        x = np.round(_random(dims, 5) * 2) / 2
        x.reshape(-1)[::9] = np.nan
        build = round_trip(dims, M.MAXPOOL, P.ZERO_PAD, _members(2), D.FLOAT, D.FLOAT)
        agree(build, FUSION, {"X": x}, M.MAXPOOL, D.FLOAT)


def _node(mode: hg.ResampleMode, padding: hg.PaddingMode, backward_node: bool = False) -> Any:
    members = {"window": [2, 2], "stride": [2, 2], "pre_padding": [0, 0], "post_padding": [0, 0]}
    g = _graph(D.FLOAT, D.FLOAT)
    if backward_node:
        dy = g.tensor(name="dy", dim=[1, 1, 2, 2])
        index = g.tensor(name="i", dim=[1, 1, 2, 2], data_type=D.INT32)
        g.resample_bwd(dy, name="n", index=index if mode == M.MAXPOOL else None,
                       resample_mode=mode, padding_mode=padding, **members)  # fmt: skip
    else:
        g.resample_fwd(g.tensor(name="x", dim=[1, 1, 4, 4]), name="n", resample_mode=mode,
                       padding_mode=padding, **members)  # fmt: skip
    g.validate()
    return g


@pytest.mark.parametrize("backward_node", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize(
    ("mode", "padding", "words"),
    [
        (M.BILINEAR, P.ZERO_PAD, "resample mode BILINEAR: hipDNN defines no resample math"),
        (M.NEAREST, P.NEG_INF_PAD, "resample mode NEAREST: hipDNN defines no resample math"),
        (M.NOT_SET, P.ZERO_PAD, "resample mode NOT_SET: hipDNN defines no resample math"),
        (M.MAXPOOL, P.EDGE_VAL_PAD, "padding mode EDGE_VAL_PAD: hipDNN defines no resample math"),
        (M.AVGPOOL_INCLUDE_PADDING, P.NOT_SET, "padding mode NOT_SET: hipDNN defines no"),
    ],
)  # fmt: skip
def test_modes_without_hipdnn_math_are_refused(
    mode: hg.ResampleMode, padding: hg.PaddingMode, words: str, backward_node: bool
) -> None:
    """What the NumPy reference refuses, the engines refuse, naming the node and the mode."""
    g = _node(mode, padding, backward_node)
    (node,) = g.nodes
    reason = refusal(node)
    assert reason is not None and reason.startswith(f"node 'n': {words}")
    assert words in (TorchEagerEngine().check(g).reason or "")


def test_geometry_and_types_the_lowering_cannot_run_are_refused() -> None:
    """Members that are not one per spatial dim, an INDEX on an average, a compute type that is
    not floating: refused with the reason (the reference raises on these at run time)."""
    rule = torch_family(hg.NodeType.RESAMPLE_FWD).refusal
    x, y = hg.TensorAttributes(dim=[1, 1, 4, 4]), hg.TensorAttributes(dim=[1, 1, 2, 2])
    index = hg.TensorAttributes(dim=[1, 1, 2, 2], data_type=D.INT32)
    for data in (x, y):
        data.set_data_type(D.FLOAT)

    def node(**change: Any) -> Any:
        a = (hg.ResampleFwdAttributes().set_name("n").set_x(x).set_y(y)
             .set_resample_mode(change.get("mode", M.MAXPOOL)).set_padding_mode(P.ZERO_PAD)
             .set_window(change.get("window", [2, 2])).set_stride([2, 2])
             .set_pre_padding([0, 0]).set_post_padding([0, 0])
             .set_compute_data_type(change.get("compute", D.FLOAT)))  # fmt: skip
        if "index" in change:
            a.set_index(index)
        return hg.ResampleFwdNode(a, hg.GraphAttributes())

    assert rule(node()) is None
    assert "needs one pre/post padding, stride >= 1 and window >= 1 per spatial dim (2)" in (
        rule(node(window=[2])) or ""
    )
    assert "window >= 1" in (rule(node(window=[2, 0])) or "")
    assert "an INDEX tensor with resample mode AVGPOOL_EXCLUDE_PADDING (MAXPOOL only)" in (
        rule(node(mode=M.AVGPOOL_EXCLUDE_PADDING, index=True)) or ""
    )
    assert rule(node(index=True)) is None
    assert "compute type INT32 (FLOAT, DOUBLE, HALF or BFLOAT16 only)" in (
        rule(node(compute=D.INT32)) or ""
    )
