"""Throughput and memory of ``NUMPY_REFERENCE_ENGINE`` through the public graph API.

For fp32 ``B=1, H=4, S=2048, D=128``, causal and not, prints the median time of
``graph.execute`` for an SDPA-backward graph, its GFLOP/s (FLOPs from
``hg.backend.SdpaProblem.flops()``: ``2·B·H·N·(3·D + 2·Dv)``, N = visible (query, key) pairs),
and its time ratio to torch's fused CPU backward
``aten._scaled_dot_product_flash_attention_for_cpu_backward`` measured in the same run, in turns
(its inputs ``out``/``logsumexp`` come from ``_scaled_dot_product_flash_attention_for_cpu``, and
the graph gets the same O and Stats). Then the peak extra memory (tracemalloc: allocations
beyond the caller's inputs and outputs) of one 16k-token head backward (``B=1, H=1, S=16384,
D=128``) through ``graph.execute``.

Issue 4's targets: ratio ≤ 1.4 and ≤ 256 MiB extra for the 16k-token head.

``OMP_WAIT_POLICY`` defaults to ``PASSIVE`` here: torch's OpenMP workers otherwise spin for a
while after each op and, when the two libraries take turns on two cores, steal them from
OpenBLAS's threads (and the other way round), which made both timings noisy by up to 5x.

Run: ``.venv/bin/python benchmarks/numpy_reference.py [--repeats N] [--skip-16k] [--threads T]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import hipdnn_graph as hg

ENGINE = "NUMPY_REFERENCE_ENGINE"
RATIO_TARGET = 1.4
MEMORY_TARGET_MIB = 256.0


def backward_graph(b: int, h: int, s: int, d: int, causal: bool) -> tuple[hg.Graph, dict[str, Any]]:
    """An fp32 SDPA-backward graph on the NumPy engine; returns the graph and its tensors."""
    g = hg.Graph(
        name="bench_bwd",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    t = {n: g.tensor(name=n, dim=[b, h, s, d]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[b, h, s, 1])
    grads = g.sdpa_backward(
        t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd",
        attn_scale=d**-0.5, use_causal_mask=causal,
    )  # fmt: skip
    for name, grad in zip(("dQ", "dK", "dV"), grads, strict=True):
        grad.set_output(True)
        t[name] = grad
    g.set_preferred_engine_id_ext(ENGINE).build()
    assert g.get_plan_name() == ENGINE
    return g, t


def graph_flops(g: hg.Graph) -> int:
    return sum(hg.backend.SdpaProblem.from_node(node).flops() for node in g.nodes)


def interleaved_medians(fns: list[Callable[[], Any]], repeats: int) -> list[float]:
    """Median seconds of each function, run in turns so that load changes hit all alike."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - start)
    return [statistics.median(ts) for ts in times]


def compare_with_torch(b: int, h: int, s: int, d: int, causal: bool, repeats: int) -> float:
    """One row: graph.execute on the NumPy engine vs torch's fused CPU backward; the ratio."""
    import torch

    scale = d**-0.5
    gen = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(b, h, s, d, generator=gen) for _ in range(4))
    fwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    bwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward
    out, lse = fwd(q, k, v, 0.0, causal, scale=scale)[:2]

    g, t = backward_graph(b, h, s, d, causal)
    # torch tensors go in as they are (read zero-copy); torch's logsumexp is [B, S, H]-strided,
    # so Stats gets a packed copy
    pack: dict[Any, Any] = {
        t["Q"]: q,
        t["K"]: k,
        t["V"]: v,
        t["O"]: out,
        t["dO"]: do,
        t["Stats"]: lse.unsqueeze(-1).contiguous(),
    }
    for name in ("dQ", "dK", "dV"):
        pack[t[name]] = np.empty((b, h, s, d), np.float32)
    t_torch, t_graph = interleaved_medians(
        [lambda: bwd(do, q, k, v, out, lse, 0.0, causal, scale=scale), lambda: g.execute(pack)],
        repeats,
    )
    gflops = graph_flops(g) / t_graph / 1e9
    torch_gflops = graph_flops(g) / t_torch / 1e9
    ratio = t_graph / t_torch
    label = f"B={b} H={h} S={s} D={d} {'causal' if causal else 'full'}"
    print(
        f"| {label:<29} | {t_graph * 1e3:9.1f} | {gflops:7.1f} | {t_torch * 1e3:9.1f} | "
        f"{torch_gflops:7.1f} | {ratio:5.2f} {'ok' if ratio <= RATIO_TARGET else 'MISS'} |"
    )
    return ratio


def peak_memory(s: int = 16384, d: int = 128) -> float:
    """Peak traced memory of one fp32 head backward beyond the caller's inputs and outputs."""
    g, t = backward_graph(1, 1, s, d, causal=False)
    rng = np.random.default_rng(0)
    pack: dict[Any, Any] = {t[n]: rng.standard_normal((1, 1, s, d), dtype=np.float32)
                            for n in ("Q", "K", "V", "O", "dO")}  # fmt: skip
    pack[t["Stats"]] = np.full((1, 1, s, 1), np.log(s) + 2, np.float32)
    for name in ("dQ", "dK", "dV"):
        pack[t[name]] = np.empty((1, 1, s, d), np.float32)
    tracemalloc.start()  # the buffers above exist before tracing starts: only extras count
    start = time.perf_counter()
    g.execute(pack)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    extra = peak / 2**20
    io_mib = sum(a.nbytes for a in pack.values()) / 2**20
    print(
        f"16k-token head backward (B=1 H=1 S={s} D={d}, fp32) via graph.execute: "
        f"{elapsed:.2f} s, {graph_flops(g) / elapsed / 1e9:.1f} GFLOP/s; "
        f"peak extra memory {extra:.1f} MiB (inputs+outputs {io_mib:.0f} MiB; target "
        f"<= {MEMORY_TARGET_MIB:.0f} MiB: {'ok' if extra <= MEMORY_TARGET_MIB else 'MISS'})"
    )
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-16k", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads its OpenMP runtime
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{ENGINE} backward via graph.execute vs torch fused CPU backward, fp32 "
          f"(torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, "
          f"{os.cpu_count()} CPUs, {args.repeats} repeats, medians)")  # fmt: skip
    print("| shape                         | numpy ms  | GFLOP/s | torch ms  | GFLOP/s | ratio   |")
    print("|-------------------------------|-----------|---------|-----------|---------|---------|")
    for causal in (False, True):
        compare_with_torch(1, 4, 2048, 128, causal, args.repeats)
    if not args.skip_16k:
        peak_memory()


if __name__ == "__main__":
    main()
