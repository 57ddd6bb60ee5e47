"""Context-parallel attention over packed batches (``hipdnn_graph.torch.distributed``) on the CPU.

Two and four processes over gloo (``context_parallel_packed_worker.py``, subprocesses with a
file rendezvous and bounded timeouts) run the same cases: outputs and gradients of both packed
layouts must equal torch's ``scaled_dot_product_attention`` on each whole sequence (float64
within 1e-10, float32 within 1e-5, bf16 within twice the op's own error), bad input must raise
the same ``HipdnnError`` on every rank and leave the group usable. The layout arithmetic (which
tokens a rank holds, the balance, the per-sequence ring blocks against the packed causal mask)
and groups of one are checked here without processes.
"""

from __future__ import annotations

from itertools import accumulate, pairwise
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from context_parallel_launch import check_16_bit, session_run  # noqa: E402
from context_parallel_packed_worker import SEQUENCES, WORKER_PATH, ZIGZAG  # noqa: E402

from hipdnn_graph import ErrorCode, HipdnnError  # noqa: E402
from hipdnn_graph.torch.distributed import (  # noqa: E402
    balance_sequences,
    context_parallel_packed_attention,
    gather_packed,
    packed_shard,
    shard_packed,
)
from hipdnn_graph.torch.distributed._packed_layout import causal_work, shard_of  # noqa: E402
from hipdnn_graph.torch.distributed._packed_ring import _plan  # noqa: E402

F = torch.nn.functional


def _cu(lengths: list[int]) -> list[int]:
    return list(accumulate(lengths, initial=0))


# ----- layouts (no processes) -----
@pytest.mark.parametrize("layout", ["sequences", "zigzag"])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_shards_partition_the_batch(layout: str, world: int) -> None:
    cu = _cu([2 * world * n for n in (3, 0, 1, 5, 2)])
    shards = [shard_of(cu, world, r, layout) for r in range(world)]
    assert sorted(p for s in shards for p in s.positions) == list(range(cu[-1]))
    for s in shards:
        assert list(s.positions) == sorted(s.positions)  # the batch's order
        assert s.cu_seqlens[-1] == s.tokens and len(s.cu_seqlens) == len(s.sequences) + 1
        for i, n, (a, b) in zip(s.sequences, s.lengths, pairwise(s.cu_seqlens), strict=True):
            assert n == cu[i + 1] - cu[i]
            assert b - a == (n // world if layout == "zigzag" else n)
            assert all(cu[i] <= p < cu[i + 1] for p in s.positions[a:b])


def test_zigzag_holds_chunks_r_and_2w_minus_1_minus_r_of_every_sequence() -> None:
    s = shard_of([0, 8, 8, 24], world=2, rank=0, layout="zigzag")
    assert s.positions == (0, 1, 6, 7, 8, 9, 10, 11, 20, 21, 22, 23)
    assert s.cu_seqlens == (0, 4, 4, 12) and s.sequences == (0, 1, 2)


def test_a_group_of_one_holds_the_whole_batch_of_any_lengths() -> None:
    s = shard_of([0, 3, 10], world=1, rank=0, layout="zigzag")
    assert s.positions == tuple(range(10)) and s.cu_seqlens == (0, 3, 10)


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_balance_assigns_every_sequence_once_within_one_sequence_of_even(world: int) -> None:
    lengths = [4096, 128, 1024, 1024, 2048, 300, 77, 3000, 5, 640, 2500, 128]
    ranks = balance_sequences(lengths, world)
    assert sorted(i for r in ranks for i in r) == list(range(len(lengths)))
    loads = [sum(causal_work(lengths[i]) for i in r) for r in ranks]
    total = sum(causal_work(n) for n in lengths)
    assert max(loads) <= total / world + max(causal_work(n) for n in lengths)
    assert balance_sequences(lengths, world) == ranks  # deterministic: no communication


def test_balance_is_greedy_by_causal_work() -> None:
    # works 8.4M, 8k, 525k, 525k, 2.1M: the 4,096 alone outweighs the rest together
    assert balance_sequences([4096, 128, 1024, 1024, 2048], 2) == ((0,), (1, 2, 3, 4))
    assert balance_sequences([6, 6, 6, 6], 2) == ((0, 2), (1, 3))
    assert balance_sequences([3], 3) == ((0,), (), ())


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("causal", [True, False])
def test_ring_blocks_reproduce_the_packed_mask(world: int, causal: bool) -> None:
    """For every (rank, source) pair the per-sequence blocks of the ring step are exactly the
    packed batch's mask (same sequence; causal: key position ≤ query position) restricted to
    their tokens."""
    cu = _cu([2 * world * n for n in (2, 1, 0, 3)])
    lengths = torch.tensor([b - a for a, b in pairwise(cu)])
    seq = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # each token's sequence
    shards = [shard_of(cu, world, r, "zigzag") for r in range(world)]
    for rank in range(world):
        me = shards[rank]
        spans = tuple((a, b - a) for a, b in pairwise(me.cu_seqlens))
        ring = SimpleNamespace(rank=rank, world=world)
        for step, blocks in enumerate(_plan(ring, spans, causal)):  # type: ignore[arg-type]
            src = shards[(rank - step) % world]
            qpos, kpos = torch.tensor(me.positions), torch.tensor(src.positions)
            want = seq[qpos][:, None] == seq[kpos][None, :]
            if causal:
                want &= kpos[None, :] <= qpos[:, None]
            got = torch.zeros_like(want)
            for a, _, b in blocks:
                rect = torch.ones(b.q_len, b.kv_len, dtype=torch.bool)
                got[a + b.q_start : a + b.q_start + b.q_len,
                    a + b.kv_start : a + b.kv_start + b.kv_len] = (
                    torch.tril(rect) if b.causal else rect)  # fmt: skip
            assert torch.equal(got, want), (rank, step)


# ----- one process (torch.distributed not initialized): a group of one -----
def _per_sequence(cu: list[int], q: Any, k: Any, v: Any, **kw: Any) -> Any:
    return torch.cat([
        F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1) for t in (q, k, v)), **kw)
        .transpose(0, 1) for a, b in pairwise(cu) if b > a
    ])  # fmt: skip


