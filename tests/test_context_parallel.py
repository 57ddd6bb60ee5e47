"""Context-parallel attention (``hipdnn_graph.torch.distributed``) on the CPU over gloo.

Two and four processes (``context_parallel_worker.py``, started as subprocesses with a file
rendezvous and bounded timeouts) run the same cases; outputs and gradients must equal torch's
own ``scaled_dot_product_attention`` on the whole sequence: float64 within 1e-10, float32 within
1e-5 (against the float64 reference). Bad input, on one rank or on all, must raise the same
``HipdnnError`` (code and message) on every rank and leave the group usable; a rank left waiting
fails the run (60 s process-group timeout, 120 s for the whole run) instead of hanging it. The
layout arithmetic is checked here against the causal mask itself.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from context_parallel_launch import check_16_bit, session_run  # noqa: E402

from hipdnn_graph import ErrorCode, HipdnnError  # noqa: E402
from hipdnn_graph.torch import scaled_dot_product_attention  # noqa: E402
from hipdnn_graph.torch.distributed import (  # noqa: E402
    context_parallel_attention,
    gather_sequence,
    shard_sequence,
)
from hipdnn_graph.torch.distributed._layout import block, local_positions  # noqa: E402


# ----- layouts (no processes) -----
@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_positions_partition_the_sequence(layout: str, world: int) -> None:
    local = 6
    positions = [local_positions(layout, world, r, local) for r in range(world)]
    assert sorted(p for ps in positions for p in ps) == list(range(world * local))
    for ps in positions:  # a rank's local order follows the sequence order
        assert ps == sorted(ps)


def test_zigzag_positions_are_chunks_r_and_2w_minus_1_minus_r() -> None:
    assert local_positions("zigzag", 4, 1, 4) == [2, 3, 12, 13]
    assert local_positions("zigzag", 4, 3, 4) == [6, 7, 8, 9]


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("causal", [True, False])
def test_blocks_reproduce_the_global_mask(layout: str, world: int, causal: bool) -> None:
    """For every (rank, source) pair the block's rectangle (full or top-left triangle) is
    exactly the whole-sequence mask restricted to their positions."""
    local = 8
    for rank in range(world):
        qpos = torch.tensor(local_positions(layout, world, rank, local))
        for src in range(world):
            kpos = torch.tensor(local_positions(layout, world, src, local))
            want = kpos[None, :] <= qpos[:, None]
            if not causal:
                want = torch.ones(local, local, dtype=torch.bool)
            got = torch.zeros(local, local, dtype=torch.bool)
            b = block(layout, world, rank, src, local, causal)
            if b is not None:
                rect = torch.ones(b.q_len, b.kv_len, dtype=torch.bool)
                if b.causal:
                    assert b.q_len == b.kv_len and b.q_start == b.kv_start == 0
                    rect = torch.tril(rect)
                got[b.q_start : b.q_start + b.q_len, b.kv_start : b.kv_start + b.kv_len] = rect
            assert torch.equal(got, want), (rank, src)


def test_zigzag_balances_causal_work() -> None:
    """Every rank of the zigzag layout computes the same number of visible pairs."""
    world, local = 4, 8
    work = []
    for rank in range(world):
        blocks = [block("zigzag", world, rank, s, local, True) for s in range(world)]
        work.append(sum(b.q_len * b.kv_len for b in blocks if b is not None))
    assert len(set(work)) == 1


# ----- one process (torch.distributed not initialized): a group of one -----
def test_without_torch_distributed_it_is_the_op() -> None:
    q, k, v = (torch.randn(1, 4, 7, 8, dtype=torch.float64) for _ in range(3))
    kv = k[:, :2], v[:, :2]
    out = context_parallel_attention(q, *kv, is_causal=True, enable_gqa=True, scale=0.5)
    plain = scaled_dot_product_attention(q, *kv, is_causal=True, enable_gqa=True, scale=0.5)
    assert torch.equal(out, plain)  # any length: 7 is not divisible by anything


def test_group_of_one_has_gradients() -> None:
    q = torch.randn(1, 2, 6, 8, dtype=torch.float64, requires_grad=True)
    context_parallel_attention(q, q, q, is_causal=True, layout="contiguous").sum().backward()
    ref = q.detach().clone().requires_grad_()
    torch.nn.functional.scaled_dot_product_attention(ref, ref, ref, is_causal=True).sum().backward()
    assert q.grad is not None and torch.allclose(q.grad, ref.grad, atol=1e-6)


def test_shard_and_gather_of_one_process_copy() -> None:
    x = torch.randn(2, 3, 5, 4)
    for fn in (shard_sequence, gather_sequence):
        y = fn(x)
        assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda x: context_parallel_attention(x, x, x, layout="ring"), "layout must be"),
        (lambda x: shard_sequence(x, layout="Zigzag"), "layout must be"),
        (lambda x: gather_sequence(x, layout=None), "layout must be"),
        (lambda x: shard_sequence(x, dim=4), "dim 4 is out of range"),
        (lambda x: gather_sequence(x.numpy()), "must be a torch.Tensor"),
        (lambda x: context_parallel_attention(x, x, x, group=object()), "not initialized"),
    ],
    ids=["cp-layout", "shard-layout", "gather-layout", "shard-dim", "gather-numpy", "no-init"],
)
def test_bad_input_in_one_process(call: Any, text: str) -> None:
    with pytest.raises(HipdnnError) as info:
        call(torch.randn(1, 2, 4, 8))
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert text in info.value.message


# ----- the agreement's message encoding (no processes) -----
@pytest.mark.parametrize(
    ("message", "size", "back"),
    [
        ("layout must be 'contiguous' or 'zigzag', got 'ring'", 512, None),
        ("näive 🙂 scale", 512, None),
        ("ab🙂", 5, "ab"),  # a character cut in half is dropped, not garbled
        ("x" * 600, 512, "x" * 512),
        ("", 8, ""),
    ],
)
def test_messages_cross_ranks_as_fixed_size_numbers(message: str, size: int, back: Any) -> None:
    from hipdnn_graph.torch.distributed._agree import decode, encode

    numbers = encode(message, size)
    assert len(numbers) == size and all(0 <= x < 256 for x in numbers)
    assert decode(numbers) == (message if back is None else back)


# ----- several processes over gloo -----
@pytest.fixture(params=[2, 4], ids=["W2", "W4"])
def ranks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return session_run(request.param, tmp_path_factory)


VALUE_CASES = [
    f"{dtype}-{layout}-{kind}"
    for layout in ("zigzag", "contiguous")
    for dtype, kind in (
        ("f64", "causal"),
        ("f64", "full"),
        ("f64", "causal-gqa"),
        ("f32", "causal-gqa"),
    )
] + ["f64-zigzag-full-gqa-dv8-scale", "f64-zigzag-causal-bshd-sum", "f32-contiguous-full"]
LOW_CASES = [f"bf16-{layout}-causal-gqa-bshd" for layout in ("zigzag", "contiguous")]


@pytest.mark.parametrize("case", VALUE_CASES)
def test_equals_torch_sdpa_on_the_whole_sequence(ranks: list[dict[str, Any]], case: str) -> None:
    tol = 1e-10 if case.startswith("f64") else 1e-5
    for r, res in enumerate(ranks):
        got = res[f"value/{case}"]
        assert set(got["errors"]) == {"out", "dq", "dk", "dv", "gathered_out"}
        for name, err in got["errors"].items():
            assert err <= tol, f"rank {r} {name}: {err:.3g} > {tol:g}"
        dtype = "torch.float64" if case.startswith("f64") else "torch.float32"
        assert got["out_dtype"] == dtype and got["grad_dtypes"] == [dtype] * 3
        assert got["inputs_unchanged"]
        assert got["strides_follow_inputs"]
        assert got["shape"][2] == 8  # 2 chunks of 4 tokens per rank


@pytest.mark.parametrize("case", LOW_CASES)
def test_16_bit_within_the_ops_own_error(ranks: list[dict[str, Any]], case: str) -> None:
    """bf16 against float64: within twice the op's own bf16 error on the whole sequence plus
    one bf16 step at 2 (the largest values here), in bf16 and the inputs' dimension order."""
    check_16_bit(ranks, case, "torch.bfloat16")


