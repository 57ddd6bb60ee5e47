"""Philox dropout on a GPU (run on the device machine; skipped without CUDA/ROCm).

The torch math engine's stream on the device equals hipdnn_graph.philox bit for bit; on CUDA
builds it also equals what the memory-efficient kernel draws (``_fill_mem_eff_dropout_mask_``),
live; Seed and Offset tensors on the device are read there, with no host synchronization, and a
captured CUDA graph picks up new seed values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.philox import dropout_keep_mask, dropout_keep_words, dropout_uniforms  # noqa: E402
from hipdnn_graph_torch_rocm.kernels._math_philox import philox_keep  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

MATH = "TORCH_SDPA_MATH_ENGINE"
CASES = [
    (42, 0, 0.5, (1, 1, 5, 7)),
    (2**63 - 5, 2**40 + 3, 0.7, (1, 2, 130, 300)),
    (8589934603, 17, 0.2, (2, 3, 33, 129)),
    (7, 1, 0.1, (2, 4, 256, 512)),
]


def _int64(x: int) -> int:
    x %= 2**64
    return x - 2**64 if x >= 2**63 else x


@pytest.mark.parametrize(("seed", "offset", "p", "shape"), CASES)
def test_device_stream_equals_numpy(seed: int, offset: int, p: float, shape: Any) -> None:
    dev = torch.device("cuda")
    want = dropout_keep_mask(seed, offset, p, shape)
    words = dropout_keep_words(p)
    full = ((0, shape[2]), (0, shape[3]))
    got = philox_keep(seed, offset, words, shape, *full, dev)
    np.testing.assert_array_equal(got.cpu().numpy(), want)
    on_device = [torch.tensor(_int64(v), device=dev) for v in (seed, offset)]
    got = philox_keep(*on_device, words, shape, *full, dev)
    np.testing.assert_array_equal(got.cpu().numpy(), want)


@pytest.mark.skipif(bool(torch.version.hip), reason="ROCm's memory-efficient kernels are AOTriton")
@pytest.mark.parametrize(("seed", "offset", "p", "shape"), CASES)
def test_stream_equals_the_memory_efficient_kernel_live(seed, offset, p, shape) -> None:
    fill = torch.empty(shape, dtype=torch.float32, device="cuda")
    torch.ops.aten._fill_mem_eff_dropout_mask_(fill, p, seed, offset)
    want = dropout_uniforms(seed, offset, shape)
    np.testing.assert_array_equal(fill.cpu().numpy().view(np.uint32), want.view(np.uint32))


def _graph(b: int, h: int, s: int, d: int) -> tuple[hg.Graph, dict[str, Any]]:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[b, h, s, d])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    seed = g.tensor(name="Seed", dim=[1], data_type=hg.DataType.INT64)
    offset = g.tensor(name="Offset", dim=[1], data_type=hg.DataType.INT64)
    o, _ = g.sdpa(q, k, v, attn_scale=0.125, dropout=(0.25, seed, offset), generate_stats=False)
    o.set_output(True)
    return g, {"Q": q, "K": k, "V": v, "Seed": seed, "Offset": offset, "O": o}


def _numpy_forward(x: dict[str, Any], seed: int, offset: int) -> np.ndarray:
    q, k, v = (x[n].double().cpu().numpy() for n in ("Q", "K", "V"))
    s = q @ k.transpose(0, 1, 3, 2) * 0.125
    probs = np.exp(s - s.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    mask = dropout_keep_mask(seed, offset, 0.25, s.shape)
    return (probs * mask / 0.75) @ v


def test_device_seed_is_read_without_a_host_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIPDNN_GRAPH_CUDA_GRAPHS", "0")  # eager: every kernel runs each call
    g, t = _graph(2, 4, 128, 64)
    g.set_preferred_engine_id_ext(MATH).build()
    assert g.get_plan_name() == MATH
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = {n: torch.randn(t[n].get_dim(), device="cuda", generator=gen) for n in ("Q", "K", "V")}
    o = torch.empty(t["O"].get_dim(), device="cuda")
    seed = torch.tensor([2**40 + 1], device="cuda")
    offset = torch.tensor([3], device="cuda")
    pack = {**{t[n]: a for n, a in x.items()}, t["Seed"]: seed, t["Offset"]: offset, t["O"]: o}
    g.execute(pack)  # warm-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        g.execute(pack)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    np.testing.assert_allclose(o.double().cpu().numpy(), _numpy_forward(x, 2**40 + 1, 3),
                               rtol=1e-4, atol=1e-5)  # fmt: skip


def test_replayed_plan_reads_new_seed_values_on_the_device() -> None:
    g, t = _graph(1, 2, 64, 32)
    g.set_preferred_engine_id_ext(MATH).build()
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = {n: torch.randn(t[n].get_dim(), device="cuda", generator=gen) for n in ("Q", "K", "V")}
    o = torch.empty(t["O"].get_dim(), device="cuda")
    seed, offset = torch.tensor([5], device="cuda"), torch.tensor([0], device="cuda")
    pack = {**{t[n]: a for n, a in x.items()}, t["Seed"]: seed, t["Offset"]: offset, t["O"]: o}
    for value in (5, 6, 7, 8):  # the second call captures, the later ones replay
        seed.fill_(value)
        offset.fill_(value * 1000 + 1)
        g.execute(pack)
        want = _numpy_forward(x, value, value * 1000 + 1)
        np.testing.assert_allclose(o.double().cpu().numpy(), want, rtol=1e-4, atol=1e-5)
