"""The NumPy convolution references (forward, data gradient, weight gradient) against torch's
float64 autograd of ``F.conv{1,2,3}d``: 1-3 spatial dims, asymmetric padding, stride, dilation,
groups, both convolution modes, channels-first and channels-last layouts, and each storage type
computed in FLOAT (tolerances of float32 accumulation) or DOUBLE."""

from __future__ import annotations

import doctest
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families import (
    convolution,
    convolution_depthwise,
    convolution_layout,
    convolution_math,
)
from hipdnn_graph_numpy_reference.families.convolution import (
    run_conv_dgrad,
    run_conv_fprop,
    run_conv_wgrad,
)

torch = pytest.importorskip("torch")
F = torch.nn.functional

Array = np.ndarray[Any, Any]
CROSS, CONV = hg.ConvolutionMode.CROSS_CORRELATION, hg.ConvolutionMode.CONVOLUTION


@dataclass(frozen=True)
class Case:
    n: int
    c: int
    k: int
    groups: int
    size: tuple[int, ...]
    kernel: tuple[int, ...]
    pre: tuple[int, ...]
    post: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]

    @property
    def out(self) -> tuple[int, ...]:
        return tuple(
            (n + a + b - (d * (k - 1) + 1)) // s + 1
            for n, k, a, b, s, d in zip(
                self.size, self.kernel, self.pre, self.post, self.stride, self.dilation,
                strict=True,
            )
        )  # fmt: skip

    def members(self) -> dict[str, Any]:
        return {
            "pre_padding": list(self.pre),
            "post_padding": list(self.post),
            "stride": list(self.stride),
            "dilation": list(self.dilation),
        }


