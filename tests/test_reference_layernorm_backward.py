"""The NumPy layer-norm backward reference against torch's autograd in float64: full-rank and
lower-rank SCALEs, the normalized dim count given or inferred, the forward's saved statistics
given or recomputed (with the node's EPSILON or hipDNN's default), per storage type computed in
FLOAT; what hipDNN's reference does not define is refused by name, and inputs are never written."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families.layernorm_backward import (
    DEFAULT_EPSILON,
    run_layernorm_backward,
)

torch = pytest.importorskip("torch")
F = torch.nn.functional

Array = np.ndarray[Any, Any]
FLOAT, DOUBLE = hg.DataType.FLOAT, hg.DataType.DOUBLE
EPS = 1e-3


def _graph(io: hg.DataType = FLOAT, compute: hg.DataType = DOUBLE) -> hg.Graph:
    return hg.Graph(io_data_type=io, intermediate_data_type=compute, compute_data_type=compute)


def _node(
    x_dims: list[int],
    scale_dims: list[int],
    count: int = 0,
    saved: list[int] | None = None,
    epsilon: float | None = None,
    compute: hg.DataType = DOUBLE,
    mean_only: bool = False,
) -> Any:
    g = _graph(compute=compute)
    attrs = hg.LayernormBackwardAttributes().set_normalized_dim_count(count)
    if saved is not None:
        attrs.set_saved_mean_and_inv_variance(
            g.tensor(name="m", dim=saved), g.tensor(name="iv", dim=saved)
        )
    if mean_only:  # hipDNN's node accepts it; its reference does not
        attrs.set_mean(g.tensor(name="m", dim=[x_dims[0], 1]))
    if epsilon is not None:
        attrs.set_epsilon(g.tensor(name="eps").set_value(epsilon))
    dy, x = g.tensor(name="dy", dim=x_dims), g.tensor(name="x", dim=x_dims)
    for t in g.layernorm_backward(dy, x, g.tensor(name="s", dim=scale_dims), attrs, name="lnb"):
        t.set_output(True)
    g.validate()
    return g.nodes[0]


def _torch_grads(
    x: Array, dy: Array, scale: Array, normalized: list[int], eps: float
) -> tuple[Array, Array, Array, Array, Array]:
    """dx, dweight, dbias of F.layer_norm over the trailing ``normalized`` shape, and its saved
    mean and rstd (aten.native_layer_norm), all float64."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(scale.reshape(normalized), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(normalized, dtype=torch.float64, requires_grad=True)
    y = F.layer_norm(xt, normalized, w, b, eps)
    y.backward(torch.tensor(dy, dtype=torch.float64))
    _, mean, rstd = torch.ops.aten.native_layer_norm(xt.detach(), normalized, None, None, eps)
    grads = (xt.grad, w.grad, b.grad, mean, rstd)
    return tuple(t.detach().numpy() for t in grads)  # type: ignore[return-value]


def _frozen(a: Array) -> Array:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


# (X dims, SCALE dims, normalized_dim_count given (0: inferred), normalized trailing dims)
CASES = {
    "rows": ([6, 10], [1, 10], 0, 1),
    "tokens": ([2, 5, 16], [1, 1, 16], 0, 1),
    "chw": ([2, 3, 4, 5], [1, 3, 4, 5], 0, 3),
    "hw": ([2, 3, 4, 5], [1, 1, 4, 5], 0, 2),
    "reduced-rank": ([3, 4, 8], [4, 8], 2, 2),
    "reduced-rank-inferred": ([3, 4, 8], [8], 0, 1),
}


