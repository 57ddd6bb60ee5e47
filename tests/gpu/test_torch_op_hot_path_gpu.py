"""GPU suite of the torch op's hot path (issue 22 item 3; skipped without CUDA/ROCm).

A cache hit on the device builds nothing and calls no ``Graph.run``/``execute``: it calls the
fused engine's plan directly, with inputs that do not require grad (the flex kernels run under
``fail_on_recompile`` and are guarded on ``requires_grad``, so a hit with a leaf that requires
grad would raise there), and gives torch's results. The pre-bound launchers a hit calls give what
``Graph.run`` gives (the route before them), philox dropout included; the fused ops' signature
check runs once per plan; engine choices are still logged; ``Graph.execute`` replays by the
addresses the variant-pack check read. Calls whose two graphs call aten's cuDNN attention take
the autograd route once learnt, with the graph path's results and, with dropout, torch's mask.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

BF16 = torch.bfloat16
F = torch.nn.functional


def _rel(a: Any, ref: Any) -> float:
    return float((a.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-12))


def _leaves(shape: tuple[int, ...] = (2, 4, 128, 64)) -> list[Any]:
    g = torch.Generator(device="cuda").manual_seed(5)
    return [
        torch.randn(*shape, device="cuda", dtype=BF16, generator=g).requires_grad_()
        for _ in range(3)
    ]


def test_cuda_cache_hits_call_the_fused_plan_directly(monkeypatch: Any) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves()
    hgt.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    listed = hgt.cached_graphs()
    assert [c.kind for c in listed] == ["forward", "backward"]
    assert all(c.engine != "TORCH_SDPA_MATH_ENGINE" for c in listed), listed

    def no_build(*args: Any, **kw: Any) -> None:
        raise AssertionError("a cache hit built or re-checked something")

    monkeypatch.setattr(hg.Graph, "build", no_build)
    monkeypatch.setattr(hg.Graph, "run", no_build)
    monkeypatch.setattr(hg.Graph, "execute", no_build)
    for _ in range(3):
        out = hgt.scaled_dot_product_attention(q, k, v, is_causal=True)
        grads = torch.autograd.grad(out.float().square().sum(), [q, k, v])
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
    assert _rel(out, ref) < 2e-2
    for a, b in zip(grads, refs, strict=True):
        assert _rel(a, b) < 3e-2
    # three hits each, or, once the second call learnt the autograd route (cuDNN), the forward
    # graph's hits alone after it
    routed = any(c.autograd_route for c in hgt.cached_graphs())
    assert hgt.graph_cache().info()[:2] == ((4, 2) if routed else (6, 2))


@pytest.mark.parametrize(
    "engine",
    [
        "TORCH_SDPA_FLEX_ENGINE",
        "TORCH_SDPA_CUDNN_ENGINE",
        "TORCH_SDPA_FLASH_ENGINE",
        "TORCH_SDPA_EFFICIENT_ENGINE",
    ],
)
def test_a_forced_fused_engine_takes_leaves_that_require_grad_on_hits(engine: str) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves((1, 2, 128, 64))
    results = []
    for _ in range(3):  # a miss, then hits, with leaves that require grad
        try:
            out = hgt.scaled_dot_product_attention(q, k, v, is_causal=True, engine=engine)
            grads = torch.autograd.grad(out.sum(), [q, k, v])
        except hg.NotSupportedError as err:
            pytest.skip(f"{engine} does not run here: {err}")
        results.append((out, *grads))
    for later in results[1:]:
        for a, b in zip(results[0], later, strict=True):
            assert _rel(a, b) < 1e-2
    assert {c.engine for c in hgt.cached_graphs()} == {engine}


# ----- the pre-bound launchers (issue 22 item 3) -----
FUSED = ["TORCH_SDPA_CUDNN_ENGINE", "TORCH_SDPA_FLASH_ENGINE", "TORCH_SDPA_EFFICIENT_ENGINE"]


def _graph_run(entry: Any, args: list[Any]) -> list[Any]:
    """The outputs of the entry's graph through ``Graph.run`` (every check, the plan's
    ``execute``): the route a hit took before the launchers."""
    slots = dict(zip(entry.launch_slots, args, strict=True))
    out = entry.graph.run({entry.slots[s]: value for s, value in slots.items()})
    return [out[t] for t in entry.outputs]


@pytest.mark.parametrize("engine", [*FUSED, "TORCH_SDPA_MATH_ENGINE"])
@pytest.mark.parametrize("causal", [False, True])
def test_prebound_launchers_give_what_graph_run_gives(engine: str, causal: bool) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves((2, 4, 128, 64))
    try:
        out = hgt.scaled_dot_product_attention(q, k, v, is_causal=causal, engine=engine)
        grads = torch.autograd.grad(out.float().square().sum(), [q, k, v])
    except hg.NotSupportedError as err:
        pytest.skip(f"{engine} does not run here: {err}")
    entries = hgt.graph_cache().values()
    assert [e.engine for e in entries] == [engine, engine]
    assert all(e.launch is not None for e in entries), "the op's graphs offer no launcher"
    fwd, bwd = entries
    args = [q.detach(), k.detach(), v.detach()]
    ran = _graph_run(fwd, args)
    for _ in range(3):  # the first launcher call checks, later ones may call the op directly
        launched = fwd.launch(list(args))
        for a, b in zip(launched, ran, strict=True):
            assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
            assert torch.equal(a, b)  # one forward kernel, deterministic
    o, stats = launched
    do = torch.randn_like(o)
    bargs = [*args, o, do, stats]
    bran = _graph_run(bwd, bargs)
    for _ in range(3):
        for a, b in zip(bwd.launch(list(bargs)), bran, strict=True):
            assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
            assert _rel(a, b) < 1e-2  # backward kernels may accumulate in another order
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
    assert _rel(out, ref) < 2e-2
    for a, b in zip(grads, refs, strict=True):
        assert _rel(a, b) < 3e-2


def test_a_philox_hit_draws_the_mask_graph_run_draws() -> None:
    from hipdnn_graph.torch._philox_graphs import philox_forward

    hgt.graph_cache().clear()
    q, k, v = (t.detach() for t in _leaves((1, 2, 64, 64)))
    runs = [philox_forward(q, k, v, dropout_p=0.3, seed=11, offset=8) for _ in range(2)]
    (entry,) = hgt.graph_cache().values()
    assert entry.launch is not None and hgt.graph_cache().info()[:2] == (1, 1)
    assert runs[0][2] == runs[1][2] == entry.engine
    direct = _graph_run(entry, [q, k, v, 11, 8])
    for a, b in zip(runs[1][:2], direct, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(runs[0][0], runs[1][0])


def test_the_fused_signature_check_runs_once_per_plan_and_again_after_a_probe_reset(
    monkeypatch: Any,
) -> None:
    from hipdnn_graph_torch_rocm.kernels import fused, probe

    hgt.graph_cache().clear()
    q, k, v = _leaves((1, 2, 128, 64))
    try:  # misses (Graph.run), then hits: the launchers' first calls fill their memos
        for _ in range(2):
            hgt.scaled_dot_product_attention(q, k, v, engine=FUSED[2]).sum().backward()
    except hg.NotSupportedError as err:
        pytest.skip(f"{FUSED[2]} does not run here: {err}")
    looked_up: list[Any] = []

    class Recording(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            looked_up.append(key)
            return super().get(key, default)

    monkeypatch.setattr(fused, "PLANS", Recording(fused.PLANS))
    for _ in range(2):
        hgt.scaled_dot_product_attention(q, k, v, engine=FUSED[2]).sum().backward()
    assert not looked_up  # the plans' memos answered
    probe.clear_cache()  # new measurements: the memos are stale
    hgt.scaled_dot_product_attention(q, k, v, engine=FUSED[2]).sum().backward()
    assert len(looked_up) == 2  # forward and backward checked again, once each


def test_the_debug_logger_still_reports_engine_choices(caplog: Any) -> None:
    import logging

    hgt.graph_cache().clear()
    q, k, v = _leaves((1, 2, 128, 64))
    with caplog.at_level(logging.DEBUG, logger="hipdnn_graph"):
        hgt.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        first = [r.getMessage() for r in caplog.records if r.name == "hipdnn_graph.engines"]
        caplog.clear()
        hgt.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    engines = {c.kind: c.engine for c in hgt.cached_graphs()}
    assert f"graph 'hipdnn_torch_sdpa_fwd' runs on engine {engines['forward']}" in first
    assert f"graph 'hipdnn_torch_sdpa_bwd' runs on engine {engines['backward']}" in first
    assert any("engines that apply, best first" in m for m in first)
    hits = [r.getMessage() for r in caplog.records if r.name.startswith("hipdnn_graph")]
    # hits log nothing but, once, a forward graph whose calls take the autograd route
    assert all("own autograd formula" in m for m in hits), hits


def test_graph_execute_replays_by_the_addresses_the_binder_read() -> None:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    shape = [1, 2, 64, 64]
    t = {n: g.tensor(name=n, dim=shape) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[1, 2, 64, 1], data_type=hg.DataType.FLOAT)
    grads = g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd")
    for grad in grads:
        grad.set_output(True)
    g.build()
    q, k, v = (x.detach() for x in _leaves((1, 2, 64, 64)))
    do = torch.randn_like(q)
    o, stats = hgt.sdpa_forward(q, k, v)
    pack: dict[Any, Any] = {t["Q"]: q, t["K"]: k, t["V"]: v, t["O"]: o, t["dO"]: do,
                            t["Stats"]: stats}  # fmt: skip
    outs = [torch.empty(shape, device="cuda", dtype=BF16) for _ in grads]
    pack.update(dict(zip(grads, outs, strict=True)))
    built = g._state.active
    assert built is not None
    results = []
    for _ in range(4):  # eager, capture, replay, replay
        g.execute(pack)
        torch.cuda.synchronize()
        results.append([x.clone() for x in outs])
    replay = built.plan.replay
    assert replay.captures == 1
    _, addresses = built.binder.bind_keyed(pack, None)
    assert addresses in replay.graphs
    for later in results[1:]:
        for a, b in zip(results[0], later, strict=True):
            assert _rel(a, b) < 1e-2


@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_hits_call_the_aten_op_directly(causal: bool, monkeypatch: Any) -> None:
    from hipdnn_graph_torch_rocm.kernels import _fused_ops

    engine = FUSED[0]
    hgt.graph_cache().clear()
    q, k, v = _leaves((2, 4, 128, 64))
    try:  # misses, then a first hit (the launchers check once and bind the op)
        for _ in range(2):
            out = hgt.scaled_dot_product_attention(q, k, v, is_causal=causal, engine=engine)
            grads = torch.autograd.grad(out.float().square().sum(), [q, k, v])
    except hg.NotSupportedError as err:
        pytest.skip(f"{engine} does not run here: {err}")

    def generic(*args: Any, **kw: Any) -> None:
        raise AssertionError("a plain cuDNN hit went through the generic wrapper")

    monkeypatch.setitem(_fused_ops.FORWARD, _fused_ops.FusedOp.CUDNN, generic)
    monkeypatch.setitem(_fused_ops.BACKWARD, _fused_ops.FusedOp.CUDNN, generic)
    again = hgt.scaled_dot_product_attention(q, k, v, is_causal=causal, engine=engine)
    regrads = torch.autograd.grad(again.float().square().sum(), [q, k, v])
    assert torch.equal(again, out)
    for a, b in zip(regrads, grads, strict=True):
        assert _rel(a, b) < 1e-2


def test_the_philox_seed_cache_reads_the_current_stream_as_torch_does() -> None:
    from hipdnn_graph_torch_rocm.kernels._fused_philox import _current_stream

    for device in (torch.device("cuda"), torch.device("cuda", torch.cuda.current_device())):
        assert _current_stream(device) == torch.cuda.current_stream(device).cuda_stream
        side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        with torch.cuda.stream(side):
            assert _current_stream(device) == side.cuda_stream


def test_cudnn_philox_hits_call_the_aten_op_directly_with_the_graphs_seed(
    monkeypatch: Any,
) -> None:
    from hipdnn_graph.torch._philox_graphs import philox_backward, philox_forward
    from hipdnn_graph_torch_rocm.kernels import _fused_ops

    engine = FUSED[0]
    hgt.graph_cache().clear()
    q, k, v = (t.detach() for t in _leaves((1, 2, 64, 64)))
    kw: dict[str, Any] = {"dropout_p": 0.3, "seed": 11, "offset": 8}
    try:  # a miss (Graph.run), then a first hit (checks once, binds the op)
        fwd = [philox_forward(q, k, v, prefer=engine, **kw) for _ in range(2)]
    except hg.NotSupportedError as err:
        pytest.skip(f"{engine} does not run here: {err}")
    if fwd[0][2] != engine:
        pytest.skip(f"{engine} did not take the philox graph here (ran {fwd[0][2]})")
    o, stats, _ = fwd[0]
    do = torch.randn_like(o)
    bwd = [philox_backward(q, k, v, o, do, stats, engine=engine, **kw) for _ in range(2)]

    def generic(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a philox cuDNN hit went through the generic wrapper")

    monkeypatch.setitem(_fused_ops.FORWARD, _fused_ops.FusedOp.CUDNN, generic)
    monkeypatch.setitem(_fused_ops.BACKWARD, _fused_ops.FusedOp.CUDNN, generic)
    o3, stats3, ran = philox_forward(q, k, v, prefer=engine, **kw)
    assert ran == engine and torch.equal(o3, o) and torch.equal(stats3, stats)  # one mask
    other = philox_forward(q, k, v, prefer=engine, **{**kw, "seed": 12})[0]
    assert not torch.equal(other, o)  # the seed reaches the op
    grads = philox_backward(q, k, v, o, do, stats, engine=engine, **kw)
    for a, b in zip(grads[:3], bwd[0][:3], strict=True):
        assert _rel(a, b) < 1e-2
    for a, b in zip(bwd[1][:3], bwd[0][:3], strict=True):
        assert _rel(a, b) < 1e-2


# ----- the autograd route (see hipdnn_graph.torch._hot): calls whose forward and backward graphs
# both run aten's cuDNN attention directly run the op under torch's autograd from the call after
# the one that learnt it; results, the dropout mask and the generator are the graph path's and
# torch's own
_CUDNN = "TORCH_SDPA_CUDNN_ENGINE"


def _routed_by_aten(out: Any) -> bool:
    return "_SdpaFunction" not in type(out.grad_fn).__name__


@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_calls_learn_the_route_and_give_the_graphs_results(causal: bool) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves()
    runs, routed = [], []
    try:
        for _ in range(4):
            out = hgt.scaled_dot_product_attention(q, k, v, is_causal=causal, engine=_CUDNN)
            routed.append(_routed_by_aten(out))
            runs.append((out, *torch.autograd.grad(out.float().square().sum(), [q, k, v])))
    except hg.NotSupportedError as err:
        pytest.skip(f"{_CUDNN} does not run here: {err}")
    assert routed == [False, False, True, True]  # learnt in the second call's backward
    listed = sorted((c.kind, c.engine, c.autograd_route) for c in hgt.cached_graphs())
    assert listed == [("backward", _CUDNN, False), ("forward", _CUDNN, True)]
    graph, route = runs[1], runs[3]
    assert route[0].shape == graph[0].shape and route[0].stride() == graph[0].stride()
    assert torch.equal(route[0], graph[0])  # one forward kernel on the same arguments
    for a, b in zip(route[1:], graph[1:], strict=True):
        assert _rel(a, b) < 1e-2  # backward kernels may accumulate in another order
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
    assert _rel(route[0], ref) < 2e-2
    for a, b in zip(route[1:], refs, strict=True):
        assert _rel(a, b) < 3e-2


def test_the_dropout_route_draws_sdpas_cudnn_mask_and_moves_the_generator_alike() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    hgt.graph_cache().clear()
    q, k, v = _leaves((2, 4, 256, 64))
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    routed, states = [], []
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # torch's choice, so the op's: cuDNN
        for seed in range(5):
            torch.cuda.manual_seed(seed)
            ours = hgt.scaled_dot_product_attention(q, k, v, dropout_p=0.2, is_causal=True)
            ours_offset = gen.get_offset()
            grads = torch.autograd.grad(ours.float().square().sum(), [q, k, v])
            torch.cuda.manual_seed(seed)
            ref = F.scaled_dot_product_attention(q, k, v, dropout_p=0.2, is_causal=True)
            assert gen.get_offset() == ours_offset
            refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
            assert torch.equal(ours, ref), seed  # one kernel, one mask
            for a, b in zip(grads, refs, strict=True):
                assert _rel(a, b) < 1e-2
            routed.append(_routed_by_aten(ours))
            states.append(
                [(e.engine, e.autograd, e.route_tries) for e in hgt.graph_cache().values()]
            )
    engines = {c.engine for c in hgt.cached_graphs()}
    if engines != {_CUDNN}:
        pytest.skip(f"the op's philox graphs ran on {engines}, not cuDNN")
    # learnt in a hit's backward once both launchers bound the op (the second or third call)
    assert routed[:2] == [False, False] and routed[3:] == [True, True], (routed, states)
