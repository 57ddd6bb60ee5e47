"""torch's fused variable-length FlashAttention over packed (THD) batches against the math
kernel run sequence by sequence in float64 on the CPU (issue 37; run on the device machine).

bf16 and fp16, GQA, Sq != Skv per sequence, no mask and causal bottom-right (FlashAttention's
alignment): O, Stats and dQ/dK/dV within a relative error of 1e-2, no NaN. A build without the
flash kernel skips, naming the error."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.varlen import (  # noqa: E402
    cu_seqlens,
    flash_varlen_backward,
    flash_varlen_forward,
    lse_as_thd,
    varlen_math_backward,
    varlen_math_forward,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

H, HK, D, SCALE = 8, 2, 64, 0.125
Q_LENS, KV_LENS = [128, 7, 300, 64], [200, 7, 256, 1]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _rel(out: Any, ref: Any) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    assert not torch.isnan(out).any(), "NaN"
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


@pytest.mark.parametrize("causal", [False, True], ids=["none", "causal_bottom_right"])
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_flash_varlen_matches_math_per_sequence(dtype_name: str, causal: bool) -> None:
    dtype = DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    tq, tkv = sum(Q_LENS), sum(KV_LENS)
    q, k, v, do = (
        torch.randn(s, generator=gen).to(dtype)
        for s in ((tq, H, D), (tkv, HK, D), (tkv, HK, D), (tq, H, D))
    )
    cu_q, cu_kv = cu_seqlens(Q_LENS, "cuda"), cu_seqlens(KV_LENS, "cuda")
    dev = [x.cuda() for x in (q, k, v, do)]
    try:
        o, lse, rng = flash_varlen_forward(
            *dev[:3], cu_q, cu_kv, max(Q_LENS), max(KV_LENS), scale=SCALE, causal=causal
        )
    except RuntimeError as exc:  # a build without the flash kernel
        pytest.skip(f"flash varlen unavailable: {exc}")
    dq, dk, dv = flash_varlen_backward(
        dev[3], *dev[:3], o, lse, rng, cu_q, cu_kv, max(Q_LENS), max(KV_LENS),
        scale=SCALE, causal=causal,
    )  # fmt: skip
    call = SdpaCall(scale=SCALE, **({"right_bound": 0, "bottom_right": True} if causal else {}))
    ref = [x.double() for x in (q, k, v, do)]
    o_ref, s_ref = varlen_math_forward(
        *ref[:3], cu_q.cpu(), cu_kv.cpu(), call, compute_dtype=torch.float64
    )
    grads_ref = varlen_math_backward(
        *ref[:3], o_ref, ref[3], s_ref, cu_q.cpu(), cu_kv.cpu(), call,
        compute_dtype=torch.float64,
    )  # fmt: skip
    assert _rel(o, o_ref) <= 1e-2
    stats = lse_as_thd(lse, cu_q).cpu()
    finite = torch.isfinite(s_ref)
    assert _rel(stats[finite], s_ref[finite]) <= 1e-2
    for got, want in zip((dq, dk, dv), grads_ref, strict=True):
        assert _rel(got, want) <= 1e-2
