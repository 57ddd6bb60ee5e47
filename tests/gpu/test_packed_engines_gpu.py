"""Packed (ragged) SDPA graphs on the device against NUMPY_REFERENCE_ENGINE on the CPU (issue 37;
run on the device machine): TORCH_SDPA_MATH_ENGINE (sequence by sequence) and the fused engines'
variable-length kernels, TORCH_SDPA_FLASH_ENGINE (fp16/bf16) and TORCH_SDPA_EFFICIENT_ENGINE
(float32/bf16).

Offsets on the GPU (the binder reads them on the host), GQA, Sq != Skv per sequence, an empty
query sequence and an empty key sequence, no mask and causal masks of both alignments; forward
O/Stats and backward dQ/dK/dV within a relative error of 1e-2 of the reference fed the same
rounded values, no NaN. Each fused case asserts that the kernel ran once per node where the
engine's causal alignment is the node's, and that the math step ran instead (no kernel call)
where it is not and the sequences are not square. ``varlen_attention`` on CUDA tensors picks a
fused engine. cuDNN's engines still refuse packed graphs by name."""

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
TYPES = {**IO, "fp32": hg.DataType.FLOAT}
TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


MASKS: dict[str, dict[str, bool]] = {
    "none": {},
    "top_left": {"use_causal_mask": True},
    "bottom_right": {"use_causal_mask_bottom_right": True},
}
#: lengths of the fused cases: Sq > Skv, Sq < Skv, an empty query side, an empty key side
FUSED_Q, FUSED_KV = [128, 7, 300, 0, 64, 40], [200, 7, 256, 33, 0, 40]


def _graph(
    io: hg.DataType, mask: str = "bottom_right", b: int = B
) -> tuple[hg.Graph, dict[str, Any]]:
    """Forward then backward over one packed batch; O, dQ, dK, dV packed, Stats dense."""
    g = hg.Graph(io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    offs = {n: g.tensor(name=n, dim=[b + 1, 1, 1, 1], data_type=hg.DataType.INT32)
            for n in ("off_q", "off_kv")}  # fmt: skip

    def packed(name: str, heads: int, side: str) -> hg.TensorAttributes:
        t = g.tensor(name=name, dim=[b, heads, S, D], stride=[S * heads * D, D, heads * D, 1])
        return t.set_ragged_offset(offs[side]).set_ragged_offset_multiplier(heads * D)

    q, do = packed("Q", H, "off_q"), packed("dO", H, "off_q")
    k, v = packed("K", HK, "off_kv"), packed("V", HK, "off_kv")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, **MASKS[mask])
    assert stats is not None
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", **MASKS[mask])
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


def _run(engine: str, dtype: str, mask: str, q_lens: list[int], kv_lens: list[int]
         ) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """The graph's results on ``engine`` (CUDA tensors) and the NumPy reference's."""
    rng = np.random.default_rng(0)
    tq, tkv, b = sum(q_lens), sum(kv_lens), len(q_lens)
    values = {
        "Q": rng.standard_normal((tq, H, D)), "dO": rng.standard_normal((tq, H, D)),
        "K": rng.standard_normal((tkv, HK, D)), "V": rng.standard_normal((tkv, HK, D)),
    }  # fmt: skip
    rounded = {n: torch.tensor(x).to(TORCH[dtype]) for n, x in values.items()}
    offsets = {
        "off_q": np.cumsum([0, *q_lens]).astype(np.int32).reshape(b + 1, 1, 1, 1),
        "off_kv": np.cumsum([0, *kv_lens]).astype(np.int32).reshape(b + 1, 1, 1, 1),
    }
    device, t = _graph(TYPES[dtype], mask, b)
    device.set_preferred_engine_id_ext(engine).build()
    assert device.get_plan_name() == engine, device.get_engine_refusals().get(engine)
    pack = {t[n]: x.cuda() for n, x in rounded.items()}
    pack.update({t[n]: torch.from_numpy(x).cuda() for n, x in offsets.items()})
    copies = {k: v.clone() for k, v in pack.items()}
    out = device.run(pack)
    for key, value in copies.items():
        assert torch.equal(pack[key], value)  # inputs are never written
    reference, r = _graph(hg.DataType.FLOAT, mask, b)
    reference.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ref_pack = {r[n]: x.float().numpy() for n, x in rounded.items()}
    ref_pack.update({r[n]: x for n, x in offsets.items()})
    want = reference.run(ref_pack)
    return {n: out[t[n]] for n in RESULTS}, {n: want[r[n]] for n in RESULTS}


