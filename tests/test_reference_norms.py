"""The NumPy layer-norm and RMSNorm forward references against torch in float64
(``aten.native_layer_norm``, ``F.rms_norm``), for full-rank and lower-rank SCALEs, the normalized
dim count given or inferred as hipDNN infers it, both phases, channels-last layouts, and per
storage type computed in FLOAT."""

from __future__ import annotations

import doctest
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families import layernorm, rmsnorm
from hipdnn_graph_numpy_reference.families.layernorm import (
    layernorm_refusal,
    normalized_dim_count,
    run_layernorm,
)
from hipdnn_graph_numpy_reference.families.rmsnorm import run_rmsnorm

torch = pytest.importorskip("torch")
F = torch.nn.functional

Array = np.ndarray[Any, Any]
FLOAT, DOUBLE = hg.DataType.FLOAT, hg.DataType.DOUBLE
TRAINING, INFERENCE = hg.NormFwdPhase.TRAINING, hg.NormFwdPhase.INFERENCE
EPS = 1e-3
STORAGE = {
    FLOAT: np.float32,
    hg.DataType.HALF: np.float16,
    hg.DataType.BFLOAT16: ml_dtypes.bfloat16,
}


def _strides(dims: list[int], channels_last: bool) -> list[int]:
    order = [0, *range(2, len(dims)), 1] if channels_last and len(dims) > 2 else range(len(dims))
    strides, step = [0] * len(dims), 1
    for axis in reversed(list(order)):
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


def _graph(io: hg.DataType, compute: hg.DataType) -> hg.Graph:
    return hg.Graph(io_data_type=io, compute_data_type=compute)


def _tensor(g: hg.Graph, name: str, dims: list[int], channels_last: bool) -> hg.TensorAttributes:
    return g.tensor(name=name, dim=dims, stride=_strides(dims, channels_last))


def _eps() -> hg.TensorAttributes:
    return hg.TensorAttributes().set_value(EPS)


def _validated(g: hg.Graph, outputs: tuple[hg.TensorAttributes | None, ...]) -> Any:
    for t in outputs:
        if t is not None:
            t.set_output(True)
    g.validate()
    return g.nodes[0]


# (X dims, SCALE dims, normalized_dim_count given (0: inferred), normalized dims expected)
LAYERNORM_CASES = {
    "rows": ([4, 10], [1, 10], 1, 1),
    "rows-inferred": ([4, 10], [1, 10], 0, 1),
    "chw-inferred": ([2, 3, 4, 5], [1, 3, 4, 5], 0, 3),
    "hw-of-chw": ([2, 3, 4, 5], [1, 1, 4, 5], 0, 2),
    "lower-rank": ([3, 5, 8], [8], 1, 1),
    "lower-rank-inferred": ([3, 5, 8], [5, 8], 0, 2),
    "vector": ([16], [16], 0, 1),
}


def _layernorm_node(
    case: str,
    phase: hg.NormFwdPhase = TRAINING,
    *,
    channels_last: bool = False,
    io: hg.DataType = FLOAT,
    compute: hg.DataType = DOUBLE,
) -> Any:
    x_dims, scale_dims, count, normalized = LAYERNORM_CASES[case]
    g = _graph(io, compute)
    x = _tensor(g, "x", x_dims, channels_last)
    scale, bias = (_tensor(g, n, scale_dims, channels_last) for n in ("scale", "bias"))
    outs = g.layernorm(
        x, scale, bias, epsilon=_eps(), forward_phase=phase, normalized_dim_count=count
    )
    batch = x_dims[: len(x_dims) - normalized] + [1] * normalized
    for stats in outs[1:]:
        if stats is not None and len(scale_dims) != len(x_dims):
            stats.set_dim(batch)  # hipDNN's inference assumes all dims after the first
    return _validated(g, outs)


def _layernorm_torch(
    x: Array, scale: Array, bias: Array, normalized: int
) -> tuple[Array, Array, Array]:
    shape = x.shape[x.ndim - normalized :]
    xt = torch.tensor(x.astype(np.float64))
    st, bt = (torch.tensor(a.astype(np.float64)).reshape(shape) for a in (scale, bias))
    y, mean, rstd = torch.ops.aten.native_layer_norm(xt, list(shape), st, bt, EPS)
    return y.numpy(), mean.numpy(), rstd.numpy()


def _layernorm_operands(case: str, seed: int = 0) -> tuple[Array, Array, Array]:
    x_dims, scale_dims, _, _ = LAYERNORM_CASES[case]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_dims) * 3 + 2
    return x, rng.standard_normal(scale_dims), rng.standard_normal(scale_dims)


