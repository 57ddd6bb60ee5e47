"""Forward+backward time and peak memory of packed (ragged, THD) attention through hipdnn-graph
against torch's variable-length kernel called directly and against the same batch padded
(issue 37's first target).

Run on a GPU machine: ``python benchmarks/packed_attention.py [--rounds N] [--json OUT]
[--dtypes bfloat16,float32]``. One packed batch of 16 sequences of 128 to 4,096 tokens (32,768
in all), H=16, D=128, causal; for each dtype (``bfloat16``: torch's FlashAttention varlen kernel;
``float32``: its memory-efficient kernel, the one torch has for float32) it prints the
milliseconds of one forward+backward of

* ``torch``: the aten kernel called directly (``_flash_attention_forward/_backward`` or
  ``_efficient_attention_forward/_backward`` with cumulative sequence lengths, no autograd);
* ``varlen_attention``: :func:`hipdnn_graph.torch.varlen_attention` with autograd;
* ``graph``: a built packed forward graph and backward graph run with ``Graph.execute`` on
  preallocated buffers;
* ``padded``: :func:`hipdnn_graph.torch.scaled_dot_product_attention` on the batch padded to
  ``[16, H, 4096, D]`` with its padding lengths (``seq_len_q``/``seq_len_kv``), today's padding
  path;

(CUDA events; rounds of ten calls of each in turn, median over the rounds), each row's speed
against ``torch`` (issue 37's target for the graph paths: ≥ 0.95) and against ``padded``
(target ≥ 1.5), the peak memory each call adds above its inputs (target: ≤ the padded path's)
and the engines the graphs ran on. It needs one 80 GB card and well under two minutes; the
untimed warm-up includes the device probe of the fused kernels and, for bf16, the compile of
the flex kernels the padded op runs on (``--padded-engine NAME`` forces another engine for the
padded row, e.g. ``TORCH_SDPA_FLASH_ENGINE``'s own padding path).

``--smoke`` runs a tiny batch on the CPU (no figures worth reading; the test suite runs it to
keep the script working).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch_timing import interleaved_ms, peak_bytes

import hipdnn_graph as hg
import hipdnn_graph.torch as hgt

#: 16 sequences of 128..4,096 tokens, 32,768 in all (a fixed, shuffled mix)
LENGTHS = (2048, 128, 3584, 640, 4096, 1280, 2560, 384, 3072, 1792, 896, 2816, 1536, 4096,
           256, 3584)  # fmt: skip
SMOKE_LENGTHS = (5, 1, 8, 3)
HEADS, DIM = 16, 128
DTYPES = ("bfloat16", "float32")
_IO = {torch.bfloat16: hg.DataType.BFLOAT16, torch.float16: hg.DataType.HALF,
       torch.float32: hg.DataType.FLOAT}  # fmt: skip


def _torch_step(q: Any, k: Any, v: Any, do: Any, cu: Any, longest: int, scale: float
                ) -> Callable[[], None] | None:  # fmt: skip
    """torch's own variable-length kernel, forward then backward (None on the CPU)."""
    if q.device.type != "cuda":
        return None
    aten = torch.ops.aten
    if q.dtype == torch.float32:

        def efficient() -> None:
            o, lse, seed, offset, _, _ = aten._efficient_attention_forward(
                q[None], k[None], v[None], None, cu, cu, longest, longest, 0.0, 1, True,
                scale=scale,
            )  # fmt: skip
            aten._efficient_attention_backward(
                do[None], q[None], k[None], v[None], None, o, cu, cu, longest, longest, lse, 0.0,
                seed, offset, 1, False, scale=scale,
            )  # fmt: skip

        return efficient

    def flash() -> None:
        o, lse, rng, unused, _ = aten._flash_attention_forward(
            q, k, v, cu, cu, longest, longest, 0.0, True, False, scale=scale
        )
        aten._flash_attention_backward(
            do, q, k, v, o, lse, cu, cu, longest, longest, 0.0, True, rng, unused, scale=scale
        )

    return flash


def _graphs(t: dict[str, Any], cu: Any, lengths: tuple[int, ...], s_max: int
            ) -> tuple[Callable[[], None], list[str]]:  # fmt: skip
    """A built packed forward graph and backward graph, run on preallocated buffers."""
    io, b = _IO[t["Q"].dtype], len(lengths)
    stride = [s_max * HEADS * DIM, DIM, HEADS * DIM, 1]

    def graph(name: str) -> tuple[hg.Graph, Any, Any]:
        g = hg.Graph(name=name, io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                     compute_data_type=hg.DataType.FLOAT)  # fmt: skip
        off = g.tensor(name="cu", dim=[b + 1, 1, 1, 1], data_type=hg.DataType.INT32)

        def packed(x: hg.TensorAttributes) -> hg.TensorAttributes:
            x.set_dim([b, HEADS, s_max, DIM]).set_stride(stride).set_ragged_offset(off)
            return x.set_ragged_offset_multiplier(HEADS * DIM)

        return g, off, packed

    fwd, off_f, packed_f = graph("packed_fwd")
    q, k, v = (packed_f(fwd.tensor(name=n, dim=[1, 1, 1, 1])) for n in "QKV")
    o, stats = fwd.sdpa(q, k, v, name="fwd", generate_stats=True, use_causal_mask=True)
    assert stats is not None
    packed_f(o).set_output(True)
    stats.set_output(True).set_data_type(hg.DataType.FLOAT)
    fwd.build()
    bwd, off_b, packed_b = graph("packed_bwd")
    qb, kb, vb, ob, dob = (packed_b(bwd.tensor(name=n, dim=[1, 1, 1, 1]))
                           for n in ("Q", "K", "V", "O", "dO"))  # fmt: skip
    sb = bwd.tensor(name="Stats", dim=[b, HEADS, s_max, 1], data_type=hg.DataType.FLOAT)
    grads = bwd.sdpa_backward(qb, kb, vb, ob, dob, sb, name="bwd", use_causal_mask=True)
    for grad in grads:
        packed_b(grad).set_output(True)
    bwd.build()
    offsets = cu.reshape(b + 1, 1, 1, 1)
    out = torch.empty_like(t["Q"])
    lse = torch.empty(b, HEADS, s_max, 1, device=out.device)
    dq, dk, dv = (torch.empty_like(t[n]) for n in "QKV")
    fwd_pack = {off_f: offsets, q: t["Q"], k: t["K"], v: t["V"], o: out, stats: lse}
    bwd_pack = {off_b: offsets, qb: t["Q"], kb: t["K"], vb: t["V"], ob: out, dob: t["dO"],
                sb: lse, grads[0]: dq, grads[1]: dk, grads[2]: dv}  # fmt: skip

    def step() -> None:
        fwd.execute(fwd_pack, None)
        bwd.execute(bwd_pack, None)

    return step, [fwd.get_plan_name(), bwd.get_plan_name()]


