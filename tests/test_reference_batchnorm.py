"""The NumPy batch-norm references (training forward with saved and running statistics,
inference from the inverse variance, inference from the variance, backward with and without
saved statistics) against torch in float64 (``aten.native_batch_norm``, ``F.batch_norm`` and
``aten.native_batch_norm_backward``), in channels-first and channels-last layouts, and per storage
type computed in FLOAT."""

from __future__ import annotations

import doctest
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families import _statistics, batchnorm, batchnorm_backward
from hipdnn_graph_numpy_reference.families.batchnorm import (
    run_batchnorm,
    run_batchnorm_inference,
    run_batchnorm_inference_variance_ext,
)
from hipdnn_graph_numpy_reference.families.batchnorm_backward import (
    DEFAULT_EPSILON,
    run_batchnorm_backward,
)

torch = pytest.importorskip("torch")
F = torch.nn.functional
aten = torch.ops.aten

Array = np.ndarray[Any, Any]
FLOAT, DOUBLE = hg.DataType.FLOAT, hg.DataType.DOUBLE
EPS, MOMENTUM = 1e-3, 0.25
SHAPES = {"2d": (5, 3), "4d": (2, 3, 4, 5), "5d": (2, 4, 2, 3, 2)}
STORAGE = {
    FLOAT: np.float32,
    hg.DataType.HALF: np.float16,
    hg.DataType.BFLOAT16: ml_dtypes.bfloat16,
}


def _strides(dims: tuple[int, ...], channels_last: bool) -> list[int]:
    order = [0, *range(2, len(dims)), 1] if channels_last else list(range(len(dims)))
    strides, step = [0] * len(dims), 1
    for axis in reversed(order):
        strides[axis] = step
        step *= dims[axis]
    return strides


def _laid_out(values: Array, dtype: Any, channels_last: bool) -> Array:
    if channels_last and values.ndim > 2:
        array = np.moveaxis(np.ascontiguousarray(np.moveaxis(values, 1, -1)).astype(dtype), -1, 1)
    else:
        array = np.ascontiguousarray(values).astype(dtype)
    array.flags.writeable = False
    return array


class _Builder:
    """A graph of one storage type whose tensors are laid out channels-first or -last."""

    def __init__(self, io: hg.DataType, compute: hg.DataType, channels_last: bool) -> None:
        self.g = hg.Graph(io_data_type=io, compute_data_type=compute)
        self.channels_last = channels_last

    def tensor(self, name: str, dims: tuple[int, ...]) -> hg.TensorAttributes:
        return self.g.tensor(name=name, dim=list(dims), stride=_strides(dims, self.channels_last))

    def scalar(self, name: str, value: float) -> hg.TensorAttributes:
        return self.g.tensor(name=name, dim=[1], stride=[1]).set_value(value)

    def node(self, *outputs: hg.TensorAttributes | None) -> Any:
        for t in outputs:
            if t is not None:
                t.set_output(True)
        self.g.validate()
        return self.g.nodes[0]


def _channel_shape(dims: tuple[int, ...]) -> tuple[int, ...]:
    return (1, dims[1]) + (1,) * (len(dims) - 2)


def _operands(dims: tuple[int, ...], seed: int = 0) -> dict[str, Array]:
    rng = np.random.default_rng(seed)
    per_channel = _channel_shape(dims)
    return {
        "X": rng.standard_normal(dims) * 2 + 3,
        "DY": rng.standard_normal(dims),
        "SCALE": rng.standard_normal(per_channel),
        "BIAS": rng.standard_normal(per_channel),
        "MEAN": rng.standard_normal(per_channel),
        "VARIANCE": rng.uniform(0.5, 2.0, per_channel),
    }


def _t(a: Array) -> Any:
    return torch.tensor(np.asarray(a, dtype=np.float64).reshape(a.shape))


def _flat(a: Array) -> Any:
    return _t(a).reshape(-1)


