"""The distributed page's packed example: context-parallel attention over a packed batch on two
CPU processes (gloo), in both packed layouts."""

# --8<-- [start:step]
from itertools import pairwise

import torch
import torch.nn.functional as F

from hipdnn_graph.torch.distributed import (
    context_parallel_packed_attention,
    gather_packed,
    packed_shard,
    shard_packed,
)


def packed_step(rank: int, layout: str) -> str:
    """What every rank runs: its tokens of the packed batch in, its tokens of the output out."""
    torch.manual_seed(0)  # the same whole batch on every rank (a data loader's job)
    cu_seqlens = torch.tensor([0, 256, 384, 896, 1024])  # 4 sequences: 256, 128, 512, 128
    q = torch.randn(1024, 8, 64)  # [T, H, D]: the tokens of every sequence, one after another
    k = torch.randn(1024, 2, 64)  # 2 KV heads: grouped-query attention
    v = torch.randn(1024, 2, 64)

    q_l, k_l, v_l = (shard_packed(t, cu_seqlens, layout=layout).requires_grad_() for t in (q, k, v))
    out = context_parallel_packed_attention(
        q_l, k_l, v_l, cu_seqlens, is_causal=True, enable_gqa=True, layout=layout
    )
    out.square().sum().backward()  # type: ignore[no-untyped-call]

    # the same on one process: torch's SDPA on each whole sequence
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    bounds = cu_seqlens.tolist()
    q_r, k_r, v_r = leaves
    ref = torch.cat([
        F.scaled_dot_product_attention(
            q_r[a:b].transpose(0, 1), k_r[a:b].transpose(0, 1), v_r[a:b].transpose(0, 1),
            is_causal=True, enable_gqa=True,
        ).transpose(0, 1)
        for a, b in pairwise(bounds)
    ])  # fmt: skip
    ref.square().sum().backward()  # type: ignore[no-untyped-call]
    whole = gather_packed(out.detach(), cu_seqlens, layout=layout)
    grads_match = all(
        mine.grad is not None
        and t.grad is not None
        and torch.allclose(mine.grad, shard_packed(t.grad, cu_seqlens, layout=layout), atol=1e-4)
        for mine, t in zip((q_l, k_l, v_l), leaves, strict=True)
    )
    held = packed_shard(cu_seqlens, layout=layout).sequences
    return (f"{layout} rank {rank}: sequences {list(held)}, local {list(out.shape)}, "
            f"output matches: {torch.allclose(whole, ref, atol=1e-5)}, "
            f"gradients match: {grads_match}")  # fmt: skip


# --8<-- [end:step]

import os  # noqa: E402
import tempfile  # noqa: E402

import torch.distributed as dist  # noqa: E402


def worker(rank: int, world: int, rendezvous: str) -> None:
    torch.set_num_threads(1)  # the ranks share this machine's cores
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    for layout in ("sequences", "zigzag"):
        report = packed_step(rank, layout)
        for turn in range(world):  # one rank at a time, so that the lines come in rank order
            if turn == rank:
                print(report, flush=True)
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        rendezvous = "file://" + os.path.join(folder, "rendezvous")
        torch.multiprocessing.spawn(worker, args=(2, rendezvous), nprocs=2)  # type: ignore[attr-defined,no-untyped-call]
