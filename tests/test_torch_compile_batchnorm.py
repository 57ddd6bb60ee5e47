"""Batch norm in the torch.compile backend: ``_native_batch_norm_legit_no_training`` as hipDNN's
batchnorm_inference, ``_native_batch_norm_legit_functional`` and ``native_batch_norm_backward``
as batchnorm and batchnorm_backward (docs/torch-compile.md); other forms stay in aten."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")

make_fx = pytest.importorskip("torch.fx.experimental.proxy_tensor").make_fx

from compile_models import refusals, trains_as_eager  # noqa: E402

import hipdnn_graph.torch.compile as hgc  # noqa: E402

aten = torch.ops.aten
BN = "aten._native_batch_norm_legit_no_training.default"


def test_batchnorm_conditions() -> None:
    x, c = torch.randn(2, 4, 3, 3), torch.rand(4) + 0.5
    op = aten._native_batch_norm_legit_no_training.default
    assert refusals(lambda x, c: op(x, c, c, c, c, 0.1, 1e-5)[0], x, c, op=op) == [None]
    assert refusals(lambda x, c: op(x, None, c, c, c, 0.1, 1e-5)[0], x, c, op=op) == [
        "no weight or no bias (hipDNN's batchnorm_inference takes both)"
    ]
    assert refusals(lambda x, c: op(x, c, c, c, c, 0.1, 1e-5)[1], x, c, op=op) == [
        "its saved mean or inverse standard deviation is used"
    ]


def test_training_batchnorm_conditions() -> None:
    x, c = torch.randn(2, 4, 3, 3), torch.rand(4) + 0.5
    op = aten._native_batch_norm_legit_functional.default
    assert refusals(lambda x, c: op(x, c, c, c, c, True, 0.1, 1e-5)[0], x, c, op=op) == [None]
    assert refusals(lambda x, c: op(x, c, None, c, c, True, 0.1, 1e-5)[0], x, c, op=op) == [
        "no weight or no bias (hipDNN's batchnorm takes both)"
    ]
    back = aten.native_batch_norm_backward.default

    def backward(x: Any, c: Any, mask: list[bool]) -> Any:
        return back(x, x, c, c, c, c, c, True, 1e-5, mask)[0]

    assert refusals(lambda x, c: backward(x, c, [True] * 3), x, c, op=back) == [None]
    assert refusals(lambda x, c: backward(x, c, [True, False, True]), x, c, op=back) == [
        "not all of dX, dScale, dBias asked for"
    ]


def _with_stats(model: torch.nn.Module, bn: torch.nn.Module) -> torch.nn.Module:
    """``model`` in eval mode, ``bn``'s running statistics and affine parameters random."""
    assert isinstance(bn, torch.nn.modules.batchnorm._BatchNorm)
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()
        bn.bias.normal_()
    return model.eval()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    torch._dynamo.reset()
    hgc.reset_census()


@pytest.mark.parametrize(
    ("dtype", "tol"), [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("kind", ["conv-bn2d-relu", "linear-bn1d"])
def test_inference_batchnorm_runs_in_hipdnn_as_eager(
    kind: str, dtype: torch.dtype, tol: float
) -> None:
    torch.manual_seed(0)
    if kind == "conv-bn2d-relu":
        bn: torch.nn.Module = torch.nn.BatchNorm2d(4)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), bn, torch.nn.ReLU())
        x = torch.randn(2, 3, 6, 6)
    else:
        bn = torch.nn.BatchNorm1d(4)
        model, x = torch.nn.Sequential(torch.nn.Linear(5, 4), bn), torch.randn(3, 5)
    model, x = _with_stats(model, bn).to(dtype), x.to(dtype)
    with torch.no_grad():
        got = torch.compile(model, backend=hgc.compile_backend)(x)
        want = model(x)
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    rows = [r for r in hgc.census().rows if r.placement == "hipdnn"]
    assert (BN, "batchnorm_inference") in {(r.op, r.why) for r in rows}
    assert {r.subgraph for r in rows} == {0}  # conv/linear, batch norm (and ReLU): one graph


def test_frozen_batchnorm_in_training_stays_in_aten() -> None:
    """An eval-mode model trained: the forward saves the op's statistics for its backward."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(4)
    model = _with_stats(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), bn), bn)
    trains_as_eager(model, torch.randn(2, 3, 6, 6, requires_grad=True))
    assert hgc.census().aten_ops()[BN] == "its saved mean or inverse standard deviation is used"


@pytest.mark.parametrize("kind", ["conv-bn2d-relu-conv", "conv-bias-bn2d", "linear-bn1d"])
def test_training_batchnorm_trains_and_updates_running_stats_as_eager(kind: str) -> None:
    torch.manual_seed(0)
    if kind == "conv-bn2d-relu-conv":
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1, bias=False),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 4, 3, stride=2, padding=1),
        )
        x = torch.randn(2, 3, 9, 9)
    elif kind == "conv-bias-bn2d":  # the conv's bias gradient reads batchnorm_backward's DX
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
        x = torch.randn(2, 3, 6, 6)
    else:
        model, x = (
            torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4)),
            torch.randn(6, 5),
        )
    twin = copy.deepcopy(model)
    trains_as_eager(model, x.clone().requires_grad_(True))  # one compiled, one eager step
    for _ in range(2):
        twin(x)
    for got, want in zip(model.buffers(), twin.buffers(), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    rows = {(r.graph, r.why) for r in hgc.census().rows if "batch_norm" in r.op}
    assert rows == {("forward", "batchnorm"), ("backward", "batchnorm_backward")}
