"""The NumPy reference of the resample families (``families/resample.py``) against torch in
float64: max pooling (both padding modes, with its INDEX) through ``F.max_pool{1,2,3}d`` on an
explicitly padded input, the averages through ``F.avg_pool*d`` (and, where torch's own padding
can express it, its ``count_include_pad``), the backward passes through autograd; the edge cases
hipDNN's kernels define (all-padding windows, ties, INT8 indices, Y dims the formula does not
give) and the modes hipDNN defines no math for."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from family_reference_cases import TYPE_IDS, TYPE_PAIRS, assert_close, graph, run, stored

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families.resample import (
    resample_bwd_refusal,
    resample_fwd_refusal,
    run_resample_bwd,
    run_resample_fwd,
)

torch = pytest.importorskip("torch")
F = torch.nn.functional

M, P, D = hg.ResampleMode, hg.PaddingMode, hg.DataType
RNG = np.random.default_rng(7)

#: (x dims, window, stride, pre, post): 1-D, 2-D (asymmetric, overlapping, strided), 3-D
CASES = [
    ([2, 3, 11], [3], [2], [1], [2]),
    ([2, 3, 9, 10], [3, 2], [2, 1], [1, 0], [0, 1]),
    ([1, 2, 7, 8], [2, 3], [2, 3], [0, 2], [1, 0]),
    ([1, 2, 5, 6, 4], [2, 3, 2], [1, 2, 2], [1, 0, 1], [0, 2, 1]),
]


def _graph() -> hg.Graph:
    return hg.Graph(
        io_data_type=D.DOUBLE, compute_data_type=D.DOUBLE, intermediate_data_type=D.DOUBLE
    )


def _members(window: list[int], stride: list[int], pre: list[int], post: list[int]) -> dict:
    return {"window": window, "stride": stride, "pre_padding": pre, "post_padding": post}


def _fwd_node(dims, mode, padding, members, index_type=D.INT32) -> Any:
    g = _graph()
    x = g.tensor(name="x", dim=dims)
    attrs = hg.ResampleFwdAttributes().set_name("pool").set_resample_mode(mode)
    attrs.set_padding_mode(padding).set_generate_index(mode == M.MAXPOOL)
    y, index = g.resample(x, attrs, **members)
    y.set_output(True)
    if index is not None:
        index.set_data_type(index_type).set_output(True)
    g.validate()
    return g.nodes[0]


def _bwd_node(dy_dims, dx_dims, mode, padding, members, index_type=D.INT32) -> Any:
    g = _graph()
    dy = g.tensor(name="dy", dim=dy_dims)
    index = g.tensor(name="i", dim=dy_dims, data_type=index_type) if mode == M.MAXPOOL else None
    attrs = hg.ResampleBwdAttributes().set_name("back").set_resample_mode(mode)
    dx = g.resample_bwd(dy, attrs.set_padding_mode(padding), index=index, **members)
    dx.set_dim(dx_dims).set_output(True)
    g.validate()
    return g.nodes[0]


def _pad(t: torch.Tensor, pre: list[int], post: list[int], value: float) -> torch.Tensor:
    """``t`` padded before/after each spatial dim (F.pad lists the last dim first)."""
    widths: list[int] = []
    for a, b in zip(reversed(pre), reversed(post), strict=True):
        widths += [a, b]
    return F.pad(t, widths, value=value)


_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _torch_max(x: torch.Tensor, window, stride, pre, post, padding) -> tuple[torch.Tensor, Any]:
    """Max pooling in torch and hipDNN's INDEX: the flat spatial index in X, -1 for a zero of
    the padding."""
    value = float("-inf") if padding == P.NEG_INF_PAD else 0.0
    padded = _pad(x, pre, post, value)
    y, flat = _MAX[len(window)](padded, window, stride, return_indices=True)
    coords = np.unravel_index(flat.numpy(), padded.shape[2:])
    inner = x.shape[2:]
    real = np.ones(flat.shape, dtype=bool)
    index = np.zeros(flat.shape, dtype=np.int64)
    for c, start, size in zip(coords, pre, inner, strict=True):
        p = c - start
        real &= (p >= 0) & (p < size)
        index = index * size + p
    return y, np.where(real, index, -1)


def _torch_avg(x: torch.Tensor, window, stride, pre, post, mode) -> torch.Tensor:
    """Average pooling in torch: the window sum over the real count or the window size."""
    pool = _AVG[len(window)]
    size = float(np.prod(window))
    total = pool(_pad(x, pre, post, 0.0), window, stride) * size
    if mode == M.AVGPOOL_INCLUDE_PADDING:
        return total / size
    count = pool(_pad(torch.ones_like(x), pre, post, 0.0), window, stride) * size
    return total / count.clamp(min=1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0]) - 2}d")
@pytest.mark.parametrize("padding", [P.NEG_INF_PAD, P.ZERO_PAD])
def test_maxpool_forward_and_backward_match_torch(case, padding) -> None:
    dims, window, stride, pre, post = case
    members = _members(window, stride, pre, post)
    x = RNG.standard_normal(dims)
    node = _fwd_node(dims, M.MAXPOOL, padding, members)
    out = run_resample_fwd(node, {"X": x})
    xt = torch.tensor(x, requires_grad=True)
    yt, index = _torch_max(xt, window, stride, pre, post, padding)
    np.testing.assert_allclose(out["Y"], yt.detach().numpy(), rtol=0, atol=0)
    np.testing.assert_array_equal(out["INDEX"], index)
    assert out["Y"].dtype == np.float64 and out["INDEX"].dtype == np.int32
    dy = RNG.standard_normal(out["Y"].shape)
    yt.backward(torch.tensor(dy))
    back = _bwd_node(list(dy.shape), dims, M.MAXPOOL, padding, members)
    dx = run_resample_bwd(back, {"DY": dy, "INDEX": out["INDEX"]})["DX"]
    assert xt.grad is not None
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0]) - 2}d")
@pytest.mark.parametrize("mode", [M.AVGPOOL_EXCLUDE_PADDING, M.AVGPOOL_INCLUDE_PADDING])
@pytest.mark.parametrize("padding", [P.NEG_INF_PAD, P.ZERO_PAD])
def test_avgpool_forward_and_backward_match_torch(case, mode, padding) -> None:
    """Padding adds 0 to the averages in both padding modes (hipDNN's kernels)."""
    dims, window, stride, pre, post = case
    members = _members(window, stride, pre, post)
    x = RNG.standard_normal(dims)
    out = run_resample_fwd(_fwd_node(dims, mode, padding, members), {"X": x})
    assert set(out) == {"Y"}
    xt = torch.tensor(x, requires_grad=True)
    yt = _torch_avg(xt, window, stride, pre, post, mode)
    np.testing.assert_allclose(out["Y"], yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    dy = RNG.standard_normal(out["Y"].shape)
    yt.backward(torch.tensor(dy))
    back = _bwd_node(list(dy.shape), dims, mode, padding, members)
    dx = run_resample_bwd(back, {"DY": dy})["DX"]
    assert xt.grad is not None
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("include", [True, False])
def test_avgpool_matches_torch_own_padding_where_it_applies(include: bool) -> None:
    """Symmetric padding of at most half the window: torch's count_include_pad is the same
    choice as hipDNN's two average modes."""
    dims, members = [2, 3, 8, 9], _members([3, 3], [2, 2], [1, 1], [1, 1])
    mode = M.AVGPOOL_INCLUDE_PADDING if include else M.AVGPOOL_EXCLUDE_PADDING
    x = RNG.standard_normal(dims)
    y = run_resample_fwd(_fwd_node(dims, mode, P.ZERO_PAD, members), {"X": x})["Y"]
    expected = F.avg_pool2d(torch.tensor(x), 3, 2, padding=1, count_include_pad=include)
    np.testing.assert_allclose(y, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_float_compute_stays_float32() -> None:
    g = hg.Graph(io_data_type=D.FLOAT, compute_data_type=D.FLOAT, intermediate_data_type=D.FLOAT)
    x = g.tensor(name="x", dim=[1, 1, 4, 4])
    g.resample_fwd(x, resample_mode=M.AVGPOOL_INCLUDE_PADDING, padding_mode=P.ZERO_PAD,
                   **_members([2, 2], [2, 2], [0, 0], [0, 0])).set_output(True)  # fmt: skip
    g.validate()
    y = run_resample_fwd(g.nodes[0], {"X": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    assert y["Y"].dtype == np.float32 and y["Y"].ravel().tolist() == [2.5, 4.5, 10.5, 12.5]


def test_maxpool_edges_hipdnn_defines() -> None:
    """All-padding windows give the lowest finite value and INDEX -1 with NEG_INF_PAD, 0 and -1
    with ZERO_PAD; ties go to the first maximum in scan order; NaN is never selected."""
    members = _members([2, 2], [2, 2], [2, 0], [0, 0])  # the first output row is all padding
    x = np.array([[[[1.0, 1.0, -3.0, np.nan], [1.0, 0.5, -4.0, -2.0]]]])
    neg = run_resample_fwd(_fwd_node([1, 1, 2, 4], M.MAXPOOL, P.NEG_INF_PAD, members), {"X": x})
    lowest = np.finfo(np.float64).min
    assert neg["Y"].ravel().tolist() == [lowest, lowest, 1.0, -2.0]
    assert neg["INDEX"].ravel().tolist() == [-1, -1, 0, 7]
    zero = run_resample_fwd(_fwd_node([1, 1, 2, 4], M.MAXPOOL, P.ZERO_PAD, members), {"X": x})
    assert zero["Y"].ravel().tolist() == [0.0, 0.0, 1.0, -2.0]
    assert zero["INDEX"].ravel().tolist() == [-1, -1, 0, 7]
    back = _bwd_node([1, 1, 2, 2], [1, 1, 2, 4], M.MAXPOOL, P.ZERO_PAD, members)
    dx = run_resample_bwd(back, {"DY": np.ones((1, 1, 2, 2)), "INDEX": zero["INDEX"]})["DX"]
    assert dx.ravel().tolist() == [1.0, 0, 0, 0, 0, 0, 0, 1.0]  # padding winners route nothing


def test_int8_index_is_cast_as_hipdnn_casts_it() -> None:
    """A flat index past 127 wraps in an INT8 INDEX; the backward compares the wrapped values
    (hipDNN's kernels cast both sides to the index type)."""
    dims, members = [1, 1, 12, 12], _members([12, 12], [12, 12], [0, 0], [0, 0])
    x = np.zeros(dims)
    x[0, 0, 11, 11] = 1.0  # flat 143 -> -113 as int8
    node = _fwd_node(dims, M.MAXPOOL, P.NEG_INF_PAD, members, index_type=D.INT8)
    out = run_resample_fwd(node, {"X": x})
    assert out["INDEX"].dtype == np.int8 and out["INDEX"].ravel().tolist() == [-113]
    back = _bwd_node([1, 1, 1, 1], dims, M.MAXPOOL, P.NEG_INF_PAD, members, index_type=D.INT8)
    dx = run_resample_bwd(back, {"DY": np.ones((1, 1, 1, 1)), "INDEX": out["INDEX"]})["DX"]
    assert dx[0, 0, 11, 11] == 1.0 and dx.sum() == 1.0


def test_y_dims_other_than_the_formula_read_padding() -> None:
    """hipDNN's kernels loop over Y's own dims: positions past the input are padding."""
    g = _graph()
    x = g.tensor(name="x", dim=[1, 1, 4])
    y = g.tensor(name="y", dim=[1, 1, 3]).set_output(True)
    attrs = hg.ResampleFwdAttributes().set_y(y)
    node = hg.ResampleFwdNode(
        attrs.set_x(x).set_resample_mode(M.AVGPOOL_EXCLUDE_PADDING).set_padding_mode(P.ZERO_PAD)
        .set_window([2]).set_stride([2]).set_pre_padding([0]).set_post_padding([0])
        .set_compute_data_type(D.DOUBLE),
    )  # fmt: skip
    out = run_resample_fwd(node, {"X": np.array([[[1.0, 2.0, 3.0, 5.0]]])})
    assert out["Y"].ravel().tolist() == [1.5, 4.0, 0.0]


@pytest.mark.parametrize(
    ("mode", "padding", "words"),
    [
        (M.BILINEAR, P.ZERO_PAD, "resample mode BILINEAR: hipDNN defines no resample math"),
        (M.NEAREST, P.ZERO_PAD, "resample mode NEAREST"),
        (M.NOT_SET, P.ZERO_PAD, "resample mode NOT_SET"),
        (M.MAXPOOL, P.EDGE_VAL_PAD, "padding mode EDGE_VAL_PAD: hipDNN defines no resample math"),
    ],
)
def test_modes_without_hipdnn_math_are_refused(mode, padding, words) -> None:
    members = _members([2, 2], [2, 2], [0, 0], [0, 0])
    node = _fwd_node([1, 1, 4, 4], mode, padding, members)
    assert words in (resample_fwd_refusal(node) or "")
    with pytest.raises(hg.HipdnnError) as info:
        run_resample_fwd(node, {"X": np.zeros((1, 1, 4, 4))})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED and words in info.value.message
    g = _graph()
    dy = g.tensor(name="dy", dim=[1, 1, 2, 2])
    g.resample_bwd(dy, resample_mode=mode, padding_mode=padding, **members).set_output(True)
    assert words in (resample_bwd_refusal(g.nodes[0]) or "")
    with pytest.raises(hg.HipdnnError) as info:
        run_resample_bwd(g.nodes[0], {"DY": np.zeros((1, 1, 2, 2))})
    assert words in info.value.message


def test_bad_inputs_are_refused_and_left_untouched() -> None:
    members = _members([2, 2], [2, 2], [0, 0], [0, 0])
    node = _fwd_node([1, 1, 4, 4], M.MAXPOOL, P.ZERO_PAD, members)
    assert resample_fwd_refusal(node) is None
    for inputs in ({}, {"X": np.zeros((1, 1, 4, 5))}):
        with pytest.raises(hg.HipdnnError) as info:
            run_resample_fwd(node, inputs)
        assert info.value.code == hg.ErrorCode.INVALID_VALUE
    back = _bwd_node([1, 1, 2, 2], [1, 1, 4, 4], M.MAXPOOL, P.ZERO_PAD, members)
    dy, index = np.ones((1, 1, 2, 2)), np.zeros((1, 1, 2, 2), dtype=np.int32)
    dy.flags.writeable = False
    index.flags.writeable = False
    with pytest.raises(hg.HipdnnError, match="input INDEX was not given"):
        run_resample_bwd(back, {"DY": dy})
    dx = run_resample_bwd(back, {"DY": dy, "INDEX": index})["DX"]
    assert dx[0, 0, 0, 0] == 1.0 and dx.sum() == 1.0  # only the first window holds position 0


@pytest.mark.parametrize(("io", "compute"), TYPE_PAIRS, ids=TYPE_IDS)
@pytest.mark.parametrize(
    "mode",
    [M.MAXPOOL, M.AVGPOOL_EXCLUDE_PADDING, M.AVGPOOL_INCLUDE_PADDING],
    ids=lambda m: m.name,
)
def test_a_pooling_and_its_backward_run_on_the_engine(io, compute, mode) -> None:
    """A forward pooling and its backward in one graph on ``NUMPY_REFERENCE_ENGINE`` (the
    registered references): the backward reads Y as its DY (and MAXPOOL's INDEX, a virtual
    INT32 tensor), per storage type, against torch in float64 on the stored values."""
    dims, window, stride, pre, post = [2, 3, 6, 6], [3, 3], [2, 2], [1, 1], [1, 1]
    padding = P.NEG_INF_PAD if mode == M.MAXPOOL else P.ZERO_PAD
    g = graph(io, compute)
    x = g.tensor(name="x", dim=dims)
    y, index = g.resample(
        x, name="pool", resample_mode=mode, padding_mode=padding,
        generate_index=mode == M.MAXPOOL, **_members(window, stride, pre, post),
    )  # fmt: skip
    y.set_output(True)
    dx = g.resample_bwd(
        y, name="back", index=index, resample_mode=mode, padding_mode=padding,
        **_members(window, stride, pre, post),
    )  # fmt: skip
    dx.set_dim(dims).set_output(True)
    g.validate()
    assert (index is None) == (mode != M.MAXPOOL)
    # distinct values, exact in every storage type, so no maximum ties
    x_in = stored(RNG.permutation(int(np.prod(dims))).reshape(dims) - 100.0, x)
    got = run(g, {x: x_in})
    xt = torch.tensor(np.asarray(x_in, dtype=np.float64), requires_grad=True)
    if mode == M.MAXPOOL:
        want, _ = _torch_max(xt, window, stride, pre, post, padding)
    else:
        want = _torch_avg(xt, window, stride, pre, post, mode)
    assert_close(got[y], want.detach().numpy(), io, compute, terms=int(np.prod(window)))
    want.backward(torch.tensor(got[y].astype(np.float64)))  # the stored Y is the DY read
    assert_close(got[dx], xt.grad.numpy(), io, compute, terms=int(np.prod(window)))


@pytest.mark.filterwarnings("error")
def test_sums_past_the_range_and_infinities_give_ieee_answers_without_warnings() -> None:
    # NumPy's RuntimeWarnings (overflow in add, invalid value in add) reached users of the
    # reference (issue 41 item 23): the answers are IEEE's, in the compute type, silently
    members = _members([1, 2], [1, 2], [0, 0], [0, 0])
    big, inf = 1.7e308, np.inf
    x = np.array([[[[big, big, inf, -inf, np.nan, 1.0]]]])
    for mode in (M.AVGPOOL_INCLUDE_PADDING, M.AVGPOOL_EXCLUDE_PADDING):
        node = _fwd_node([1, 1, 1, 6], mode, P.ZERO_PAD, members)
        y = run_resample_fwd(node, {"X": x})["Y"].ravel()
        assert y[0] == inf and np.isnan(y[1]) and np.isnan(y[2])
        back = _bwd_node([1, 1, 1, 3], [1, 1, 1, 6], mode, P.ZERO_PAD, members)
        dx = run_resample_bwd(back, {"DY": np.array([[[[inf, -inf, big]]]])})["DX"].ravel()
        assert dx.tolist() == [inf, inf, -inf, -inf, big / 2, big / 2]
    node = _fwd_node([1, 1, 1, 6], M.MAXPOOL, P.ZERO_PAD, members)
    assert run_resample_fwd(node, {"X": x})["Y"].ravel().tolist() == [big, inf, 1.0]
