"""The family engines on the CPU: ranking (fusion for graphs, eager for single nodes), the
three example graphs of issue 25 through ``Graph.execute`` with NumPy and torch buffers,
refusals with reasons, and compile-at-build (``execute`` never compiles)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch_family_cases as cases  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.backend import isolated_registry, register_backend  # noqa: E402
from hipdnn_graph.backend.contract import checked_support  # noqa: E402
from hipdnn_graph_torch_rocm import (  # noqa: E402
    TorchEagerEngine,
    TorchFusionEngine,
    family_fusion,
)

FUSION, EAGER = "TORCH_FUSION_ENGINE", "TORCH_EAGER_ENGINE"
EX = cases.fusion_examples()


class Counting:
    """A torch.compile backend that counts compilations and runs the traced graph eagerly."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.calls += 1
        return gm.forward


class _Backend:
    name = "torch-families-test"

    def __init__(self, *engines: Any) -> None:
        self._engines = list(engines)

    def engines(self) -> list[Any]:
        return self._engines


@pytest.fixture
def counting() -> Iterator[Counting]:
    """A registry holding the fusion engine (compiling through a counting backend, no
    autotune) and the eager engine."""
    counter = Counting()
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(TorchFusionEngine(backend=counter, autotune=False),
                                  TorchEagerEngine()))  # fmt: skip
        yield counter


def _plan(g: hg.Graph) -> Any:
    return g._state.active.plan


def _example(kind: str) -> Any:
    return {
        "rmsnorm_matmul": lambda: EX.rmsnorm_matmul(8, 16, 12, io=hg.DataType.FLOAT),
        "conv_bias_relu": lambda: EX.conv_bias_relu(2, 4, 5, io=hg.DataType.FLOAT),
        "matmul_bias_gelu": lambda: EX.matmul_bias_gelu(8, 16, 12, io=hg.DataType.FLOAT),
    }[kind]()


def _reference(case: Any) -> list[Any]:
    """The case's own torch function on float64 copies of its inputs."""
    return [case.direct(*[v.double() for v in case.args()])]


@pytest.mark.parametrize("kind", ["rmsnorm_matmul", "conv_bias_relu", "matmul_bias_gelu"])
@pytest.mark.parametrize("numpy_buffers", [False, True], ids=["torch", "numpy"])
def test_example_graphs_run_fused_and_match(counting: Counting, kind: str,
                                            numpy_buffers: bool) -> None:  # fmt: skip
    case = _example(kind)
    g = case.graph
    g.build_operation_graph().create_execution_plans().check_support().build_plans()
    assert g.get_plan_name() == FUSION
    plan = _plan(g)
    assert plan.choice == "fused" and plan.compiles == counting.calls == 1
    before = {t: v.clone() for t, v in case.inputs.items()}
    (out,) = case.outputs
    pack: dict[Any, Any] = {**case.inputs, out: torch.full(out.dim, float("nan"))}
    pack[out] = torch.empty_strided(out.dim, out.stride).fill_(float("nan"))
    if numpy_buffers:
        pack = {t: v.numpy() for t, v in pack.items()}
    for _ in range(3):
        g.execute(pack)
    assert counting.calls == 1, "execute compiled"
    (want,) = _reference(case)
    assert cases.max_rel_error(torch.as_tensor(pack[out]), want) < 1e-5
    for t, v in before.items():
        assert torch.equal(torch.as_tensor(pack[t]), v), f"input {t.name} was written"


def test_eager_and_fused_plans_agree(counting: Counting) -> None:
    case = _example("matmul_bias_gelu")
    g = case.graph
    g.build_operation_graph().create_execution_plans()
    assert g.get_engine_names()[:2] == [FUSION, EAGER]
    g.build_plans(hg.BuildPlanPolicy.ALL)
    (out,) = case.outputs
    results = []
    for index in range(2):
        buf = torch.empty(out.dim)
        g.execute_plan_at_index({**case.inputs, out: buf}, None, index)
        results.append(buf)
    torch.testing.assert_close(results[0], results[1])


def test_single_node_runs_on_the_eager_engine(counting: Counting) -> None:
    """A single matmul is a library call: refused whatever the race; a single layer norm
    is refused where no race runs (autotune off, as on the CPU by default)."""
    for case, reason in (
        (EX.single_matmul(4, 8, 6, io=hg.DataType.FLOAT),
         "a single MATMUL node has nothing to fuse; TORCH_EAGER_ENGINE runs it (the torch op "
         "called directly: a library kernel, compiled alone the same call)"),
        (EX.single_layernorm(4, 8, io=hg.DataType.FLOAT),
         "a single node has nothing to fuse; TORCH_EAGER_ENGINE runs it (the torch op called "
         "directly; a GPU build races the two, as does autotune=True)"),
    ):  # fmt: skip
        g = case.graph
        g.build_operation_graph().create_execution_plans()
        assert dict(g.get_engine_refusals())[FUSION] == reason
        g.build_plans()
        assert g.get_plan_name() == EAGER and counting.calls == 0
    conv = EX.single_conv(1, 2, 4, io=hg.DataType.FLOAT).graph.build_operation_graph()
    engine = TorchFusionEngine(backend="eager", autotune=True)
    assert engine.check(conv).reason.startswith("a single CONVOLUTION_FPROP node has nothing")