@pytest.mark.parametrize("layout", ["sequences", "zigzag"])
def test_group_of_one_is_per_sequence_attention_with_gradients(layout: str) -> None:
    cu = [0, 7, 7, 10, 15]  # any lengths, an empty sequence
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(15, h, 8, generator=g, dtype=torch.float64) for h in (4, 2, 2))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = context_parallel_packed_attention(
        leaves[0],
        leaves[1],
        leaves[2],
        torch.tensor(cu),
        is_causal=True,
        enable_gqa=True,
        scale=0.5,
        layout=layout,
    )
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = _per_sequence(cu, *ref_leaves, is_causal=True, enable_gqa=True, scale=0.5)
    assert torch.allclose(out, ref, atol=1e-12)
    weights = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    (out * weights).sum().backward()
    (ref * weights).sum().backward()
    for mine, theirs in zip(leaves, ref_leaves, strict=True):
        assert mine.grad is not None and torch.allclose(mine.grad, theirs.grad, atol=1e-12)


def test_shard_and_gather_of_one_process_copy() -> None:
    x = torch.randn(3, 9, 2)
    y = shard_packed(x, [0, 4, 9], dim=1)
    assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()
    z = gather_packed(y, [0, 4, 9], dim=1)
    assert torch.equal(z, x) and z.data_ptr() != y.data_ptr()