RESULTS = ("O", "Stats", "dQ", "dK", "dV")


@pytest.mark.parametrize("dtype", sorted(IO))
def test_math_engine_on_the_device_matches_the_reference(dtype: str) -> None:
    got, want = _run("TORCH_SDPA_MATH_ENGINE", dtype, "bottom_right", Q_LENS, KV_LENS)
    for name in RESULTS:
        assert got[name].device.type == "cuda" and got[name].dtype == (
            torch.float32 if name == "Stats" else TORCH[dtype]
        )
        assert _rel(got[name], want[name]) < 1e-2, name


FUSED_CASES = [
    ("TORCH_SDPA_FLASH_ENGINE", "bf16"),
    ("TORCH_SDPA_FLASH_ENGINE", "fp16"),
    ("TORCH_SDPA_EFFICIENT_ENGINE", "fp32"),
    ("TORCH_SDPA_EFFICIENT_ENGINE", "bf16"),
]


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize(("engine", "dtype"), FUSED_CASES, ids=[f"{e[11:-7]}-{d}" for e, d in
                                                                 FUSED_CASES])  # fmt: skip
def test_fused_engine_runs_packed_graphs_through_its_varlen_kernel(
    monkeypatch: pytest.MonkeyPatch, engine: str, dtype: str, mask: str
) -> None:
    from hipdnn_graph.backend import SdpaProblem
    from hipdnn_graph_torch_rocm import _packed_fused

    op = "flash" if "FLASH" in engine else "efficient"
    calls: list[str] = []
    for direction in ("forward", "backward"):
        name = f"{op}_varlen_{direction}"
        real = getattr(_packed_fused, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(_packed_fused, name, counted)
    got, want = _run(engine, dtype, mask, FUSED_Q, FUSED_KV)
    for name in RESULTS:
        assert got[name].device.type == "cuda"
        assert _rel(got[name], want[name]) < 1e-2, name
    g, _ = _graph(TYPES[dtype], mask, len(FUSED_Q))
    g.validate()
    exact = [
        _packed_fused.packed_fused_choice(op, SdpaProblem.from_node(n)).exact_alignment
        for n in g.nodes
    ]
    assert calls == [f"{op}_varlen_{d}" for d, e in zip(("forward", "backward"), exact,
                                                        strict=True) if e]  # fmt: skip


def test_varlen_attention_picks_a_fused_engine_on_cuda_tensors() -> None:
    from hipdnn_graph.torch import cached_graphs, graph_cache, varlen_attention

    graph_cache().clear()
    gen = torch.Generator().manual_seed(0)
    lens = [100, 3, 250, 64]
    cu = torch.tensor(np.cumsum([0, *lens]), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(sum(lens), h, D, generator=gen).to("cuda", torch.bfloat16)
               .requires_grad_() for h in (H, HK, HK))  # fmt: skip
    out = varlen_attention(q, k, v, cu, cu, max(lens), max(lens), is_causal=True,
                           enable_gqa=True)  # fmt: skip
    out.float().square().sum().backward()
    engines = {(c.kind, c.engine) for c in cached_graphs()}
    assert engines == {("forward", "TORCH_SDPA_FLASH_ENGINE"),
                       ("backward", "TORCH_SDPA_FLASH_ENGINE")}, engines  # fmt: skip
    for b, (lo, hi) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)):
        alone = torch.nn.functional.scaled_dot_product_attention(
            *(x[lo:hi].transpose(0, 1).float() for x in (q, k, v)), is_causal=True,
            enable_gqa=True,
        ).transpose(0, 1)  # fmt: skip
        assert _rel(out[lo:hi].detach().float(), alone.detach().cpu().numpy()) < 1e-2, b
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_cudnn_engines_refuse_packed_graphs_by_name() -> None:
    from hipdnn_graph.backend.contract import checked_support
    from hipdnn_graph.backend.registry import current_registry

    g, _ = _graph(hg.DataType.BFLOAT16)
    g.validate()
    engines = {e.name: e for e in current_registry().engines()}
    for name in ("TORCH_SDPA_CUDNN_ENGINE", "CUDNN_FRONTEND_ENGINE"):
        if name not in engines:
            continue
        ok, reason = checked_support(engines[name], g)
        assert not ok
        assert reason.startswith(
            "does not support packed (ragged) tensors: Q has ragged offsets off_q"
        )
    for name in ("TORCH_SDPA_FLASH_ENGINE", "TORCH_SDPA_EFFICIENT_ENGINE"):
        assert checked_support(engines[name], g) == (True, ""), name