def test_a_single_norm_is_raced_where_autotune_runs() -> None:
    """With the race on, a single layer norm is compiled and measured against node by node;
    whichever runs, ``execute`` writes what the eager engine writes."""
    counter = Counting()
    engine = TorchFusionEngine(backend=counter, autotune=True)
    case = EX.single_layernorm(16, 32, io=hg.DataType.FLOAT)
    g = case.graph.build_operation_graph()
    assert engine.check(g).ok
    family_fusion._VERDICTS.clear()
    try:
        plan = engine.build_plan(g)
    finally:
        family_fusion._VERDICTS.clear()
    assert counter.calls == 1 and set(plan.timings) == {"fused", "eager"}
    assert plan.cut is None  # no writer to leave out of the compiled function
    (out,) = case.outputs
    feeds = {t.get_uid(): v for t, v in case.inputs.items()}
    got, want = torch.full(out.dim, float("nan")), torch.full(out.dim, float("nan"))
    for choice, buf in (("fused", got), ("eager", want)):
        plan.choice = choice
        plan.run_now({**feeds, out.get_uid(): buf})
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not torch.isnan(got).any()


def test_a_trailing_matmul_writes_the_callers_buffer_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RMSNorm -> matmul: the compiled function runs the norm and returns its result; the
    matmul then writes C into the caller's buffer with ``out=`` (a compiled function would
    return C and copy it, a copy inductor cannot fold into a library GEMM)."""
    counter = Counting()
    engine = TorchFusionEngine(backend=counter, autotune=False)
    case = _example("rmsnorm_matmul")
    g = case.graph.build_operation_graph()
    plan = engine.build_plan(g)
    assert plan.choice == "fused" and plan.cut == 1 and counter.calls == 1
    program = plan.program
    assert program.carried(1) == (program.steps[0].outputs[0][1],)  # the norm's Y
    written: list[Any] = []
    write = program.steps[1].write

    def spy(inputs: Any, outs: Any) -> None:
        written.append(outs["C"])
        write(inputs, outs)

    monkeypatch.setattr(program, "steps", (program.steps[0], replace(program.steps[1], write=spy)))
    (out,) = case.outputs
    buf = torch.full(out.dim, float("nan"))
    plan.run_now({**{t.get_uid(): v for t, v in case.inputs.items()}, out.get_uid(): buf})
    assert len(written) == 1 and written[0] is buf
    want = _reference(case)[0]
    torch.testing.assert_close(buf.double(), want, rtol=1e-4, atol=1e-4)
    assert counter.calls == 1


def test_the_head_writes_its_own_outputs_when_a_tail_follows() -> None:
    """A graph output made before the trailing matmul (the norm's Y here, also the matmul's A)
    is written by the compiled head; the matmul by the eager tail."""
    g = cases.graph(hg.DataType.FLOAT)
    x, s, w = (
        g.tensor(name="x", dim=[4, 8]),
        g.tensor(name="s", dim=[1, 8]),
        g.tensor(name="w", dim=[8, 3]),
    )
    y, _ = g.rmsnorm(x, s, epsilon=g.tensor(name="eps").set_value(1e-5),
                     forward_phase=hg.NormFwdPhase.INFERENCE, name="norm")  # fmt: skip
    y.set_output(True)
    c = g.matmul(y, w, name="mm")
    c.set_output(True)
    g.build_operation_graph()
    counter = Counting()
    plan = TorchFusionEngine(backend=counter, autotune=False).build_plan(g)
    assert plan.cut == 1
    gen = torch.Generator().manual_seed(3)
    feeds = {t.get_uid(): torch.randn(t.dim, generator=gen) for t in (x, s, w)}
    bufs = {t.get_uid(): torch.full(t.dim, float("nan")) for t in (y, c)}
    plan.run_now({**feeds, **bufs})
    xv, sv, wv = (feeds[t.get_uid()].double() for t in (x, s, w))
    norm = xv * torch.rsqrt((xv * xv).mean(-1, keepdim=True) + 1e-5) * sv
    torch.testing.assert_close(bufs[y.get_uid()].double(), norm, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bufs[c.get_uid()].double(), norm @ wv, rtol=1e-4, atol=1e-4)


def test_graphs_not_ending_in_a_writer_compile_whole(counting: Counting) -> None:
    """matmul + bias + GELU ends in a pointwise node (no writer): one compiled function."""
    case = _example("matmul_bias_gelu")
    case.graph.build_operation_graph()
    plan = TorchFusionEngine(backend=counting, autotune=False).build_plan(case.graph)
    assert plan.cut is None and plan.program.writer_tail() is None


def test_runtime_epsilon_is_a_tensor_argument_not_a_recompile(counting: Counting) -> None:
    g = cases.graph(hg.DataType.FLOAT)
    x, s, w = (
        g.tensor(name="x", dim=[4, 8]),
        g.tensor(name="s", dim=[1, 8]),
        g.tensor(name="w", dim=[8, 3]),
    )
    eps = g.tensor(name="eps", dim=[1], data_type=hg.DataType.FLOAT).set_is_pass_by_value(True)
    y, _ = g.rmsnorm(x, s, epsilon=eps, forward_phase=hg.NormFwdPhase.INFERENCE, name="n")
    c = g.matmul(y, w, name="mm")
    c.set_output(True)
    g.build_operation_graph().create_execution_plans().build_plans()
    assert g.get_plan_name() == FUSION
    xv, sv, wv = torch.randn(4, 8) * 0.01, torch.ones(1, 8), torch.eye(8)[:, :3].contiguous()
    for e in (1e-6, 1.0):
        out = torch.empty(4, 3)
        g.execute({x: xv, s: sv, w: wv, eps: e, c: out})
        want = xv[:, :3] / torch.sqrt((xv * xv).mean(-1, keepdim=True) + e)
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-7)
    assert counting.calls == 1


def test_execute_refuses_to_compile_and_the_guard_is_at_build() -> None:
    counter = Counting()
    engine = TorchFusionEngine(backend=counter, autotune=False)
    case = _example("matmul_bias_gelu")
    case.graph.build_operation_graph()
    plan = engine.build_plan(case.graph)
    assert counter.calls == 1 and plan.compiles == 1
    with pytest.raises(Exception, match="recompiled at execute"):
        # float64 buffers of the same dims: the guards fail and dynamo wants to compile again
        p = plan.program
        plan.compiled(*[torch.zeros(p.specs[u][0], dtype=torch.float64)
                        for u in (*p.feeds, *p.outputs)])  # fmt: skip
    assert counter.calls == 1


def test_autotune_measures_both_plans_and_caches_the_verdict() -> None:
    counter = Counting()
    engine = TorchFusionEngine(backend=counter, autotune=True)
    case = _example("rmsnorm_matmul")
    case.graph.build_operation_graph()
    family_fusion._VERDICTS.clear()
    first = engine.build_plan(case.graph)
    assert set(first.timings) == {"fused", "eager"}
    assert first.choice == min(first.timings, key=first.timings.__getitem__)
    second = engine.build_plan(case.graph)
    assert second.timings == {} and second.choice == first.choice  # the cached verdict
    assert counter.calls == (
        2 if first.choice == "fused" else 1
    )  # an eager verdict skips compiling
    family_fusion._VERDICTS.clear()


def test_environment_chooses_the_compile_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIPDNN_GRAPH_TORCH_COMPILE_BACKEND", "eager")
    monkeypatch.setenv("HIPDNN_GRAPH_TORCH_FUSION_AUTOTUNE", "0")
    engine = TorchFusionEngine()
    assert engine.config().backend == "eager" and engine.config().autotune is False
    case = _example("conv_bias_relu")
    case.graph.build_operation_graph()
    plan = engine.build_plan(case.graph)
    assert plan.compiles == 1 and plan.choice == "fused"


def test_inductor_compiles_with_eager_numerics_and_the_callers_patches_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Compiled kernels keep every declared cast and correctly rounded division (Inductor's
    defaults drop down-casts and use approximate division on GPUs: block-scale quantize lost
    bits on the H200 with them); a caller's ``options`` override these defaults."""
    import torch._inductor.compile_fx as compile_fx_module

    from hipdnn_graph_torch_rocm.fusion_compile import CountingBackend, FusionConfig

    seen: list[dict[str, Any]] = []

    def fake_compile_fx(gm: Any, example_inputs: Any, config_patches: Any = None) -> Any:
        seen.append(dict(config_patches))
        return gm.forward

    monkeypatch.setattr(compile_fx_module, "compile_fx", fake_compile_fx)
    import torch._inductor.config as inductor_config

    division = (
        "emulate_divison_rounding"
        if hasattr(inductor_config, "emulate_divison_rounding")
        else "eager_numerics.division_rounding"
    )
    for options, casts in ((None, True), ({"emulate_precision_casts": False}, False)):
        backend = CountingBackend(FusionConfig(backend="inductor", options=options))
        backend.building = True
        backend(torch.fx.symbolic_trace(torch.nn.ReLU()), [torch.ones(2)])
        assert seen[-1]["emulate_precision_casts"] is casts
        assert seen[-1][division] is True