@pytest.mark.parametrize("case", sorted(LAYERNORM_CASES))
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_layernorm_training_matches_torch(case: str, channels_last: bool) -> None:
    node = _layernorm_node(case, channels_last=channels_last)
    normalized = LAYERNORM_CASES[case][3]
    assert normalized_dim_count(node) == normalized
    x, scale, bias = _layernorm_operands(case)
    arrays = {
        "X": _laid_out(x, np.float64, channels_last),
        "SCALE": _laid_out(scale, np.float64, channels_last),
        "BIAS": _laid_out(bias, np.float64, channels_last),
        "EPSILON": EPS,
    }
    out = run_layernorm(node, arrays)
    y, mean, rstd = _layernorm_torch(x, scale, bias, normalized)
    assert sorted(out) == ["INV_VARIANCE", "MEAN", "Y"]
    np.testing.assert_allclose(out["Y"], y, rtol=1e-12, atol=1e-12)
    for slot, want in (("MEAN", mean), ("INV_VARIANCE", rstd)):
        assert list(out[slot].shape) == node.attributes.tensors_by_slot()[slot].dim
        np.testing.assert_allclose(out[slot].reshape(want.shape), want, rtol=1e-12, atol=1e-12)


def test_layernorm_inference_writes_only_y() -> None:
    node = _layernorm_node("chw-inferred", INFERENCE)
    x, scale, bias = _layernorm_operands("chw-inferred")
    out = run_layernorm(node, {"X": x, "SCALE": scale, "BIAS": bias, "EPSILON": EPS})
    assert sorted(out) == ["Y"]
    np.testing.assert_allclose(out["Y"], _layernorm_torch(x, scale, bias, 3)[0], rtol=1e-12)


@pytest.mark.parametrize("io", list(STORAGE), ids=lambda t: t.name)
def test_layernorm_storage_types_compute_in_float(io: hg.DataType) -> None:
    storage = STORAGE[io]
    node = _layernorm_node("chw-inferred", io=io, compute=FLOAT, channels_last=True)
    x, scale, bias = (a.astype(storage) for a in _layernorm_operands("chw-inferred", seed=2))
    arrays = {"X": _laid_out(x, storage, True), "SCALE": scale, "BIAS": bias, "EPSILON": EPS}
    out = run_layernorm(node, arrays)
    y, mean, rstd = _layernorm_torch(x, scale, bias, 3)
    for slot, want in (("Y", y), ("MEAN", mean), ("INV_VARIANCE", rstd)):
        assert out[slot].dtype == np.float32
        np.testing.assert_allclose(out[slot].reshape(want.shape), want, rtol=2e-5, atol=2e-5)


def test_layernorm_refusals() -> None:
    g = _graph(FLOAT, DOUBLE)
    x = _tensor(g, "x", [4, 6], False)
    outs = g.layernorm(
        x, _tensor(g, "s", [1, 6], False), _tensor(g, "b", [1, 6], False), epsilon=_eps(),
        forward_phase=INFERENCE, normalized_dim_count=3,
    )  # fmt: skip
    for t in outs:  # a count above X's rank is refused by validate() (issue 41 item 7)
        if t is not None:
            t.set_output(True)
    with pytest.raises(hg.HipdnnError, match="normalized_dim_count 3 must be in"):
        g.validate()
    # a SCALE that varies along a batch dim
    g = _graph(FLOAT, DOUBLE)
    outs = g.layernorm(
        _tensor(g, "x", [4, 6], False), _tensor(g, "s", [4, 6], False),
        _tensor(g, "b", [4, 6], False), epsilon=_eps(), forward_phase=INFERENCE,
        normalized_dim_count=1,
    )  # fmt: skip
    assert "SCALE dims [4, 6]" in (layernorm_refusal(_validated(g, outs)) or "")
    # statistics that hipDNN infers as [N, 1, 1] beside a lower-rank SCALE normalizing one dim
    g = _graph(FLOAT, DOUBLE)
    outs = g.layernorm(
        _tensor(g, "x", [3, 5, 8], False), _tensor(g, "s", [8], False),
        _tensor(g, "b", [8], False), epsilon=_eps(), forward_phase=TRAINING,
        normalized_dim_count=1,
    )  # fmt: skip
    assert "MEAN has dims [3, 1, 1]" in (layernorm_refusal(_validated(g, outs)) or "")


# (X dims, SCALE dims, first normalized dim)
RMSNORM_CASES = {
    "rows": ([4, 16], [1, 16], 1),
    "tokens": ([2, 5, 32], [1, 1, 32], 2),
    "chw": ([2, 3, 4, 5], [1, 3, 4, 5], 1),
    "hw-of-chw": ([2, 3, 4, 5], [1, 1, 4, 5], 2),
}


