"""One rank of the packed context-parallel tests:
``context_parallel_packed_worker.py RANK WORLD INIT OUT [cuda]``.

``tests/test_context_parallel_packed.py`` starts ``WORLD`` of these on the CPU (gloo, file
rendezvous). Every rank runs the same cases in the same order and writes one JSON record per
case to ``OUT``. The bad-input cases come first, so the value cases after them also show that a
refused call leaves the group usable.

A value case builds the whole packed batch ``[T, H, D]`` from a seed (the same on every rank),
shards it with ``shard_packed``, runs ``context_parallel_packed_attention`` forward and
backward, and measures the largest difference of its output and gradient tokens from torch's
``scaled_dot_product_attention`` on each whole sequence in float64 (``gather_packed`` of the
output is compared too).

With ``cuda`` (``tests/gpu/test_context_parallel_packed_gpu.py``) each rank takes GPU ``RANK``,
the group runs over NCCL (NVLink multicast off) and only the 16-bit cases run, on longer
sequences.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

# Before torch loads NCCL: never NVLink multicast (NVLS) on shared machines.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import torch
import torch.nn.functional as F
from context_parallel_rank import error_of, serve, sixteen_bit_cases

from hipdnn_graph.torch import scaled_dot_product_attention
from hipdnn_graph.torch.distributed import (
    context_parallel_packed_attention,
    gather_packed,
    packed_shard,
    shard_packed,
)

WORKER_PATH = Path(__file__).resolve()
D = 16  # default scale 1/4: exact in float32
#: zigzag batches: every length divisible by 2·W for W = 2 and 4 (one empty sequence)
ZIGZAG = [0, 16, 16, 24, 48]
#: whole-sequence batches: any lengths
SEQUENCES = [0, 5, 22, 25, 36, 45]


def full_inputs(
    seed: int, t: int, h: int, hk: int, dv: int, dtype: torch.dtype
) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(t, h, D), (t, hk, D), (t, hk, dv), (t, h, dv)]  # q, k, v, dO
    return [torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) for shape in shapes]


def per_sequence(
    fn: Callable[..., torch.Tensor], cu: list[int], q: Any, k: Any, v: Any, do: Any, **kw: Any
) -> list[torch.Tensor]:
    """``fn`` (an SDPA) on each whole sequence of the batch: output, dQ, dK, dV."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    pieces = []
    for a, b in pairwise(cu):
        if b > a:
            o = fn(*(t[a:b].transpose(0, 1).unsqueeze(0) for t in leaves), **kw)
            pieces.append(o[0].transpose(0, 1))
    out = torch.cat(pieces)
    out.backward(do)  # type: ignore[no-untyped-call]
    return [out.detach(), *_grads(leaves)]


def _grads(leaves: list[torch.Tensor]) -> list[torch.Tensor]:
    grads = [t.grad for t in leaves]
    assert all(g is not None for g in grads)
    return grads  # type: ignore[return-value]


def value_case(
    group: Any,
    world: int,
    *,
    layout: str,
    causal: bool,
    cu: list[int] | None = None,
    dtype: torch.dtype = torch.float64,
    h: int = 2,
    hk: int = 2,
    dv: int = D,
    scale: float | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, Any]:
    cu = cu or (ZIGZAG if layout == "zigzag" else SEQUENCES)
    host = full_inputs(seed, cu[-1], h, hk, dv, dtype)
    gqa = hk != h
    kw: dict[str, Any] = {"is_causal": causal, "scale": scale, "enable_gqa": gqa}
    ref = per_sequence(F.scaled_dot_product_attention, cu, *(t.double() for t in host), **kw)
    ref = [t.to(device) for t in ref]
    q, k, v, do = (t.to(device) for t in host)
    local = [shard_packed(t, cu, group, layout).requires_grad_() for t in (q, k, v)]
    before = [t.detach().clone() for t in local]
    out = context_parallel_packed_attention(
        local[0], local[1], local[2], cu, group=group, layout=layout, **kw
    )
    out.backward(shard_packed(do, cu, group, layout))  # type: ignore[no-untyped-call]
    got = [out.detach(), *_grads(local)]
    names = ("out", "dq", "dk", "dv")
    errors = {
        name: (g.double() - shard_packed(r, cu, group, layout)).abs().max().item()
        if g.numel()
        else 0.0
        for name, g, r in zip(names, got, ref, strict=True)
    }
    gathered = gather_packed(out.detach(), cu, group, layout)
    errors["gathered_out"] = (gathered.double() - ref[0]).abs().max().item()
    result: dict[str, Any] = {
        "errors": errors,
        "shape": list(out.shape),
        "out_dtype": str(out.dtype),
        "grad_dtypes": [str(g.dtype) for g in got[1:]],
        "strides_follow_inputs": all(
            g.stride() == t.stride() for g, t in zip(got[1:], local, strict=True)
        ),
        "inputs_unchanged": all(
            torch.equal(a, b.detach()) for a, b in zip(before, local, strict=True)
        ),
        "sequences": list(packed_shard(cu, group, layout).sequences),
    }
    if dtype in (torch.float16, torch.bfloat16):  # the error scale: the op in that dtype
        op = per_sequence(scaled_dot_product_attention, cu, q, k, v, do, **kw)
        result["op_errors"] = {
            name: (g.double() - r).abs().max().item()
            for name, g, r in zip(names, op, ref, strict=True)
        }
    return result