def test_family_plans_run_cpu_buffers_eagerly_without_capturing() -> None:
    """CUDA-graph replay is for CUDA buffers only: CPU packs run every call, capture nothing
    and remember no buffer set."""
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(TorchFusionEngine(backend="eager", autotune=False),
                                  TorchEagerEngine()))  # fmt: skip
        for engine in (FUSION, EAGER):
            case = _example("rmsnorm_matmul")
            g = case.graph
            g.build_operation_graph().create_execution_plans().build_plans(hg.BuildPlanPolicy.ALL)
            index = g.get_engine_names().index(engine)
            plan = g._state.plans[index].plan
            (out,) = case.outputs
            pack = {**case.inputs, out: torch.empty(out.dim)}
            for _ in range(3):
                next(iter(case.inputs.values())).add_(1.0)  # new values, same buffer
                g.execute_plan_at_index(pack, None, index)
                want = _reference(case)[0]
                assert cases.max_rel_error(pack[out], want) < 1e-5
            assert plan.replay.captures == 0 and not plan.replay.graphs


def _graph_with(builder: Any) -> hg.Graph:
    g = cases.graph(hg.DataType.FLOAT)
    builder(g)
    g.validate()
    return g


def test_refusals_name_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    fusion, eager = TorchFusionEngine(backend="inductor"), TorchEagerEngine()
    # SDPA stays on the SDPA engines: refused by family before check()
    g = cases.graph(hg.DataType.BFLOAT16)
    q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    g.validate()
    for engine in (fusion, eager):
        ok, reason = checked_support(engine, g)
        assert not ok and reason.startswith("does not run SDPA_FWD nodes")
    # an integer matmul
    ig = hg.Graph(io_data_type=hg.DataType.INT8, intermediate_data_type=hg.DataType.INT8,
                  compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    ig.matmul(ig.tensor(name="a", dim=[2, 3]), ig.tensor(name="b", dim=[3, 2]), name="mm")
    ig.validate()
    assert "tensor 'a' (slot A) is INT8" in eager.check(ig).reason
    # a compute type the lowerings do not honour
    cg = _graph_with(lambda g: g.pointwise(g.tensor(name="x", dim=[2]), name="e",
                                           mode=hg.PointwiseMode.EXP,
                                           compute_data_type=hg.DataType.INT32))  # fmt: skip
    assert "compute type INT32" in eager.check(cg).reason
    # batch-norm backward without the saved statistics
    bg = cases.graph(hg.DataType.FLOAT)
    bg.batchnorm_backward(bg.tensor(name="dy", dim=[2, 3, 4]), bg.tensor(name="x", dim=[2, 3, 4]),
                          bg.tensor(name="s", dim=[1, 3, 1]), name="bnb")  # fmt: skip
    bg.validate()
    assert "without the saved MEAN and INV_VARIANCE" in eager.check(bg).reason
    # a resample mode hipDNN defines no math for
    rg = _graph_with(lambda g: g.resample_fwd(g.tensor(name="x", dim=[1, 1, 4, 4]), name="up",
                                              resample_mode=hg.ResampleMode.NEAREST,
                                              padding_mode=hg.PaddingMode.ZERO_PAD,
                                              window=[2, 2], stride=[2, 2], pre_padding=[0, 0],
                                              post_padding=[0, 0]))  # fmt: skip
    assert eager.check(rg).reason == (
        "node 'up': resample mode NEAREST: hipDNN defines no resample math for it (only MAXPOOL, "
        "AVGPOOL_EXCLUDE_PADDING and AVGPOOL_INCLUDE_PADDING have a backend value)"
    )
    # Inductor on the CPU without a C++ compiler
    case = _example("matmul_bias_gelu")
    case.graph.validate()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("shutil.which", lambda name: None)
    reason = fusion.check(case.graph).reason
    assert reason.startswith("Inductor on the CPU needs a C++ compiler")
    assert TorchFusionEngine(backend="aot_eager").check(case.graph).ok


def test_numpy_caller_gets_numpy_results_from_run(counting: Counting) -> None:
    case = _example("rmsnorm_matmul")
    g = case.graph
    g.build_operation_graph().create_execution_plans().build_plans()
    (out,) = case.outputs
    results = g.run({t: v.numpy() for t, v in case.inputs.items()})
    assert isinstance(results[out], np.ndarray)
    (want,) = _reference(case)
    assert cases.max_rel_error(torch.from_numpy(results[out]), want) < 1e-5


def test_run_hands_the_eager_result_over_in_the_declared_layout() -> None:
    """Graph.run: an output the caller does not pass is the engine's own tensor when its
    layout is the declared one, a copy in the declared layout otherwise."""
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(TorchEagerEngine()))
        for strides in ([6, 1], [1, 4]):  # row-major as computed; column-major: copied
            g = cases.graph(hg.DataType.FLOAT)
            a, b = g.tensor(name="a", dim=[4, 5]), g.tensor(name="b", dim=[5, 6])
            c = g.matmul(a, b, name="mm")
            c.set_output(True).set_dim([4, 6]).set_stride(strides)
            g.build_operation_graph().create_execution_plans().build_plans()
            av, bv = torch.randn(4, 5), torch.randn(5, 6)
            got = g.run({a: av, b: bv})[c]
            assert list(got.stride()) == strides
            torch.testing.assert_close(got, av @ bv)