BAD = {
    # case: (the message on every rank, or (message on the refusing rank, on the others))
    "odd_zigzag_length": "positive multiple of 2 (each rank holds 2 equal chunks), got 3",
    "lengths_differ_across_ranks": "arguments differ across ranks",
    "causal_differs_across_ranks": "is_causal",
    "dtype_differs_across_ranks": "dtype float",
    "heads_without_gqa": "pass enable_gqa=True",
    "unknown_layout": "layout must be 'contiguous' or 'zigzag', got 'ring'",
    "shard_not_divisible": "is not divisible by",
    "shard_contiguous_not_divisible": "is not divisible by",
    "gather_shapes_differ": "gather_sequence: arguments differ across ranks",
    "layout_one_rank": "context_parallel_attention: rank 1 refused its arguments: "
    "layout must be 'contiguous' or 'zigzag', got 'ring'",
    "scale_overflows_one_rank": "rank 0 refused its arguments: scale must be a finite number, "
    "got 1000",
    "string_flag_one_rank": "rank 1 refused its arguments: is_causal must be a bool, got 'false'",
    "bogus_group_one_rank": "rank 1 refused its arguments: group must be a torch.distributed "
    "process group or None, got an object of type object",
    "meta_one_rank": "rank 0 refused its arguments: query has no data to exchange (a meta tensor)",
    "requires_grad_one_rank": "arguments differ across ranks (rank 0 vs rank 1: autograd True "
    "vs False)",
    "gather_layouts_differ": "gather_sequence: arguments differ across ranks (rank 0 vs rank 1: "
    "layout zigzag vs contiguous)",
    "gather_layout_one_rank": "gather_sequence: rank 1 refused its arguments",
    "gather_requires_grad_one_rank": "autograd False vs True",
    "gather_meta_one_rank": "rank 1 refused its arguments: x_local has no data to exchange",
    "gather_bogus_group_one_rank": "rank 0 refused its arguments: group must be a "
    "torch.distributed process group or None, got 'world'",
}
#: cases without communication (every rank raises its own, the same, error)
LOCAL = {"shard_not_divisible", "shard_contiguous_not_divisible"}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_on_every_rank(ranks: list[dict[str, Any]], case: str) -> None:
    for r, res in enumerate(ranks):
        got = res[f"bad/{case}"]
        assert got["raised"] == "HipdnnError", f"rank {r}: {got}"
        assert got["code"] == "INVALID_VALUE"
        assert BAD[case] in got["message"], f"rank {r}: {got['message']}"


