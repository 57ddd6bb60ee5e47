"""The thin hot path (issue 22 item 3): plan launchers, the op's direct keys, the variant-pack
fast path and the addresses it hands to the plan.

A hit of the torch op calls the plan's launcher (its kernel with the build-time keywords bound)
and nothing of ``execute``; the launcher gives what ``Graph.run`` gives, bit for bit, for every
kind of step (the fused CPU kernel, the chunked math kernels, runtime scalars); the variant-pack
fast path still refuses what the checked path refuses.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.graph.prepared import PreparedLaunch, prepared_launch  # noqa: E402
from hipdnn_graph.torch import graph_cache, scaled_dot_product_attention  # noqa: E402
from hipdnn_graph.torch._args import _PLAIN_OPTIONS  # noqa: E402
from hipdnn_graph.torch._graphs import sdpa_forward  # noqa: E402
from hipdnn_graph.torch._hot import Hit, backward_qkv, forward_qkv  # noqa: E402
from hipdnn_graph.torch._keys import cache_key, qkv_key  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

F = torch.nn.functional
MATH = "TORCH_SDPA_MATH_ENGINE"


def _rand(*shape: int, dtype: Any = torch.float32, seed: int = 0) -> Any:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _forward_graph(**kw: Any) -> tuple[hg.Graph, dict[str, Any], list[Any]]:
    """A built SDPA forward graph on the math engine, its inputs and its outputs."""
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    heads_kv = kw.pop("heads_kv", 2)
    q = g.tensor(name="Q", dim=[2, 2, 6, 8])
    k = g.tensor(name="K", dim=[2, heads_kv, 5, 8])
    v = g.tensor(name="V", dim=[2, heads_kv, 5, 8])
    tensors = {"Q": q, "K": k, "V": v}
    if kw.pop("bias", False):
        tensors["Bias"] = kw["bias"] = g.tensor(name="Bias", dim=[1, 2, 6, 5])
    if kw.pop("philox", False):
        seed = g.tensor(name="Seed", dim=[1], is_pass_by_value=True, data_type=hg.DataType.INT64)
        offset = g.tensor(name="Offset", dim=[1], is_pass_by_value=True,
                          data_type=hg.DataType.INT64)  # fmt: skip
        tensors["Seed"], tensors["Offset"] = seed, offset
        kw["dropout"] = (0.25, seed, offset)
    o, stats = g.sdpa(q, k, v, generate_stats=True, name="fwd", **kw)
    assert stats is not None
    for t in (o, stats):
        t.set_output(True)
    g.set_preferred_engine_id_ext(MATH).build()
    return g, tensors, [o, stats]


@pytest.mark.parametrize(
    "kw",
    [
        {},  # the fused CPU kernel, bound directly
        {"use_causal_mask": True},
        {"bias": True},  # the chunked kernels
        {"heads_kv": 1, "use_causal_mask_bottom_right": True},
        {"philox": True},  # runtime scalars (Seed, Offset) converted per call
        {"attn_scale": 0.3, "use_alibi_mask": True},
    ],
)
def test_a_launcher_gives_what_graph_run_gives(kw: dict[str, Any]) -> None:
    g, tensors, outputs = _forward_graph(**kw)
    values: dict[str, Any] = {
        name: 7 if name == "Seed" else 4 if name == "Offset" else _rand(*t.dim, seed=i)
        for i, (name, t) in enumerate(tensors.items())
    }
    launch = prepared_launch(g)
    assert launch is not None and launch.engine_name == MATH
    by_uid = {t.get_uid(): values[name] for name, t in tensors.items()}
    got = launch([by_uid[uid] for uid in launch.inputs])
    want = g.run({t: values[name] for name, t in tensors.items()})
    assert launch.outputs == tuple(t.get_uid() for t in outputs)
    for value, t in zip(got, outputs, strict=True):
        assert value.stride() == tuple(t.stride) and value.dtype == torch.float32
        assert torch.equal(value, want[t])


def test_a_launcher_detaches_inputs_and_wraps_engine_errors() -> None:
    g, _, _ = _forward_graph()
    launch = prepared_launch(g)
    assert isinstance(launch, PreparedLaunch)
    q, k, v = (_rand(2, 2, 6, 8, seed=1).requires_grad_() for _ in range(3))
    with torch.enable_grad():
        out = launch([q, k, v])
    assert all(t.grad_fn is None and not t.requires_grad for t in out)

    def broken(*args: Any) -> Any:
        raise RuntimeError("kernel exploded")

    launch._call = broken
    with pytest.raises(hg.HipdnnError, match="TORCH_SDPA_MATH_ENGINE failed during execute: "
                       "RuntimeError: kernel exploded") as info:  # fmt: skip
        launch([q, k, v])
    assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED


def test_hits_of_the_op_call_no_execute_and_no_plan_steps(monkeypatch: Any) -> None:
    # before the launchers a hit went through the plan's execute and its step loop
    from hipdnn_graph_torch_rocm._engines import TorchSdpaPlan

    graph_cache().clear()
    q, k, v = (_rand(1, 2, 8, 4, seed=i).requires_grad_() for i in range(3))
    scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    def refuse(*args: Any, **kw: Any) -> None:
        raise AssertionError("a cache hit went through the plan's execute")

    monkeypatch.setattr(TorchSdpaPlan, "execute", refuse)
    monkeypatch.setattr(TorchSdpaPlan, "execute_at", refuse)
    monkeypatch.setattr(TorchSdpaPlan, "run_now", refuse)
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    grads = torch.autograd.grad(out.square().sum(), [q, k, v])
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref)
    for a, b in zip(grads, torch.autograd.grad(ref.square().sum(), [q, k, v]), strict=True):
        torch.testing.assert_close(a, b)
    assert graph_cache().info()[:2] == (2, 2)


def test_the_direct_keys_are_the_cache_keys_so_every_route_shares_one_graph() -> None:
    graph_cache().clear()
    q, k, v = (_rand(1, 2, 8, 4, seed=i) for i in range(3))
    opts = _PLAIN_OPTIONS[True]
    pack = {"Q": q, "K": k, "V": v}
    o, stats = sdpa_forward(q, k, v, is_causal=True)  # a miss, keyed by cache_key
    key = qkv_key(q, k, v, opts)  # the op's direct key
    o2, stats2 = forward_qkv(q, k, v, opts, Hit(key, graph_cache().get(key)))  # a hit
    assert graph_cache().info()[:2] == (1, 1)
    assert torch.equal(o, o2) and torch.equal(stats, stats2)
    entry = graph_cache().values()[0]
    assert entry.launch_slots == ("Q", "K", "V")
    assert key == cache_key("fwd", pack, opts)
    assert graph_cache().get(cache_key("fwd", pack, opts)) is entry
    do = torch.ones_like(o)
    grads = backward_qkv(q, k, v, o, do, stats, opts)  # a miss
    again = backward_qkv(q, k, v, o, do, stats, opts)  # a hit
    assert graph_cache().info()[:2] == (3, 2)  # the get above counted one
    for a, b in zip(grads, again, strict=True):
        assert torch.equal(a, b)


def test_engine_choices_are_logged_on_misses_and_hits_log_nothing(caplog: Any) -> None:
    graph_cache().clear()
    q, k, v = (_rand(1, 1, 4, 8, seed=i).requires_grad_() for i in range(3))
    with caplog.at_level(logging.DEBUG, logger="hipdnn_graph"):
        scaled_dot_product_attention(q, k, v).sum().backward()  # two misses
        first = [r.getMessage() for r in caplog.records]
        caplog.clear()
        scaled_dot_product_attention(q, k, v).sum().backward()  # two hits
    chosen = [m for m in first if "runs on engine" in m]
    assert [m.split("'")[1] for m in chosen] == ["hipdnn_torch_sdpa_fwd", "hipdnn_torch_sdpa_bwd"]
    assert all(m.endswith(MATH) for m in chosen)
    # hits log nothing but, once, that the forward graph's calls take the autograd route
    hits = [r.getMessage() for r in caplog.records]
    assert len(hits) == 1 and "own autograd formula" in hits[0], hits


# ----- Graph.execute: the variant-pack fast path -----
def _backward_graph() -> tuple[hg.Graph, dict[str, Any], list[Any]]:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    t = {n: g.tensor(name=n, dim=[1, 1, 4, 8]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[1, 1, 4, 1])
    grads = list(g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"]))
    for grad in grads:
        grad.set_output(True)
    g.set_preferred_engine_id_ext(MATH).build()
    return g, t, grads


def test_the_fast_path_still_refuses_an_output_aliasing_an_input_when_uids_swap() -> None:
    g, t, grads = _backward_graph()
    x, z, w, y = (_rand(1, 1, 4, 8, seed=i) for i in range(4))
    stats = torch.zeros(1, 1, 4, 1)
    outs = [torch.empty(1, 1, 4, 8) for _ in grads]
    pack = {t["Q"]: x, t["K"]: x, t["V"]: w, t["O"]: y, t["dO"]: y, t["Stats"]: stats,
            grads[0]: z, grads[1]: outs[1], grads[2]: outs[2]}  # fmt: skip
    g.execute(pack)  # Q and K share memory: inputs may
    # the same addresses in the same pack order, but now dQ is Q's buffer: refused
    swapped = {t["Q"]: x, grads[0]: x, t["V"]: w, t["O"]: y, t["dO"]: y, t["Stats"]: stats,
               t["K"]: z, grads[1]: outs[1], grads[2]: outs[2]}  # fmt: skip
    with pytest.raises(hg.HipdnnError, match="shares memory") as info:
        g.execute(swapped)
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK


@pytest.mark.parametrize("bad", ["sparse", "dtype", "strides", "grad"])
def test_the_fast_path_sends_every_mismatch_to_the_checked_path(bad: str) -> None:
    g, t, grads = _backward_graph()
    pack: dict[Any, Any] = {t[n]: _rand(*t[n].dim, seed=i) for i, n in enumerate(t)}
    pack.update({grad: torch.empty(1, 1, 4, 8) for grad in grads})
    g.execute(pack)
    q = pack[t["Q"]]
    pack[t["Q"]] = {
        "sparse": q.to_sparse(),
        "dtype": q.double(),
        "strides": q.transpose(2, 3).contiguous().transpose(2, 3),
        "grad": q,
    }[bad]
    if bad == "grad":
        pack[grads[0]] = torch.empty(1, 1, 4, 8, requires_grad=True)
    match = {"sparse": "layout", "dtype": "dtype", "strides": "strides", "grad": "requires grad"}
    with pytest.raises(hg.HipdnnError, match=match[bad]) as info:
        g.execute(pack)
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK


def test_bind_keyed_gives_addresses_only_for_a_complete_exact_torch_pack() -> None:
    g, t, grads = _backward_graph()
    built = g._state.active
    assert built is not None
    pack: dict[Any, Any] = {t[n]: _rand(*t[n].dim, seed=i) for i, n in enumerate(t)}
    pack.update({grad: torch.empty(1, 1, 4, 8) for grad in grads})
    _, addresses = built.binder.bind_keyed(pack, None)
    _, again = built.binder.bind_keyed(dict(pack), None)
    assert addresses is not None and addresses == again
    pack[t["Q"]] = pack[t["Q"]].numpy()  # converted on the checked path: no addresses
    assert built.binder.bind_keyed(pack, None)[1] is None


def test_the_replay_remembers_packs_it_cannot_capture() -> None:
    from hipdnn_graph_torch_rocm.replay import CudaGraphReplay

    replay = CudaGraphReplay(frozenset({2}), capacity=4)
    buffers = {1: torch.zeros(2), 2: torch.zeros(2)}
    calls: list[int] = []
    key = ((1, 2), (buffers[1].data_ptr(), buffers[2].data_ptr()))
    assert not replay.run(buffers, lambda b: calls.append(1), key)
    assert replay._eager == key and not replay.graphs and not calls
    assert not replay.run(buffers, lambda b: calls.append(1), key)


# ----- the fused ops' bound calls (their kernels need a GPU; the binding logic does not) -----
def test_a_bound_fused_kernel_checks_once_per_device_then_calls_the_direct_op(
    monkeypatch: Any,
) -> None:
    from hipdnn_graph_torch_rocm.kernels import _fused_direct, fused, probe

    calls: list[str] = []

    def generic(op: Any, *args: Any, memo: Any = None, **kw: Any) -> str:
        calls.append("generic")
        memo[:] = [fused.PLAN_GENERATION[0], args[0].device, ("p", "c", None)]
        return "generic"

    def direct(op: Any, forward: bool, p: Any, c: Any, er: Any, device: Any) -> Any:
        calls.append(f"bind {device}")

        def run(*args: Any, **kw: Any) -> str:
            calls.append("direct")
            return "direct"

        return run

    monkeypatch.setattr(fused, "forward", generic)
    monkeypatch.setattr(_fused_direct, "direct", direct)
    bound = fused.Kernel(fused.FusedOp.CUDNN, True).bind({"call": SdpaCall(scale=0.5)})
    x, meta = torch.zeros(1), torch.zeros(1, device="meta")
    assert [bound(x), bound(x), bound(meta), bound(x)] == ["generic", "direct", "generic", "direct"]
    assert bound(x, dropout_seed=1) == "direct"  # a philox node's Seed: passed through
    probe.clear_cache()  # new measurements: checked and bound again
    assert [bound(x), bound(x)] == ["generic", "direct"]
    assert calls.count("bind cpu") == 2 and calls.count("generic") == 3


def test_only_plain_cudnn_nodes_are_called_directly() -> None:
    from hipdnn_graph_torch_rocm.kernels import _fused_direct
    from hipdnn_graph_torch_rocm.kernels.fused import FusedOp, FusedSdpaCase, OpCaps

    caps = OpCaps(FusedOp.CUDNN, True, lse_rank=4)
    cpu = torch.device("cpu")
    causal = SdpaCall(scale=0.125, right_bound=0)

    def problem(**kw: Any) -> Any:
        base = {"b": 1, "h": 4, "hk": 4, "hv": 4, "sq": 8, "skv": 8, "d": 64, "dv": 64,
                "dtype": torch.bfloat16, "device": "cpu", "call": causal}  # fmt: skip
        return FusedSdpaCase(**{**base, **kw})

    rank3 = OpCaps(FusedOp.CUDNN, True, lse_rank=3)  # an older cuDNN's [B, H, Sq] LSE
    for forward in (True, False):
        for c in (caps, rank3):
            assert callable(_fused_direct.direct(FusedOp.CUDNN, forward, problem(), c, None, cpu))
    refused = [
        (FusedOp.FLASH, problem(), caps),
        (FusedOp.CUDNN, problem(bias_shape=(1, 1, 8, 8)), caps),
        (FusedOp.CUDNN, problem(padding=True), caps),
        (FusedOp.CUDNN, problem(hk=2, hv=2), caps),  # K/V heads expanded
        (FusedOp.CUDNN, problem(dropout_mask=True), caps),
        (FusedOp.CUDNN, problem(call=replace(causal, dbias_shape=(1, 4, 8, 8))), caps),
        (FusedOp.CUDNN, problem(call=replace(causal, alibi=True)), caps),
        (FusedOp.CUDNN, problem(call=replace(causal, scale=None)), caps),  # a runtime scale
    ]
    for op, p, c in refused:
        assert _fused_direct.direct(op, True, p, c, None, cpu) is None, (op, p, c)
    philox = replace(causal, dropout_p=0.1, dropout_seed=3)  # the offset comes per call
    assert callable(_fused_direct.direct(FusedOp.CUDNN, False, problem(call=philox), caps, None,
                                         cpu))  # fmt: skip
    gqa = OpCaps(FusedOp.CUDNN, True, lse_rank=4, gqa_native=True)
    assert callable(_fused_direct.direct(FusedOp.CUDNN, True, problem(hk=2, hv=2), gqa, None,
                                         cpu))  # fmt: skip
    rows = torch.zeros(1, 1, 8, 1, dtype=torch.bool)
    assert _fused_direct.direct(FusedOp.CUDNN, True, problem(), caps, rows, cpu) is None


def test_the_c_level_apply_gives_what_function_apply_gives(monkeypatch: Any) -> None:
    from hipdnn_graph.torch import _op

    assert _op.APPLY is not None  # this torch has it: the op takes the short route
    q, k, v = (_rand(2, 2, 6, 4, seed=i, dtype=torch.float64).requires_grad_() for i in range(3))
    lens = [4, 6]
    runs = []
    for apply in (_op.APPLY, None):
        monkeypatch.setattr(_op, "APPLY", apply)
        out = scaled_dot_product_attention(q, k, v, is_causal=True, seq_len_kv=lens)
        assert out.grad_fn is not None and "SdpaFunction" in type(out.grad_fn).__name__
        runs.append((out, *torch.autograd.grad(out.square().sum(), [q, k, v])))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)
