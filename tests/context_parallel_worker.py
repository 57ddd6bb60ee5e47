"""One rank of the context-parallel tests:
``context_parallel_worker.py RANK WORLD INIT OUT [cuda]``.

``tests/test_context_parallel.py`` starts ``WORLD`` of these on the CPU (gloo, rendezvous through
the file ``INIT``). Every rank runs the same cases in the same order and writes one JSON record
per case to ``OUT``; the test process asserts on them. The bad-input cases come first, so the
value cases after them also show that a refused call leaves the group usable.

A value case builds the whole sequence from a seed (the same on every rank), shards it, runs
``context_parallel_attention`` forward and backward, and measures the largest difference of its
output slice and gradient slices from torch's own ``scaled_dot_product_attention`` on the whole
sequence in float64 (``gather_sequence`` of the output is compared too).

With ``cuda`` (``tests/gpu/test_context_parallel_gpu.py``) each rank takes GPU ``RANK`` and
the group runs over NCCL (NVLink multicast off); only the 16-bit value cases run there, on
longer sequences.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# Before torch loads NCCL: never NVLink multicast (NVLS) on shared machines.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import torch
import torch.distributed as dist
import torch.nn.functional as F
from context_parallel_rank import error_of, serve, sixteen_bit_cases

from hipdnn_graph.torch import scaled_dot_product_attention
from hipdnn_graph.torch.distributed import (
    context_parallel_attention,
    gather_sequence,
    shard_sequence,
)

D = 16  # default scale 1/4: exact in float32 (hipDNN's attn_scale is a float attribute)
CHUNK = 4  # tokens per zigzag chunk: S = 2·W·CHUNK


def full_inputs(
    seed: int, s: int, h: int, hk: int, dv: int, dtype: torch.dtype
) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(1, h, s, D), (1, hk, s, D), (1, hk, s, dv), (1, h, s, dv)]  # q, k, v, dO
    return [torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) for shape in shapes]


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, **kw: Any
) -> list[torch.Tensor]:
    """torch's SDPA on the whole sequence in float64: output and dQ, dK, dV."""
    leaves = [t.to(torch.float64, copy=True).requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, **kw)
    out.backward(do.double())
    return [out.detach()] + [t.grad for t in leaves]  # type: ignore[misc]


def value_case(
    group: Any,
    world: int,
    *,
    layout: str,
    causal: bool,
    dtype: torch.dtype = torch.float64,
    h: int = 2,
    hk: int = 2,
    dv: int = D,
    scale: float | None = None,
    seed: int = 0,
    bshd: bool = False,
    sum_loss: bool = False,
    chunk: int = CHUNK,
    device: str = "cpu",
) -> dict[str, Any]:
    """``bshd``: the local slices are ``[B, S, H, D]`` memory seen as ``[B, H, S, D]`` (as
    transformers passes them); ``sum_loss``: the loss is ``out.sum()`` (a broadcast dO);
    ``chunk``: tokens per zigzag chunk; ``device``: where the op runs (the reference: CPU)."""
    s = 2 * world * chunk
    host = full_inputs(seed, s, h, hk, dv, dtype)
    if sum_loss:
        host[3] = torch.ones_like(host[3])
    gqa = hk != h
    ref = [t.to(device) for t in reference(*host, is_causal=causal, scale=scale, enable_gqa=gqa)]
    q, k, v, do = (t.to(device) for t in host)
    local = [shard_sequence(t, group, layout) for t in (q, k, v)]
    if bshd:
        local = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in local]
    local = [t.requires_grad_() for t in local]
    before = [t.detach().clone() for t in local]
    out = context_parallel_attention(
        *local, group=group, is_causal=causal, scale=scale, enable_gqa=gqa, layout=layout
    )
    if sum_loss:
        out.sum().backward()
    else:
        out.backward(shard_sequence(do, group, layout))
    got = [out.detach()] + [t.grad for t in local]
    errors = {
        name: (g.double() - shard_sequence(r, group, layout)).abs().max().item()
        for name, g, r in zip(("out", "dq", "dk", "dv"), got, ref, strict=True)
    }
    follows = all(g.stride() == t.stride() for g, t in zip(got[1:], local, strict=True))
    gathered = gather_sequence(out.detach(), group, layout)
    errors["gathered_out"] = (gathered.double() - ref[0]).abs().max().item()
    # the error scale of the dtype: the op itself on the whole sequence, in that dtype
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    whole = scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale, enable_gqa=gqa)
    whole.backward(do)
    op = [whole.detach()] + [t.grad for t in leaves]
    op_errors = {
        name: (g.double() - r).abs().max().item()  # type: ignore[union-attr]
        for name, g, r in zip(("out", "dq", "dk", "dv"), op, ref, strict=True)
    }
    return {
        "errors": errors,
        "op_errors": op_errors,
        "dtype": str(dtype),
        "shape": list(out.shape),
        "out_dtype": str(out.dtype),
        "grad_dtypes": [str(t.grad.dtype) for t in local],  # type: ignore[union-attr]
        # outputs in their inputs' dimension order, as the op's: O like Q, dQ/dK/dV like Q/K/V
        "strides_follow_inputs": follows and (dv != D or out.stride() == local[0].stride()),
        "inputs_unchanged": all(
            torch.equal(a, b.detach()) for a, b in zip(before, local, strict=True)
        ),
    }