def test_differing_shapes_name_the_ranks_and_lengths(ranks: list[dict[str, Any]]) -> None:
    message = ranks[0]["bad/lengths_differ_across_ranks"]["message"]
    assert "rank 0 vs rank 1: local query length 4 vs 8" in message


@pytest.mark.parametrize("case", sorted(set(BAD) - LOCAL))
def test_every_rank_raises_the_same_error(ranks: list[dict[str, Any]], case: str) -> None:
    """The same code and message on every rank, naming the rank (and the differing fields)."""
    first = ranks[0][f"bad/{case}"]
    assert "rank" in first["message"], first
    for r, res in enumerate(ranks[1:], 1):
        assert res[f"bad/{case}"] == first, f"rank {r}"


def test_one_rank_refusing_stops_every_rank(ranks: list[dict[str, Any]]) -> None:
    for res in ranks:
        message = res["bad/one_rank_passes_rank3"]["message"]
        assert message.startswith(
            "context_parallel_attention: rank 1 refused its arguments: query must be rank-4"
        ), message


def test_gather_sequence_values_and_gradient(ranks: list[dict[str, Any]]) -> None:
    for res in ranks:
        for layout in ("zigzag", "contiguous"):
            assert res["gather_grad"][layout] == {"equal": True, "grad_error": 0.0}


def test_group_of_one_inside_a_world_is_the_op(ranks: list[dict[str, Any]]) -> None:
    for res in ranks:
        assert res["group_of_one"] == {"equal_to_op": True, "shape": [1, 2, 10, 16]}


def test_subgroups_ring_over_global_ranks(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Of four processes, the even and the odd ranks run a ring each, at the same time."""
    for r, res in enumerate(session_run(4, tmp_path_factory)):
        for name, err in res["subgroups"]["errors"].items():
            assert err <= 1e-10, f"rank {r} {name}: {err:.3g}"


def _benchmark() -> Any:
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "context_parallel.py"
    spec = importlib.util.spec_from_file_location("context_parallel_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("comm", "compute", "covered"),
    [
        ([(0, 10)], [], 0),
        ([(0, 10)], [(2, 4), (3, 6), (8, 20)], 6),  # overlapping compute spans count once
        ([(0, 2), (1, 5), (9, 12)], [(4, 10)], 2),  # comm spans merge first: [0, 5] and [9, 12]
        ([(5, 6)], [(0, 5), (6, 9)], 0),  # touching is not overlapping
        ([(0, 3), (4, 7)], [(1, 6)], 4),  # one compute span under two comm spans
    ],
)
def test_profile_overlap_of_span_unions(comm: Any, compute: Any, covered: float) -> None:
    assert _benchmark().overlap_us(comm, compute) == covered
