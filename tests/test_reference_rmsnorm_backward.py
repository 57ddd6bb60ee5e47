"""The NumPy RMSNorm backward reference against torch's autograd (``F.rms_norm``) in float64:
scales normalizing one, two or all non-batch axes, DBIAS asked for or not, per storage type
computed in FLOAT; an INV_RMS of the wrong size and an unsupported compute type are refused by
name, and inputs are never written."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families.rmsnorm_backward import run_rmsnorm_backward

torch = pytest.importorskip("torch")
F = torch.nn.functional

Array = np.ndarray[Any, Any]
FLOAT, DOUBLE = hg.DataType.FLOAT, hg.DataType.DOUBLE
EPS = 1e-3


def _node(
    x_dims: list[int], scale_dims: list[int], dbias: bool, compute: hg.DataType = DOUBLE
) -> Any:
    g = hg.Graph(io_data_type=FLOAT, compute_data_type=compute)
    k = sum(1 for s in scale_dims if s != 1) or len(x_dims) - 1
    inv_dims = [*x_dims[: len(x_dims) - k], *[1] * k]
    dy, x = g.tensor(name="dy", dim=x_dims), g.tensor(name="x", dim=x_dims)
    scale, inv_rms = g.tensor(name="s", dim=scale_dims), g.tensor(name="r", dim=inv_dims)
    for t in g.rmsnorm_backward(dy, x, scale, inv_rms, compute_dbias=dbias, name="rb"):
        if t is not None:
            t.set_output(True)
    g.validate()
    return g.nodes[0]


def _torch(
    x: Array, dy: Array, scale: Array, normalized: list[int]
) -> tuple[Array, Array, Array, Array]:
    """dx, dweight and dbias of ``F.rms_norm(x) * w + b`` over the trailing ``normalized``
    shape, and the inverse RMS, all float64."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(scale.reshape(normalized), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(normalized, dtype=torch.float64, requires_grad=True)
    (F.rms_norm(xt, normalized, w, EPS) + b).backward(torch.tensor(dy, dtype=torch.float64))
    dims = tuple(range(x.ndim - len(normalized), x.ndim))
    inv = torch.rsqrt(xt.detach().pow(2).mean(dim=dims, keepdim=True) + EPS)
    return tuple(t.detach().numpy() for t in (xt.grad, w.grad, b.grad, inv))  # type: ignore[return-value]


def _frozen(a: Array) -> Array:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


CASES = {
    "tokens": ([2, 5, 16], [1, 1, 16]),
    "chw": ([2, 3, 4, 5], [1, 3, 4, 5]),
    "hw": ([2, 3, 4, 5], [1, 1, 4, 5]),
    "rows": ([6, 10], [1, 10]),
}


@pytest.mark.parametrize("dbias", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch_in_float64(case: str, dbias: bool) -> None:
    x_dims, scale_dims = CASES[case]
    k = sum(1 for s in scale_dims if s != 1)
    rng = np.random.default_rng(5)
    x, dy = rng.normal(0.5, 1.5, x_dims), rng.normal(size=x_dims)
    scale = rng.normal(size=scale_dims)
    dx, dw, db, inv = _torch(x, dy, scale, x_dims[len(x_dims) - k :])
    inputs = {"DY": _frozen(dy), "X": _frozen(x), "SCALE": _frozen(scale), "INV_RMS": _frozen(inv)}
    before = {key: v.copy() for key, v in inputs.items()}
    out = run_rmsnorm_backward(_node(x_dims, scale_dims, dbias), inputs)
    assert sorted(out) == (["DBIAS", "DSCALE", "DX"] if dbias else ["DSCALE", "DX"])
    np.testing.assert_allclose(out["DX"], dx, rtol=1e-10, atol=1e-12)
    assert out["DSCALE"].shape == tuple(scale_dims)
    np.testing.assert_allclose(out["DSCALE"].reshape(dw.shape), dw, rtol=1e-10, atol=1e-12)
    if dbias:
        np.testing.assert_allclose(out["DBIAS"].reshape(db.shape), db, rtol=1e-10, atol=1e-12)
    for key, v in before.items():
        np.testing.assert_array_equal(inputs[key], v)


@pytest.mark.parametrize("storage", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_storage_types_compute_in_float(storage: Any) -> None:
    rng = np.random.default_rng(9)
    x, dy, scale = (rng.normal(size=d).astype(storage) for d in ([4, 32], [4, 32], [1, 32]))
    want = _torch(*(a.astype(np.float64) for a in (x, dy, scale)), [32])
    inputs = {"DY": dy, "X": x, "SCALE": scale, "INV_RMS": want[3].astype(np.float32)}
    out = run_rmsnorm_backward(_node([4, 32], [1, 32], True, compute=FLOAT), inputs)
    assert {v.dtype for v in out.values()} == {np.dtype(np.float32)}
    np.testing.assert_allclose(out["DX"], want[0], rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(out["DSCALE"][0], want[1], rtol=2e-4, atol=2e-4)


def test_refusals_name_the_node_and_why() -> None:
    node = _node([4, 8], [1, 8], False)
    arrays = {"DY": np.ones((4, 8)), "X": np.ones((4, 8)), "SCALE": np.ones((1, 8))}
    with pytest.raises(hg.HipdnnError) as info:
        run_rmsnorm_backward(node, {**arrays, "INV_RMS": np.ones(8)})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert info.value.message == "node 'rb': INV_RMS holds 8 values where dims [4, 1] need 4"
    half = _node([4, 8], [1, 8], False, compute=hg.DataType.HALF)
    with pytest.raises(hg.HipdnnError, match=r"node 'rb': compute type HALF"):
        run_rmsnorm_backward(half, {**arrays, "INV_RMS": np.ones((4, 1))})