def bad_cases(rank: int, world: int) -> dict[str, Callable[[], Any]]:
    cu = [0, 8 * world, 24 * world]  # zigzag: 24 tokens per rank
    local = torch.randn(cu[-1] // world, 2, D, dtype=torch.float64)
    whole = torch.randn(cu[-1], 2, D, dtype=torch.float64)
    other = [0, 16 * world, 24 * world]  # the same token counts, other sequences
    odd = [0, 8, 13]
    one_head = local[:, :1]
    return {
        "zigzag_not_divisible": lambda: context_parallel_packed_attention(local, local, local, odd),
        "shard_zigzag_not_divisible": lambda: shard_packed(whole[:13], odd),
        "whole_batch_on_every_rank": lambda: context_parallel_packed_attention(
            whole, whole, whole, cu, is_causal=True
        ),
        "batches_differ_across_ranks": lambda: context_parallel_packed_attention(
            local, local, local, cu if rank == 0 else other
        ),
        "decreasing_cu_one_rank": lambda: context_parallel_packed_attention(
            local, local, local, [0, 8 * world, 4] if rank == 1 else cu
        ),
        "rank4_query": lambda: context_parallel_packed_attention(local[None], local, local, cu),
        "heads_without_gqa": lambda: context_parallel_packed_attention(
            local, one_head, one_head, cu
        ),
        "unknown_layout": lambda: context_parallel_packed_attention(
            local, local, local, cu, layout="contiguous"
        ),
        "requires_grad_one_rank": lambda: context_parallel_packed_attention(
            local.clone().requires_grad_(rank == 0), local, local, cu
        ),
        "gather_wrong_tokens_one_rank": lambda: gather_packed(
            whole if rank == world - 1 else local, cu
        ),
        "gather_batches_differ": lambda: gather_packed(local, cu if rank else other),
    }


def value_cases() -> dict[str, dict[str, Any]]:
    f32 = torch.float32
    cases: dict[str, dict[str, Any]] = {}
    for layout in ("zigzag", "sequences"):
        cases[f"f64-{layout}-causal"] = {"layout": layout, "causal": True}
        cases[f"f64-{layout}-full"] = {"layout": layout, "causal": False, "seed": 1}
        cases[f"f32-{layout}-causal-gqa"] = {"layout": layout, "causal": True, "dtype": f32,
                                             "h": 4, "hk": 1, "seed": 2}  # fmt: skip
    cases["f64-zigzag-causal-gqa-dv8-scale"] = {
        "layout": "zigzag", "causal": True, "h": 4, "hk": 2, "dv": 8, "scale": 0.375, "seed": 3
    }  # fmt: skip
    # one sequence, fewer than the ranks: some ranks hold no token at all
    cases["f64-sequences-causal-one-sequence"] = {"layout": "sequences", "causal": True,
                                                  "cu": [0, 6], "seed": 4}  # fmt: skip
    cases["bf16-zigzag-causal-gqa"] = {
        "layout": "zigzag", "causal": True, "dtype": torch.bfloat16, "h": 4, "hk": 2, "seed": 5
    }  # fmt: skip
    return cases


def gpu_value_cases() -> dict[str, dict[str, Any]]:
    """The 16-bit cases on GPUs: 8 sequences of 64 to 1,024 tokens, both layouts, GQA."""
    lengths = [64, 1024, 256, 128, 512, 64, 768, 256]
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return sixteen_bit_cases(("zigzag", "sequences"), "gqa", cu=cu)


def gather_grad(group: Any, world: int) -> dict[str, Any]:
    """gather_packed's gradient: each rank's loss is on the whole batch, so a token's gradient
    is the sum over the ``world`` ranks of the same weights (``world ×`` them)."""
    out: dict[str, Any] = {}
    for layout, cu in (("zigzag", ZIGZAG), ("sequences", SEQUENCES)):
        full = torch.randn(cu[-1], 2, 3, generator=torch.Generator().manual_seed(5))
        weights = torch.randn(full.shape, generator=torch.Generator().manual_seed(6))
        local = shard_packed(full, cu, group, layout).requires_grad_()
        gathered = gather_packed(local, cu, group, layout)
        (gathered * weights).sum().backward()  # type: ignore[no-untyped-call]
        expected = world * shard_packed(weights, cu, group, layout)
        out[layout] = {
            "equal": torch.equal(gathered, full),
            "grad_error": (local.grad - expected).abs().max().item(),  # type: ignore[operator]
        }
    return out


def run(rank: int, world: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, fn in bad_cases(rank, world).items():
        results[f"bad/{name}"] = error_of(fn)
    for name, kw in value_cases().items():
        results[f"value/{name}"] = value_case(None, world, **kw)
    results["gather_grad"] = gather_grad(None, world)
    return results


if __name__ == "__main__":
    serve(run, value_case, gpu_value_cases)