X = torch.zeros(6, 2, 8)


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda: packed_shard([0, 4, 2]), "cu_seqlens must not decrease, but [1] = 4 > [2] = 2"),
        (lambda: packed_shard([1, 4]), "cu_seqlens must start at 0, got 1"),
        (lambda: packed_shard([0]), "cu_seqlens needs at least 2 entries (one sequence), got 1"),
        (lambda: packed_shard(torch.tensor([0.0, 4.0])), "1-D integer tensor, got torch.float32"),
        (lambda: packed_shard(torch.tensor([0, 1]) > 0), "1-D integer tensor, got torch.bool"),
        (lambda: packed_shard(torch.zeros(1, 2, dtype=torch.int32)), "of shape [1, 2]"),
        (lambda: packed_shard([0, 2.5]), "cu_seqlens must hold ints"),
        (lambda: packed_shard([0, True]), "cu_seqlens must hold ints"),
        (lambda: packed_shard("0,4"), "a sequence of ints, got str"),
        (
            lambda: packed_shard([0, 4], layout="contiguous"),
            "packed layout must be 'sequences' or 'zigzag', got 'contiguous'",
        ),
        (lambda: shard_packed(X, [0, 4]), "x holds 6 tokens along dim 0, but cu_seqlens ends at 4"),
        (lambda: shard_packed(X, [0, 6], dim=3), "dim 3 is out of range for a tensor of rank 3"),
        (
            lambda: gather_packed(X, [0, 5]),
            "x_local holds 6 tokens along dim 0, but rank 0's share",
        ),
        (
            lambda: context_parallel_packed_attention(X, X, X, [0, 5]),
            "query, key and value hold 6, 6, 6 tokens, but rank 0's share of the packed batch "
            "(zigzag layout over 1 ranks) is 5 tokens",
        ),
        (
            lambda: context_parallel_packed_attention(X[0], X, X, [0, 6]),
            "query must be rank-3 [T, H, D] (packed tokens), got [2, 8]",
        ),
        (
            lambda: context_parallel_packed_attention(X, X[:, :1], X[:, :1], [0, 6]),
            "key/value heads (1, 1) differ from query heads (2); pass enable_gqa=True",
        ),
        (
            lambda: context_parallel_packed_attention(X, X, X, [0, 6], is_causal=1),  # type: ignore[arg-type]
            "is_causal must be a bool, got 1",
        ),
        (
            lambda: context_parallel_packed_attention(X, X, X, [0, 6], group=object()),
            "not initialized",
        ),
        # hostile lengths are counted against the tensors before any position is listed
        (
            lambda: context_parallel_packed_attention(X, X, X, [0, 2**62]),
            "query, key and value hold 6, 6, 6 tokens, but rank 0's share of the packed batch "
            "(zigzag layout over 1 ranks) is 4611686018427387904 tokens",
        ),
        (
            lambda: context_parallel_packed_attention(X, X, X, [0, 6, 2**70], layout="sequences"),
            "query, key and value hold 6, 6, 6 tokens, but rank 0's share of the packed batch "
            "(sequences layout over 1 ranks) is 1180591620717411303424 tokens",
        ),
        (
            lambda: shard_packed(X, [0, 2**62]),
            "x holds 6 tokens along dim 0, but cu_seqlens ends at 4611686018427387904",
        ),
        (
            lambda: gather_packed(X, [0, 2**62], layout="sequences"),
            "x_local holds 6 tokens along dim 0, but rank 0's share of the packed batch "
            "(sequences layout) is 4611686018427387904 tokens",
        ),
    ],
)
def test_bad_input_in_one_process(call: Any, text: str) -> None:
    with pytest.raises(HipdnnError) as info:
        call()
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert text in info.value.message


# ----- several processes over gloo -----
@pytest.fixture(params=[2, 4], ids=["W2", "W4"])
def ranks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return session_run(request.param, tmp_path_factory, worker=WORKER_PATH)


VALUE_CASES = [
    f"{dtype}-{layout}-{kind}"
    for layout in ("zigzag", "sequences")
    for dtype, kind in (("f64", "causal"), ("f64", "full"), ("f32", "causal-gqa"))
] + ["f64-zigzag-causal-gqa-dv8-scale", "f64-sequences-causal-one-sequence"]


@pytest.mark.parametrize("case", VALUE_CASES)
def test_equals_torch_sdpa_on_every_whole_sequence(ranks: list[dict[str, Any]], case: str) -> None:
    tol = 1e-10 if case.startswith("f64") else 1e-5
    dtype = "torch.float64" if case.startswith("f64") else "torch.float32"
    for r, res in enumerate(ranks):
        got = res[f"value/{case}"]
        assert set(got["errors"]) == {"out", "dq", "dk", "dv", "gathered_out"}
        for name, err in got["errors"].items():
            assert err <= tol, f"rank {r} {name}: {err:.3g} > {tol:g}"
        assert got["out_dtype"] == dtype and got["grad_dtypes"] == [dtype] * 3
        assert got["inputs_unchanged"] and got["strides_follow_inputs"]