@pytest.mark.parametrize("stats", ["saved", "recomputed", "default-epsilon"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch_in_float64(case: str, stats: str) -> None:
    x_dims, scale_dims, count, k = CASES[case]
    rng = np.random.default_rng(7)
    x = rng.normal(1.5, 2.0, x_dims)
    dy = rng.normal(size=x_dims)
    scale = rng.normal(size=scale_dims)
    eps = DEFAULT_EPSILON if stats == "default-epsilon" else EPS
    dx, dw, db, mean, rstd = _torch_grads(x, dy, scale, x_dims[len(x_dims) - k :], eps)
    batch = [*x_dims[: len(x_dims) - k], *[1] * k]
    node = _node(
        x_dims,
        scale_dims,
        count,
        saved=batch if stats == "saved" else None,
        epsilon=EPS if stats == "recomputed" else None,
    )
    inputs: dict[str, Any] = {"DY": _frozen(dy), "X": _frozen(x), "SCALE": _frozen(scale)}
    if stats == "saved":
        inputs["MEAN"], inputs["INV_VARIANCE"] = _frozen(mean), _frozen(rstd)
    elif stats == "recomputed":
        inputs["EPSILON"] = EPS
    before = {k: v.copy() for k, v in inputs.items() if isinstance(v, np.ndarray)}
    out = run_layernorm_backward(node, inputs)
    assert sorted(out) == ["DBIAS", "DSCALE", "DX"]
    assert all(v.dtype == np.float64 for v in out.values())
    np.testing.assert_allclose(out["DX"], dx, rtol=1e-10, atol=1e-12)
    assert out["DSCALE"].shape == tuple(scale_dims) == out["DBIAS"].shape
    np.testing.assert_allclose(out["DSCALE"].reshape(dw.shape), dw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["DBIAS"].reshape(db.shape), db, rtol=1e-10, atol=1e-12)
    for k_, v in before.items():
        np.testing.assert_array_equal(inputs[k_], v)


@pytest.mark.parametrize("storage", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_storage_types_compute_in_float(storage: Any) -> None:
    x_dims, scale_dims = [4, 32], [1, 32]
    rng = np.random.default_rng(3)
    x, dy, scale = (rng.normal(size=d).astype(storage) for d in (x_dims, x_dims, scale_dims))
    node = _node(x_dims, scale_dims, epsilon=EPS, compute=FLOAT)
    out = run_layernorm_backward(node, {"DY": dy, "X": x, "SCALE": scale, "EPSILON": EPS})
    assert {v.dtype for v in out.values()} == {np.dtype(np.float32)}
    want = _torch_grads(*(a.astype(np.float64) for a in (x, dy, scale)), [32], EPS)
    np.testing.assert_allclose(out["DX"], want[0], rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(out["DSCALE"][0], want[1], rtol=2e-4, atol=2e-4)


def test_channels_last_arrays_are_read_by_index() -> None:
    dims = [2, 3, 4, 5]
    rng = np.random.default_rng(11)
    x, dy = rng.normal(size=dims), rng.normal(size=dims)
    scale = rng.normal(size=[1, 3, 4, 5])
    x_cl = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)  # NHWC memory
    node = _node(dims, [1, 3, 4, 5], epsilon=EPS)
    out = run_layernorm_backward(node, {"DY": dy, "X": x_cl, "SCALE": scale, "EPSILON": EPS})
    want = _torch_grads(x, dy, scale, [3, 4, 5], EPS)
    np.testing.assert_allclose(out["DX"], want[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("x_dims", "scale_dims", "count", "inputs", "words"),
    [
        (
            [4, 8],
            [1, 8],
            -1,
            {"MEAN": np.zeros((4, 1))},
            "MEAN and INV_VARIANCE come together or not at all",
        ),
        ([4, 8], [3], 1, {}, "SCALE dims [3] are not X's last 1 (normalized_dim_count) dims [8]"),
        ([4, 8], [2, 8], 0, {}, "SCALE dim 0 is 2, neither 1 nor X's 4"),
        ([4, 8], [1, 8], 0, {"EPSILON": np.ones(2)}, "EPSILON holds 2 values, not one"),
    ],
)
def test_what_hipdnn_does_not_define_is_refused(
    x_dims: list[int], scale_dims: list[int], count: int, inputs: dict[str, Any], words: str
) -> None:
    node = _node(x_dims, scale_dims, max(count, 0), epsilon=1e-5, mean_only=count < 0)
    arrays = {"DY": np.ones(x_dims), "X": np.arange(np.prod(x_dims), dtype=float).reshape(x_dims)}
    arrays["EPSILON"] = 1e-5
    arrays["SCALE"] = np.ones(scale_dims)
    with pytest.raises(hg.HipdnnError) as info:
        run_layernorm_backward(node, {**arrays, **inputs})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert info.value.message == f"node 'lnb': {words}"


def test_wrong_statistics_size_and_compute_type_are_refused() -> None:
    node = _node([4, 8], [1, 8], saved=[4, 1])
    arrays = {"DY": np.ones((4, 8)), "X": np.ones((4, 8)), "SCALE": np.ones((1, 8))}
    with pytest.raises(hg.HipdnnError, match=r"MEAN holds 3 values where dims \[4, 1\] need 4"):
        run_layernorm_backward(node, {**arrays, "MEAN": np.zeros(3), "INV_VARIANCE": np.ones(4)})
    half = _node([4, 8], [1, 8], compute=hg.DataType.HALF)
    with pytest.raises(hg.HipdnnError, match=r"compute type HALF \(FLOAT or DOUBLE only\)"):
        run_layernorm_backward(half, arrays)