def row(dtype_name: str, device: str, rounds: int, lengths: tuple[int, ...],
        padded_engine: str | None = None) -> dict[str, Any]:  # fmt: skip
    cuda = device == "cuda"
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(0)
    total, longest, b = sum(lengths), max(lengths), len(lengths)
    scale = 1 / math.sqrt(DIM)
    t = {n: torch.randn(total, HEADS, DIM, device=device, dtype=dtype, generator=gen)
         for n in ("Q", "K", "V", "dO")}  # fmt: skip
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32,
                      device=device)  # fmt: skip
    leaves = {n: t[n].clone().requires_grad_() for n in "QKV"}
    hgt.graph_cache().clear()

    def varlen() -> None:
        out = hgt.varlen_attention(leaves["Q"], leaves["K"], leaves["V"], cu, cu, longest,
                                   longest, is_causal=True, scale=scale)  # fmt: skip
        torch.autograd.grad(out, list(leaves.values()), t["dO"])  # no .grad accumulation

    s_pad = 1 << (longest - 1).bit_length()
    padded = {n: torch.zeros(b, HEADS, s_pad, DIM, device=device, dtype=dtype) for n in t}
    for i, (lo, n) in enumerate(zip(cu[:-1].tolist(), lengths, strict=True)):
        for name in t:
            padded[name][i, :, :n] = t[name][lo : lo + n].transpose(0, 1)
    pad_leaves = {n: padded[n].requires_grad_() for n in "QKV"}
    lens = torch.tensor(lengths, dtype=torch.int32)

    def pad() -> None:
        out = hgt.scaled_dot_product_attention(
            pad_leaves["Q"], pad_leaves["K"], pad_leaves["V"], is_causal=True, scale=scale,
            seq_len_q=lens, seq_len_kv=lens, engine=padded_engine,
        )  # fmt: skip
        torch.autograd.grad(out, list(pad_leaves.values()), padded["dO"])

    graph_step, graph_engines = _graphs(t, cu, lengths, s_pad)
    steps: dict[str, Callable[[], None]] = {"varlen_attention": varlen, "graph": graph_step}
    direct = _torch_step(t["Q"], t["K"], t["V"], t["dO"], cu, longest, scale)
    if direct is not None:
        steps["torch"] = direct
    steps["padded"] = pad
    for step in steps.values():  # warm: plans, probes, caches
        step()
        step()
    peaks = {name: peak_bytes(step, cuda) for name, step in steps.items()}
    ms = interleaved_ms(steps, cuda, rounds)
    engines = sorted({f"{c.kind}:{c.engine}" for c in hgt.cached_graphs()})
    return {
        "dtype": dtype_name,
        "device": device,
        "lengths": list(lengths),
        "tokens": total,
        "heads": HEADS,
        "dim": DIM,
        "ms": ms,
        "peak_mib": {n: None if p is None else p / 2**20 for n, p in peaks.items()},
        "vs_torch": {n: ms["torch"] / ms[n] for n in ms} if "torch" in ms else None,
        "vs_padded": {n: ms["padded"] / ms[n] for n in ms},
        "graph_engines": graph_engines,
        "op_engines": engines,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny batch on the CPU")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds (median)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="bfloat16, float16, float32")
    parser.add_argument("--padded-engine", help="force this engine for the padded row")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    lengths = SMOKE_LENGTHS if args.smoke else LENGTHS
    dtypes = ["float32"] if args.smoke else args.dtypes.split(",")
    rows = [
        row(d, device, 2 if args.smoke else args.rounds, lengths, args.padded_engine)
        for d in dtypes
    ]
    for r in rows:
        print(f"{r['dtype']} {r['device']}: {len(r['lengths'])} sequences, {r['tokens']} tokens, "
              f"H={r['heads']} D={r['dim']}, causal fwd+bwd")  # fmt: skip
        for name, ms in r["ms"].items():
            speed = ""
            if r["vs_torch"] is not None:
                speed += f", {r['vs_torch'][name]:.2f}x torch (target >= 0.95)"
            speed += f", {r['vs_padded'][name]:.2f}x padded (target >= 1.5)"
            peak = r["peak_mib"][name]
            memory = "" if peak is None else f", peak +{peak:.0f} MiB"
            print(f"  {name:>16}: {ms:8.3f} ms{speed}{memory}")
        print(f"  graph engines {r['graph_engines']}; op engines {r['op_engines']}")
    print(f"({time.perf_counter() - start:.0f} s in all, warm-up included)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
