"""The torch math kernel over packed (THD) batches against the NumPy reference's packed
definition (float64, CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph_numpy_reference.sdpa_packed import (  # noqa: E402
    Packing,
    packed_sdpa_backward,
    packed_sdpa_forward,
)
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.varlen import (  # noqa: E402
    cu_seqlens,
    lse_as_thd,
    varlen_math_backward,
    varlen_math_forward,
)

H, HK, D, DV, SCALE = 4, 2, 8, 6, 0.3
Q_LENS, KV_LENS = [5, 0, 2, 3, 6], [3, 4, 7, 0, 6]
MASKS: dict[str, dict[str, Any]] = {
    "none": {},
    "causal_top_left": {"right_bound": 0},
    "causal_bottom_right": {"right_bound": 0, "bottom_right": True},
    "band": {"left_bound": 2, "right_bound": 1, "bottom_right": True},
}


@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_math_kernel_matches_the_packed_reference(mask_name: str) -> None:
    mask = MASKS[mask_name]
    rng = np.random.default_rng(3)
    tq, tkv = sum(Q_LENS), sum(KV_LENS)
    q, k, v, do = (
        rng.standard_normal(s) for s in ((tq, H, D), (tkv, HK, D), (tkv, HK, DV), (tq, H, DV))
    )
    pq, pkv = Packing.from_lengths(Q_LENS), Packing.from_lengths(KV_LENS)
    o_ref, s_ref = packed_sdpa_forward(
        q, k, v, pq, pkv, scale=SCALE, compute_dtype=np.float64, **mask
    )
    grads_ref = packed_sdpa_backward(
        q, k, v, o_ref, do, s_ref, pq, pkv, scale=SCALE, compute_dtype=np.float64, **mask
    )
    call = SdpaCall(scale=SCALE, **mask)
    tq_, tk_, tv_, tdo = (torch.from_numpy(x) for x in (q, k, v, do))
    cu_q, cu_kv = cu_seqlens(Q_LENS), cu_seqlens(KV_LENS)
    o, stats = varlen_math_forward(tq_, tk_, tv_, cu_q, cu_kv, call, compute_dtype=torch.float64)
    np.testing.assert_allclose(o.numpy(), o_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.isinf(stats.numpy()), np.isinf(s_ref))
    finite = np.isfinite(s_ref)
    np.testing.assert_allclose(stats.numpy()[finite], s_ref[finite], rtol=1e-10)
    grads = varlen_math_backward(
        tq_, tk_, tv_, o, tdo, stats, cu_q, cu_kv, call, compute_dtype=torch.float64
    )
    for got, want in zip(grads, grads_ref, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-11)


def test_bounds_are_checked() -> None:
    x = torch.zeros(3, 1, 2)
    with pytest.raises(ValueError, match="Q packs 1 sequences and K/V 2"):
        varlen_math_forward(x, x, x, cu_seqlens([3]), cu_seqlens([1, 2]), SdpaCall(scale=1.0))
    with pytest.raises(ValueError, match="non-decreasing"):
        varlen_math_forward(
            x, x, x, torch.tensor([0, 3, 1]), cu_seqlens([1, 2]), SdpaCall(scale=1.0)
        )


def test_lse_layouts() -> None:
    cu = cu_seqlens([2, 1])
    unpadded = torch.arange(6.0).reshape(2, 3)  # [H, Tq]
    padded = torch.tensor([[[0.0, 1.0], [3.0, 4.0]], [[2.0, 9.0], [5.0, 9.0]]])  # [B, H, max_q]
    for lse in (unpadded, padded):
        assert lse_as_thd(lse, cu)[:, :, 0].tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
