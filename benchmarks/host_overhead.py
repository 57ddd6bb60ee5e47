"""Host time of the torch op and of ``Graph.execute`` on tiny problems, against torch's own.

Where the arithmetic is negligible (B=1, H=1, S=16, D=16) what is timed is the path around the
kernels: argument checks, the graph cache, variant-pack binding, plan dispatch and autograd.
In one run, for the CPU and (when present) a CUDA/ROCm device:

- ``op fwd+bwd``: ``hipdnn_graph.torch.scaled_dot_product_attention(q, k, v)`` then
  ``out.sum().backward()``, against the same with ``torch.nn.functional
  .scaled_dot_product_attention`` (issue 22's targets: ≤ 3× on the CPU, ≤ 1.3× on the GPU);
- ``op fwd+bwd p=0.1``: the same call of a training step (causal, philox dropout 0.1), against
  torch's with the same arguments (issue 35's target: ≤ 1.3× on the GPU too);
- ``op fwd+bwd autocast`` (float32 leaves only): the causal call under
  ``torch.autocast(device, torch.bfloat16)``, float32 inputs cast by the call, against torch's
  under the same region;
- ``Graph.execute``: a built SDPA backward graph of the same shape on the torch engines, every
  output given (on the GPU this is the CUDA-graph replay path), with its two parts timed apart:
  the variant-pack check (``bind``) and the plan (target ≤ 15 µs host for the whole call).

Contenders are interleaved: each round times ``--calls`` back-to-back calls of each in turn
(the device synchronized between them, so host time is not hidden behind a full queue) and
keeps each one's median; the table reports the median over ``--rounds`` rounds, and each ratio
is the median of the per-round ratios, so a loaded, shared machine moves both sides together.

Each device is timed for every dtype of ``--dtypes`` (default float32, float16 and bfloat16 on
the GPU, float32 on the CPU), a table per dtype: float32 is the default dtype of a model, so
its rows are the ones a user meets first.

Run: ``.venv/bin/python benchmarks/host_overhead.py [--rounds 15] [--calls 200] [--cpu-only]
[--dtypes float32,float16,bfloat16] [--cpu-dtypes float32]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import hipdnn_graph as hg
from hipdnn_graph.torch import graph_cache, scaled_dot_product_attention

B, H, S, D = 1, 1, 16, 16
TARGETS = {"cpu": 3.0, "cuda": 1.3}
EXECUTE_TARGET_US = 15.0


def _sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def interleaved(
    fns: dict[str, Callable[[], Any]], device: str, rounds: int, calls: int
) -> dict[str, list[float]]:
    """Per-round median host µs of each function, the functions taking turns every round."""
    for fn in fns.values():  # warm up: builds, caches, lazy kernels
        for _ in range(20):
            fn()
    _sync(device)
    clock = time.perf_counter_ns
    medians: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples = []
            for _ in range(calls):
                start = clock()
                fn()
                samples.append((clock() - start) / 1000.0)
            _sync(device)
            medians[name].append(statistics.median(samples))
    return medians


def op_pair(device: str, dtype: torch.dtype) -> dict[str, Callable[[], Any]]:
    """fwd+bwd of the op and of F.sdpa on the same leaf tensors."""
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (
        torch.randn(B, H, S, D, device=device, dtype=dtype, generator=g).requires_grad_()
        for _ in range(3)
    )

    def ours() -> None:
        scaled_dot_product_attention(q, k, v).sum().backward()

    def torchs() -> None:
        F.scaled_dot_product_attention(q, k, v).sum().backward()

    def ours_dropout() -> None:
        scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True).sum().backward()

    def torchs_dropout() -> None:
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True).sum().backward()

    fns = {
        "op fwd+bwd": ours,
        "F.sdpa fwd+bwd": torchs,
        "op fwd+bwd p=0.1": ours_dropout,
        "F.sdpa fwd+bwd p=0.1": torchs_dropout,
    }
    if dtype == torch.float32:
        region = device.split(":")[0]

        def ours_autocast() -> None:
            with torch.autocast(region, dtype=torch.bfloat16):
                out = scaled_dot_product_attention(q, k, v, is_causal=True)
            out.sum().backward()

        def torchs_autocast() -> None:
            with torch.autocast(region, dtype=torch.bfloat16):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.sum().backward()

        fns.update({"op fwd+bwd autocast": ours_autocast, "F.sdpa autocast": torchs_autocast})
    return fns


#: (ours, torch's) rows whose ratio is reported
PAIRS = (
    ("op fwd+bwd", "F.sdpa fwd+bwd", "plain"),
    ("op fwd+bwd p=0.1", "F.sdpa fwd+bwd p=0.1", "dropout 0.1"),
    ("op fwd+bwd autocast", "F.sdpa autocast", "autocast bf16"),
)


def execute_parts(device: str, dtype: torch.dtype) -> dict[str, Callable[[], Any]]:
    """A built tiny backward graph's execute, and its bind and plan apart."""
    io = {torch.float32: hg.DataType.FLOAT, torch.bfloat16: hg.DataType.BFLOAT16,
          torch.float16: hg.DataType.HALF}[dtype]  # fmt: skip
    g = hg.Graph(
        name="tiny_bwd",
        io_data_type=io,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    t = {n: g.tensor(name=n, dim=[B, H, S, D]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[B, H, S, 1], data_type=hg.DataType.FLOAT)
    grads = g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd")
    for grad in grads:
        grad.set_output(True)
    g.build()
    gen = torch.Generator(device=device).manual_seed(1)
    pack: dict[Any, Any] = {
        t[n]: torch.randn(B, H, S, D, device=device, dtype=dtype, generator=gen)
        for n in ("Q", "K", "V", "O", "dO")
    }
    pack[t["Stats"]] = torch.full((B, H, S, 1), 3.0, device=device)
    pack.update({grad: torch.empty(B, H, S, D, device=device, dtype=dtype) for grad in grads})
    built = g._state.active  # the lifecycle's plan, read here only to time the parts apart
    assert built is not None
    bound, addresses = built.binder.bind_keyed(pack, None, 0)
    print(f"  Graph.execute graph runs on {g.get_plan_name()}")
    return {
        "Graph.execute": lambda: g.execute(pack),
        "  of which bind": lambda: built.binder.bind_keyed(pack, None, 0),
        "  of which plan": lambda: built.plan.execute_at(dict(bound), None, addresses),
    }


def _described(entry: Any) -> str:
    """One of the op's cached graphs: its kind, its engine, whether calls take the autograd
    route."""
    kind = ("philox " if "Seed" in entry.slots else "") + (
        "backward" if "dO" in entry.slots else "forward"
    )
    return f"{kind} on {entry.engine}" + (" (autograd route)" if entry.autograd else "")


def report(device: str, dtype: torch.dtype, rounds: int, calls: int) -> None:
    name = torch.cuda.get_device_name() if device != "cpu" else "CPU"
    dtype_name = str(dtype).replace("torch.", "")
    print(f"\n{device} ({name}), {dtype}, B={B} H={H} S={S} D={D}: "
          f"{rounds} rounds × {calls} calls, median of per-round medians")  # fmt: skip
    graph_cache().clear()
    fns = {**op_pair(device, dtype), **execute_parts(device, dtype)}
    medians = interleaved(fns, device, rounds, calls)
    engines = sorted({_described(e) for e in graph_cache().values()})
    print(f"  the op's graphs: {', '.join(engines)}")
    print(f"  | {'call':<20} | host µs | p10 round | p90 round |")
    print(f"  |{'-' * 22}|---------|-----------|-----------|")
    for label, values in medians.items():
        deciles = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
        print(f"  | {label:<20} | {statistics.median(values):7.1f} | {deciles[0]:9.1f} | "
              f"{deciles[-1]:9.1f} |")  # fmt: skip
    target = TARGETS["cpu" if device == "cpu" else "cuda"]
    for ours, torchs, label in PAIRS:
        if ours not in medians:
            continue
        ratios = [a / b for a, b in zip(medians[ours], medians[torchs], strict=True)]
        ratio = statistics.median(ratios)
        print(
            f"  {dtype_name} {label}: op / F.sdpa = {ratio:.2f}× (rounds {min(ratios):.2f}–"
            f"{max(ratios):.2f}; target ≤ {target}×: {'ok' if ratio <= target else 'MISS'})"
        )
    execute = statistics.median(medians["Graph.execute"])
    print(f"  Graph.execute {execute:.1f} µs (target ≤ {EXECUTE_TARGET_US:.0f} µs host on the GPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16", help="GPU dtypes")
    parser.add_argument("--cpu-dtypes", default="float32", help="CPU dtypes")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} CPU thread(s)")
    for name in args.cpu_dtypes.split(","):
        report("cpu", getattr(torch, name), args.rounds, args.calls)
    if torch.cuda.is_available() and not args.cpu_only:
        for name in args.dtypes.split(","):
            report("cuda", getattr(torch, name), args.rounds, args.calls)


if __name__ == "__main__":
    main()
