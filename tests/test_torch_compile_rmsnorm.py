"""RMSNorm in the torch.compile backend: aten's decomposed chain fused back into
``aten._fused_rms_norm`` and lowered to hipDNN's RMSNorm (docs/torch-compile.md)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

torch = pytest.importorskip("torch")

make_fx = pytest.importorskip("torch.fx.experimental.proxy_tensor").make_fx

from compile_models import trains_as_eager  # noqa: E402

import hipdnn_graph.torch.compile as hgc  # noqa: E402
from hipdnn_graph.torch.compile._partition import partition  # noqa: E402
from hipdnn_graph.torch.compile._rmsnorm import fuse_rms_norm  # noqa: E402

aten = torch.ops.aten


def _chain(x: Any, w: Any, dims: list[int], eps: float = 1e-6) -> Any:
    ms = aten.mean.dim(aten.pow.Tensor_Scalar(x, 2), dims, True)
    return aten.mul.Tensor(aten.mul.Tensor(x, aten.rsqrt.default(aten.add.Scalar(ms, eps))), w)


def _targets(gm: Any) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_the_decomposed_chain_is_fused_over_trailing_dims_only() -> None:
    x = torch.randn(2, 3, 8)
    gm = make_fx(lambda x, w: _chain(x, w, [2, 1]), tracing_mode="fake")(x, torch.randn(3, 8))
    assert fuse_rms_norm(gm) == 1
    (fused,) = [n for n in gm.graph.nodes if n.target is aten._fused_rms_norm.default]
    assert (fused.args[1], fused.args[3]) == ([3, 8], 1e-6)
    # over a leading dim, or a weight broadcast from fewer dims: left decomposed
    for w, dims in ((torch.randn(3, 8), [1]), (torch.randn(8), [1, 2])):
        gm = make_fx(functools.partial(_chain, dims=dims), tracing_mode="fake")(x, w)
        assert fuse_rms_norm(gm) == 0
        assert "aten._fused_rms_norm.default" not in _targets(gm)

    def mean_square_too(x: Any, w: Any) -> Any:  # the mean square has another user
        ms = aten.mean.dim(aten.pow.Tensor_Scalar(x, 2), [2], True)
        r = aten.rsqrt.default(aten.add.Scalar(ms, 1e-6))
        return aten.mul.Tensor(aten.mul.Tensor(x, r), w), ms

    gm = make_fx(mean_square_too, tracing_mode="fake")(x, torch.randn(8))
    assert fuse_rms_norm(gm) == 0


def _fused(x: Any, w: Any, eps: float | None = 1e-5, weight: bool = True) -> Any:
    """The fused op as the backend sees it: the chain traced, then fused (make_fx would
    decompose a traced ``_fused_rms_norm``), with the eps and weight asked for."""
    gm = make_fx(lambda x, w: _chain(x, w, [-1], 1e-5), tracing_mode="fake")(x, w)
    assert fuse_rms_norm(gm) == 1
    (node,) = gm.graph.find_nodes(op="call_function", target=aten._fused_rms_norm.default)
    node.args = (node.args[0], node.args[1], node.args[2] if weight else None, eps)
    gm.recompile()
    return gm


@pytest.mark.parametrize("eps", [1e-5, None], ids=["eps", "default-eps"])
def test_fused_op_runs_as_hipdnn_rmsnorm(eps: float | None) -> None:
    x, w = torch.randn(4, 6), torch.randn(6)
    fused, rows = partition(_fused(x, w, eps), "inference")
    assert [(r.op, r.placement, r.why) for r in rows] == [
        ("aten._fused_rms_norm.default", "hipdnn", "rmsnorm")
    ]
    want = aten._fused_rms_norm.default(x, [6], w, eps)[0]
    torch.testing.assert_close(fused(x, w), want, rtol=1e-5, atol=1e-6)


def test_without_weight_it_stays_in_aten() -> None:
    x, w = torch.randn(4, 6), torch.randn(6)
    fused, rows = partition(_fused(x, w, weight=False), "inference")
    assert [(r.placement, r.why) for r in rows if "rms" in r.op] == [
        ("aten", "no weight (hipDNN's RMSNorm takes a scale)")
    ]
    torch.testing.assert_close(fused(x, w), aten._fused_rms_norm.default(x, [6], None, 1e-5)[0])


class _Rms(torch.nn.Module):
    def __init__(self, shape: Any, affine: bool = True) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.norm = torch.nn.RMSNorm(shape, eps=1e-6, elementwise_affine=affine)
        if affine:
            torch.nn.init.normal_(self.norm.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.lin(x))


@pytest.fixture(autouse=True)
def _fresh() -> None:
    torch._dynamo.reset()
    hgc.reset_census()


@pytest.mark.parametrize("shape", [8, [3, 8]], ids=["last-dim", "two-dims"])
def test_rmsnorm_model_trains_as_eager(shape: Any) -> None:
    torch.manual_seed(0)
    trains_as_eager(_Rms(shape), torch.randn(2, 3, 8, requires_grad=True))
    rows = {(r.graph, r.op, r.placement, r.why) for r in hgc.census().rows}
    assert ("forward", "aten._fused_rms_norm.default", "hipdnn", "rmsnorm") in rows
    # the backward stays decomposed: its sums are reductions, its powers and scalings pointwise
    assert ("backward", "aten.sum.dim_IntList", "hipdnn", "reduction") in rows
    assert ("backward", "aten.pow.Tensor_Scalar", "hipdnn", "pointwise") in rows
    assert ("backward", "aten.div.Scalar", "hipdnn", "pointwise") in rows


def test_bf16_rmsnorm_inference_matches_eager() -> None:
    torch.manual_seed(0)
    model, x = _Rms(8).to(torch.bfloat16), torch.randn(2, 3, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        got = torch.compile(model, backend=hgc.compile_backend)(x)
        want = model(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    assert ("aten._fused_rms_norm.default", "rmsnorm") in {
        (r.op, r.why) for r in hgc.census().rows if r.placement == "hipdnn"
    }


def test_rmsnorm_without_weight_stays_decomposed() -> None:
    torch.manual_seed(0)
    model, x = _Rms(8, affine=False), torch.randn(2, 3, 8)
    with torch.no_grad():
        got = torch.compile(model, backend=hgc.compile_backend)(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    c = hgc.census()
    assert "aten._fused_rms_norm.default" not in {r.op for r in c.rows}
    assert ("aten.mean.dim", "reduction") in {(r.op, r.why) for r in c.rows}
