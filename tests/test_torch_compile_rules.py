"""The rule table of the torch.compile backend, without Dynamo: aten graphs traced by
``make_fx``, asked which nodes a family expresses, and partitioned and run directly."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

make_fx = pytest.importorskip("torch.fx.experimental.proxy_tensor").make_fx

from compile_models import refusals  # noqa: E402

from hipdnn_graph.torch.compile._partition import partition  # noqa: E402

aten = torch.ops.aten


def test_pointwise_operands_alpha_and_types() -> None:
    x, b = torch.randn(3, 4), torch.randn(4)
    assert refusals(lambda x, b: aten.add.Tensor(b, x), x, b) == [None]  # commutes: swapped
    assert refusals(lambda x, b: aten.sub.Tensor(b, x), x, b) == [
        "its first operand does not have the result's shape (hipDNN broadcasts IN_1 only)"
    ]
    assert refusals(lambda x, b: aten.add.Tensor(x, b, alpha=2), x, b) == ["alpha != 1"]
    assert refusals(lambda x: aten.mul.Tensor(x, 0.5), x) == [None]
    assert refusals(lambda x: aten.cumsum.default(x, 0), x) == ["no hipDNN family expresses it"]
    assert refusals(lambda x: aten.relu.default(x), x.half()) == [None]
    assert refusals(lambda x: aten.relu.default(x), x.double()) == [
        "a torch.float64 tensor (subgraphs take float32, float16, bfloat16)"
    ]


def test_matmul_norm_conv_and_attention_conditions() -> None:
    x, w, b = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    assert refusals(lambda b, x, w: aten.addmm.default(b, x, w), b, x, w) == [None]
    assert refusals(lambda b, x, w: aten.addmm.default(b, x, w, beta=0.5), b, x, w) == [
        "beta or alpha != 1"
    ]
    t = torch.randn(2, 3, 8)
    assert refusals(lambda t: aten.native_layer_norm.default(t, [8], None, None, 1e-5), t) == [
        "no weight or no bias (hipDNN's layernorm takes both)"
    ]
    img, filt = torch.randn(1, 4, 6, 6), torch.randn(4, 2, 3, 3)
    grouped = refusals(
        lambda i, f: aten.convolution.default(i, f, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 2),
        img,
        filt,
    )
    assert grouped == ["a grouped convolution"]
    q = torch.randn(1, 2, 4, 8)
    sdpa = aten._scaled_dot_product_flash_attention_for_cpu.default
    assert refusals(lambda q: sdpa(q, q, q, 0.5)[0], q) == ["dropout"]
    assert refusals(lambda q: sdpa(q, q, q, 0.0, True)[0], q) == [None]


def test_partition_runs_a_swapped_broadcast_add_and_a_scalar_mul() -> None:
    def f(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return aten.relu.default(aten.mul.Tensor(aten.add.Tensor(b, x), 0.5))

    x, b = torch.randn(3, 4), torch.randn(4)
    gm = make_fx(f, tracing_mode="fake")(x, b)
    fused, rows = partition(gm, "inference")
    assert [(r.op, r.placement, r.subgraph) for r in rows] == [
        ("aten.add.Tensor", "hipdnn", 0),
        ("aten.mul.Tensor", "hipdnn", 0),
        ("aten.relu.default", "hipdnn", 0),
    ]
    (sub,) = [m for name, m in fused.named_children() if name.startswith("hipdnn_subgraph_")]
    assert type(sub).__name__ == "HipdnnSubgraph"
    torch.testing.assert_close(fused(x, b), torch.relu((b + x) * 0.5))


def test_an_output_whose_first_operand_is_broadcast_gets_fx_strides() -> None:
    def f(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return aten.add.Tensor(aten.expand.default(b, [5, 8]), x)

    x, b = torch.randn(5, 8), torch.randn(1, 8)
    gm = make_fx(f, tracing_mode="fake")(x, b)
    fused, _ = partition(gm, "inference")
    (sub,) = [m for name, m in fused.named_children() if name.startswith("hipdnn_subgraph_")]
    ((out, _),) = sub.lowered.outputs
    assert out.get_stride() == [8, 1]  # not IN_0's [0, 1], which no engine can write
    torch.testing.assert_close(fused(x, b), b + x)
    assert sub.given_up is False


def test_plans_are_built_at_the_first_call_on_the_preferred_engine() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return aten.relu.default(aten.mm.default(x, w))

    x, w = torch.randn(3, 4), torch.randn(4, 5)
    gm = make_fx(f, tracing_mode="fake")(x, w)
    fused, _ = partition(gm, "inference", prefer="NUMPY_REFERENCE_ENGINE")
    (sub,) = [m for name, m in fused.named_children() if name.startswith("hipdnn_subgraph_")]
    assert sub.lowered.built is False  # compile time checks support only
    torch.testing.assert_close(fused(x, w), torch.relu(x @ w))
    assert sub.lowered.built is True
    assert sub.lowered.graph.get_plan_name() == "NUMPY_REFERENCE_ENGINE"


def test_backend_options_are_checked() -> None:
    from hipdnn_graph import HipdnnError
    from hipdnn_graph.torch.compile import compile_backend

    gm = make_fx(lambda x: aten.relu.default(x), tracing_mode="fake")(torch.randn(2))
    with pytest.raises(HipdnnError) as err:
        compile_backend(gm, [torch.randn(2)], options={"engine": "TORCH_EAGER_ENGINE"})
    assert err.value.code.name == "INVALID_VALUE"
    assert err.value.message == (
        "hipdnn torch.compile backend: unknown options ['engine']; it takes ['prefer']"
    )
    with pytest.raises(HipdnnError) as err:
        compile_backend(gm, [torch.randn(2)], options={"prefer": "NOPE"})
    assert err.value.message.startswith("Unknown engine name 'NOPE'; registered engines: ")


def test_a_plan_that_fails_to_build_sends_every_call_to_aten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hipdnn_graph import Graph, HipdnnError
    from hipdnn_graph.types import ErrorCode

    tries = []

    def fail(self: object, *args: object) -> None:
        tries.append(1)
        raise HipdnnError(ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED, "no plan")

    monkeypatch.setattr(Graph, "build_plans", fail)
    x = torch.randn(3, 4)
    gm = make_fx(lambda x: aten.relu.default(x), tracing_mode="fake")(x)
    fused, _ = partition(gm, "inference")
    (sub,) = [m for name, m in fused.named_children() if name.startswith("hipdnn_subgraph_")]
    for _ in range(3):
        torch.testing.assert_close(fused(x), torch.relu(x))
    assert tries == [1] and sub.given_up is True


def test_scalar_forms_and_powers_run_as_pointwise() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        powers = [aten.pow.Tensor_Scalar(x, e) for e in (1, 2, 3, 0.5, -0.5, -1)]
        return (
            *powers,
            aten.add.Scalar(x, 2.5),
            aten.mul.Scalar(x, -0.5),
            aten.sub.Scalar(x, 1),
            aten.div.Scalar(x, 8),
        )

    x = torch.rand(3, 4) + 0.5
    gm = make_fx(f, tracing_mode="fake")(x)
    fused, rows = partition(gm, "inference")
    assert {(r.placement, r.why) for r in rows} == {("hipdnn", "pointwise")}
    for got, want in zip(fused(x), f(x), strict=True):
        torch.testing.assert_close(got, want)
    assert refusals(lambda x: aten.pow.Tensor_Scalar(x, 4), x) == [
        "exponent 4 (pointwise takes 1, 2, 3, 0.5, -0.5, -1)"
    ]
    assert refusals(lambda x: aten.add.Scalar(x, 1, 2), x) == ["alpha != 1"]
