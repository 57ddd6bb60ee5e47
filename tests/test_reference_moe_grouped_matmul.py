"""The NumPy MoE grouped matmul references (forward in each routing mode, weight gradient)
against torch in float64: the forward against a row-by-row torch loop of hipDNN's definition,
the weight gradient against torch autograd of that forward (NONE mode, one group per expert);
computed in DOUBLE (exact to rounding) and FLOAT (float32 tolerances); and the refusals of what
hipDNN's CPU references reject."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families import moe_grouped_matmul as module
from hipdnn_graph_numpy_reference.families.moe_grouped_matmul import (
    moe_grouped_matmul_bwd_refusal,
    moe_grouped_matmul_refusal,
    run_moe_grouped_matmul,
    run_moe_grouped_matmul_bwd,
)

torch = pytest.importorskip("torch")

Array = np.ndarray[Any, Any]
I32 = hg.DataType.INT32
Mode = hg.MoeGroupedMatmulMode
TOL = {hg.DataType.DOUBLE: (1e-12, 1e-12), hg.DataType.FLOAT: (2e-5, 2e-5)}


def _graph(compute: hg.DataType) -> hg.Graph:
    return hg.Graph(io_data_type=compute, compute_data_type=compute, intermediate_data_type=compute)


def _forward(
    compute: hg.DataType,
    tokens: int,
    k: int,
    n: int,
    experts: int,
    groups: int,
    mode: Mode,
    routed: int | None = None,
    top_k: int = 0,
) -> hg.MoeGroupedMatmulNode:
    g = _graph(compute)
    index = ks = None
    if mode != Mode.NONE:
        index = g.tensor(name="index", dim=[1, routed or tokens, 1], data_type=I32)
    if mode == Mode.SCATTER:
        ks = g.tensor(name="ks", dim=[1, tokens, 1], data_type=I32)
    g.moe_grouped_matmul(
        g.tensor(name="token", dim=[1, tokens, k]),
        g.tensor(name="weight", dim=[experts, k, n]),
        g.tensor(name="offsets", dim=[groups, 1, 1], data_type=I32),
        index,
        ks,
        mode=mode,
        top_k=top_k,
    )
    g.validate()
    node = g.nodes[0]
    assert isinstance(node, hg.MoeGroupedMatmulNode)
    return node


def _offsets(rng: np.random.Generator, groups: int, rows: int, start: int = 0) -> Array:
    """Sorted group boundaries in [start, rows] (empty groups included)."""
    cuts = np.sort(rng.integers(start, rows + 1, size=groups - 1))
    return np.concatenate([[start], cuts]).astype(np.int32).reshape(groups, 1, 1)


def _torch_forward(
    token: Array, weight: Array, offsets: Array, mode: Mode, out_rows: int,
    index: Array | None = None, ks: Array | None = None, top_k: int = 0,
) -> Any:  # fmt: skip
    """hipDNN's definition, row by row, in torch float64."""
    t = torch.from_numpy(token[0].astype(np.float64))
    w = torch.from_numpy(weight.astype(np.float64))
    off = [int(o) for o in offsets.ravel()]
    routed = index.size if mode == Mode.GATHER and index is not None else t.shape[0]
    out = torch.zeros(out_rows, w.shape[2], dtype=torch.float64)
    for g, start in enumerate(off):
        end = off[g + 1] if g + 1 < len(off) else routed
        for r in range(start, end):
            src, dst = r, r
            if mode == Mode.GATHER:
                assert index is not None
                src = int(index.ravel()[r])
            elif mode == Mode.SCATTER:
                assert index is not None and ks is not None
                dst = int(index.ravel()[r]) * top_k + int(ks.ravel()[r])
            out[dst] = t[src] @ w[g % w.shape[0]]
    return out.reshape(1, out_rows, -1)


