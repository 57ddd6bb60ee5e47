"""Packed (ragged) SDPA graphs on the device through TORCH_SDPA_MATH_ENGINE (the engine that runs
them there) against NUMPY_REFERENCE_ENGINE on the CPU (issue 37; run on the device machine).

bf16 and fp16 tokens on the GPU, offsets on the GPU (the binder reads them on the host), GQA,
Sq != Skv per sequence, causal bottom-right; forward O/Stats and backward dQ/dK/dV within a
relative error of 1e-2 of the reference fed the same rounded values, no NaN. The fused engines
refuse packed graphs by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

H, HK, D, S = 8, 2, 64, 384
Q_LENS, KV_LENS = [128, 7, 300, 64], [200, 7, 256, 1]
B = len(Q_LENS)
IO = {"bf16": hg.DataType.BFLOAT16, "fp16": hg.DataType.HALF}
TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _graph(io: hg.DataType) -> tuple[hg.Graph, dict[str, Any]]:
    """Forward then backward over one packed batch; O, dQ, dK, dV packed, Stats dense."""
    g = hg.Graph(io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    offs = {n: g.tensor(name=n, dim=[B + 1, 1, 1, 1], data_type=hg.DataType.INT32)
            for n in ("off_q", "off_kv")}  # fmt: skip

    def packed(name: str, heads: int, side: str) -> hg.TensorAttributes:
        t = g.tensor(name=name, dim=[B, heads, S, D], stride=[S * heads * D, D, heads * D, 1])
        return t.set_ragged_offset(offs[side]).set_ragged_offset_multiplier(heads * D)

    q, do = packed("Q", H, "off_q"), packed("dO", H, "off_q")
    k, v = packed("K", HK, "off_kv"), packed("V", HK, "off_kv")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, use_causal_mask_bottom_right=True)
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask_bottom_right=True)
    stats.set_output(True)
    for x, heads, side in zip((o, *grads), (H, H, HK, HK), ("off_q", "off_q", "off_kv", "off_kv"),
                              strict=True):  # fmt: skip
        x.set_output(True).set_stride([S * heads * D, D, heads * D, 1])
        x.set_ragged_offset(offs[side]).set_ragged_offset_multiplier(heads * D)
    names = dict(zip(("O", "dQ", "dK", "dV"), (o, *grads), strict=True))
    return g, {"Q": q, "K": k, "V": v, "dO": do, "Stats": stats, **offs, **names}


def _rel(out: Any, ref: Any) -> float:
    out = torch.as_tensor(np.asarray(out, np.float64) if isinstance(out, np.ndarray) else out)
    out, ref = out.double().cpu(), torch.as_tensor(np.asarray(ref, np.float64))
    assert not torch.isnan(out).any(), "NaN"
    finite = torch.isfinite(ref)
    assert torch.equal(finite, torch.isfinite(out))
    return float((out[finite] - ref[finite]).norm() / ref[finite].norm().clamp_min(1e-30))


@pytest.mark.parametrize("dtype", sorted(IO))
def test_math_engine_on_the_device_matches_the_reference(dtype: str) -> None:
    rng = np.random.default_rng(0)
    tq, tkv = sum(Q_LENS), sum(KV_LENS)
    values = {
        "Q": rng.standard_normal((tq, H, D)), "dO": rng.standard_normal((tq, H, D)),
        "K": rng.standard_normal((tkv, HK, D)), "V": rng.standard_normal((tkv, HK, D)),
    }  # fmt: skip
    rounded = {n: torch.tensor(x).to(TORCH[dtype]) for n, x in values.items()}
    offsets = {
        "off_q": np.cumsum([0, *Q_LENS]).astype(np.int32).reshape(B + 1, 1, 1, 1),
        "off_kv": np.cumsum([0, *KV_LENS]).astype(np.int32).reshape(B + 1, 1, 1, 1),
    }
    device, t = _graph(IO[dtype])
    device.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    pack = {t[n]: x.cuda() for n, x in rounded.items()}
    pack.update({t[n]: torch.from_numpy(x).cuda() for n, x in offsets.items()})
    out = device.run(pack)
    reference, r = _graph(hg.DataType.FLOAT)
    reference.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ref_pack = {r[n]: x.float().numpy() for n, x in rounded.items()}
    ref_pack.update({r[n]: x for n, x in offsets.items()})
    want = reference.run(ref_pack)
    for name in ("O", "Stats", "dQ", "dK", "dV"):
        got = out[t[name]]
        assert got.device.type == "cuda" and got.dtype == (
            torch.float32 if name == "Stats" else TORCH[dtype]
        )
        assert _rel(got, want[r[name]]) < 1e-2, name


def test_fused_engines_refuse_packed_graphs_by_name() -> None:
    from hipdnn_graph.backend.contract import checked_support
    from hipdnn_graph.backend.registry import current_registry

    g, _ = _graph(hg.DataType.BFLOAT16)
    g.validate()
    engines = {e.name: e for e in current_registry().engines()}
    for name in ("TORCH_SDPA_FLASH_ENGINE", "TORCH_SDPA_EFFICIENT_ENGINE", "CUDNN_FRONTEND_ENGINE"):
        ok, reason = checked_support(engines[name], g)
        assert not ok
        assert reason.startswith(
            "does not support packed (ragged) tensors: Q has ragged offsets off_q"
        )