def _training(
    dims: tuple[int, ...], io: hg.DataType, compute: hg.DataType, channels_last: bool
) -> tuple[Any, list[hg.TensorAttributes | None]]:
    b = _Builder(io, compute, channels_last)
    per_channel = _channel_shape(dims)
    outs = b.g.batchnorm(
        b.tensor("x", dims), b.tensor("scale", per_channel), b.tensor("bias", per_channel),
        epsilon=b.scalar("eps", EPS), prev_running_mean=b.tensor("rm", per_channel),
        prev_running_variance=b.tensor("rv", per_channel), momentum=b.scalar("m", MOMENTUM),
    )  # fmt: skip
    return b.node(*outs), list(outs)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_training_matches_torch(shape: str, channels_last: bool) -> None:
    dims = SHAPES[shape]
    node, _ = _training(dims, FLOAT, DOUBLE, channels_last)
    v = _operands(dims)
    arrays = {k: _laid_out(v[k], np.float32, channels_last) for k in ("X", "SCALE", "BIAS")}
    arrays |= {"PREV_RUNNING_MEAN": v["MEAN"], "PREV_RUNNING_VARIANCE": v["VARIANCE"]}
    out = run_batchnorm(node, {**arrays, "EPSILON": EPS, "MOMENTUM": MOMENTUM})
    x = _t(arrays["X"])
    running_mean, running_var = _flat(v["MEAN"]), _flat(v["VARIANCE"])
    y, mean, inv_std = aten.native_batch_norm(
        x, _flat(arrays["SCALE"]), _flat(arrays["BIAS"]), running_mean, running_var,
        True, MOMENTUM, EPS,
    )[:3]  # fmt: skip
    expected = {
        "Y": y.numpy(),
        "MEAN": mean.numpy().reshape(_channel_shape(dims)),
        "INV_VARIANCE": inv_std.numpy().reshape(_channel_shape(dims)),
        # torch updates its running statistics in place, the variance unbiased
        "NEXT_RUNNING_MEAN": running_mean.numpy().reshape(_channel_shape(dims)),
        "NEXT_RUNNING_VARIANCE": running_var.numpy().reshape(_channel_shape(dims)),
    }
    assert sorted(out) == sorted(expected)
    for slot, want in expected.items():
        assert out[slot].dtype == np.float64 and out[slot].shape == want.shape, slot
        np.testing.assert_allclose(out[slot], want, rtol=1e-12, atol=1e-12, err_msg=slot)


def test_training_without_running_statistics_and_scalars_as_arrays() -> None:
    dims = SHAPES["4d"]
    b = _Builder(FLOAT, DOUBLE, False)
    per_channel = _channel_shape(dims)
    outs = b.g.batchnorm(
        b.tensor("x", dims), b.tensor("scale", per_channel), b.tensor("bias", per_channel),
        epsilon=b.scalar("eps", EPS),
    )  # fmt: skip
    assert outs[3] is None and outs[4] is None
    node = b.node(*outs)
    v = _operands(dims)
    out = run_batchnorm(
        node, {"X": v["X"], "SCALE": v["SCALE"], "BIAS": v["BIAS"], "EPSILON": np.array([EPS])}
    )
    assert sorted(out) == ["INV_VARIANCE", "MEAN", "Y"]
    y = F.batch_norm(_t(v["X"]), None, None, _flat(v["SCALE"]), _flat(v["BIAS"]), True, 0.1, EPS)
    np.testing.assert_allclose(out["Y"], y.numpy(), rtol=1e-12, atol=1e-12)


