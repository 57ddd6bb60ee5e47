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

Why the ratio moves (measured, see docs/performance.md): OpenBLAS runs each matmul on all its
threads and its idle workers busy-wait between calls, so during the engine's single-threaded
elementwise steps a worker burns a core (the "other threads" CPU printed below equals the main
thread's). That is free on an idle machine and costly on a busy one: another process, or torch's
OpenMP workers when they busy-wait too, take the cores the engine's fork-join calls wait for.
So this script sets ``OMP_WAIT_POLICY=PASSIVE`` before torch's OpenMP runtime loads (unless the
caller set a policy), prints every thread pool and the load it ran under, and splits each
contender's CPU time into its main thread's and its worker threads'. ``--blas-threads 1`` runs
the NumPy engine on one BLAS thread (no busy-waiting worker).

Run: ``.venv/bin/python benchmarks/numpy_reference.py [--repeats N] [--skip-16k] [--threads T]
[--blas-threads N] [--seq S]``.
"""

from __future__ import annotations

import os
import sys

# before numpy and torch load their thread pools: an OpenMP runtime reads its policy once
POLICY_TOO_LATE = "torch" in sys.modules
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from threads import limit_blas_threads, thread_settings  # noqa: E402

import hipdnn_graph as hg  # noqa: E402

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
    return [wall for wall, _, _ in interleaved_profile(fns, repeats)]


def interleaved_profile(
    fns: list[Callable[[], Any]], repeats: int
) -> list[tuple[float, float, float]]:
    """Per function, medians of (wall s, main-thread CPU s, CPU s of the process's other
    threads: BLAS/OpenMP workers, busy-waiting included), run in turns."""
    for fn in fns:
        fn()  # warm-up
    samples: list[list[tuple[float, float, float]]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, rows in zip(fns, samples, strict=True):
            wall, main, process = time.perf_counter(), time.thread_time(), time.process_time()
            fn()
            main = time.thread_time() - main
            rows.append((time.perf_counter() - wall, main, time.process_time() - process - main))
    return [
        (
            statistics.median(r[0] for r in rows),
            statistics.median(r[1] for r in rows),
            statistics.median(r[2] for r in rows),
        )
        for rows in samples
    ]


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
    (t_torch, torch_main, torch_other), (t_graph, np_main, np_other) = interleaved_profile(
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
    CPU_LINES.append(
        f"{label}: NumPy engine CPU {np_main * 1e3:.0f} ms main thread + {np_other * 1e3:.0f} ms "
        f"other threads; torch CPU {torch_main * 1e3:.0f} + {torch_other * 1e3:.0f} ms"
    )
    return ratio


#: CPU splits of the rows, printed under the table
CPU_LINES: list[str] = []


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
    parser.add_argument(
        "--blas-threads", type=int, default=0, help="BLAS (OpenBLAS) threads (0: default)"
    )
    parser.add_argument("--seq", type=int, default=2048, help="sequence length (default 2048)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    limits = limit_blas_threads(args.blas_threads) if args.blas_threads else None
    if args.blas_threads and limits is None:
        print("--blas-threads needs threadpoolctl; running with the default BLAS threads")
    torch.zeros(64).sum()  # starts torch's OpenMP pool, so that the pools below are all there
    print(f"{ENGINE} backward via graph.execute vs torch fused CPU backward, fp32 "
          f"({args.repeats} repeats, medians); thread settings:")  # fmt: skip
    for line in thread_settings():
        print(f"  {line}")
    if POLICY_TOO_LATE:
        print("  note: torch was loaded before this script set OMP_WAIT_POLICY, so its OpenMP "
              "runtime kept the policy it found")  # fmt: skip
    print("| shape                         | numpy ms  | GFLOP/s | torch ms  | GFLOP/s | ratio   |")
    print("|-------------------------------|-----------|---------|-----------|---------|---------|")
    for causal in (False, True):
        compare_with_torch(1, 4, args.seq, 128, causal, args.repeats)
    for line in CPU_LINES:
        print(line)
    if not args.skip_16k:
        peak_memory()


if __name__ == "__main__":
    main()
