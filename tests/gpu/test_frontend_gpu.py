"""GPU suite of hipdnn_graph.frontend (run on the device machine; skipped without CUDA/ROCm).

hipDNN-style code on device memory: DeviceBuffers, torch tensors, raw torch addresses, DLPack-only
producers and streams, executed by the torch engines and compared with torch's own SDPA
(forward) and autograd (backward) on the same device.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.frontend as hipdnn  # noqa: E402
from hipdnn_graph.frontend.hipdnn_frontend_python import _get_data_ptr  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

ENGINES = [
    "TORCH_SDPA_CUDNN_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_MATH_ENGINE",
]
DTYPES = {"fp16": (torch.float16, hg.DataType.HALF), "bf16": (torch.bfloat16, hg.DataType.BFLOAT16)}
B, H, SQ, SKV, D = 2, 4, 128, 128, 64
TOL = 2e-2


class DlpackOnly:
    """Hides data_ptr() so that only __dlpack__ is left."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.tensor.__dlpack_device__()


def _graph(data_type: hg.DataType) -> hipdnn.Graph:
    graph = hipdnn.Graph()
    graph.set_io_data_type(data_type)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    return graph


def _build(graph: hipdnn.Graph, engine: str | None = None) -> Any:
    if engine is not None:
        graph.set_preferred_engine_id_ext(engine)
    handle = hipdnn.create_handle()
    for step in (
        graph.validate,
        lambda: graph.build_operation_graph(handle),
        graph.create_execution_plans,
        graph.check_support,
        graph.build_plans,
    ):
        error = step()
        assert error.is_good(), error.get_message()
    if engine is not None and graph.get_plan_name() != engine:
        pytest.skip(f"{engine} does not apply here (ranked {graph.get_plan_name()})")
    return handle


def _forward(data_type: hg.DataType, causal: bool = False) -> tuple[Any, ...]:
    graph = _graph(data_type)
    q = hipdnn.Tensor.create([B, H, SQ, D], data_type).set_name("q")
    k = hipdnn.Tensor.create([B, H, SKV, D], data_type).set_name("k")
    v = hipdnn.Tensor.create([B, H, SKV, D], data_type).set_name("v")
    attributes = hipdnn.SdpaAttributes().set_causal_mask(causal)
    o, _ = graph.sdpa(q, k, v, attributes)
    o.set_output(True)
    return graph, q, k, v, o


def _inputs(dtype: Any, seed: int = 0) -> list[Any]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [
        torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
        for shape in ((B, H, SQ, D), (B, H, SKV, D), (B, H, SKV, D))
    ]


def _close(actual: Any, expected: Any) -> None:
    actual, expected = actual.double(), expected.double()
    assert not torch.isnan(actual).any()
    error = (actual - expected).abs().max().item() / max(expected.abs().max().item(), 1e-6)
    assert error <= TOL, error


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("engine", ENGINES)
def test_forward_with_torch_tensors_keyed_by_tensor_and_uid(engine: str, dtype_name: str) -> None:
    dtype, data_type = DTYPES[dtype_name]
    graph, q, k, v, o = _forward(data_type, causal=True)
    handle = _build(graph, engine)
    qt, kt, vt = _inputs(dtype)
    expected = torch.nn.functional.scaled_dot_product_attention(
        qt.float(), kt.float(), vt.float(), is_causal=True
    )
    out = torch.full((B, H, SQ, D), float("nan"), dtype=dtype, device="cuda")
    assert graph.execute(handle, {q: qt, k: kt, v: vt, o: out}).is_good()
    _close(out, expected)
    out.fill_(float("nan"))
    uid_pack = {t.get_uid(): x for t, x in ((q, qt), (k, kt), (v, vt), (o, out))}
    assert graph.execute(handle, uid_pack, 0).is_good()
    _close(out, expected)
    out.fill_(float("nan"))
    assert graph.execute_plan_at_index(handle, uid_pack, 0, 0).is_good()
    _close(out, expected)


def test_forward_with_device_buffers_raw_addresses_and_dlpack_only_producers() -> None:
    graph, q, k, v, o = _forward(hg.DataType.HALF)
    handle = _build(graph)
    qt, kt, vt = _inputs(torch.float16, seed=1)
    expected = torch.nn.functional.scaled_dot_product_attention(qt.float(), kt.float(), vt.float())
    qbuf = hipdnn.DeviceBuffer(qt.numel() * 2)
    qbuf.copy_from_host(qt.cpu().numpy().tobytes())
    out = torch.zeros(B, H, SQ, D, dtype=torch.float16, device="cuda")
    mixed = {q: qbuf, k: kt.data_ptr(), v.get_uid(): DlpackOnly(vt), o: out}
    assert graph.execute(handle, mixed, 0).is_good()
    _close(out, expected)
    obuf = hipdnn.DeviceBuffer(out.numel() * 2)
    pack = {q: qbuf.ptr(), k: kt, v: vt, o: obuf.ptr()}
    assert graph.execute(handle, pack, 0).is_good()
    result = torch.from_numpy(np.frombuffer(obuf.copy_to_host(), np.float16).copy())
    _close(result.view(B, H, SQ, D).cuda(), expected)


