"""Autotune against the fastest engine measured in the same run (issue 36's targets): one line
per configuration.

For each graph: ``Graph.autotune`` times every applicable engine (``--sweep engines``, default
knobs) or every engine with up to ``--per-engine`` knob combinations (``--sweep knobs``) on the
configuration's buffers, with a fresh store (``retune``); then the tuned plan's ``execute``
and, on graphs built with each engine preferred, every engine's ``execute`` are timed the same
way, interleaved (CUDA events on a GPU, ``perf_counter`` on the CPU; median of rounds). The
line prints the tuning seconds, the tuned plan's time, the fastest engine's time and their
ratio (target ≤ 1.01), and the engine each chose. ``--check-reuse`` then runs this script
again in a child process over the same store, which must find every choice stored and time
nothing (``from_store`` on every graph).

Sets: the SDPA backward set (D 64/128 × S 1k/4k/16k × causal or not, and GQA Hk:H 1:4 at 4k:
14 shapes, bf16, 16k tokens), the masked set (bias+dBias, padding 75 %, band ±256 at 1k, 4k and
16k), the family fusion set (:mod:`family_fusion`'s graphs).

    python benchmarks/autotune.py                        # every set on the GPU
    python benchmarks/autotune.py --set masked --check-reuse
    python benchmarks/autotune.py --small                # toy shapes on the CPU (a smoke run)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

import hipdnn_graph as hg
from hipdnn_graph.graph.autotune_types import (
    AutotuneConfig,
    AutotuneStorageConfig,
    AutotuneStrategy,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

F32, BF16, I32 = hg.DataType.FLOAT, hg.DataType.BFLOAT16, hg.DataType.INT32
#: engines that compile with Inductor's C++ on the CPU (minutes): left out of --small
CPU_COMPILING = ["TORCH_FUSION_ENGINE", "TORCH_SDPA_FLEX_ENGINE"]


Factory = tuple[Callable[[], hg.Graph], dict[str, Any]]


def sdpa_backward(b: int, h: int, hk: int, s: int, d: int, *, causal: bool = False,
                  bias: bool = False, pad: float = 0.0, band: int = 0, io: hg.DataType = BF16,
                  device: str = "cuda") -> Factory:  # fmt: skip
    """A factory of identical SDPA backward graphs and their buffers, by tensor name."""
    dtype = torch.bfloat16 if io == BF16 else torch.float32

    def graph() -> hg.Graph:
        g = hg.Graph(io_data_type=io, intermediate_data_type=F32, compute_data_type=F32)
        t = {n: g.tensor(name=n, dim=[b, h if n in ("Q", "O", "dO") else hk, s, d])
             for n in ("Q", "K", "V", "O", "dO")}  # fmt: skip
        t["Stats"] = g.tensor(name="Stats", dim=[b, h, s, 1], data_type=F32)
        kw: dict[str, Any] = {"use_causal_mask": causal} if causal else {}
        if bias:
            kw["bias"] = g.tensor(name="Bias", dim=[1, h, s, s])
            kw["dBias"] = g.tensor(name="dBias", dim=[1, h, s, s], data_type=F32)
            kw["dBias"].set_output(True)
        if pad:
            seq = {n: g.tensor(name=n.upper(), dim=[b, 1, 1, 1], data_type=I32)
                   for n in ("seq_len_q", "seq_len_kv")}  # fmt: skip
            kw.update(use_padding_mask=True, **seq)
        if band:
            kw.update(diagonal_band_left_bound=band, diagonal_band_right_bound=band)
        grads = g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], **kw)
        for name, x in zip(("dQ", "dK", "dV"), grads, strict=True):
            x.set_name(name).set_output(True)
        return g

    torch.manual_seed(0)
    values: dict[str, Any] = {}
    probe = graph()
    probe.validate()  # the outputs' shapes
    for x in probe.graph_tensors():
        if x.is_virtual:
            continue
        if x.name == "Stats":
            values[x.name] = torch.full(x.dim, math.log(s), device=device)
        elif x.name.startswith("SEQ_LEN"):
            values[x.name] = torch.full(x.dim, max(1, int(pad * s)), dtype=torch.int32,
                                        device=device)  # fmt: skip
        else:
            kind = torch.float32 if x.data_type == F32 else dtype
            values[x.name] = torch.randn(x.dim, device=device, dtype=kind) * 0.5
    return graph, values


def family(case_builder: Callable[[], Any]) -> tuple[Callable[[], hg.Graph], dict[str, Any]]:
    """A factory of :mod:`family_fusion`'s graph and its buffers, by tensor name."""
    from family_fusion import _pack

    first = case_builder()
    first.graph.validate()  # the outputs' shapes
    values = {t.name: v for t, v in _pack(first).items()}
    return (lambda: case_builder().graph), values


