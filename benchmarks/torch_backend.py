"""Throughput of the torch backend's ``graph.execute`` against torch's fused backward ops.

Run on a GPU machine (``python benchmarks/torch_backend.py [--quick] [--json OUT]``). For each
configuration (bf16, B·S = 16k tokens, H·D = 2048; D ∈ {64, 128}, S ∈ {1k, 4k, 16k}, causal and
not; GQA 32:8 at 4k) it prints:

* the engine the graph picked and the TFLOP/s of ``graph.execute`` (backward only; the O and
  Stats it reads come from the same engine's forward, computed once),
* the TFLOP/s of each direct aten fused backward (cuDNN, flash, efficient) on the same tensors,
  each fed by its own forward's outputs, and the fastest of them,
* the ratios ``time(graph.execute) / time(fastest aten)`` and ``time(graph.run) / time(fastest
  aten)``, and two references for the first: ``time(fastest aten + copying its dQ, dK, dV into
  the caller's buffers) / time(fastest aten)`` (the least any ``execute`` over torch's ops can
  cost, since they have no ``out=`` form), the same captured in a CUDA graph and replayed (as a
  repeated ``execute`` is), and the copy alone as a share of the aten time;

then the host time of a tiny graph's execute and of the direct aten call it wraps, and the math
engine's TFLOP/s at S=4k, D=128. With ``--flex`` (or ``--flex-only``) it also runs issue 14's
FlexAttention configurations (:mod:`torch_flex`: bias+dBias, padding, bands, ALiBi,
bottom-right causal; ``graph.execute`` vs flex called directly vs the math engine, build time),
written under ``"flex"`` in the JSON. FLOPs = 2·B·H·N·(3·D + 2·Dv), N = visible (query, key) pairs.
All figures of one row come from the same run, timed with CUDA events: rounds of ten
back-to-back calls of each contender in turn, median over nine rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from gpu_memory import config_memory

import hipdnn_graph as hg

A = torch.ops.aten
BF16 = torch.bfloat16


def bench(fn: Callable[[], Any], warmup: int = 5, reps: int = 20) -> float:
    """Median milliseconds of one call of ``fn``, each call timed alone with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def interleaved(
    fns: dict[str, Callable[[], Any]], calls: int = 10, rounds: int = 9
) -> dict[str, float]:
    """Median milliseconds per call of each function, compared fairly.

    Each round times ``calls`` back-to-back calls of every function in turn (so host time
    overlaps GPU time, as in a training step, and clock or thermal drift hits all of them
    alike); the figure is the median over the rounds.
    """
    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) / calls)
    return {name: statistics.median(times) for name, times in samples.items()}