def _close(got: Array, want: Any, compute: hg.DataType) -> None:
    rtol, atol = TOL[compute]
    np.testing.assert_allclose(got, want.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("compute", [hg.DataType.DOUBLE, hg.DataType.FLOAT])
@pytest.mark.parametrize(("experts", "groups"), [(1, 1), (3, 3), (2, 4), (4, 8)])
def test_none_mode_matches_torch(compute: hg.DataType, experts: int, groups: int) -> None:
    rng = np.random.default_rng(experts * 10 + groups)
    tokens, k, n = 13, 6, 5
    node = _forward(compute, tokens, k, n, experts, groups, Mode.NONE)
    token, weight = rng.standard_normal((1, tokens, k)), rng.standard_normal((experts, k, n))
    offsets = _offsets(rng, groups, tokens, start=int(rng.integers(0, 3)))
    got = run_moe_grouped_matmul(
        node, {"TOKEN": token, "WEIGHT": weight, "FIRST_TOKEN_OFFSET": offsets}
    )["OUTPUT"]
    assert got.shape == (1, tokens, n) and got.dtype == hg.backend.dtypes.numpy_dtype(compute)
    _close(got, _torch_forward(token, weight, offsets, Mode.NONE, tokens), compute)
    if offsets.ravel()[0] > 0:  # rows before the first group are zero
        assert not got[0, : offsets.ravel()[0]].any()


@pytest.mark.parametrize("compute", [hg.DataType.DOUBLE, hg.DataType.FLOAT])
def test_gather_mode_matches_torch(compute: hg.DataType) -> None:
    rng = np.random.default_rng(7)
    tokens, routed, k, n, experts = 6, 10, 4, 3, 2
    node = _forward(compute, tokens, k, n, experts, 2, Mode.GATHER, routed=routed)
    token, weight = rng.standard_normal((1, tokens, k)), rng.standard_normal((experts, k, n))
    index = rng.integers(0, tokens, size=(1, routed, 1)).astype(np.int32)  # rows repeat
    offsets = _offsets(rng, 2, routed)
    inputs = {"TOKEN": token, "WEIGHT": weight, "FIRST_TOKEN_OFFSET": offsets, "TOKEN_INDEX": index}
    got = run_moe_grouped_matmul(node, inputs)["OUTPUT"]
    assert got.shape == (1, routed, n)
    _close(got, _torch_forward(token, weight, offsets, Mode.GATHER, routed, index), compute)


@pytest.mark.parametrize("compute", [hg.DataType.DOUBLE, hg.DataType.FLOAT])
def test_scatter_mode_matches_torch(compute: hg.DataType) -> None:
    """Each of 4 tokens routed to top_k = 2 experts: 8 routed rows scattered back to
    ``token * top_k + k``, the routed rows sorted by expert as a router leaves them."""
    rng = np.random.default_rng(3)
    source_tokens, top_k, k, n, experts = 4, 2, 5, 3, 3
    rows = source_tokens * top_k
    node = _forward(compute, rows, k, n, experts, experts, Mode.SCATTER, top_k=top_k)
    choice = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(source_tokens)])
    pairs = sorted((int(choice[t, j]), t, j) for t in range(source_tokens) for j in range(top_k))
    index = np.array([t for _, t, _ in pairs], np.int32).reshape(1, rows, 1)
    ks = np.array([j for _, _, j in pairs], np.int32).reshape(1, rows, 1)
    counts = np.bincount([e for e, _, _ in pairs], minlength=experts)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32).reshape(-1, 1, 1)
    token, weight = rng.standard_normal((1, rows, k)), rng.standard_normal((experts, k, n))
    inputs = {"TOKEN": token, "WEIGHT": weight, "FIRST_TOKEN_OFFSET": offsets,
              "TOKEN_INDEX": index, "TOKEN_KS": ks}  # fmt: skip
    got = run_moe_grouped_matmul(node, inputs)["OUTPUT"]
    want = _torch_forward(token, weight, offsets, Mode.SCATTER, rows, index, ks, top_k)
    _close(got, want, compute)


def _backward(compute: hg.DataType, tokens: int, k: int, n: int, experts: int) -> Any:
    g = _graph(compute)
    g.moe_grouped_matmul_bwd(
        g.tensor(name="dout", dim=[1, tokens, n]),
        g.tensor(name="token", dim=[1, tokens, k]),
        g.tensor(name="offsets", dim=[experts, 1, 1], data_type=I32),
    )
    g.validate()
    return g.nodes[0]


@pytest.mark.parametrize("compute", [hg.DataType.DOUBLE, hg.DataType.FLOAT])
@pytest.mark.parametrize("experts", [1, 2, 5])
def test_weight_gradient_is_torch_autograd_of_the_forward(
    compute: hg.DataType, experts: int
) -> None:
    rng = np.random.default_rng(experts)
    tokens, k, n = 11, 4, 6
    token, dout = rng.standard_normal((1, tokens, k)), rng.standard_normal((1, tokens, n))
    offsets = _offsets(rng, experts, tokens)
    weight = torch.zeros(experts, k, n, dtype=torch.float64, requires_grad=True)
    out = torch.zeros(tokens, n, dtype=torch.float64)
    t = torch.from_numpy(token[0])
    bounds = [*offsets.ravel().tolist(), tokens]
    for e in range(experts):  # the NONE-mode forward, one group per expert
        out = out.index_add(0, torch.arange(bounds[e], bounds[e + 1]),
                            t[bounds[e] : bounds[e + 1]] @ weight[e])  # fmt: skip
    out.backward(torch.from_numpy(dout[0]))
    node = _backward(compute, tokens, k, n, experts)
    got = run_moe_grouped_matmul_bwd(
        node, {"DOUTPUT": dout, "TOKEN": token, "FIRST_TOKEN_OFFSET": offsets}
    )["DWEIGHT"]
    assert got.shape == (experts, k, n) and got.dtype == hg.backend.dtypes.numpy_dtype(compute)
    assert weight.grad is not None
    _close(got, weight.grad, compute)