def test_zigzag_ranks_hold_an_equal_share_of_every_sequence(ranks: list[dict[str, Any]]) -> None:
    world = len(ranks)
    for res in ranks:
        got = res["value/f64-zigzag-causal"]
        assert got["shape"] == [ZIGZAG[-1] // world, 2, 16]
        assert got["sequences"] == list(range(len(ZIGZAG) - 1))


def test_sequence_ranks_hold_the_balanced_whole_sequences(ranks: list[dict[str, Any]]) -> None:
    world = len(ranks)
    lengths = [b - a for a, b in pairwise(SEQUENCES)]
    expected = balance_sequences(lengths, world)
    for r, res in enumerate(ranks):
        got = res["value/f64-sequences-causal"]
        assert tuple(got["sequences"]) == expected[r]
        assert got["shape"] == [sum(lengths[i] for i in expected[r]), 2, 16]
        alone = res["value/f64-sequences-causal-one-sequence"]  # one sequence of 6 tokens
        assert alone["shape"] == ([6, 2, 16] if r == 0 else [0, 2, 16])


def test_16_bit_within_the_ops_own_error(ranks: list[dict[str, Any]]) -> None:
    check_16_bit(ranks, "bf16-zigzag-causal-gqa", "torch.bfloat16")


BAD = {
    "zigzag_not_divisible": "refused its arguments (ranks 0, 1",
    "shard_zigzag_not_divisible": "the packed zigzag layout cuts every sequence into",
    "whole_batch_on_every_rank": "rank 0 refused its arguments",
    "batches_differ_across_ranks": "context_parallel_packed_attention: arguments differ across "
    "ranks (rank 0 vs rank 1: cu_seqlens hash",
    "decreasing_cu_one_rank": "context_parallel_packed_attention: rank 1 refused its arguments: "
    "cu_seqlens must not decrease, but [1] = ",
    "rank4_query": "query must be rank-3 [T, H, D] (packed tokens)",
    "heads_without_gqa": "pass enable_gqa=True",
    "unknown_layout": "packed layout must be 'sequences' or 'zigzag', got 'contiguous'",
    "requires_grad_one_rank": "arguments differ across ranks (rank 0 vs rank 1: autograd True "
    "vs False)",
    "gather_wrong_tokens_one_rank": "gather_packed: rank {last} refused its arguments: x_local "
    "holds {whole} tokens along dim 0, but rank {last}'s share of the packed batch (zigzag "
    "layout) is 24 tokens",
    "gather_batches_differ": "gather_packed: arguments differ across ranks (rank 0 vs rank 1: "
    "cu_seqlens hash",
}
#: cases without communication (every rank raises its own, the same, error)
LOCAL = {"shard_zigzag_not_divisible"}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_the_same_error_on_every_rank(
    ranks: list[dict[str, Any]], case: str
) -> None:
    world = len(ranks)
    text = BAD[case].format(last=world - 1, whole=24 * world)
    first = ranks[0][f"bad/{case}"]
    for r, res in enumerate(ranks):
        got = res[f"bad/{case}"]
        assert got["raised"] == "HipdnnError", f"rank {r}: {got}"
        assert got["code"] == "INVALID_VALUE"
        assert text in got["message"], f"rank {r}: {got['message']}"
        if case not in LOCAL:
            assert got == first, f"rank {r}"


def test_zigzag_refusal_names_the_sequence_and_the_chunks(ranks: list[dict[str, Any]]) -> None:
    world = len(ranks)
    message = ranks[0]["bad/zigzag_not_divisible"]["message"]
    assert message.endswith(
        f"the packed zigzag layout cuts every sequence into {2 * world} equal chunks over "
        f"{world} ranks: sequence 1 has 5 tokens, not divisible by {2 * world}"
    ), message


def test_gather_packed_values_and_gradient(ranks: list[dict[str, Any]]) -> None:
    for res in ranks:
        for layout in ("zigzag", "sequences"):
            assert res["gather_grad"][layout] == {"equal": True, "grad_error": 0.0}
