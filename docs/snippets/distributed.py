"""The distributed page's example: context-parallel attention on two CPU processes (gloo)."""

# --8<-- [start:step]
import torch
import torch.nn.functional as F

from hipdnn_graph.torch.distributed import (
    context_parallel_attention,
    gather_sequence,
    shard_sequence,
)


def attention_step(rank: int) -> str:
    """What every rank runs: its slice of the sequence in, its slice of the output out (and a
    line saying whether it matches torch's SDPA on the whole sequence)."""
    torch.manual_seed(0)  # the same whole sequence on every rank (a data loader's job)
    q = torch.randn(1, 8, 1024, 64)  # [B, H, S, D]
    k = torch.randn(1, 2, 1024, 64)  # 2 KV heads: grouped-query attention
    v = torch.randn(1, 2, 1024, 64)

    # zigzag: with 2 ranks the sequence is cut into 4 chunks of 256 tokens;
    # rank 0 holds chunks 0 and 3, rank 1 holds chunks 1 and 2
    q_l, k_l, v_l = (shard_sequence(t).requires_grad_() for t in (q, k, v))
    out = context_parallel_attention(q_l, k_l, v_l, is_causal=True, enable_gqa=True)
    loss = out.square().sum()  # this rank's loss; dK and dV come home around the ring
    loss.backward()  # type: ignore[no-untyped-call]

    # the same on one process, whole sequence: torch's own SDPA
    q_r, k_r, v_r = leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(q_r, k_r, v_r, is_causal=True, enable_gqa=True)
    ref.square().sum().backward()  # type: ignore[no-untyped-call]  # every rank's loss
    whole = gather_sequence(out.detach())
    grads_match = all(
        mine.grad is not None
        and t.grad is not None
        and torch.allclose(mine.grad, shard_sequence(t.grad), atol=1e-4)
        for mine, t in zip((q_l, k_l, v_l), leaves, strict=True)
    )
    return (f"rank {rank}: local {list(out.shape)}, gathered {list(whole.shape)}, "
            f"output matches: {torch.allclose(whole, ref, atol=1e-5)}, "
            f"gradients match: {grads_match}")  # fmt: skip


# --8<-- [end:step]

# --8<-- [start:launch]
import os  # noqa: E402
import tempfile  # noqa: E402

import torch.distributed as dist  # noqa: E402


def worker(rank: int, world: int, rendezvous: str) -> None:
    torch.set_num_threads(1)  # the ranks share this machine's cores
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    report = attention_step(rank)
    for turn in range(world):  # one rank at a time, so that the lines come in rank order
        if turn == rank:
            print(report, flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        rendezvous = "file://" + os.path.join(folder, "rendezvous")
        torch.multiprocessing.spawn(worker, args=(2, rendezvous), nprocs=2)  # type: ignore[attr-defined,no-untyped-call]
# --8<-- [end:launch]