def replayed(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` captured once in a CUDA graph; the returned function replays it."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def flops(b: int, h: int, sq: int, skv: int, d: int, causal: bool) -> float:
    window = hg.MaskWindow(right_bound=0) if causal else hg.MaskWindow()
    return 2.0 * b * h * hg.backend.visible_pairs(sq, skv, window) * (3 * d + 2 * d)


def build_graphs(
    b: int, h: int, hk: int, s: int, d: int, causal: bool, engine: str | None = None
) -> tuple[hg.Graph, hg.Graph, dict[str, Any]]:
    def graph() -> hg.Graph:
        g = hg.Graph(
            io_data_type=hg.DataType.BFLOAT16,
            intermediate_data_type=hg.DataType.FLOAT,
            compute_data_type=hg.DataType.FLOAT,
        )
        if engine:
            g.set_preferred_engine_id_ext(engine)
        return g

    fwd, bwd = graph(), graph()
    q = fwd.tensor(name="Q", dim=[b, h, s, d], uid=1)
    k = fwd.tensor(name="K", dim=[b, hk, s, d], uid=2)
    v = fwd.tensor(name="V", dim=[b, hk, s, d], uid=3)
    o, stats = fwd.sdpa(q, k, v, use_causal_mask=causal, generate_stats=True)
    o.set_output(True).set_uid(4)
    assert stats is not None
    stats.set_output(True).set_uid(5)
    fwd.build()
    t = {n: bwd.tensor(x.clone()) for n, x in (("Q", q), ("K", k), ("V", v))}
    t["O"] = bwd.tensor(name="O", dim=[b, h, s, d], uid=4)
    t["Stats"] = bwd.tensor(name="Stats", dim=[b, h, s, 1], data_type=hg.DataType.FLOAT, uid=5)
    t["dO"] = bwd.tensor(name="dO", dim=[b, h, s, d], uid=6)
    dq, dk, dv = bwd.sdpa_backward(
        t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], use_causal_mask=causal
    )
    for i, x in enumerate((dq, dk, dv)):
        x.set_output(True).set_uid(7 + i)
    bwd.build()
    return fwd, bwd, t


def backward_pack(
    b: int, h: int, hk: int, s: int, d: int, causal: bool, engine: str | None = None
) -> tuple[hg.Graph, dict[int, Any]]:
    """A built backward graph (on ``engine``, else the best) and its variant pack by uid: seeded
    random bf16 Q, K, V (1-3) and dO (6) on the GPU, O (4) and Stats (5) from the forward graph
    on the best engine, empty dQ, dK, dV (7-9)."""
    fwd, bwd, _ = build_graphs(b, h, hk, s, d, causal)
    if engine is not None:
        _, bwd, _ = build_graphs(b, h, hk, s, d, causal, engine=engine)
    torch.manual_seed(0)
    q = torch.randn(b, h, s, d, device="cuda", dtype=BF16)
    k = torch.randn(b, hk, s, d, device="cuda", dtype=BF16)
    v = torch.randn(b, hk, s, d, device="cuda", dtype=BF16)
    do = torch.randn(b, h, s, d, device="cuda", dtype=BF16)
    o = torch.empty(b, h, s, d, device="cuda", dtype=BF16)
    st = torch.empty(b, h, s, 1, device="cuda", dtype=torch.float32)
    fwd.execute({1: q, 2: k, 3: v, 4: o, 5: st})
    grads = [torch.empty_like(x) for x in (q, k, v)]
    return bwd, {1: q, 2: k, 3: v, 4: o, 5: st, 6: do, 7: grads[0], 8: grads[1], 9: grads[2]}


def direct_aten(
    q: Any, k: Any, v: Any, do: Any, causal: bool, scale: float, o: Any = None
) -> dict[str, Any]:
    """One closure per fused op that runs its backward on the same Q, K, V, dO (and, where the
    op accepts that layout, the same O); the LSE and RNG state come from the op's own forward."""
    ops: dict[str, Any] = {}

    def cudnn() -> Callable[[], Any]:
        r = A._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, 0.0, causal, False, scale=scale
        )
        out = r[0] if o is None else o
        return lambda: A._scaled_dot_product_cudnn_attention_backward(
            do,
            q,
            k,
            v,
            out,
            r[1],
            r[6],
            r[7],
            None,
            r[2],
            r[3],
            r[4],
            r[5],
            0.0,
            causal,
            scale=scale,
        )

    def flash() -> Callable[[], Any]:
        r = A._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
        out = r[0] if o is None else o
        return lambda: A._scaled_dot_product_flash_attention_backward(
            do, q, k, v, out, r[1], r[2], r[3], r[4], r[5], 0.0, causal, r[6], r[7], scale=scale
        )

    def efficient() -> Callable[[], Any]:
        # its backward needs O in the layout its forward writes, so it keeps its own O
        r = A._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal, scale=scale)
        return lambda: A._scaled_dot_product_efficient_attention_backward(
            do,
            q,
            k,
            v,
            None,
            r[0],
            r[1],
            r[2],
            r[3],
            0.0,
            [True, True, True, False],
            causal,
            scale=scale,
        )

    for name, make in (("cudnn", cudnn), ("flash", flash), ("efficient", efficient)):
        try:
            ops[name] = make()
        except Exception as exc:
            print(
                f"  {name} direct unavailable: {type(exc).__name__}: {str(exc)[:160]}",
                file=sys.stderr,
            )
    return ops


def row(d: int, s: int, causal: bool, hk_ratio: int = 1) -> dict[str, Any]:
    b, h = 16384 // s, 2048 // d
    hk = h // hk_ratio
    bwd, pack = backward_pack(b, h, hk, s, d, causal)
    q, k, v, o, do = pack[1], pack[2], pack[3], pack[4], pack[6]
    grads = [pack[7], pack[8], pack[9]]
    inputs = {uid: x for uid, x in pack.items() if uid < 7}
    n = flops(b, h, s, s, d, causal)
    result: dict[str, Any] = {
        "D": d,
        "S": s,
        "B": b,
        "H": h,
        "Hk": hk,
        "causal": causal,
        "engine": bwd.get_plan_name(),
    }
    fns: dict[str, Callable[[], Any]] = {
        "execute": lambda: bwd.execute(pack),
        "run": lambda: bwd.run(inputs),
    }
    ops = direct_aten(q, k, v, do, causal, 1 / d**0.5, o)
    for name, fn in ops.items():

        def copied(fn: Callable[[], Any] = fn) -> None:
            for dst, src in zip(grads, fn(), strict=False):
                dst.copy_(src)

        try:
            copied()
        except Exception as exc:
            print(
                f"  {name} direct failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr
            )
            continue
        fns[name] = fn
        fns[f"{name}+copy"] = copied
        try:
            fns[f"{name}+copy replayed"] = replayed(copied)
        except Exception as exc:
            print(f"  {name} cannot be captured: {type(exc).__name__}", file=sys.stderr)
    results = [torch.empty_like(x) for x in grads]
    fns["copy"] = lambda: [dst.copy_(src) for dst, src in zip(grads, results, strict=True)]
    ms = interleaved(fns)
    replay = bwd._state.active.plan.replay  # type: ignore[union-attr]
    result["execute_replayed"] = replay.captures > 0 and replay.capacity > 0
    aten = {name: ms[name] for name in ops if name in ms}
    for name, t_ms in aten.items():
        result[f"{name}_tflops"] = n / t_ms / 1e9
    result["graph_tflops"] = n / ms["execute"] / 1e9
    result["run_tflops"] = n / ms["run"] / 1e9
    if aten:
        best = min(aten, key=aten.__getitem__)
        result["fastest_aten"] = best
        result["ratio"] = ms["execute"] / aten[best]
        result["run_ratio"] = ms["run"] / aten[best]
        # the least any execute over the op can cost: its outputs copied into the caller's buffers
        result["copy_floor_ratio"] = ms[f"{best}+copy"] / aten[best]
        if f"{best}+copy replayed" in ms:  # the same, captured in a CUDA graph as execute is
            result["replayed_copy_floor_ratio"] = ms[f"{best}+copy replayed"] / aten[best]
        result["copy_share"] = ms["copy"] / aten[best]
    return result


def host_overhead() -> dict[str, float]:
    """Host microseconds per call of a tiny graph's execute and of the direct aten call."""
    bwd, pack = backward_pack(1, 1, 1, 128, 64, False)
    ops = direct_aten(pack[1], pack[2], pack[3], pack[6], False, 0.125, pack[4])
    engine_op = {
        "TORCH_SDPA_CUDNN_ENGINE": "cudnn",
        "TORCH_SDPA_FLASH_ENGINE": "flash",
        "TORCH_SDPA_EFFICIENT_ENGINE": "efficient",
    }.get(bwd.get_plan_name())

    def host(fn: Callable[[], Any]) -> float:
        samples = []
        for _ in range(40):
            torch.cuda.synchronize()
            for _ in range(20):
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
        return statistics.median(samples) * 1e6

    for _ in range(20):
        bwd.execute(pack)
    if os.environ.get("PROFILE_DIR"):
        import cProfile

        os.environ["HIPDNN_GRAPH_CUDA_GRAPHS"] = "0"
        _, bwd2, _ = build_graphs(1, 1, 1, 128, 64, False)
        for _ in range(20):
            bwd2.execute(pack)
        cProfile.runctx(
            "for _ in range(300): bwd2.execute(pack)",
            globals(),
            locals(),
            os.path.join(os.environ["PROFILE_DIR"], "execute_eager.prof"),
        )
        del os.environ["HIPDNN_GRAPH_CUDA_GRAPHS"]
        out_eager = host(lambda: bwd2.execute(pack))
    out = {"engine": bwd.get_plan_name(), "graph_execute_us": host(lambda: bwd.execute(pack))}
    built = bwd._state.active  # the parts of a replayed execute, for the record
    if built is not None:
        out["bind_us"] = host(lambda: built.binder.bind(pack, None, 0))
        graphs = built.plan.replay.graphs  # type: ignore[attr-defined]
        captured = [g for g in graphs.values() if g is not None]
        if captured:
            out["cuda_graph_replay_us"] = host(captured[-1].replay)
    if os.environ.get("PROFILE_DIR"):
        out["graph_execute_eager_us"] = out_eager
    inputs = {uid: t for uid, t in pack.items() if uid < 7}
    out["graph_run_us"] = host(lambda: bwd.run(inputs))
    if engine_op in ops:
        out["direct_aten_us"] = host(ops[engine_op])
        out["overhead_us"] = out["graph_execute_us"] - out["direct_aten_us"]
    return out


def math_engine(d: int = 128, s: int = 4096) -> dict[str, Any]:
    b, h = 16384 // s, 2048 // d
    bwd, pack = backward_pack(b, h, h, s, d, False, engine="TORCH_SDPA_MATH_ENGINE")
    ms = bench(lambda: bwd.execute(pack), warmup=2, reps=5)
    return {
        "engine": bwd.get_plan_name(),
        "D": d,
        "S": s,
        "tflops": flops(b, h, s, s, d, False) / ms / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two configurations only")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--flex", action="store_true", help="also the FlexAttention configs")
    parser.add_argument("--flex-only", action="store_true", help="only the FlexAttention configs")
    args = parser.parse_args()
    print(
        f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    flex_rows: list[dict[str, Any]] = []
    if args.flex or args.flex_only:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_flex

        flex_rows = torch_flex.run(args.quick)
    if args.flex_only:
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"flex": flex_rows, "torch": torch.__version__}, fh, indent=1)
        return
    configs = [(d, s, c) for d in (64, 128) for s in (1024, 4096, 16384) for c in (False, True)]
    if args.quick:
        configs = [(128, 4096, False), (64, 1024, True)]
    rows = []
    for d, s, c, hk_ratio in [*((d, s, c, 1) for d, s, c in configs),
                              *((64, 4096, c, 4) for c in (False, True))]:  # fmt: skip
        with config_memory(f"D={d} S={s} causal={c} Hk:H=1:{hk_ratio}", torch) as mem:
            r = row(d, s, c, hk_ratio=hk_ratio)
        rows.append({**r, **mem})
    print(
        "| D | S | causal | Hk:H | engine | execute TFLOP/s | run TFLOP/s | cuDNN | flash | "
        "efficient | execute ratio | run ratio | aten+copy ratio | replayed aten+copy ratio | "
        "copy share |"
    )
    print("|---" * 15 + "|")
    nan = float("nan")
    for r in rows:
        cells = [
            f"{r[k]:.0f}" if k in r else "—"
            for k in ("cudnn_tflops", "flash_tflops", "efficient_tflops")
        ]
        ratios = [
            f"{r.get(k, nan):.3f}"
            for k in ("ratio", "run_ratio", "copy_floor_ratio", "replayed_copy_floor_ratio")
        ]
        print(
            f"| {r['D']} | {r['S']} | {r['causal']} | {r['Hk']}:{r['H']} | {r['engine']} | "
            f"{r['graph_tflops']:.0f} | {r['run_tflops']:.0f} | {' | '.join(cells)} | "
            f"{' | '.join(ratios)} | {r.get('copy_share', nan):.3f} |"
        )
    overhead = host_overhead()
    print(f"tiny graph host time: {overhead}")
    maths = math_engine()
    print(f"math engine: {maths}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "rows": rows,
                    "host": overhead,
                    "math": maths,
                    "flex": flex_rows,
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