def test_a_failing_guard_at_execute_runs_node_by_node_without_compiling(counting: Counting) -> None:
    """One buffer passed for both inputs: dynamo's guards (distinct inputs) fail, the compile
    it asks for is refused, and the call runs node by node, correctly."""
    g = cases.graph(hg.DataType.FLOAT)
    x, y = g.tensor(name="x", dim=[4, 8]), g.tensor(name="y", dim=[4, 8])
    s = g.pointwise(x, y, mode=hg.PointwiseMode.ADD, name="add")
    r = g.pointwise(s, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    r.set_output(True)
    g.build_operation_graph().create_execution_plans().build_plans()
    assert g.get_plan_name() == FUSION and counting.calls == 1
    v = torch.randn(4, 8)
    out = torch.empty(4, 8)
    g.execute({x: v, y: v, r: out})
    torch.testing.assert_close(out, torch.relu(2 * v))
    assert counting.calls == 1 and _plan(g).compiles == 1
    g.execute({x: v, y: v.clone(), r: out})  # the compiled function again
    torch.testing.assert_close(out, torch.relu(2 * v))


def _eager_matmul(
    a_dims: list[int], b_dims: list[int], c_dims: list[int], io: Any, c_type: Any = None,
    c_strides: list[int] | None = None,
) -> tuple[hg.Graph, Any, Any, Any]:  # fmt: skip
    g = hg.Graph(io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    a, b = g.tensor(name="a", dim=a_dims), g.tensor(name="b", dim=b_dims)
    c = g.matmul(a, b, name="mm").set_output(True).set_dim(c_dims)
    if c_type is not None:
        c.set_data_type(c_type)
    if c_strides is not None:
        c.set_stride(c_strides)
    g.build_operation_graph().create_execution_plans().build_plans()
    return g, a, b, c


@pytest.mark.parametrize(
    ("a_dims", "b_dims", "c_dims", "io", "c_type", "c_strides", "direct"),
    [
        ([2, 4, 5], [2, 5, 6], [2, 4, 6], hg.DataType.FLOAT, None, None, True),
        ([1, 4, 5], [3, 5, 6], [3, 4, 6], hg.DataType.FLOAT, None, None, True),  # broadcast
        ([2, 4, 5], [4, 5, 6], [4, 4, 6], hg.DataType.FLOAT, None, None, True),  # divisor
        ([4, 5], [5, 6], [4, 6], hg.DataType.BFLOAT16, None, None, True),  # native bf16
        ([4, 5], [5, 6], [4, 6], hg.DataType.FLOAT, None, [1, 4], True),  # column-major C
        ([4, 5], [5, 6], [4, 6], hg.DataType.FLOAT, hg.DataType.BFLOAT16, None, False),  # rounded
    ],
)
def test_execute_writes_a_matmul_straight_into_the_callers_buffer(
    monkeypatch: pytest.MonkeyPatch, a_dims: list[int], b_dims: list[int], c_dims: list[int],
    io: Any, c_type: Any, c_strides: list[int] | None, direct: bool,
) -> None:  # fmt: skip
    """Single matmul nodes on the eager engine: C's buffer receives the product (out=), with
    no copy, where C's storage type is the product's; otherwise the rounded copy as before."""
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(TorchEagerEngine()))
        g, a, b, c = _eager_matmul(a_dims, b_dims, c_dims, io, c_type, c_strides)
        dtype = {hg.DataType.FLOAT: torch.float32, hg.DataType.BFLOAT16: torch.bfloat16}
        gen = torch.Generator().manual_seed(4)
        av, bv = (torch.randn(d, generator=gen).to(dtype[io]) for d in (a_dims, b_dims))
        before = (av.clone(), bv.clone())
        buf = torch.empty_strided(c_dims, c.stride, dtype=dtype[c.data_type])
        address = buf.data_ptr()
        copies: list[int] = []
        copy = torch.Tensor.copy_
        monkeypatch.setattr(
            torch.Tensor, "copy_", lambda t, *x, **k: copies.append(1) or copy(t, *x, **k)
        )
        g.execute({a: av, b: bv, c: buf})
        monkeypatch.undo()
        assert buf.data_ptr() == address and list(buf.stride()) == c.stride
        assert bool(copies) != direct
        ra, rb = av.double(), bv.double()
        if a_dims[0] != b_dims[0] and min(a_dims[0], b_dims[0]) > 1:  # hipDNN's divisor batch
            ra = ra.repeat_interleave(c_dims[0] // a_dims[0], dim=0)
        want = (ra @ rb).to(buf.dtype)
        tol = 1e-2 if torch.bfloat16 in (buf.dtype, av.dtype) else 1e-5
        torch.testing.assert_close(buf, want, rtol=tol, atol=tol)
        assert torch.equal(av, before[0]) and torch.equal(bv, before[1])  # inputs untouched
        # Graph.run (no buffer given) still hands over the engine's own result
        torch.testing.assert_close(g.run({a: av, b: bv})[c], buf, rtol=0, atol=0)


def test_a_matmul_whose_result_feeds_another_node_writes_the_buffer_the_next_node_reads() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(TorchEagerEngine()))
        g = cases.graph(hg.DataType.FLOAT)
        a, b = g.tensor(name="a", dim=[4, 5]), g.tensor(name="b", dim=[5, 6])
        c = g.matmul(a, b, name="mm").set_output(True)
        e = g.pointwise(c, mode=hg.PointwiseMode.EXP, name="exp").set_output(True)
        g.build_operation_graph().create_execution_plans()
        g.set_preferred_engine_id_ext(EAGER).build_plans()
        av, bv = torch.randn(4, 5) / 4, torch.randn(5, 6)
        cbuf, ebuf = torch.empty(4, 6), torch.empty(4, 6)
        g.execute({a: av, b: bv, c: cbuf, e: ebuf})
        torch.testing.assert_close(cbuf, av @ bv)
        torch.testing.assert_close(ebuf, torch.exp(av @ bv))


# ----- block scale and MoE on both engines, against the NumPy reference -----
D = hg.DataType


def _reference_outputs(g: hg.Graph, feeds: dict[Any, Any]) -> dict[Any, Any]:
    """Every non-virtual output of ``g``'s nodes by the NumPy reference, node by node."""
    from hipdnn_graph.backend.dtypes import numpy_dtype
    from hipdnn_graph_numpy_reference.families import reference_family

    values = dict(feeds)
    for node in g.nodes:
        slots = node.attributes.tensors_by_slot()
        args = {s: values[t] for s, t in slots.items() if t in values}
        got = reference_family(node.get_node_type()).run(node, args)
        for s, t in slots.items():
            if s in got:
                values[t] = np.asarray(got[s]).astype(numpy_dtype(t.data_type))
    return {t: v for t, v in values.items() if t not in feeds}


def _quantize_roundtrip(compute: D, y_type: D, scale_type: D) -> tuple[hg.Graph, Any, list[Any]]:
    """X -> quantize (Y, SCALE outputs) -> dequantize (an output): a graph of two nodes."""
    g = hg.Graph(name="qdq", io_data_type=compute, intermediate_data_type=compute,
                 compute_data_type=compute)  # fmt: skip
    x = g.tensor(name="x", dim=[4, 6, 64])
    y, s = g.block_scale_quantize(x, block_size=32, name="q")
    y.set_data_type(y_type).set_output(True)
    s.set_data_type(scale_type).set_output(True)
    z = g.block_scale_dequantize(y, s, block_size=[32], name="dq")
    z.set_data_type(compute).set_output(True)
    g.validate()
    return g, x, [y, s, z]


@pytest.mark.parametrize("engine", [FUSION, EAGER])
@pytest.mark.parametrize(("y_type", "scale_type"), [(D.FP8_E4M3, D.FP8_E8M0),
                         (D.FP8_E5M2_FNUZ, D.HALF), (D.INT8, D.FLOAT), (D.BFLOAT16, D.BFLOAT16)],
                         ids=lambda t: t.name)  # fmt: skip
def test_block_scale_round_trip_on_both_engines_is_the_references(
    counting: Counting, engine: str, y_type: D, scale_type: D
) -> None:
    g, x, outs = _quantize_roundtrip(D.FLOAT, y_type, scale_type)
    g.build_operation_graph().create_execution_plans().build_plans(hg.BuildPlanPolicy.ALL)
    names = g.get_engine_names()
    assert names[:2] == [FUSION, EAGER]
    xv = cases.numpy_values(x, cases.wide(list(x.dim), seed=1))
    want = _reference_outputs(g, {x: xv})
    pack: dict[Any, Any] = {x: torch.from_numpy(xv)}
    pack.update({t: torch.full(t.dim, 7.0).to(cases.storage(t)) for t in outs})
    g.execute_plan_at_index(pack, None, names.index(engine))
    for t in outs:
        cases.assert_same_bits(pack[t], want[t], t.name)
    assert torch.equal(pack[x], torch.from_numpy(xv)), "X was written"
    if engine == FUSION:
        assert counting.calls == 1 and _plan(g).choice == "fused"


@pytest.mark.parametrize("engine", [FUSION, EAGER])
def test_a_non_finite_x_raises_on_both_engines_and_writes_nothing(counting: Counting,
                                                                  engine: str) -> None:  # fmt: skip
    g, x, outs = _quantize_roundtrip(D.FLOAT, D.FP8_E4M3, D.FP8_E8M0)
    g.build_operation_graph().create_execution_plans().build_plans(hg.BuildPlanPolicy.ALL)
    xv = torch.randn(x.dim)
    xv[3, 5, 63] = float("nan")
    pack: dict[Any, Any] = {x: xv}
    pack.update({t: torch.full(t.dim, 7.0).to(cases.storage(t)) for t in outs})
    before = {t: v.clone() for t, v in pack.items()}
    with pytest.raises(hg.HipdnnError) as err:
        g.execute_plan_at_index(pack, None, g.get_engine_names().index(engine))
    assert err.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert "X holds NaN or ±inf, which hipDNN's quantize reference refuses" in str(err.value)
    for t, v in before.items():
        torch.testing.assert_close(pack[t].float(), v.float(), rtol=0, atol=0, equal_nan=True)


def _moe_graph(mode: str, io: D = D.FLOAT) -> tuple[hg.Graph, dict[Any, Any], Any]:
    """ReLU(TOKEN) -> MoE grouped matmul (``mode``: NONE, GATHER, SCATTER, or BWD: the weight
    gradient), with valid routes: two nodes, so the fusion engine takes them."""
    compute = D.DOUBLE if io == D.DOUBLE else D.FLOAT
    g = hg.Graph(name="moe", io_data_type=io, intermediate_data_type=compute,
                 compute_data_type=compute)  # fmt: skip
    i32 = D.INT32
    tokens, k, n, experts = 6, 8, 5, 3
    t = g.tensor(name="t", dim=[1, tokens, k])
    relu = g.pointwise(t, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    rng = np.random.default_rng(0)
    values: dict[Any, Any] = {t: rng.standard_normal([1, tokens, k])}
    if mode == "BWD":
        dout = g.tensor(name="dout", dim=[1, tokens, n])
        off = g.tensor(name="off", dim=[experts, 1, 1], data_type=i32)
        out = g.moe_grouped_matmul_bwd(dout, relu, off, name="mm")
        values[dout] = rng.standard_normal([1, tokens, n])
        values[off] = np.array([0, 2, 2], np.int32).reshape(experts, 1, 1)
    else:
        w = g.tensor(name="w", dim=[experts, k, n])
        values[w] = rng.standard_normal([experts, k, n])
        groups = 6  # two batches of 3 experts: group g uses expert g % 3
        off = g.tensor(name="off", dim=[groups, 1, 1], data_type=i32)
        index = ks = None
        routed = tokens
        if mode in ("GATHER", "SCATTER"):
            routed = 7 if mode == "GATHER" else tokens
            index = g.tensor(name="index", dim=[1, routed, 1], data_type=i32)
            order = [5, 0, 3, 3, 1, 4, 2] if mode == "GATHER" else [2, 0, 1, 2, 0, 1]
            values[index] = np.array(order, np.int32).reshape(1, routed, 1)
        if mode == "SCATTER":
            ks = g.tensor(name="ks", dim=[1, tokens, 1], data_type=i32)
            values[ks] = np.array([0, 1, 0, 1, 0, 1], np.int32).reshape(1, tokens, 1)
        values[off] = np.array([1, 2, 2, 3, 4, routed - 1], np.int32).reshape(groups, 1, 1)
        out = g.moe_grouped_matmul(relu, w, off, index, ks, name="mm",
                                   mode=getattr(hg.MoeGroupedMatmulMode, mode),
                                   top_k=2 if mode == "SCATTER" else 0)  # fmt: skip
    out.set_output(True)
    g.validate()
    feeds = {u: cases.numpy_values(u, v) if u.data_type != i32 else v for u, v in values.items()}
    return g, feeds, out


MOE_MODES = ["NONE", "GATHER", "SCATTER", "BWD"]


@pytest.mark.parametrize("engine", [FUSION, EAGER])
@pytest.mark.parametrize("io", [D.FLOAT, D.HALF, D.BFLOAT16, D.DOUBLE], ids=lambda t: t.name)
@pytest.mark.parametrize("mode", MOE_MODES)
def test_moe_on_both_engines_agrees_with_the_reference(counting: Counting, mode: str, io: D,
                                                       engine: str) -> None:  # fmt: skip
    g, feeds, out = _moe_graph(mode, io)
    g.build_operation_graph().create_execution_plans().build_plans(hg.BuildPlanPolicy.ALL)
    names = g.get_engine_names()
    assert names[:2] == [FUSION, EAGER]
    want = _reference_outputs(g, feeds)[out]
    pack: dict[Any, Any] = {t: cases.as_torch(v) for t, v in feeds.items()}
    pack[out] = torch.empty_strided(out.dim, out.stride, dtype=cases.storage(out)).fill_(
        float("nan")
    )  # DWEIGHT's inferred layout is column-major
    g.execute_plan_at_index(pack, None, names.index(engine))
    got = pack[out].double()
    assert cases.max_rel_error(got, torch.from_numpy(want.astype(np.float64))) < 1e-6
    if engine == FUSION:
        assert counting.calls == 1 and _plan(g).choice == "fused"


#: (mode, routing input, its bad values, the reference's exact message)
BAD_ROUTES = [
    (
        "NONE",
        "off",
        [1, 5, 2, 4, 4, 4],
        "FIRST_TOKEN_OFFSET must be non-decreasing (violated at 2)",
    ),
    ("NONE", "off", [0, 2, 2, 3, 4, 9], "FIRST_TOKEN_OFFSET[5] = 9 is out of range [0, 6]"),
    ("GATHER", "index", [5, 0, 3, 6, 1, 4, 2], "routed source row 6 is out of range [0, 6)"),
    ("SCATTER", "ks", [0, 1, 0, 2, 0, 1], "TOKEN_KS[3] = 2 is out of range [0, 2)"),
    ("SCATTER", "index", [2, 0, 1, 2, 0, 2], "duplicate SCATTER destination row 5"),
    ("BWD", "off", [1, 2, 2], "FIRST_TOKEN_OFFSET[0] must be 0, got 1"),
]


@pytest.mark.parametrize("engine", [FUSION, EAGER])
@pytest.mark.parametrize(
    ("mode", "slot", "bad", "message"),
    BAD_ROUTES,
    ids=[f"{m}-{s}-{i}" for i, (m, s, _, _) in enumerate(BAD_ROUTES)],
)
def test_bad_moe_routes_raise_the_references_error_and_write_nothing(
    counting: Counting, engine: str, mode: str, slot: str, bad: list[int], message: str
) -> None:
    g, feeds, out = _moe_graph(mode)
    g.build_operation_graph().create_execution_plans().build_plans(hg.BuildPlanPolicy.ALL)
    (t,) = [u for u in feeds if u.name == slot]
    feeds[t] = np.array(bad, np.int32).reshape(t.dim)
    pack: dict[Any, Any] = {u: cases.as_torch(v) for u, v in feeds.items()}
    pack[out] = torch.empty_strided(out.dim, out.stride).fill_(7.0)
    before = {u: v.clone() for u, v in pack.items()}
    with pytest.raises(hg.HipdnnError) as err:
        g.execute_plan_at_index(pack, None, g.get_engine_names().index(engine))
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert str(err.value) == f"node 'mm': {message}"
    for u, v in before.items():
        assert torch.equal(pack[u], v), f"{u.name} was written"


def test_custom_op_graphs_are_refused_with_the_references_reason() -> None:
    g = cases.graph(D.FLOAT)
    (y,) = g.custom_op([g.tensor(name="x", dim=[4])], 1, name="op", custom_op_id="ex.rope")
    y.set_dim([4]).set_stride([1]).set_output(True)
    g.validate()
    ok, reason = checked_support(TorchEagerEngine(), g)
    assert not ok
    assert (
        reason == "node 'op': custom op 'ex.rope' is plugin-defined: hipDNN defines no math for it"
    )
    # in a graph of two nodes the fusion engine gives the same reason
    g2 = cases.graph(D.FLOAT)
    x = g2.pointwise(g2.tensor(name="x", dim=[4]), mode=hg.PointwiseMode.EXP, name="e")
    (y,) = g2.custom_op([x], 1, name="op", custom_op_id="ex.rope")
    y.set_dim([4]).set_stride([1]).set_output(True)
    g2.validate()
    ok, reason = checked_support(TorchFusionEngine(backend="aot_eager"), g2)
    assert not ok
    assert (
        reason == "node 'op': custom op 'ex.rope' is plugin-defined: hipDNN defines no math for it"
    )


def test_autotune_survives_example_routes_the_eager_lowering_refuses() -> None:
    """build_plan times the eager function on example buffers: zeros, which for SCATTER are
    duplicate destinations the eager MoE lowering refuses; the plan is built (fused, not timed)
    and runs valid routes correctly."""
    counter = Counting()
    engine = TorchFusionEngine(backend=counter, autotune=True)
    g, feeds, out = _moe_graph("SCATTER")
    g.build_operation_graph()
    family_fusion._VERDICTS.clear()
    plan = engine.build_plan(g)
    assert plan.choice == "fused" and plan.timings == {} and counter.calls == 1
    pack: dict[Any, Any] = {t.get_uid(): cases.as_torch(v) for t, v in feeds.items()}
    pack[out.get_uid()] = torch.empty(out.dim)
    plan.execute(pack, None)
    want = _reference_outputs(g, feeds)[out]
    assert cases.max_rel_error(pack[out.get_uid()], torch.from_numpy(want)) < 1e-6
    family_fusion._VERDICTS.clear()


def test_inductor_on_the_cpu_compiles_block_scale_and_moe_to_the_references_bits() -> None:
    """Real Inductor kernels (C++ on the CPU): the quantized values and scales bit for bit,
    E8M0 scales included (Inductor cannot bitcast E8M0: its round-up step doubles instead), a
    DOUBLE quotient rounded once to HALF, and HALF scales rounded up (on the GPU this needs the
    engine's eager-numerics settings); a SCATTER MoE to the reference's values."""
    from hipdnn_graph_torch_rocm.fusion_compile import compiler_refusal

    engine = TorchFusionEngine(backend="inductor", autotune=False)
    reason = compiler_refusal(engine.config(), "cpu")
    if reason is not None:
        pytest.skip(reason)
    rounds = ((D.FLOAT, D.FP8_E4M3, D.FP8_E8M0), (D.DOUBLE, D.HALF, D.FP8_E8M0),
              (D.FLOAT, D.INT8, D.HALF))  # fmt: skip
    for compute, y_type, scale in rounds:
        g, x, outs = _quantize_roundtrip(compute, y_type, scale)
        g.build_operation_graph()
        plan = engine.build_plan(g)
        xv = cases.numpy_values(x, cases.wide(list(x.dim), seed=1))
        want = _reference_outputs(g, {x: xv})
        pack: dict[int, Any] = {x.get_uid(): torch.from_numpy(xv)}
        pack.update({t.get_uid(): torch.empty(t.dim).to(cases.storage(t)) for t in outs})
        plan.execute(pack, None)
        assert plan.choice == "fused" and plan.compiles == 1
        for t in outs:
            cases.assert_same_bits(pack[t.get_uid()], want[t], f"{t.name} ({compute.name})")
    g, feeds, out = _moe_graph("SCATTER")
    g.build_operation_graph()
    plan = engine.build_plan(g)
    pack = {t.get_uid(): cases.as_torch(v) for t, v in feeds.items()}
    pack[out.get_uid()] = torch.empty(out.dim)
    plan.execute(pack, None)
    want = _reference_outputs(g, feeds)[out]
    assert cases.max_rel_error(pack[out.get_uid()], torch.from_numpy(want)) < 1e-6
