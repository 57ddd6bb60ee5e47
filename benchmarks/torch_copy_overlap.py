"""Can the copy of dQ, dK, dV into the caller's buffers hide behind torch's cuDNN backward?

``graph.execute`` must leave the gradients in the buffers the caller gave (hipDNN's contract),
and torch's fused backward ops return fresh tensors (no ``out=`` form), so the torch engines copy
them once. This script (run on a GPU machine: ``python benchmarks/torch_copy_overlap.py
[--json OUT]``) measures what that copy costs and whether splitting the batch into chunks, with
each chunk's copy on a side stream while the next chunk computes, hides it. For bf16, B·S = 16k
tokens, H·D = 2048 it prints, as multiples of one plain aten call (CUDA events, rounds of ten
back-to-back calls of every variant in turn, median over nine rounds):

* ``copy``: the three copies alone; ``aten+copy``: the call followed by the copies,
* ``chunksN``: the call split into N batch chunks, no copy (the price of splitting),
* ``pipelineN``: N chunks, each chunk's copy on a side stream overlapping the next chunk,
* ``graph:`` variants: the same captured once in a CUDA graph and replayed (what repeated
  ``execute`` calls do).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import torch
from torch_backend import BF16, interleaved, replayed

A = torch.ops.aten


def measure(d: int, s: int, causal: bool) -> dict[str, Any]:
    b, h = 16384 // s, 2048 // d
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=BF16) for _ in range(4))
    scale = d**-0.5
    fwd = A._scaled_dot_product_cudnn_attention(
        q, k, v, None, True, 0.0, causal, False, scale=scale
    )
    o, lse, seed, offset = fwd[0], fwd[1], fwd[6], fwd[7]
    grads = [torch.empty_like(x) for x in (q, k, v)]
    spare = [torch.empty_like(x) for x in (q, k, v)]
    side = torch.cuda.Stream()

    def backward(lo: int = 0, hi: int = b) -> Any:
        return A._scaled_dot_product_cudnn_attention_backward(
            do[lo:hi], q[lo:hi], k[lo:hi], v[lo:hi], o[lo:hi], lse[lo:hi], seed, offset, None,
            None, None, s, s, 0.0, causal, scale=scale,
        )  # fmt: skip

    def with_copy() -> None:
        for dst, src in zip(grads, backward(), strict=True):
            dst.copy_(src)

    def chunks(n: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(n):
                backward(i * b // n, (i + 1) * b // n)

        return run

    def pipeline(n: int) -> Callable[[], None]:
        def run() -> None:
            main = torch.cuda.current_stream()
            side.wait_stream(main)
            for i in range(n):
                lo, hi = i * b // n, (i + 1) * b // n
                results = backward(lo, hi)
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    for dst, src in zip(grads, results, strict=True):
                        dst[lo:hi].copy_(src)
                for t in results:
                    t.record_stream(side)
            main.wait_stream(side)

        return run

    fns: dict[str, Callable[[], Any]] = {
        "aten": backward,
        "copy": lambda: [dst.copy_(src) for dst, src in zip(grads, spare, strict=True)],
        "aten+copy": with_copy,
    }
    for n in (2, 4):
        fns[f"chunks{n}"] = chunks(n)
        fns[f"pipeline{n}"] = pipeline(n)
    for name in ("aten", "aten+copy", "pipeline2", "pipeline4"):
        fns[f"graph:{name}"] = replayed(fns[name])
    ms = interleaved(fns)
    return {
        "D": d, "S": s, "causal": causal, "aten_ms": ms["aten"],
        **{name: t / ms["aten"] for name, t in ms.items()},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = [measure(d, s, c) for d in (64, 128) for s in (1024, 4096) for c in (False, True)]
    names = [k for k in rows[0] if k not in ("D", "S", "causal", "aten_ms")]
    print("| D | S | causal | aten ms | " + " | ".join(names) + " |")
    print("|---" * (4 + len(names)) + "|")
    for r in rows:
        cells = " | ".join(f"{r[n]:.3f}" for n in names)
        print(f"| {r['D']} | {r['S']} | {r['causal']} | {r['aten_ms']:.3f} | {cells} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