def bad_cases(rank: int, world: int) -> dict[str, Callable[[], Any]]:
    x = torch.randn(1, 2, 2 * CHUNK, D, dtype=torch.float64)
    odd = torch.randn(1, 2, 3, D, dtype=torch.float64)
    short = torch.randn(1, 2, CHUNK, D, dtype=torch.float64)
    one_head = torch.randn(1, 1, 2 * CHUNK, D, dtype=torch.float64)
    mine = short if rank == 0 else x
    return {
        "odd_zigzag_length": lambda: context_parallel_attention(odd, odd, odd),
        "lengths_differ_across_ranks": lambda: context_parallel_attention(mine, mine, mine),
        "causal_differs_across_ranks": lambda: context_parallel_attention(
            x, x, x, is_causal=rank == 0
        ),
        "dtype_differs_across_ranks": lambda: context_parallel_attention(
            *([x.float()] * 3 if rank == world - 1 else [x] * 3)
        ),
        "one_rank_passes_rank3": lambda: context_parallel_attention(
            *([x[0]] * 3 if rank == 1 else [x] * 3)
        ),
        "heads_without_gqa": lambda: context_parallel_attention(x, one_head, one_head),
        "unknown_layout": lambda: context_parallel_attention(x, x, x, layout="ring"),
        "shard_not_divisible": lambda: shard_sequence(
            torch.randn(1, 2, 2 * world * CHUNK + 2, D), layout="zigzag"
        ),
        "shard_contiguous_not_divisible": lambda: shard_sequence(
            torch.randn(1, 2, world * CHUNK + 1, D), layout="contiguous"
        ),
        "gather_shapes_differ": lambda: gather_sequence(mine),
        # one rank's bad argument: every rank raises its error (none waits in the exchange)
        "layout_one_rank": lambda: context_parallel_attention(
            x, x, x, layout="ring" if rank == 1 else "zigzag"
        ),
        "scale_overflows_one_rank": lambda: context_parallel_attention(
            x, x, x, scale=10**400 if rank == 0 else 0.25
        ),
        "string_flag_one_rank": lambda: context_parallel_attention(
            x,
            x,
            x,
            is_causal="false" if rank == 1 else False,  # type: ignore[arg-type]
        ),
        "bogus_group_one_rank": lambda: context_parallel_attention(
            x, x, x, group=object() if rank == 1 else None
        ),
        "meta_one_rank": lambda: context_parallel_attention(
            *([x.to("meta")] * 3 if rank == 0 else [x] * 3)
        ),
        # autograd on one rank only: its backward would wait for the others forever
        "requires_grad_one_rank": lambda: context_parallel_attention(
            x.clone().requires_grad_(rank == 0), x, x
        ),
        "gather_layouts_differ": lambda: gather_sequence(
            x, layout="zigzag" if rank == 0 else "contiguous"
        ),
        "gather_layout_one_rank": lambda: gather_sequence(x, layout="ring" if rank else "zigzag"),
        "gather_requires_grad_one_rank": lambda: gather_sequence(
            x.clone().requires_grad_(rank == world - 1)
        ),
        "gather_meta_one_rank": lambda: gather_sequence(x.to("meta") if rank == 1 else x),
        "gather_bogus_group_one_rank": lambda: gather_sequence(
            x, group="world" if rank == 0 else None
        ),
    }