def _rmsnorm_node(
    case: str,
    phase: hg.NormFwdPhase = TRAINING,
    *,
    bias: bool = False,
    channels_last: bool = False,
    io: hg.DataType = FLOAT,
    compute: hg.DataType = DOUBLE,
) -> Any:
    x_dims, scale_dims, _ = RMSNORM_CASES[case]
    g = _graph(io, compute)
    keywords: dict[str, Any] = {"epsilon": _eps(), "forward_phase": phase}
    if bias:
        keywords["bias"] = _tensor(g, "bias", scale_dims, channels_last)
    outs = g.rmsnorm(
        _tensor(g, "x", x_dims, channels_last), _tensor(g, "scale", scale_dims, channels_last),
        **keywords,
    )  # fmt: skip
    return _validated(g, outs)


def _rmsnorm_torch(x: Array, scale: Array, bias: Array | None, start: int) -> tuple[Array, Array]:
    xt = torch.tensor(x.astype(np.float64))
    shape = list(x.shape[start:])
    st = torch.tensor(scale.astype(np.float64)).reshape(shape)
    y = F.rms_norm(xt, shape, st, EPS)
    if bias is not None:
        y = y + torch.tensor(bias.astype(np.float64)).reshape(shape)
    axes = list(range(start, x.ndim))
    inv_rms = torch.rsqrt(xt.square().mean(dim=axes, keepdim=True) + EPS)
    return y.numpy(), inv_rms.numpy()


def _rmsnorm_operands(case: str, seed: int = 0) -> tuple[Array, Array, Array]:
    x_dims, scale_dims, _ = RMSNORM_CASES[case]
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal(x_dims) + 0.5,
        rng.standard_normal(scale_dims),
        rng.standard_normal(scale_dims),
    )


@pytest.mark.parametrize("case", sorted(RMSNORM_CASES))
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_rmsnorm_training_matches_torch(case: str, bias: bool, channels_last: bool) -> None:
    node = _rmsnorm_node(case, bias=bias, channels_last=channels_last)
    x, scale, b = _rmsnorm_operands(case)
    arrays = {
        "X": _laid_out(x, np.float64, channels_last),
        "SCALE": _laid_out(scale, np.float64, channels_last),
        "EPSILON": EPS,
    }
    if bias:
        arrays["BIAS"] = _laid_out(b, np.float64, channels_last)
    out = run_rmsnorm(node, arrays)
    y, inv_rms = _rmsnorm_torch(x, scale, b if bias else None, RMSNORM_CASES[case][2])
    assert sorted(out) == ["INV_RMS", "Y"]
    np.testing.assert_allclose(out["Y"], y, rtol=1e-12, atol=1e-12)
    assert list(out["INV_RMS"].shape) == node.attributes.get_inv_rms().dim
    np.testing.assert_allclose(out["INV_RMS"], inv_rms, rtol=1e-12, atol=1e-12)


def test_rmsnorm_inference_writes_only_y() -> None:
    node = _rmsnorm_node("tokens", INFERENCE)
    x, scale, _ = _rmsnorm_operands("tokens")
    out = run_rmsnorm(node, {"X": x, "SCALE": scale, "EPSILON": EPS})
    assert sorted(out) == ["Y"]
    np.testing.assert_allclose(out["Y"], _rmsnorm_torch(x, scale, None, 2)[0], rtol=1e-12)


@pytest.mark.parametrize("io", list(STORAGE), ids=lambda t: t.name)
def test_rmsnorm_storage_types_compute_in_float(io: hg.DataType) -> None:
    storage = STORAGE[io]
    node = _rmsnorm_node("chw", bias=True, io=io, compute=FLOAT, channels_last=True)
    x, scale, b = (a.astype(storage) for a in _rmsnorm_operands("chw", seed=4))
    arrays = {"X": _laid_out(x, storage, True), "SCALE": scale, "BIAS": b, "EPSILON": EPS}
    out = run_rmsnorm(node, arrays)
    y, inv_rms = _rmsnorm_torch(x, scale, b, 1)
    for slot, want in (("Y", y), ("INV_RMS", inv_rms)):
        assert out[slot].dtype == np.float32
        np.testing.assert_allclose(out[slot], want, rtol=2e-5, atol=2e-5)


def test_float_compute_is_not_rounded_through_half() -> None:
    """FLOAT compute of half inputs: the mean of squares is not accumulated in half."""
    node = _rmsnorm_node("rows", io=hg.DataType.HALF, compute=FLOAT)
    x = np.full((4, 16), 1 + 2.0**-10, dtype=np.float16)
    out = run_rmsnorm(node, {"X": x, "SCALE": np.ones((1, 16), np.float16), "EPSILON": 0.0})
    exact = 1 / np.float64(1 + 2.0**-10)
    np.testing.assert_allclose(out["INV_RMS"], exact, rtol=1e-6)


@pytest.mark.parametrize("module", [layernorm, rmsnorm])
def test_docstring_examples(module: Any) -> None:
    assert doctest.testmod(module).failed == 0