def test_epsilon_of_several_elements_is_refused() -> None:
    node, _ = _training(SHAPES["2d"], FLOAT, DOUBLE, False)
    v = _operands(SHAPES["2d"])
    with pytest.raises(hg.HipdnnError) as info:
        run_batchnorm(
            node,
            {"X": v["X"], "SCALE": v["SCALE"], "BIAS": v["BIAS"], "EPSILON": np.ones(2),
             "PREV_RUNNING_MEAN": v["MEAN"], "PREV_RUNNING_VARIANCE": v["VARIANCE"],
             "MOMENTUM": MOMENTUM},
        )  # fmt: skip
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_inference_matches_torch(shape: str, channels_last: bool) -> None:
    dims = SHAPES[shape]
    per_channel = _channel_shape(dims)
    v = _operands(dims)
    inv_variance = 1 / np.sqrt(v["VARIANCE"] + EPS)
    b = _Builder(FLOAT, DOUBLE, channels_last)
    y = b.g.batchnorm_inference(*(b.tensor(n, d) for n, d in (
        ("x", dims), ("mean", per_channel), ("inv_var", per_channel), ("scale", per_channel),
        ("bias", per_channel))))  # fmt: skip
    node = b.node(y)
    x = _laid_out(v["X"], np.float64, channels_last)
    common = {"X": x, "MEAN": v["MEAN"], "SCALE": v["SCALE"], "BIAS": v["BIAS"]}
    got = run_batchnorm_inference(node, {**common, "INV_VARIANCE": inv_variance})["Y"]
    b = _Builder(FLOAT, DOUBLE, channels_last)
    y = b.g.batchnorm_inference_variance_ext(*(b.tensor(n, d) for n, d in (
        ("x", dims), ("mean", per_channel), ("var", per_channel), ("scale", per_channel),
        ("bias", per_channel))), b.scalar("eps", EPS))  # fmt: skip
    node = b.node(y)
    got_ext = run_batchnorm_inference_variance_ext(
        node, {**common, "VARIANCE": v["VARIANCE"], "EPSILON": EPS}
    )["Y"]
    want = F.batch_norm(
        _t(x), _flat(v["MEAN"]), _flat(v["VARIANCE"]), _flat(v["SCALE"]), _flat(v["BIAS"]),
        False, 0.0, EPS,
    ).numpy()  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_ext, want, rtol=1e-12, atol=1e-12)


def _backward_node(
    dims: tuple[int, ...],
    saved: bool,
    channels_last: bool,
    io: hg.DataType = FLOAT,
    compute: hg.DataType = DOUBLE,
) -> Any:
    b = _Builder(io, compute, channels_last)
    per_channel = _channel_shape(dims)
    keywords = {}
    if saved:
        keywords = {
            "mean": b.tensor("mean", per_channel),
            "inv_variance": b.tensor("iv", per_channel),
        }
    outs = b.g.batchnorm_backward(
        b.tensor("dy", dims), b.tensor("x", dims), b.tensor("scale", per_channel), **keywords
    )
    return b.node(*outs)