CASES = {
    # 1-D, grouped, strided, more padding after than before
    "1d": Case(2, 4, 6, 2, (9,), (3,), (1,), (2,), (2,), (1,)),
    # 2-D, stride in one dim, dilation in the other, asymmetric padding
    "2d": Case(2, 4, 6, 1, (7, 8), (3, 2), (1, 0), (2, 1), (2, 1), (1, 2)),
    # 2-D depthwise (groups = channels), unit stride: the transposed-correlation data gradient
    "depthwise": Case(1, 6, 6, 6, (5, 5), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    # 1x1 grouped
    "pointwise": Case(3, 4, 8, 2, (6, 7), (1, 1), (0, 0), (0, 0), (1, 1), (1, 1)),
    # 3-D, mixed strides and dilations
    "3d": Case(2, 4, 4, 2, (5, 6, 4), (2, 3, 2), (1, 0, 1), (0, 2, 1), (1, 2, 2), (2, 1, 1)),
    # padding past the kernel's reach, stride above the kernel: input rows no output reads
    "sparse": Case(2, 3, 5, 1, (7, 7), (3, 3), (3, 0), (0, 3), (3, 2), (2, 2)),
    # unit stride but padding past the kernel's reach: the data gradient scatters (col2im)
    "wide-pad": Case(2, 2, 3, 1, (5, 4), (2, 2), (3, 0), (0, 2), (1, 1), (1, 1)),
    # 1x1 strided, grouped, unpadded: the windows are a subsample of the input
    "pointwise-strided": Case(2, 4, 6, 2, (7, 6), (1, 1), (0, 0), (0, 0), (2, 3), (1, 1)),
    # unit stride and dilation 2 in the first dim (its taps are shifted rows), no padding and
    # a last input column no tap reads (the input is read in place, not padded)
    "dilated-unpadded": Case(3, 4, 2, 1, (8, 9), (3, 2), (0, 0), (0, 0), (1, 3), (2, 1)),
    # a dim whose only tap reads the padding before the input: all of its outputs are 0
    "padding-only": Case(2, 2, 3, 1, (4, 4), (1, 2), (3, 0), (0, 0), (7, 1), (1, 1)),
    # grouped 3x3 of unit stride over a batch: the channels-last batch flattened into rows
    "grouped": Case(3, 6, 9, 3, (6, 5), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    # depthwise, 1-D, stride and dilation 2, asymmetric padding (channels last: tap by tap;
    # the strided data gradient scatters)
    "depthwise-1d": Case(2, 5, 5, 5, (11,), (3,), (2,), (1,), (2,), (2,)),
    # depthwise, 3-D, mixed strides and dilations
    "depthwise-3d": Case(
        2, 3, 3, 3, (5, 4, 6), (2, 3, 2), (1, 0, 1), (0, 2, 1), (1, 1, 2), (2, 1, 1)
    ),
    # a depthwise multiplier of 2 (two filters per channel): the im2col path
    "depthwise-multiplier": Case(2, 3, 6, 3, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    # 3-D 1x1x1 of unit stride: no gather at all
    "pointwise-3d": Case(
        2, 3, 4, 1, (3, 4, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0), (1, 1, 1), (1, 1, 1)
    ),
}

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _torch_reference(
    case: Case, x: Array, w: Array, dy: Array, mode: hg.ConvolutionMode
) -> tuple[Array, Array, Array]:
    """(y, dx, dw) of the convolution in float64 by torch autograd."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    dims = list(range(2, 2 + len(case.size)))
    weight = torch.flip(wt, dims) if mode == CONV else wt
    pad: list[int] = []
    for a, b in zip(reversed(case.pre), reversed(case.post), strict=True):
        pad += [a, b]
    y = _CONV[len(case.size)](
        F.pad(xt, pad), weight, stride=case.stride, dilation=case.dilation, groups=case.groups
    )
    y.backward(torch.tensor(dy, dtype=torch.float64))
    assert xt.grad is not None and wt.grad is not None
    return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()


def _strides(dims: tuple[int, ...], channels_last: bool) -> list[int]:
    order = [0, *range(2, len(dims)), 1] if channels_last else list(range(len(dims)))
    strides, step = [0] * len(dims), 1
    for axis in reversed(order):
        strides[axis] = step
        step *= dims[axis]
    return strides


def _laid_out(values: Array, dtype: Any, channels_last: bool) -> Array:
    """``values`` in the storage ``dtype``, its memory in the given layout (logical dims kept),
    read-only as the engine hands it."""
    if channels_last:
        array = np.ascontiguousarray(np.moveaxis(values, 1, -1)).astype(dtype)
        array = np.moveaxis(array, -1, 1)
    else:
        array = np.ascontiguousarray(values).astype(dtype)
    array.flags.writeable = False
    return array


def _graph(io: hg.DataType, compute: hg.DataType) -> hg.Graph:
    return hg.Graph(io_data_type=io, compute_data_type=compute)


def _node(
    kind: str,
    case: Case,
    *,
    channels_last: bool = False,
    mode: hg.ConvolutionMode = CROSS,
    io: hg.DataType = hg.DataType.FLOAT,
    compute: hg.DataType = hg.DataType.DOUBLE,
) -> Any:
    """A validated node of ``kind`` (fprop, dgrad, wgrad) for ``case``."""
    g = _graph(io, compute)
    x_dims = (case.n, case.c, *case.size)
    w_dims = (case.k, case.c // case.groups, *case.kernel)
    y_dims = (case.n, case.k, *case.out)

    def tensor(name: str, dims: tuple[int, ...]) -> hg.TensorAttributes:
        return g.tensor(name=name, dim=list(dims), stride=_strides(dims, channels_last))

    keywords = {**case.members(), "convolution_mode": mode, "name": kind}
    if kind == "fprop":
        out = g.conv_fprop(tensor("x", x_dims), tensor("w", w_dims), **keywords)
    elif kind == "dgrad":
        out = g.conv_dgrad(tensor("dy", y_dims), tensor("w", w_dims), **keywords)
        out.set_dim(list(x_dims))  # hipDNN infers one group
    else:
        out = g.conv_wgrad(tensor("dy", y_dims), tensor("x", x_dims), **keywords)
        out.set_dim(list(w_dims))  # the kernel is not inferable with strides; one group
    out.set_output(True)
    g.validate()
    return g.nodes[0]


def _operands(case: Case, seed: int = 0) -> tuple[Array, Array, Array]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((case.n, case.c, *case.size))
    w = rng.standard_normal((case.k, case.c // case.groups, *case.kernel))
    dy = rng.standard_normal((case.n, case.k, *case.out))
    return x, w, dy


def _run_all(
    case: Case, x: Array, w: Array, dy: Array, storage: Any, **node_args: Any
) -> tuple[Array, Array, Array]:
    channels_last = node_args.get("channels_last", False)
    xs, ws, dys = (_laid_out(v, storage, channels_last) for v in (x, w, dy))
    y = run_conv_fprop(_node("fprop", case, **node_args), {"X": xs, "W": ws})["Y"]
    dx = run_conv_dgrad(_node("dgrad", case, **node_args), {"DY": dys, "W": ws})["DX"]
    dw = run_conv_wgrad(_node("wgrad", case, **node_args), {"DY": dys, "X": xs})["DW"]
    return y, dx, dw


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", [CROSS, CONV], ids=["cross", "conv"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_matches_torch_float64(name: str, mode: hg.ConvolutionMode, channels_last: bool) -> None:
    case = CASES[name]
    x, w, dy = _operands(case)
    y, dx, dw = _run_all(case, x, w, dy, np.float64, mode=mode, channels_last=channels_last)
    ref_y, ref_dx, ref_dw = _torch_reference(case, x, w, dy, mode)
    for got, ref in ((y, ref_y), (dx, ref_dx), (dw, ref_dw)):
        assert got.dtype == np.float64 and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["2d", "sparse", "3d", "grouped", "pointwise"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_batch_chunks_give_the_same_results(
    name: str, channels_last: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a chunk budget of one byte every batch element runs alone (bounded memory)."""
    case = CASES[name]
    x, w, dy = _operands(case)
    monkeypatch.setattr(convolution_math, "CHUNK_BYTES", 1)
    assert len(convolution_math._batch_chunks(case.n, _geometry(case), case.c, 8)) == case.n
    got = _run_all(case, x, w, dy, np.float64, mode=CONV, channels_last=channels_last)
    for out, ref in zip(got, _torch_reference(case, x, w, dy, CONV), strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


def _geometry(case: Case) -> convolution_math.Geometry:
    return convolution_math.Geometry.of(
        case.size, case.kernel, pre=case.pre, post=case.post, stride=case.stride,
        dilation=case.dilation,
    )  # fmt: skip


def test_the_modes_differ_by_the_flipped_filter() -> None:
    """CONVOLUTION is cross-correlation with the kernel flipped, not the same thing."""
    case = CASES["2d"]
    x, w, dy = _operands(case)
    cross = _run_all(case, x, w, dy, np.float64, mode=CROSS)
    conv = _run_all(case, x, w, dy, np.float64, mode=CONV)
    assert not np.allclose(cross[0], conv[0])
    flipped = _run_all(case, x, w[:, :, ::-1, ::-1], dy, np.float64, mode=CROSS)
    np.testing.assert_allclose(conv[0], flipped[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(conv[2], flipped[2][:, :, ::-1, ::-1], rtol=1e-12, atol=1e-12)


STORAGE = {
    hg.DataType.FLOAT: np.float32,
    hg.DataType.HALF: np.float16,
    hg.DataType.BFLOAT16: ml_dtypes.bfloat16,
}


@pytest.mark.parametrize("io", list(STORAGE), ids=lambda t: t.name)
@pytest.mark.parametrize("name", ["2d", "3d", "depthwise"])
def test_storage_types_compute_in_float(io: hg.DataType, name: str) -> None:
    """Inputs of each storage type, computed in FLOAT: float32 results within float32
    accumulation error of the float64 result on the same (rounded) inputs."""
    case = CASES[name]
    storage = STORAGE[io]
    x, w, dy = (v.astype(storage).astype(np.float64) for v in _operands(case, seed=1))
    got = _run_all(case, x, w, dy, storage, io=io, compute=hg.DataType.FLOAT)
    ref = _torch_reference(case, x, w, dy, CROSS)
    # each output element sums at most this many products; float32 rounds each to ~6e-8
    bound = _torch_reference(case, np.abs(x), np.abs(w), np.abs(dy), CROSS)
    for out, exact, scale in zip(got, ref, bound, strict=True):
        assert out.dtype == np.float32
        assert np.all(np.abs(out - exact) <= 2e-6 * scale + 1e-30)


def test_float_compute_is_float32_not_float16() -> None:
    """The FLOAT compute of half inputs is not rounded through half (it would miss by ~1e-3)."""
    case = Case(1, 64, 1, 1, (3,), (3,), (1,), (1,), (1,), (1,))
    x = np.full((1, 64, 3), 1 + 2.0**-10, dtype=np.float16)
    w = np.ones((1, 64, 3), dtype=np.float16)
    node = _node("fprop", case, io=hg.DataType.HALF, compute=hg.DataType.FLOAT)
    y = run_conv_fprop(node, {"X": x, "W": w})["Y"]
    assert y[0, 0, 1] == np.float32(192 * (1 + 2.0**-10))


def test_inputs_are_not_written() -> None:
    case = CASES["sparse"]
    x, w, dy = _operands(case)
    copies = [v.copy() for v in (x, w, dy)]
    _run_all(case, x, w, dy, np.float64)  # read-only views: a write would raise
    for before, after in zip(copies, (x, w, dy), strict=True):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_not_set_mode_is_refused(kind: str) -> None:
    case = CASES["2d"]
    node = _node(kind, case, mode=hg.ConvolutionMode.NOT_SET)
    assert "NOT_SET" in (convolution.convolution_refusal(node) or "")
    x, w, dy = _operands(case)
    run, inputs = {
        "fprop": (run_conv_fprop, {"X": x, "W": w}),
        "dgrad": (run_conv_dgrad, {"DY": dy, "W": w}),
        "wgrad": (run_conv_wgrad, {"DY": dy, "X": x}),
    }[kind]
    with pytest.raises(hg.HipdnnError) as info:
        run(node, inputs)
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED


def test_half_compute_is_refused() -> None:
    case = CASES["1d"]
    node = _node("fprop", case, io=hg.DataType.HALF, compute=hg.DataType.HALF)
    x, w, _ = _operands(case)
    with pytest.raises(hg.HipdnnError) as info:
        run_conv_fprop(node, {"X": x.astype(np.float16), "W": w.astype(np.float16)})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert "HALF" in info.value.message


def test_dy_of_other_dims_is_refused() -> None:
    case = CASES["2d"]
    node = _node("dgrad", case)
    _, w, dy = _operands(case)
    with pytest.raises(hg.HipdnnError) as info:
        run_conv_dgrad(node, {"DY": dy[:, :, :-1], "W": w})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED


@pytest.mark.parametrize(
    "module", [convolution, convolution_math, convolution_layout, convolution_depthwise]
)
def test_docstring_examples(module: Any) -> None:
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_pointwise_gathers_nothing(channels_last: bool) -> None:
    """The im2col matrix of a 1x1 unit-stride unpadded convolution is the input itself (no
    copy), in either layout."""
    case = CASES["pointwise"]
    x = _laid_out(_operands(case)[0], np.float32, channels_last)
    g = _geometry(case)
    windows = convolution_math._windows(convolution_layout.padded(x, g), g, case.groups, 1)
    kernel, spread = convolution_math._axes(g, 1)
    rows, per_group = case.n * int(np.prod(case.size)), case.c // case.groups
    if channels_last:  # [G, N·H·W, C/G]
        shape = (case.groups, rows, per_group)
        cols = convolution_math._gathered(windows, [1, 0, *spread, *kernel, 2], shape)
    else:  # [N, G, C/G, H·W]
        shape = (case.n, case.groups, per_group, rows // case.n)
        cols = convolution_math._gathered(windows, [0, 1, 2, *kernel, *spread], shape)
    assert np.shares_memory(cols, x)
    assert convolution_math.channels_last(x) == channels_last


def test_batch_chunks_count_the_gathered_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunk budget counts the windows a unit-stride first dim gathers whole (here far more
    than the padded input: a dilation of 100 over 201 rows, overlapping 3-tap windows across)."""
    g = convolution_math.Geometry.of(
        [201, 58], [3, 3], pre=[0, 1], post=[0, 1], stride=[1, 1], dilation=[100, 1]
    )
    x = np.zeros((2, 4, 201, 58))
    windows = convolution_math._windows(convolution_layout.padded(x, g), g, 1, 1)
    per_element = windows[0].size * x.itemsize
    monkeypatch.setattr(convolution_math, "CHUNK_BYTES", 2 * per_element - 1)
    assert len(convolution_math._batch_chunks(2, g, 4, x.itemsize)) == 2


@pytest.mark.parametrize("name", ["depthwise", "depthwise-1d", "depthwise-3d"])
def test_channels_last_depthwise_runs_tap_by_tap(name: str, monkeypatch: Any) -> None:
    """No im2col (a column-wide matrix per channel): every tap multiplies and adds in place
    (the unit-stride data gradient is a depthwise correlation too, a strided one adds back tap
    by tap), and the results are torch's, in the data's layout."""
    case = CASES[name]
    x, w, dy = _operands(case)

    def im2col(*args: Any) -> None:
        raise AssertionError("a channels-last depthwise convolution gathered windows")

    monkeypatch.setattr(convolution_math, "_correlate", im2col)
    monkeypatch.setattr(convolution_math, "_weight_gradient", im2col)
    monkeypatch.setattr(convolution_math, "_scatter_data_gradient", im2col)
    got = _run_all(case, x, w, dy, np.float64, mode=CROSS, channels_last=True)
    for out, ref in zip(got, _torch_reference(case, x, w, dy, CROSS), strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    assert convolution_math.channels_last(got[0]) and convolution_math.channels_last(got[1])


def test_channels_first_or_multiplied_depthwise_keeps_im2col() -> None:
    x = np.zeros((1, 4, 5, 5))
    assert not convolution_depthwise.is_depthwise(x, 4, 1)  # channels first
    last = np.zeros((1, 5, 5, 4)).transpose(0, 3, 1, 2)
    assert convolution_depthwise.is_depthwise(last, 4, 1)
    assert not convolution_depthwise.is_depthwise(last, 8, 1)  # two filters per channel
    assert not convolution_depthwise.is_depthwise(last, 4, 2)  # grouped, two channels per group