def value_cases(world: int) -> dict[str, dict[str, Any]]:
    f32 = torch.float32
    cases: dict[str, dict[str, Any]] = {}
    for layout in ("zigzag", "contiguous"):
        cases[f"f64-{layout}-causal"] = {"layout": layout, "causal": True}
        cases[f"f64-{layout}-full"] = {"layout": layout, "causal": False}
        cases[f"f64-{layout}-causal-gqa"] = {"layout": layout, "causal": True, "h": 4, "hk": 2}
        cases[f"f32-{layout}-causal-gqa"] = {"layout": layout, "causal": True, "dtype": f32,
                                              "h": 4, "hk": 1, "seed": 2}  # fmt: skip
    cases["f64-zigzag-full-gqa-dv8-scale"] = {
        "layout": "zigzag", "causal": False, "h": 2, "hk": 1, "dv": 8, "scale": 0.375, "seed": 3
    }  # fmt: skip
    cases["f64-zigzag-causal-bshd-sum"] = {"layout": "zigzag", "causal": True, "h": 4, "hk": 2,
                                           "bshd": True, "sum_loss": True, "seed": 5}  # fmt: skip
    cases["f32-contiguous-full"] = {"layout": "contiguous", "causal": False, "dtype": f32,
                                    "seed": 4}  # fmt: skip
    # 16-bit: dK and dV make their last hop already rounded to the inputs' dtype
    for layout in ("zigzag", "contiguous"):
        cases[f"bf16-{layout}-causal-gqa-bshd"] = {
            "layout": layout, "causal": True, "dtype": torch.bfloat16, "h": 4, "hk": 2,
            "bshd": True, "seed": 6,
        }  # fmt: skip
    return cases


def gpu_value_cases() -> dict[str, dict[str, Any]]:
    """The 16-bit cases on GPUs: 2·256 tokens per rank, both layouts, GQA, ``[B, S, H, D]``."""
    return sixteen_bit_cases(("zigzag", "contiguous"), "gqa-bshd", bshd=True, chunk=256)


def gather_grad(group: Any, world: int) -> dict[str, Any]:
    """gather_sequence's gradient: each rank's loss is on the whole sequence, so the slice's
    gradient is the sum over the ``world`` ranks of the same weights (``world ×`` them)."""
    full = torch.randn(1, 2, 2 * world * CHUNK, 3, generator=torch.Generator().manual_seed(5))
    weights = torch.randn(full.shape, generator=torch.Generator().manual_seed(6))
    out: dict[str, Any] = {}
    for layout in ("zigzag", "contiguous"):
        local = shard_sequence(full, group, layout).requires_grad_()
        gathered = gather_sequence(local, group, layout)
        (gathered * weights).sum().backward()
        expected = world * shard_sequence(weights, group, layout)
        out[layout] = {
            "equal": torch.equal(gathered, full),
            "grad_error": (local.grad - expected).abs().max().item(),  # type: ignore[operator]
        }
    return out


def group_of_one(rank: int, world: int) -> dict[str, Any]:
    """Every rank in a group of its own: plain attention through the op, any length."""
    groups = [dist.new_group([r]) for r in range(world)]
    q, k, v, _ = full_inputs(7, 10, 2, 2, D, torch.float64)
    out = context_parallel_attention(q, k, v, group=groups[rank], is_causal=True)
    plain = scaled_dot_product_attention(q, k, v, is_causal=True)
    return {"equal_to_op": torch.equal(out, plain), "shape": list(out.shape)}


def subgroups(rank: int, world: int) -> dict[str, Any]:
    """Two rings at once: the even and the odd ranks (global ranks ≠ group ranks)."""
    evens = dist.new_group(list(range(0, world, 2)))
    odds = dist.new_group(list(range(1, world, 2)))
    mine = evens if rank % 2 == 0 else odds
    return value_case(mine, world // 2, layout="zigzag", causal=True, h=4, hk=2, seed=8 + rank % 2)


def run(rank: int, world: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, fn in bad_cases(rank, world).items():
        results[f"bad/{name}"] = error_of(fn)
    for name, kw in value_cases(world).items():
        results[f"value/{name}"] = value_case(None, world, **kw)
    results["gather_grad"] = gather_grad(None, world)
    results["group_of_one"] = group_of_one(rank, world)
    if world >= 4:
        results["subgroups"] = subgroups(rank, world)
    return results


if __name__ == "__main__":
    serve(run, value_case, gpu_value_cases)