def _torch_backward(
    v: dict[str, Array], mean: Array | None, inv_std: Array | None, eps: float
) -> dict[str, Array]:
    x = _t(v["X"])
    scale = _flat(v["SCALE"])
    if mean is None or inv_std is None:
        xg = x.clone().requires_grad_(True)
        sg = scale.clone().requires_grad_(True)
        bg = torch.zeros_like(scale, requires_grad=True)
        F.batch_norm(xg, None, None, sg, bg, True, 0.1, eps).backward(_t(v["DY"]))
        grads = (xg.grad, sg.grad, bg.grad)
    else:
        grads = aten.native_batch_norm_backward(
            _t(v["DY"]), x, scale, None, None, _flat(mean), _flat(inv_std), True, eps,
            [True, True, True],
        )  # fmt: skip
    shape = _channel_shape(v["X"].shape)
    return {
        "DX": grads[0].numpy(),
        "DSCALE": grads[1].numpy().reshape(shape),
        "DBIAS": grads[2].numpy().reshape(shape),
    }


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("saved", [False, True], ids=["batch-stats", "saved-stats"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_backward_matches_torch(shape: str, saved: bool, channels_last: bool) -> None:
    dims = SHAPES[shape]
    v = _operands(dims)
    node = _backward_node(dims, saved, channels_last)
    arrays = {k: _laid_out(v[k], np.float64, channels_last) for k in ("X", "DY", "SCALE")}
    mean = inv_std = None
    if saved:
        # saved statistics are used as given, even when they are not the batch's own
        mean, inv_std = v["MEAN"], 1 / np.sqrt(v["VARIANCE"])
        arrays |= {"MEAN": mean, "INV_VARIANCE": inv_std}
    out = run_backward = run_batchnorm_backward(node, arrays)
    want = _torch_backward(v, mean, inv_std, DEFAULT_EPSILON)
    assert sorted(run_backward) == sorted(want)
    for slot, expected in want.items():
        assert out[slot].shape == expected.shape, slot
        np.testing.assert_allclose(out[slot], expected, rtol=1e-10, atol=1e-10, err_msg=slot)


def test_backward_without_saved_statistics_uses_hipdnns_epsilon() -> None:
    """Without saved statistics the batch's are used with epsilon 1e-5 (a tiny variance
    makes the epsilon visible)."""
    dims = (4, 1)
    node = _backward_node(dims, False, False)
    v = {"X": np.array([[0.0], [1e-3], [2e-3], [3e-3]]), "DY": np.array([[1.0], [0], [0], [2]]),
         "SCALE": np.ones((1, 1))}  # fmt: skip
    out = run_batchnorm_backward(node, v)
    np.testing.assert_allclose(out["DX"], _torch_backward(v, None, None, 1e-5)["DX"], rtol=1e-10)
    assert not np.allclose(out["DX"], _torch_backward(v, None, None, 1e-3)["DX"], rtol=1e-3)


@pytest.mark.parametrize("io", list(STORAGE), ids=lambda t: t.name)
def test_storage_types_compute_in_float(io: hg.DataType) -> None:
    """Storage-type inputs computed in FLOAT: float32 results within float32 rounding of the
    float64 results on the same rounded inputs."""
    dims = SHAPES["4d"]
    storage = STORAGE[io]
    v = {k: a.astype(storage).astype(np.float64) for k, a in _operands(dims, seed=3).items()}
    node, _ = _training(dims, io, FLOAT, True)
    arrays = {k: _laid_out(v[k], storage, True) for k in ("X", "SCALE", "BIAS")}
    arrays |= {"PREV_RUNNING_MEAN": v["MEAN"].astype(storage),
               "PREV_RUNNING_VARIANCE": v["VARIANCE"].astype(storage)}  # fmt: skip
    out = run_batchnorm(node, {**arrays, "EPSILON": EPS, "MOMENTUM": MOMENTUM})
    y = aten.native_batch_norm(
        _t(v["X"]), _flat(v["SCALE"]), _flat(v["BIAS"]), None, None, True, 0.0, EPS
    )[0].numpy()
    assert out["Y"].dtype == np.float32
    np.testing.assert_allclose(out["Y"], y, rtol=2e-5, atol=2e-5)
    back = run_batchnorm_backward(
        _backward_node(dims, False, True, io, FLOAT),
        {k: _laid_out(v[k], storage, True) for k in ("X", "DY", "SCALE")},
    )
    want = _torch_backward(v, None, None, DEFAULT_EPSILON)
    for slot in ("DX", "DSCALE", "DBIAS"):
        assert back[slot].dtype == np.float32
        np.testing.assert_allclose(back[slot], want[slot], rtol=5e-5, atol=5e-5, err_msg=slot)


def test_half_compute_is_refused() -> None:
    node = _backward_node(SHAPES["2d"], False, False, hg.DataType.HALF, hg.DataType.HALF)
    v = _operands(SHAPES["2d"])
    with pytest.raises(hg.HipdnnError) as info:
        run_batchnorm_backward(node, {k: v[k] for k in ("X", "DY", "SCALE")})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED


@pytest.mark.parametrize("module", [batchnorm, batchnorm_backward, _statistics])
def test_docstring_examples(module: Any) -> None:
    assert doctest.testmod(module).failed == 0