def test_device_values_of_another_shape_are_read_through_their_address() -> None:
    """hipDNN's execute uses only a value's address: flat device tensors (torch, and bare
    DLPack producers) are read and written with the declared layout; one too small is
    INVALID_VARIANT_PACK."""
    graph, q, k, v, o = _forward(hg.DataType.HALF)
    handle = _build(graph)
    qt, kt, vt = _inputs(torch.float16, seed=2)
    expected = torch.nn.functional.scaled_dot_product_attention(qt.float(), kt.float(), vt.float())
    out = torch.zeros(B * H * SQ * D, dtype=torch.float16, device="cuda")
    pack = {q: qt.reshape(-1), k: DlpackOnly(kt.reshape(-1)), v: vt.reshape(B * H, -1), o: out}
    assert graph.execute(handle, pack, 0).is_good()
    _close(out.view(B, H, SQ, D), expected)
    short = torch.zeros(B * H * SQ * D - D, dtype=torch.float16, device="cuda")
    error = graph.execute(handle, {**pack, q: short}, 0)
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
    assert "but the value holds" in error.get_message()


@pytest.mark.parametrize("engine", ENGINES)
def test_core_dlpack_only_device_producers_are_read_and_written_in_place(engine: str) -> None:
    """The core API on device memory: DLPack-only inputs and output (exported once with
    copy=False on torch's current stream, layout checked, then handed to torch)."""
    g = hg.Graph(
        io_data_type=torch.float16,
        intermediate_data_type=torch.float32,
        compute_data_type=torch.float32,
    )
    qt, kt, vt = _inputs(torch.float16, seed=3)
    q, k, v = (g.tensor_like(t, n) for t, n in ((qt, "Q"), (kt, "K"), (vt, "V")))
    assert not any(t.get_is_pass_by_value() for t in (q, k, v))
    o, _ = g.sdpa(q, k, v, generate_stats=False)
    o.set_output(True)
    g.set_preferred_engine_id_ext(engine).build()
    if g.get_plan_name() != engine:
        pytest.skip(f"{engine} does not apply here (ranked {g.get_plan_name()})")
    out = torch.full((B, H, SQ, D), float("nan"), dtype=torch.float16, device="cuda")
    pack = {q: DlpackOnly(qt), k: DlpackOnly(kt), v: DlpackOnly(vt), o: DlpackOnly(out)}
    g.execute(pack, None, handle=hipdnn.create_handle())
    torch.cuda.synchronize()
    expected = torch.nn.functional.scaled_dot_product_attention(qt.float(), kt.float(), vt.float())
    _close(out, expected)


def test_unknown_device_address_is_a_bad_error() -> None:
    graph, q, k, v, o = _forward(hg.DataType.HALF)
    handle = _build(graph)
    _, kt, vt = _inputs(torch.float16)
    out = torch.zeros(B, H, SQ, D, dtype=torch.float16, device="cuda")
    error = graph.execute(handle, {q: 0x10, k: kt, v: vt, o: out})
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
    assert "0x10" in error.get_message()
    small = torch.empty(4, dtype=torch.float16, device="cuda")  # Q needs far more than its block
    error = graph.execute(handle, {q: small.data_ptr(), k: kt, v: vt, o: out})
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
    assert "not inside memory" in error.get_message()