def configurations(which: str, small: bool) -> list[tuple[str, Any]]:
    device = "cpu" if small else "cuda"
    io = F32 if small else BF16
    out: list[tuple[str, Any]] = []
    if which in ("all", "backward"):
        shapes = ([(64, 1024, False, 1), (64, 1024, True, 4)] if small else
                  [(d, s, c, 1) for d in (64, 128) for s in (1024, 4096, 16384)
                   for c in (False, True)] + [(64, 4096, c, 4) for c in (False, True)])  # fmt: skip
        for d, s, c, ratio in shapes:
            if small:
                b, h, s, d = 1, 4, 32, 16
            else:
                b, h = 16384 // s, 2048 // d
            name = f"bwd D={d} S={s}" + (" causal" if c else "")
            name += f" Hk:H=1:{ratio}" if ratio > 1 else ""
            out.append((name, lambda b=b, h=h, s=s, d=d, c=c, r=ratio: sdpa_backward(
                b, h, h // r, s, d, causal=c, io=io, device=device)))  # fmt: skip
    if which in ("all", "masked"):
        for s in (32,) if small else (1024, 4096, 16384):
            b, h, d = (1, 2, 16) if small else (max(1, 16384 // s), 16, 128)
            for kind, kw in (("bias", {"bias": True}), ("padding75", {"pad": 0.75}),
                             ("band256", {"band": 8 if small else 256})):  # fmt: skip
                out.append((f"masked {kind} S={s}", lambda b=b, h=h, s=s, d=d, kw=kw:
                            sdpa_backward(b, h, h, s, d, io=io, device=device, **kw)))  # fmt: skip
    if which in ("all", "family"):
        import family_fusion as ff

        mm, gelu = ff.rmsnorm_matmul, ff.matmul_bias_gelu
        if small:
            cases = [
                ("rmsnorm→matmul", lambda: mm(16, 32, 24, io=F32, device=device)),
                ("matmul+bias+gelu", lambda: gelu(16, 8, 8, io=F32, device=device)),
            ]
        else:
            cases = [
                ("rmsnorm→matmul 8192×4096×4096", lambda: mm(8192, 4096, 4096, device=device)),
                ("rmsnorm→matmul 8192×1024×4096", lambda: mm(8192, 1024, 4096, device=device)),
                (
                    "conv+bias+relu N32 C256 56²",
                    lambda: ff.conv_bias_relu(32, 256, 56, device=device),
                ),
                ("matmul+bias+gelu 8192×1024×1024", lambda: gelu(8192, 1024, 1024, device=device)),
                (
                    "matmul+bias+gelu 2048×4096×11008",
                    lambda: gelu(2048, 4096, 11008, device=device),
                ),
            ]
        out += [(f"family {n}", lambda c=c: family(c)) for n, c in cases]
    return out


def _timer(device: str) -> Callable[[Callable[[], None], int], float]:
    def timed(fn: Callable[[], None], calls: int) -> float:
        if device == "cuda":
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / calls
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - began) * 1e3 / calls

    return timed


def _pack(graph: hg.Graph, values: dict[str, Any]) -> dict[Any, Any]:
    return {t: values[t.name] for t in graph.graph_tensors() if t.name in values}


def tune(factory: Callable[[], hg.Graph], values: dict[str, Any], args: argparse.Namespace,
         store: Path, retune: bool) -> tuple[hg.Graph, list[Any], float]:  # fmt: skip
    g = factory()
    if args.small:
        g.deselect_engines(CPU_COMPILING)
    g.build_operation_graph()
    if args.sweep == "knobs":
        g.add_knob_sweeps(args.per_engine)
    else:
        g.add_all_engines()
    config = AutotuneConfig(strategy=AutotuneStrategy.FIXED_AVERAGE, warmup_iterations=3,
                            timed_iterations=args.iterations, retune=retune)  # fmt: skip
    began = time.perf_counter()
    results = g.autotune(_pack(g, values), config=config, storage=AutotuneStorageConfig(store))
    return g, results, time.perf_counter() - began


def run_one(
    name: str, make: Callable[[], Any], args: argparse.Namespace, store: Path
) -> dict[str, Any]:
    factory, values = make()
    device = "cpu" if args.small else "cuda"
    tuned, results, tune_s = tune(factory, values, args, store, retune=True)
    contenders: dict[str, Callable[[], None]] = {}
    tuned_pack = _pack(tuned, values)
    contenders["tuned"] = lambda: tuned.execute(tuned_pack)
    for engine in sorted({r.engine_name for r in results if r.succeeded}):
        g = factory().set_preferred_engine_id_ext(engine)
        if args.small:
            g.deselect_engines(CPU_COMPILING)
        g.build()
        if g.get_plan_name() == engine:
            pack = _pack(g, values)
            contenders[engine] = partial(g.execute, pack)
    timed = _timer(device)
    for fn in contenders.values():  # warm-up (compiles, CUDA graph captures)
        for _ in range(3):
            fn()
    rounds: dict[str, list[float]] = {n: [] for n in contenders}
    for _ in range(args.rounds):
        for n, fn in contenders.items():
            rounds[n].append(timed(fn, args.calls))
    median = {n: statistics.median(v) for n, v in rounds.items()}
    engines = {n: t for n, t in median.items() if n != "tuned"}
    fastest = min(engines, key=lambda n: engines[n])
    return {"config": name, "tune_s": tune_s, "tried": len(results),
            "tuned_engine": tuned.get_plan_name(), "tuned_ms": median["tuned"],
            "fastest_engine": fastest, "fastest_ms": engines[fastest],
            "ratio": median["tuned"] / engines[fastest]}  # fmt: skip


def reuse(args: argparse.Namespace, store: Path) -> int:
    """The child of ``--check-reuse``: every graph must come from the store, nothing timed."""
    missed = []
    for name, make in configurations(args.set, args.small):
        factory, values = make()
        _, results, seconds = tune(factory, values, args, store, retune=False)
        if not results or not all(r.from_store for r in results):
            missed.append(name)
        print(f"reuse {name}: from_store={not missed or missed[-1] != name} {seconds:.3f} s")
    print(json.dumps({"missed": missed}))
    return 1 if missed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("all", "backward", "masked", "family"), default="all")
    parser.add_argument("--small", action="store_true", help="toy shapes on the CPU")
    parser.add_argument("--sweep", choices=("engines", "knobs"), default="engines")
    parser.add_argument("--per-engine", type=int, default=4, help="knob combinations (knobs)")
    parser.add_argument("--iterations", type=int, default=10, help="timed runs per candidate")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--store", type=Path, default=None, help="the store (default: a temp)")
    parser.add_argument("--check-reuse", action="store_true")
    parser.add_argument("--reuse-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.small:
        args.rounds, args.calls, args.iterations = 2, 1, 2
    elif not torch.cuda.is_available():
        print("no GPU: run with --small for the CPU smoke run")
        return 2
    store = args.store or Path(tempfile.mkdtemp()) / "autotune.json"
    if args.reuse_child:
        return reuse(args, store)
    print("| configuration | tuning s | candidates | tuned plan | tuned ms | fastest engine | "
          "fastest ms | tuned/fastest |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name, make in configurations(args.set, args.small):
        r = run_one(name, make, args, store)
        worst = max(worst, r["ratio"])
        print(f"| {name} | {r['tune_s']:.2f} | {r['tried']} | {r['tuned_engine']} | "
              f"{r['tuned_ms']:.4f} | {r['fastest_engine']} | {r['fastest_ms']:.4f} | "
              f"{r['ratio']:.3f} |", flush=True)  # fmt: skip
    print(f"worst tuned/fastest: {worst:.3f} (target <= 1.01)")
    if args.check_reuse:
        child = [sys.executable, __file__, "--reuse-child", "--store", str(store), "--set",
                 args.set, "--sweep", args.sweep, "--per-engine", str(args.per_engine),
                 *(["--small"] if args.small else [])]  # fmt: skip
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        print(done.stdout.rstrip())
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
