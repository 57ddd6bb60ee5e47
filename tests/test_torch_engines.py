"""The torch engines on a machine without a GPU (CI): the math engine runs every graph, the
fused engines refuse cleanly with a reason, and the ROCm decisions hold (cuDNN refused)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph_torch_rocm import ENGINES, TorchSdpaEngine, create_backend  # noqa: E402

FUSED = [name for name, op, _ in ENGINES if op is not None]


def bwd_graph(io: hg.DataType = hg.DataType.FLOAT, **kw: Any) -> tuple[hg.Graph, dict[str, Any]]:
    g = hg.Graph(name="g", io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[1, 4, 32, 16])
    k = g.tensor(name="K", dim=[1, 2, 32, 16])
    v = g.tensor(name="V", dim=[1, 2, 32, 16])
    o = g.tensor(name="O", dim=[1, 4, 32, 16])
    do = g.tensor(name="dO", dim=[1, 4, 32, 16])
    stats = g.tensor(name="Stats", dim=[1, 4, 32, 1], data_type=hg.DataType.FLOAT)
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", **kw)
    for t in (dq, dk, dv):
        t.set_output(True)
    return g, {"Q": q, "K": k, "V": v, "O": o, "dO": do, "Stats": stats, "dQ": dq, "dK": dk,
               "dV": dv}  # fmt: skip


def test_backend_lists_its_engines_in_measured_speed_order() -> None:
    engines = create_backend().engines()
    assert [e.name for e in engines] == [
        "CUDNN_FRONTEND_ENGINE",
        "TORCH_SDPA_CUDNN_ENGINE",
        "TORCH_SDPA_FLASH_ENGINE",
        "TORCH_SDPA_EFFICIENT_ENGINE",
        "TORCH_SDPA_FLEX_ENGINE",
        "TORCH_SDPA_MATH_ENGINE",
        "TORCH_FUSION_ENGINE",
        "TORCH_EAGER_ENGINE",
    ]
    priorities = [e.priority for e in engines]
    assert priorities == sorted(priorities)
    assert all(e.array_kind == "torch" for e in engines)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusals")
@pytest.mark.parametrize("name", FUSED)
def test_fused_engines_refuse_without_a_device(name: str) -> None:
    g, _ = bwd_graph(hg.DataType.BFLOAT16)
    g.validate()
    support = TorchSdpaEngine(name, name.split("_")[2].lower(), 1).check(g)
    assert not support.ok
    assert "needs a CUDA or ROCm device" in support.reason


def test_math_engine_is_chosen_on_cpu_and_matches_numpy() -> None:
    g, t = bwd_graph()
    g.build()
    if not torch.cuda.is_available():
        assert g.get_plan_name() == "TORCH_SDPA_MATH_ENGINE"
        assert set(g.get_engine_refusals()) >= set(FUSED)
    rng = np.random.default_rng(0)
    inputs = {t[n]: rng.standard_normal(t[n].dim).astype(np.float32) for n in
              ("Q", "K", "V", "O", "dO")}  # fmt: skip
    inputs[t["Stats"]] = rng.standard_normal(t["Stats"].dim).astype(np.float32) + 3
    g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    got = g.run({k: torch.from_numpy(v) for k, v in inputs.items()})
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ref = g.run(inputs)
    for name in ("dQ", "dK", "dV"):
        np.testing.assert_allclose(got[t[name]].numpy(), ref[t[name]], rtol=2e-5, atol=2e-5)


def test_math_engine_reads_a_rank_3_stats_as_b_h_sq_1() -> None:
    """Stats declared [B, H, Sq] (hipDNN's sample_sdpa_backward.json) gives the gradients of
    the same values declared [B, H, Sq, 1]."""
    grads = []
    for dims in ([1, 4, 32, 1], [1, 4, 32]):
        g, t = bwd_graph()
        t["Stats"].set_dim(dims).set_stride(hg.generate_strides(dims))
        g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
        assert g.get_plan_name() == "TORCH_SDPA_MATH_ENGINE"
        rng = np.random.default_rng(3)
        data = {t[n]: torch.from_numpy(rng.standard_normal(t[n].dim).astype(np.float32))
                for n in ("Q", "K", "V", "O", "dO")}  # fmt: skip
        data[t["Stats"]] = torch.from_numpy(rng.standard_normal(dims).astype(np.float32) + 3)
        out = g.run(data)
        grads.append([out[t[n]].numpy() for n in ("dQ", "dK", "dV")])
    for four, three in zip(*grads, strict=True):
        assert np.array_equal(four, three) and np.isfinite(four).all()


def test_run_returns_outputs_with_the_declared_type_and_layout() -> None:
    g, t = bwd_graph(hg.DataType.BFLOAT16)
    t["dQ"].set_stride([2048, 16, 64, 1])  # BSHD-like layout: [1, 4, 32, 16] with S before H
    g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    data = {t[n]: torch.randn(t[n].dim, dtype=torch.bfloat16) for n in ("Q", "K", "V", "O", "dO")}
    data[t["Stats"]] = torch.randn(t["Stats"].dim) + 3
    out = g.run(data)
    assert out[t["dQ"]].dtype == torch.bfloat16
    assert out[t["dQ"]].stride() == (2048, 16, 64, 1)
    assert out[t["dK"]].shape == (1, 2, 32, 16)


def test_cudnn_engine_refuses_rocm_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch has no cuDNN attention on ROCm: the engine says so even when a device exists."""
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    g, _ = bwd_graph(hg.DataType.BFLOAT16)
    g.validate()
    support = TorchSdpaEngine("TORCH_SDPA_CUDNN_ENGINE", "cudnn", 10).check(g)
    assert not support.ok
    assert support.reason == "cuDNN attention does not exist in ROCm builds of torch"


@pytest.mark.parametrize(("name", "op"), [("TORCH_SDPA_FLASH_ENGINE", "flash"),
                                           ("TORCH_SDPA_CUDNN_ENGINE", "cudnn")])  # fmt: skip
def test_half_precision_engines_refuse_float32_inputs_naming_the_type(
    monkeypatch: pytest.MonkeyPatch, name: str, op: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    g, _ = bwd_graph(hg.DataType.FLOAT)
    g.validate()
    support = TorchSdpaEngine(name, op, 20).check(g)
    assert not support.ok
    assert support.reason == f"node 'bwd': {op} runs float16/bfloat16 only, not float32"


def test_the_efficient_engine_takes_float32_inputs_as_torchs_kernel_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """float32 is one of the memory-efficient kernel's dtypes (as in torch's own selection):
    the dtype rule lets it through, to the op's device rules (stood in for here)."""
    from hipdnn_graph_torch_rocm._sdpa_support import SdpaSupport
    from hipdnn_graph_torch_rocm.kernels import fused

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    asked: list[Any] = []
    monkeypatch.setattr(SdpaSupport, "_fused_reason", lambda self, p, io, *_: asked.append(io))
    g, _ = bwd_graph(hg.DataType.FLOAT)
    g.validate()
    assert TorchSdpaEngine("TORCH_SDPA_EFFICIENT_ENGINE", "efficient", 30).check(g).ok
    assert asked == [hg.DataType.FLOAT]
    assert fused.dtype_reason(fused.FusedOp.EFFICIENT, torch.float64) == (
        "efficient runs float16/bfloat16/float32 only, not float64"
    )
    assert fused.dtype_reason(fused.FusedOp.EFFICIENT, torch.float32) is None


def test_cpu_plans_never_capture_cuda_graphs() -> None:
    g, t = bwd_graph()
    g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    pack = {t[n]: torch.randn(t[n].dim) for n in t}
    pack[t["Stats"]] = pack[t["Stats"]] + 3
    for _ in range(3):
        g.execute(pack)
    plan = g._state.active.plan  # type: ignore[union-attr]
    assert plan.replay.captures == 0 and not plan.replay.graphs


def test_device_only_plans_are_the_fused_ones_and_stage_host_tensors_only_with_a_device() -> None:
    """A plan of torch's fused ops is device-only (host tensors are staged through the device,
    tests/gpu); without a device it runs as it is, and the kernel names the problem."""
    import torch

    from hipdnn_graph_torch_rocm._engines import TorchSdpaEngine
    from hipdnn_graph_torch_rocm._sdpa_plan import Step, TorchSdpaPlan, _on_host

    ops = {"cudnn": True, "flash": True, "efficient": True, None: False}
    for op, device_only in ops.items():
        assert TorchSdpaEngine("E", op, 0)._device_only() is device_only
    seen: list[Any] = []
    step = Step(run=lambda q: seen.append(q.device) or (q * 2,), inputs=(1,),
                outputs=((0, 2, False, torch.float32, (2, 1)),))  # fmt: skip
    plan = TorchSdpaPlan("E", [step], frozenset({2}), device_only=True)
    assert _on_host({1: torch.ones(2, 2)}, plan.steps)
    assert not _on_host({1: 3.0}, plan.steps) and not _on_host({}, [])
    out = torch.zeros(2, 2)
    plan.execute({1: torch.ones(2, 2), 2: out}, None)
    if not torch.cuda.is_available():
        assert seen == [torch.device("cpu")]
    assert torch.equal(out, torch.full((2, 2), 2.0))