@pytest.mark.parametrize("engine", ENGINES)
def test_backward_matches_autograd(engine: str) -> None:
    dtype, data_type = DTYPES["bf16"]
    graph = _graph(data_type)
    shapes = {"q": (B, H, SQ, D), "k": (B, H, SKV, D), "v": (B, H, SKV, D)}
    shapes.update({"o": (B, H, SQ, D), "dO": (B, H, SQ, D)})
    tensors = {n: hipdnn.Tensor.create(list(s), data_type).set_name(n) for n, s in shapes.items()}
    stats = hipdnn.Tensor.create([B, H, SQ, 1], hipdnn.DataType.FLOAT).set_name("stats")
    dq, dk, dv = graph.sdpa_backward(
        *(tensors[n] for n in ("q", "k", "v", "o", "dO")),
        stats,
        hipdnn.SdpaBackwardAttributes().set_causal_mask(True),
    )
    for t in (dq, dk, dv):
        t.set_output(True)
    handle = _build(graph, engine)
    qt, kt, vt = (x.float().requires_grad_() for x in _inputs(dtype, seed=2))
    dot = torch.randn(B, H, SQ, D, device="cuda").to(dtype)
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    ot.backward(dot.float())
    scores = (qt @ kt.transpose(-1, -2) / math.sqrt(D)).masked_fill(
        torch.ones(SQ, SKV, dtype=torch.bool, device="cuda").triu(1), -math.inf
    )
    lse = torch.logsumexp(scores, -1, keepdim=True).detach().float().contiguous()
    grads = {t: torch.zeros(t.get_dim(), dtype=dtype, device="cuda") for t in (dq, dk, dv)}
    pack = {
        tensors["q"]: qt.detach().to(dtype),
        tensors["k"]: kt.detach().to(dtype),
        tensors["v"]: vt.detach().to(dtype),
        # torch's fused forward may return O in another memory layout: the graph declared it packed
        tensors["o"]: ot.detach().to(dtype).contiguous(),
        tensors["dO"]: dot,
        stats: lse,
        **grads,
    }
    assert graph.execute(handle, pack, 0).is_good()
    for tensor, ref in ((dq, qt), (dk, kt), (dv, vt)):
        _close(grads[tensor], ref.grad)


def test_execute_on_a_torch_stream_and_timed() -> None:
    graph, q, k, v, o = _forward(hg.DataType.HALF)
    stream = torch.cuda.Stream()
    handle = hipdnn.create_handle(stream.cuda_stream)
    assert handle.get_stream() == stream.cuda_stream
    for step in (
        graph.validate,
        lambda: graph.build_operation_graph(handle),
        graph.create_execution_plans,
        graph.check_support,
        graph.build_plans,
    ):
        assert step().is_good()
    qt, kt, vt = _inputs(torch.float16, seed=3)
    out = torch.zeros(B, H, SQ, D, dtype=torch.float16, device="cuda")
    torch.cuda.synchronize()  # the inputs were written on the default stream
    error, timing = graph.execute_timed_ext(handle, {q: qt, k: kt, v: vt, o: out}, 0)
    assert error.is_good(), error.get_message()
    assert timing.quality == hipdnn.TimingQuality.DEVICE_ONLY and not timing.timed_out
    assert timing.elapsed_ms is not None and timing.elapsed_ms >= 0.0
    hipdnn.hip_stream_synchronize(stream.cuda_stream)
    expected = torch.nn.functional.scaled_dot_product_attention(qt.float(), kt.float(), vt.float())
    _close(out, expected)
    handle.set_stream(torch.cuda.current_stream())
    assert handle.get_stream() == torch.cuda.current_stream().cuda_stream


def test_data_pointers_and_tensor_like_on_the_device() -> None:
    buffer = hipdnn.DeviceBuffer(64)
    assert _get_data_ptr(buffer) == buffer.ptr()
    x = torch.empty(16, dtype=torch.float32, device="cuda")
    assert _get_data_ptr(x) == x.data_ptr()
    assert _get_data_ptr(x[3:]) == x.data_ptr() + 12
    assert _get_data_ptr(DlpackOnly(x[3:])) == x.data_ptr() + 12
    t = hipdnn.Graph.tensor_like(x.view(4, 4).t())
    assert t.get_dim() == [4, 4] and t.get_stride() == [1, 4]
    assert t.get_is_pass_by_value() is False
    # host memory is pass-by-value whatever its size, as hipDNN's test_torch_tensor_like has it
    # (issue 41 item 13; the core's hg.Graph.tensor_like keeps one element only)
    assert hipdnn.Graph.tensor_like(x.cpu()).get_is_pass_by_value() is True
    assert hipdnn.Graph.tensor_like(x[:1].cpu()).get_is_pass_by_value() is True
    assert hipdnn.Graph.tensor_like(x[:1]).get_is_pass_by_value() is False  # device memory
    assert hipdnn.hip_get_device_count() == torch.cuda.device_count() >= 1
    hipdnn.hip_device_synchronize()


def test_device_buffer_round_trip_and_errors() -> None:
    buffer = hipdnn.DeviceBuffer(16)
    assert "device" in repr(buffer)
    data = np.arange(4, dtype=np.float32).tobytes()
    buffer.copy_from_host(data)
    assert buffer.copy_to_host() == data
    with pytest.raises(RuntimeError):
        buffer.copy_from_host(np.zeros(8, np.float32).tobytes())


def test_unchanged_hipdnn_script_runs_on_the_device(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[1] / "scripts" / "hipdnn_sdpa_script.py"
    code = (
        "import runpy, hipdnn_graph.frontend as f; print('active:', f.install()); "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "errors OK"
