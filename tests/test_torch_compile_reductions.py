"""Reductions in the torch.compile backend: aten ``sum``/``mean``/``amax``/``amin``/``prod``
over dims with ``keepdim=True`` as hipDNN reduction nodes; the other forms stay in aten."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

make_fx = pytest.importorskip("torch.fx.experimental.proxy_tensor").make_fx

from compile_models import refusals, trains_as_eager  # noqa: E402

import hipdnn_graph.torch.compile as hgc  # noqa: E402
from hipdnn_graph.torch.compile._partition import partition  # noqa: E402

aten = torch.ops.aten


def _reductions(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    total = aten.sum.dim_IntList(x, [-1], True)
    peak = aten.amax.default(aten.mean.dim(x, [1], True), [2], True)
    return (
        aten.add.Tensor(total, peak),
        aten.amin.default(x, [0, 2], True),
        aten.prod.dim_int(x, 1, True),
        aten.sum.dim_IntList(x, None, True),  # every axis
    )


def test_keepdim_reductions_are_refused_otherwise() -> None:
    x = torch.randn(2, 3, 4)
    assert refusals(lambda x: aten.mean.dim(x, [1], True), x) == [None]
    assert refusals(lambda x: aten.sum.dim_IntList(x, [1]), x) == [
        "keepdim=False (hipDNN's reduction keeps the reduced dims as 1s)"
    ]
    assert refusals(lambda x: aten.amax.default(x, [0]), x) == [
        "keepdim=False (hipDNN's reduction keeps the reduced dims as 1s)"
    ]
    assert refusals(
        lambda x: aten.sum.dim_IntList(x, [1], True, dtype=torch.float32), x.half()
    ) == ["a dtype= conversion"]
    assert refusals(lambda x: aten.sum.dim_IntList(x, [], True), torch.tensor(2.0)) == [
        "a 0-d input (a reduction's Y keeps X's rank)"
    ]
    assert refusals(lambda x: aten.sum.dim_IntList(x, [1], True), x.double()) == [
        "a torch.float64 tensor (subgraphs take float32, float16, bfloat16)"
    ]


@pytest.mark.parametrize(
    ("dtype", "tol"), [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"]
)
def test_reductions_run_in_hipdnn_graphs_as_eager(dtype: torch.dtype, tol: float) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, dtype=dtype)
    gm = make_fx(_reductions, tracing_mode="fake")(x)
    fused, rows = partition(gm, "inference")
    assert [(r.op, r.placement, r.why) for r in rows] == [
        ("aten.sum.dim_IntList", "hipdnn", "reduction"),
        ("aten.mean.dim", "hipdnn", "reduction"),
        ("aten.amax.default", "hipdnn", "reduction"),
        ("aten.add.Tensor", "hipdnn", "pointwise"),
        ("aten.amin.default", "hipdnn", "reduction"),
        ("aten.prod.dim_int", "hipdnn", "reduction"),
        ("aten.sum.dim_IntList", "hipdnn", "reduction"),
    ]
    # the sum, the mean, its max and the add are one graph: the reductions feed the add
    assert len({r.subgraph for r in rows[:4]}) == 1
    for got, want in zip(fused(x), _reductions(x), strict=True):
        assert got.shape == want.shape and got.dtype == dtype
        # bf16: the graph keeps the sum and the max in float32 before the add (eager rounds)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


class _Centered(torch.nn.Module):
    """A linear layer, centred and scaled by its row maximum: mean and amax with keepdim."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        centred = y - y.mean(dim=-1, keepdim=True)
        return centred * y.amax(dim=-1, keepdim=True) + y.sum(dim=0)


def test_model_with_reductions_trains_as_eager() -> None:
    torch._dynamo.reset()
    hgc.reset_census()
    torch.manual_seed(0)
    trains_as_eager(_Centered(), torch.randn(5, 6, requires_grad=True))
    c = hgc.census()
    placed = {(r.graph, r.op, r.placement, r.why) for r in c.rows}
    assert ("forward", "aten.mean.dim", "hipdnn", "reduction") in placed
    assert ("forward", "aten.amax.default", "hipdnn", "reduction") in placed
    # y.sum(dim=0) drops the dim: aten runs it
    dropped = "keepdim=False (hipDNN's reduction keeps the reduced dims as 1s)"
    assert ("forward", "aten.sum.dim_IntList", "aten", dropped) in placed
    assert ("backward", "aten.sum.dim_IntList", "hipdnn", "reduction") in placed
