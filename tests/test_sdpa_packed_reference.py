"""The NumPy reference over packed (ragged, THD) batches against torch's
``F.scaled_dot_product_attention`` run on each sequence alone, in float64 on the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from hipdnn_graph_numpy_reference.sdpa_packed import (  # noqa: E402
    Packing,
    packed_sdpa_backward,
    packed_sdpa_forward,
    thd_view,
)

H, HK, D, DV = 4, 2, 8, 6
SCALE = 0.3
#: per sequence (Sq, Skv): Sq > Skv, an empty query side, Sq < Skv, no key, equal lengths
LENGTHS = [(5, 3), (0, 4), (2, 7), (3, 0), (6, 6)]

MASKS: dict[str, dict[str, Any]] = {
    "none": {},
    "causal_top_left": {"right_bound": 0},
    "causal_bottom_right": {"right_bound": 0, "bottom_right": True},
    "band_bottom_right": {"left_bound": 2, "right_bound": 1, "bottom_right": True},
}


def _visible(sq: int, skv: int, mask: dict[str, Any]) -> Any:
    i = torch.arange(sq)[:, None]
    j = torch.arange(skv)[None, :]
    diagonal = i + (skv - sq if mask.get("bottom_right") else 0)
    seen = torch.ones(sq, skv, dtype=torch.bool)
    if mask.get("right_bound") is not None:
        seen &= j <= diagonal + mask["right_bound"]
    if mask.get("left_bound") is not None:
        seen &= j >= diagonal - mask["left_bound"]
    return seen


def _torch_sequence(q: Any, k: Any, v: Any, mask: dict[str, Any]) -> tuple[Any, Any]:
    """O ``[Sq, H, Dv]`` and LSE ``[Sq, H]`` of one sequence (THD slices), through
    F.scaled_dot_product_attention; rows with no visible key: O = 0, LSE = +inf."""
    sq, skv = q.shape[0], k.shape[0]
    qh, kh, vh = (x.transpose(0, 1) for x in (q, k, v))  # [heads, S, D]
    seen = _visible(sq, skv, mask)
    o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=seen, scale=SCALE, enable_gqa=True)
    rows = seen.any(-1)
    o = torch.where(rows[None, :, None], o, torch.zeros_like(o))
    scores = SCALE * qh @ kh.repeat_interleave(H // HK, 0).transpose(-1, -2)
    lse = torch.logsumexp(scores.masked_fill(~seen, float("-inf")), -1)
    lse = torch.where(rows[None], lse, torch.full_like(lse, float("inf")))
    return o.transpose(0, 1), lse.transpose(0, 1)


def _packed_inputs(seed: int = 0) -> tuple[Packing, Packing, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    pq = Packing.from_lengths([a for a, _ in LENGTHS])
    pkv = Packing.from_lengths([b for _, b in LENGTHS])
    tq, tkv = int(pq.bounds[-1]), int(pkv.bounds[-1])
    arrays = [
        rng.standard_normal((tq, H, D)),
        rng.standard_normal((tkv, HK, D)),
        rng.standard_normal((tkv, HK, DV)),
        rng.standard_normal((tq, H, DV)),
    ]
    return pq, pkv, arrays


@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_forward_and_backward_match_torch_per_sequence(mask_name: str) -> None:
    mask = MASKS[mask_name]
    pq, pkv, (q, k, v, do) = _packed_inputs()
    o, stats = packed_sdpa_forward(q, k, v, pq, pkv, scale=SCALE, compute_dtype=np.float64, **mask)
    dq, dk, dv = packed_sdpa_backward(
        q, k, v, o, do, stats, pq, pkv, scale=SCALE, compute_dtype=np.float64, **mask
    )
    assert o.shape == (pq.bounds[-1], H, DV) and stats.shape == (pq.bounds[-1], H, 1)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    seen_rows = 0
    for b in range(pq.batch):
        q_lo, q_hi = pq.bounds[b : b + 2]
        kv_lo, kv_hi = pkv.bounds[b : b + 2]
        tq, tk, tv, tdo = (
            torch.tensor(x[lo:hi], requires_grad=True)
            for x, lo, hi in ((q, q_lo, q_hi), (k, kv_lo, kv_hi), (v, kv_lo, kv_hi),
                              (do, q_lo, q_hi))
        )  # fmt: skip
        if q_hi == q_lo:
            continue
        if kv_hi == kv_lo:  # no key: O = 0, Stats = +inf, zero gradients
            assert not o[q_lo:q_hi].any() and np.all(np.isinf(stats[q_lo:q_hi]))
            assert not dq[q_lo:q_hi].any()
            continue
        want_o, want_lse = _torch_sequence(tq, tk, tv, mask)
        np.testing.assert_allclose(o[q_lo:q_hi], want_o.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(
            np.isinf(stats[q_lo:q_hi, :, 0]), np.isinf(want_lse.detach().numpy())
        )
        finite = np.isfinite(stats[q_lo:q_hi, :, 0])
        seen_rows += int(finite.sum())
        np.testing.assert_allclose(
            stats[q_lo:q_hi, :, 0][finite], want_lse.detach().numpy()[finite], rtol=1e-10
        )
        (want_o * tdo).sum().backward()
        for got, t in ((dq[q_lo:q_hi], tq), (dk[kv_lo:kv_hi], tk), (dv[kv_lo:kv_hi], tv)):
            np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-9, atol=1e-11)
    assert seen_rows > 0


def test_sequences_do_not_see_each_other() -> None:
    pq, pkv, (q, k, v, _) = _packed_inputs(1)
    o, _ = packed_sdpa_forward(q, k, v, pq, pkv, scale=SCALE, compute_dtype=np.float64)
    k2 = k.copy()
    k2[pkv.bounds[2] : pkv.bounds[3]] += 1.0  # only sequence 2's keys change
    o2, _ = packed_sdpa_forward(q, k2, v, pq, pkv, scale=SCALE, compute_dtype=np.float64)
    changed = np.flatnonzero(np.any(o != o2, axis=(1, 2)))
    assert changed.tolist() == list(range(pq.bounds[2], pq.bounds[3]))


def test_tokens_past_the_last_sequence_stay_empty() -> None:
    pq, pkv = Packing.from_lengths([2]), Packing.from_lengths([3])
    rng = np.random.default_rng(2)
    q, k, v = (
        rng.standard_normal((4, H, D)),
        rng.standard_normal((3, HK, D)),
        rng.standard_normal((3, HK, DV)),
    )
    o, stats = packed_sdpa_forward(q, k, v, pq, pkv, scale=SCALE)
    assert not o[2:].any() and np.all(np.isinf(stats[2:])) and o[:2].any()


def test_hipdnn_offsets_become_token_bounds() -> None:
    # hipDNN's sample: element offsets of H*D = 512 per token; K/V with token-unit offsets and
    # a multiplier of H*D give the same bounds
    elements = Packing.from_offsets([0, 1024, 3584, 5120], multiplier=1, token_stride=512)
    tokens = Packing.from_offsets([0, 2, 7, 10], multiplier=512, token_stride=512)
    assert elements.bounds.tolist() == tokens.bounds.tolist() == [0, 2, 7, 10]
    with pytest.raises(ValueError, match=r"ragged offset \[1\] = 1000 elements is not a whole"):
        Packing.from_offsets([0, 1000], multiplier=1, token_stride=512)
    with pytest.raises(ValueError, match="non-decreasing"):
        Packing.from_offsets([0, 1024, 512], multiplier=1, token_stride=512)
    with pytest.raises(ValueError, match="Q packs 1 sequences and K/V 2"):
        packed_sdpa_forward(
            np.zeros((1, 1, 1)), np.zeros((2, 1, 1)), np.zeros((2, 1, 1)),
            Packing.from_lengths([1]), Packing.from_lengths([1, 1]), scale=1.0,
        )  # fmt: skip


def test_thd_view_reads_hipdnn_token_major_buffers() -> None:
    b, h, s_max, d = 2, 3, 4, 2
    strides = [s_max * h * d, d, h * d, 1]  # BSHD strides of [B, H, S, D] dims
    tokens = np.arange(5 * h * d, dtype=np.float32).reshape(5, h, d)
    view = thd_view(tokens.reshape(-1), [b, h, s_max, d], strides, tokens=5)
    np.testing.assert_array_equal(view, tokens)
    with pytest.raises(ValueError, match="holds fewer than 6 tokens"):
        thd_view(tokens.reshape(-1), [b, h, s_max, d], strides, tokens=6)