def _refused(call: Any, code: hg.ErrorCode, text: str) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    assert info.value.code == code
    assert text in info.value.message, info.value.message


def test_forward_refusals() -> None:
    node = _forward(hg.DataType.DOUBLE, 4, 2, 3, 2, 2, Mode.NONE)
    base = {"TOKEN": np.ones((1, 4, 2)), "WEIGHT": np.ones((2, 2, 3))}
    bad = hg.ErrorCode.INVALID_VALUE
    for offsets, text in (
        ([0, 5], "FIRST_TOKEN_OFFSET[1] = 5 is out of range [0, 4]"),
        ([-1, 2], "FIRST_TOKEN_OFFSET[0] = -1 is out of range [0, 4]"),
        ([3, 1], "FIRST_TOKEN_OFFSET must be non-decreasing (violated at 1)"),
    ):
        inputs = {**base, "FIRST_TOKEN_OFFSET": np.array(offsets).reshape(2, 1, 1)}
        _refused(lambda i=inputs: run_moe_grouped_matmul(node, i), bad, text)
    _refused(lambda: run_moe_grouped_matmul(node, base), bad, "no input for FIRST_TOKEN_OFFSET")
    fractional = {**base, "FIRST_TOKEN_OFFSET": np.array([0.5, 2.0]).reshape(2, 1, 1)}
    _refused(lambda: run_moe_grouped_matmul(node, fractional), bad, "not integers")
    gather = _forward(hg.DataType.DOUBLE, 4, 2, 3, 2, 2, Mode.GATHER, routed=3)
    inputs = {**base, "FIRST_TOKEN_OFFSET": np.array([0, 1]).reshape(2, 1, 1),
              "TOKEN_INDEX": np.array([0, 4, 1]).reshape(1, 3, 1)}  # fmt: skip
    _refused(lambda: run_moe_grouped_matmul(gather, inputs), bad,
             "routed source row 4 is out of range [0, 4)")  # fmt: skip


def test_scatter_refusals() -> None:
    node = _forward(hg.DataType.DOUBLE, 4, 2, 3, 2, 2, Mode.SCATTER, top_k=2)
    base = {"TOKEN": np.ones((1, 4, 2)), "WEIGHT": np.ones((2, 2, 3)),
            "FIRST_TOKEN_OFFSET": np.array([0, 2]).reshape(2, 1, 1)}  # fmt: skip
    bad = hg.ErrorCode.INVALID_VALUE
    cases = (
        ([0, 0, 1, 1], [0, 2, 0, 1], "TOKEN_KS[1] = 2 is out of range [0, 2)"),
        ([0, 0, 1, 1], [0, 0, 0, 1], "duplicate SCATTER destination row 0"),
        ([0, 0, 1, 2], [0, 1, 0, 1], "routed destination row 5 is out of range [0, 4)"),
    )
    for index, ks, text in cases:
        inputs = {**base, "TOKEN_INDEX": np.array(index).reshape(1, 4, 1),
                  "TOKEN_KS": np.array(ks).reshape(1, 4, 1)}  # fmt: skip
        _refused(lambda i=inputs: run_moe_grouped_matmul(node, i), bad, text)


def test_backward_refusals_and_compute_types() -> None:
    node = _backward(hg.DataType.FLOAT, 4, 2, 3, 2)
    base = {"DOUTPUT": np.ones((1, 4, 3)), "TOKEN": np.ones((1, 4, 2))}
    inputs = {**base, "FIRST_TOKEN_OFFSET": np.array([1, 3]).reshape(2, 1, 1)}
    _refused(lambda: run_moe_grouped_matmul_bwd(node, inputs), hg.ErrorCode.INVALID_VALUE,
             "FIRST_TOKEN_OFFSET[0] must be 0, got 1")  # fmt: skip
    assert moe_grouped_matmul_bwd_refusal(node) is None
    half = _backward(hg.DataType.HALF, 4, 2, 3, 2)
    assert moe_grouped_matmul_bwd_refusal(half) == "compute type HALF (FLOAT or DOUBLE only)"
    inputs = {**base, "FIRST_TOKEN_OFFSET": np.array([0, 3]).reshape(2, 1, 1)}
    _refused(lambda: run_moe_grouped_matmul_bwd(half, inputs), hg.ErrorCode.GRAPH_NOT_SUPPORTED,
             "compute type HALF (FLOAT or DOUBLE only)")  # fmt: skip
    fwd = _forward(hg.DataType.FLOAT, 4, 2, 3, 2, 2, Mode.NONE)
    assert moe_grouped_matmul_refusal(fwd) is None


def test_module_examples() -> None:
    assert doctest.testmod(module).failed == 0
