"""CPU speed and memory of the NumPy reference SDPA backward.

Prints, for fp32 ``B=1, H=4, S=2048, D=128`` (causal and not): the median time and GFLOP/s of
``sdpa_backward`` (FLOPs = 2·B·H·N·(3·D + 2·Dv), N = visible (query, key) pairs), and its time
ratio to torch's fused CPU kernel ``aten._scaled_dot_product_flash_attention_for_cpu_backward``
measured in the same run, in turns (``out``/``logsumexp`` come from the matching forward op). Then
the peak extra memory (tracemalloc: NumPy allocations beyond inputs and outputs) of one 16k-token
head backward.

Run: ``.venv/bin/python benchmarks/numpy_reference_math.py [--repeats N] [--skip-16k]``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
from numpy_reference import interleaved_medians
from threads import thread_settings

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.sdpa_math import sdpa_backward, sdpa_forward


def _flops(b: int, h: int, s: int, d: int, dv: int, causal: bool) -> float:
    window = hg.MaskWindow(right_bound=0) if causal else hg.MaskWindow()
    return 2.0 * b * h * hg.backend.visible_pairs(s, s, window) * (3 * d + 2 * dv)


def compare_with_torch(b: int, h: int, s: int, d: int, causal: bool, repeats: int) -> None:
    """One table row: NumPy backward vs torch's fused CPU flash backward, fp32."""
    import torch

    scale = d**-0.5
    gen = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(b, h, s, d, generator=gen) for _ in range(4))
    fwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    bwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward
    out, lse = fwd(q, k, v, 0.0, causal, scale=scale)[:2]
    qn, kn, vn, don, on = (x.numpy() for x in (q, k, v, do, out))
    stats = lse.numpy()[..., None]
    rb = 0 if causal else None
    t_torch, t_np = interleaved_medians(
        [
            lambda: bwd(do, q, k, v, out, lse, 0.0, causal, scale=scale),
            lambda: sdpa_backward(qn, kn, vn, on, don, stats, scale=scale, right_bound=rb),
        ],
        repeats,
    )
    gflops = _flops(b, h, s, d, d, causal) / t_np / 1e9
    label = f"B={b} H={h} S={s} D={d} {'causal' if causal else 'full  '}"
    print(
        f"{label} | numpy {t_np * 1e3:8.1f} ms {gflops:6.1f} GFLOP/s | "
        f"torch {t_torch * 1e3:8.1f} ms | ratio numpy/torch {t_np / t_torch:5.2f}"
    )


def peak_memory_16k(s: int = 16384, d: int = 128) -> None:
    """Peak NumPy memory of one fp32 head backward beyond its inputs and outputs."""
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((1, 1, s, d), dtype=np.float32) for _ in range(4))
    o, stats = sdpa_forward(q, k, v, scale=d**-0.5)
    outputs = 3 * q.nbytes  # dq, dk, dv
    tracemalloc.start()
    start = time.perf_counter()
    sdpa_backward(q, k, v, o, do, stats, scale=d**-0.5)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    extra = (peak - outputs) / 2**20
    print(
        f"16k-token head backward (S={s}, D={d}, fp32): {elapsed:.2f} s, "
        f"peak traced {peak / 2**20:.1f} MiB, beyond outputs {extra:.1f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-16k", action="store_true")
    args = parser.parse_args()
    import torch

    torch.zeros(64).sum()  # starts torch's OpenMP pool, so that every pool is listed
    for line in thread_settings():
        print(line)
    for causal in (False, True):
        compare_with_torch(1, 4, 2048, 128, causal, args.repeats)
    if not args.skip_16k:
        peak_memory_16k()


if __name__ == "__main__":
    main()
