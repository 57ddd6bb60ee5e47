"""Where the GPU time of ``graph.execute`` and ``graph.run`` goes, next to the aten call.

Run on a GPU machine: ``python benchmarks/torch_execute_profile.py``. For the S = 1k rows of
``benchmarks/torch_backend.py`` (bf16, B·S = 16k tokens, H·D = 2048) it runs ten back-to-back
calls of ``graph.run``, the direct ``aten._scaled_dot_product_cudnn_attention_backward`` and
``graph.execute`` (replaying its CUDA graph) and prints, per call: host time, GPU time between
CUDA events (median of five batches), the sum of kernel times the profiler saw, and each kernel.
It shows that ``run`` launches exactly the aten call's kernels and ``execute`` those plus one
device-to-device copy per gradient (the ops have no ``out=`` form).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from torch_backend import backward_pack, direct_aten


def per_call(fn: Callable[[], Any], calls: int = 10, batches: int = 5) -> tuple[float, float]:
    """(host µs, GPU µs) per call, medians over batches of back-to-back calls."""
    host, gpu = [], []
    for _ in range(batches):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        host.append((time.perf_counter() - t0) / calls * 1e6)
        end.synchronize()
        gpu.append(start.elapsed_time(end) / calls * 1e3)
    return statistics.median(host), statistics.median(gpu)


def kernels(fn: Callable[[], Any], calls: int = 10) -> list[tuple[str, float, float]]:
    """(kernel, µs per call, launches per call), longest first."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = [
        (e.key, e.self_device_time_total / calls, e.count / calls)
        for e in prof.key_averages()
        if e.self_device_time_total
    ]
    return sorted(rows, key=lambda r: -r[1])


def profile_case(d: int, s: int, causal: bool) -> None:
    b, h = 16384 // s, 2048 // d
    bwd, pack = backward_pack(b, h, h, s, d, causal)
    q, k, v, o, do = pack[1], pack[2], pack[3], pack[4], pack[6]
    inputs = {uid: x for uid, x in pack.items() if uid < 7}
    fns = {
        "graph.run": lambda: bwd.run(inputs),
        "aten cuDNN": direct_aten(q, k, v, do, causal, d**-0.5, o)["cudnn"],
        "graph.execute": lambda: bwd.execute(pack),
    }
    for fn in fns.values():
        for _ in range(5):
            fn()
    print(f"\nD={d} S={s} causal={causal}")
    for name, fn in fns.items():
        host, gpu = per_call(fn)
        ks = kernels(fn)
        total = sum(t for _, t, _ in ks)
        print(f"  {name:14s} host {host:5.0f} µs  GPU {gpu:6.0f} µs  kernels {total:6.0f} µs")
        for key, t, n in ks:
            print(f"      {t:7.1f} µs  x{n:.0f}  {key[:80]}")


def main() -> None:
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for d in (64, 128):
        for causal in (False, True):
            profile_case(d, 1024, causal)


if __name__ == "__main__":
    main()
