"""Forward+backward time and peak memory of the torch op, with and without dropout, against
torch's own SDPA, for every dtype a model trains in.

Run on a GPU machine: ``python benchmarks/torch_op_dropout.py [--json OUT] [--dtypes ...]
[--dropout 0.0,0.1]``. For each shape (causal: B=8, H=12, S=1024, D=64 and B=2, H=12, S=4096,
D=64, issue 22's GPT-2 shapes), each dtype (``float32``, the default dtype of a model, then
``float16``, ``bfloat16``, and ``autocast``: float32 leaves under ``torch.autocast("cuda",
torch.bfloat16)``) and each dropout probability it prints the milliseconds of one
forward+backward of ``hipdnn_graph.torch.scaled_dot_product_attention`` and of
``torch.nn.functional.scaled_dot_product_attention`` (CUDA events; rounds of ten calls of each
in turn, median over the rounds), their ratio (issue 35's targets: ≤ 1.03 without dropout,
≤ 1.05 with it), the peak memory each call adds above its inputs (target: no more than
F.sdpa's) and the engines the op's graphs ran on. Each call draws a new dropout mask from
torch's generator, as in training. No row is left out for being slow.

``--smoke`` runs one tiny shape on the CPU (no figures worth reading; the test suite runs it
to keep the script working).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import interleaved_ms, peak_bytes

import hipdnn_graph.torch as hgt

SHAPES = ((8, 12, 1024, 64), (2, 12, 4096, 64))
SMOKE = ((1, 2, 16, 8),)
P = 0.1
DTYPES = ("float32", "float16", "bfloat16", "autocast")


def _inputs(b: int, h: int, s: int, d: int, device: str, dtype: torch.dtype) -> list[Any]:
    g = torch.Generator(device=device).manual_seed(0)
    return [
        torch.randn(b, h, s, d, device=device, dtype=dtype, generator=g, requires_grad=True)
        for _ in range(3)
    ]


def _step(
    fn: Callable[..., Any], q: Any, k: Any, v: Any, do: Any, p: float, autocast: bool
) -> Callable[[], None]:
    device = q.device.type

    def run() -> None:
        if autocast:
            with torch.autocast(device, dtype=torch.bfloat16):
                out = fn(q, k, v, dropout_p=p, is_causal=True)
            torch.autograd.backward(out, do.to(out.dtype))
        else:
            out = fn(q, k, v, dropout_p=p, is_causal=True)
            torch.autograd.backward(out, do)

    return run


def row(
    b: int, h: int, s: int, d: int, device: str, rounds: int, dtype_name: str = "bfloat16",
    p: float = P,
) -> dict[str, Any]:  # fmt: skip
    cuda = device == "cuda"
    hgt.graph_cache().clear()  # the engines listed below are this shape's
    autocast = dtype_name == "autocast"
    dtype = torch.float32 if autocast else getattr(torch, dtype_name)
    q, k, v = _inputs(b, h, s, d, device, dtype)
    do = torch.randn_like(q)
    steps = {
        "sdpa": _step(F.scaled_dot_product_attention, q, k, v, do, p, autocast),
        "hipdnn": _step(hgt.scaled_dot_product_attention, q, k, v, do, p, autocast),
    }
    for step in steps.values():  # warm: plans, caches, autotuning
        step()
        step()
    for t in (q, k, v):
        t.grad = None
    peaks = {name: peak_bytes(step, cuda) for name, step in steps.items()}
    ms = interleaved_ms(steps, cuda, rounds)
    engines = sorted(
        {
            e.engine + (" (autograd route)" if e.autograd else "")
            for e in hgt.graph_cache().values()
            if ("Seed" in e.slots) == bool(p)
        }
    )
    return {
        "shape": [b, h, s, d],
        "device": device,
        "dtype": dtype_name,
        "dropout_p": p,
        "sdpa_ms": ms["sdpa"],
        "hipdnn_ms": ms["hipdnn"],
        "ratio": ms["hipdnn"] / ms["sdpa"],
        "sdpa_peak_mib": None if peaks["sdpa"] is None else peaks["sdpa"] / 2**20,
        "hipdnn_peak_mib": None if peaks["hipdnn"] is None else peaks["hipdnn"] / 2**20,
        "engines": engines,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one tiny shape on the CPU")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--rounds", type=int, default=9, help="timing rounds (median)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="dtypes (and 'autocast')")
    parser.add_argument("--dropout", default="0.0,0.1", help="dropout probabilities")
    args = parser.parse_args(argv)
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    shapes = SMOKE if args.smoke else SHAPES
    dtypes = ["float32"] if args.smoke else args.dtypes.split(",")
    probabilities = [P] if args.smoke else [float(x) for x in args.dropout.split(",")]
    rows = [
        row(*shape, device, 2 if args.smoke else args.rounds, dtype, p)
        for shape in shapes
        for dtype in dtypes
        for p in probabilities
    ]
    for r in rows:
        peak = ""
        if r["sdpa_peak_mib"] is not None:
            peak = f"  peak +{r['hipdnn_peak_mib']:.1f} vs +{r['sdpa_peak_mib']:.1f} MiB"
        target = 1.05 if r["dropout_p"] else 1.03
        print(
            f"B,H,S,D={r['shape']} {r['dtype']:>8} p={r['dropout_p']:.1f} {r['device']}: "
            f"hipdnn {r['hipdnn_ms']:.3f} ms, sdpa {r['sdpa_ms']:.3f} ms, ratio "
            f"{r['ratio']:.2f} (target ≤ {target}){peak}  engines {r['engines']}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
