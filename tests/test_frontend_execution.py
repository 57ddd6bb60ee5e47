"""hipdnn_graph.frontend: the lifecycle's Error values and execute() with every kind of variant-pack
value, checked against torch's own SDPA (forward) and autograd (backward) on the CPU."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from frontend_cases import build_all, float_graph, sdpa_backward_graph, sdpa_graph

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.frontend.hipdnn_frontend_python import _get_data_ptr

torch = pytest.importorskip("torch")

ENGINES = ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
DIMS = (2, 4, 16)  # batch, heads, head dim
NO_STATS = hipdnn.SdpaAttributes  # inference: O only
# DeviceBuffers are device memory when a device is visible: the NumPy engine cannot read them
# there (tests/gpu/test_frontend_gpu.py covers device buffers on the torch engines)
host_buffers = pytest.mark.skipif(
    hipdnn.hip_get_device_count() > 0, reason="DeviceBuffers are device memory here"
)


def _random(tensors: Any, seed: int = 0) -> dict[int, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return {t.get_uid(): rng.standard_normal(t.get_dim()).astype(np.float32) for t in tensors}


def _torch_forward(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None) -> Any:
    qt, kt, vt = (torch.from_numpy(x).double() for x in (q, k, v))
    return torch.nn.functional.scaled_dot_product_attention(
        qt, kt, vt, is_causal=causal, scale=scale
    ).numpy()


def _built_forward(engine: str, attributes: Any = None) -> tuple[Any, ...]:
    graph, q, k, v, o, stats = sdpa_graph(sq=8, skv=12, attributes=attributes, dims=DIMS)
    graph.set_preferred_engine_id_ext(engine)
    handle = build_all(graph)
    assert graph.get_plan_name() == engine
    return graph, handle, q, k, v, o, stats


@pytest.mark.parametrize("engine", ENGINES)
class TestExecuteMatchesTorch:
    def test_forward_with_numpy_arrays_keyed_by_tensor(self, engine: str) -> None:
        graph, handle, q, k, v, o, stats = _built_forward(engine)
        data = _random((q, k, v))
        out = np.zeros(o.get_dim(), np.float32)
        lse = np.zeros(stats.get_dim(), np.float32)
        pack = {
            q: data[q.get_uid()],
            k: data[k.get_uid()],
            v: data[v.get_uid()],
            o: out,
            stats: lse,
        }
        assert graph.execute(handle, pack).is_good()
        qd, kd, vd = (data[t.get_uid()] for t in (q, k, v))
        np.testing.assert_allclose(out, _torch_forward(qd, kd, vd), rtol=1e-4, atol=1e-5)
        scores = torch.from_numpy(qd).double() @ torch.from_numpy(kd).double().transpose(-1, -2)
        expected_lse = torch.logsumexp(scores / math.sqrt(DIMS[2]), -1, keepdim=True).numpy()
        np.testing.assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-5)

    def test_forward_causal_with_scale_through_device_buffers(self, engine: str) -> None:
        if engine == "NUMPY_REFERENCE_ENGINE" and hipdnn.hip_get_device_count() > 0:
            pytest.skip("DeviceBuffers are device memory here; the NumPy engine reads host memory")
        attributes = hipdnn.SdpaAttributes().set_causal_mask(True).set_attn_scale(0.3)
        graph, handle, q, k, v, o, _ = _built_forward(engine, attributes)
        data = _random((q, k, v), seed=1)
        data[o.get_uid()] = np.full(o.get_dim(), -1.0, np.float32)
        buffers = {}
        for uid, array in data.items():
            buffers[uid] = hipdnn.DeviceBuffer(array.nbytes)
            buffers[uid].copy_from_host(array.tobytes())
        pack = {uid: buf.ptr() for uid, buf in buffers.items()}
        assert graph.execute(handle, pack, 0).is_good()
        out = np.frombuffer(buffers[o.get_uid()].copy_to_host(), np.float32).reshape(o.get_dim())
        qd, kd, vd = (data[t.get_uid()] for t in (q, k, v))
        expected = _torch_forward(qd, kd, vd, causal=True, scale=0.3)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
        for uid in (q.get_uid(), k.get_uid(), v.get_uid()):  # inputs are left as they were
            assert buffers[uid].copy_to_host() == data[uid].tobytes()

    def test_backward_matches_autograd(self, engine: str) -> None:
        attributes = hipdnn.SdpaBackwardAttributes().set_causal_mask(True)
        graph, q, k, v, o, d_o, stats, dq, dk, dv = sdpa_backward_graph(
            sq=8, skv=8, attributes=attributes, dims=DIMS
        )
        graph.set_preferred_engine_id_ext(engine)
        handle = build_all(graph)
        data = _random((q, k, v, d_o), seed=2)
        qt, kt, vt = (
            torch.from_numpy(data[t.get_uid()]).double().requires_grad_() for t in (q, k, v)
        )
        ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        ot.backward(torch.from_numpy(data[d_o.get_uid()]).double())
        scale = 1 / math.sqrt(DIMS[2])
        scores = (qt @ kt.transpose(-1, -2) * scale).masked_fill(
            torch.ones(8, 8, dtype=torch.bool).triu(1), -math.inf
        )
        data[o.get_uid()] = ot.detach().float().numpy()
        data[stats.get_uid()] = torch.logsumexp(scores, -1, keepdim=True).detach().float().numpy()
        grads = {t: np.zeros(t.get_dim(), np.float32) for t in (dq, dk, dv)}
        pack: dict[Any, Any] = {**data, **grads}
        assert graph.execute(handle, pack, None).is_good()
        for tensor, ref in ((dq, qt), (dk, kt), (dv, vt)):
            np.testing.assert_allclose(grads[tensor], ref.grad.numpy(), rtol=1e-3, atol=1e-4)


class TestValueKinds:
    @host_buffers
    def test_every_value_kind_gives_the_same_result(self) -> None:
        graph, handle, q, k, v, o, _ = _built_forward("NUMPY_REFERENCE_ENGINE", NO_STATS())
        data = _random((q, k, v), seed=4)
        expected = _torch_forward(*(data[t.get_uid()] for t in (q, k, v)))
        qd, kd, vd = (data[t.get_uid()] for t in (q, k, v))

        class DataPtr:  # an object with data_ptr() pointing into a DeviceBuffer
            def __init__(self, buffer: hipdnn.DeviceBuffer) -> None:
                self.buffer = buffer

            def data_ptr(self) -> int:
                return self.buffer.ptr()

        kbuf = hipdnn.DeviceBuffer(kd.nbytes)
        kbuf.copy_from_host(kd.tobytes())
        out = torch.zeros(o.get_dim())
        pack = {
            q.get_uid(): _get_data_ptr(qd),  # raw address of a NumPy array seen by _get_data_ptr
            np.int64(k.get_uid()): DataPtr(kbuf),  # NumPy integer key, data_ptr() value
            v: torch.from_numpy(vd),  # torch tensor
            o: out,
        }
        assert graph.execute(handle, pack, np.uint64(0)).is_good()
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)

        class DlpackOnly:  # hides data_ptr() so only __dlpack__ is left
            def __init__(self, array: Any) -> None:
                self.array = array

            def __dlpack__(self, **kwargs: Any) -> Any:
                return self.array.__dlpack__(**kwargs)

            def __dlpack_device__(self) -> Any:
                return self.array.__dlpack_device__()

        out2 = np.zeros(o.get_dim(), np.float32)
        pack2 = {q: DlpackOnly(qd), k: DlpackOnly(kd), v: vd, o: DlpackOnly(out2)}
        assert graph.execute(handle, pack2).is_good()
        np.testing.assert_array_equal(out2, out.numpy())

    def test_only_an_array_value_s_address_is_used(self) -> None:
        """As hipDNN's execute: an array of another shape (here flat, or torch, or a bare DLPack
        producer) is read through its address with the declared layout; outputs land in it."""
        graph, handle, q, k, v, o, _ = _built_forward("NUMPY_REFERENCE_ENGINE", NO_STATS())
        data = _random((q, k, v), seed=9)
        expected = _torch_forward(*(data[t.get_uid()] for t in (q, k, v)))

        class DlpackOnly:
            def __init__(self, array: Any) -> None:
                self.array = array

            def __dlpack__(self, **kwargs: Any) -> Any:
                return self.array.__dlpack__(**kwargs)

            def __dlpack_device__(self) -> Any:
                return self.array.__dlpack_device__()

        flat_out = np.zeros(o.get_volume(), np.float32)
        torch_out = torch.zeros(o.get_volume())
        pack = {
            q: data[q.get_uid()].ravel(),  # flat NumPy
            k: torch.from_numpy(data[k.get_uid()].ravel()),  # flat torch
            v: DlpackOnly(data[v.get_uid()].reshape(-1, 4)),  # another 2-D shape, DLPack only
            o: flat_out,
        }
        assert graph.execute(handle, pack).is_good()
        np.testing.assert_allclose(flat_out.reshape(o.get_dim()), expected, rtol=1e-4, atol=1e-5)
        assert graph.execute(handle, {**pack, o: DlpackOnly(torch_out)}).is_good()
        np.testing.assert_array_equal(torch_out.numpy(), flat_out)

    def test_an_array_value_too_small_for_the_declared_layout_is_refused(self) -> None:
        """Where hipDNN would read past the value's memory, INVALID_VARIANT_PACK says so."""
        graph, handle, q, k, v, o, _ = _built_forward("NUMPY_REFERENCE_ENGINE", NO_STATS())
        pack: dict[Any, Any] = {t: np.zeros(t.get_dim(), np.float32) for t in (q, k, v, o)}
        arena = np.zeros(q.get_volume() + 4, np.float32)
        pack[q] = arena[8:]  # a view 4 floats short; its base holds what lies before it
        error = graph.execute(handle, pack)
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
        assert error.get_message() == (
            f"Variant pack tensor '{q.get_name()}' (uid {q.get_uid()}) is read from its value's "
            f"address as the graph declares it (dims {q.get_dim()}, strides {q.get_stride()}, "
            f"FLOAT: {4 * q.get_volume()} bytes), but the value holds "
            f"{4 * (q.get_volume() - 4)} bytes from there"
        )

    def test_addresses_inside_a_buffer_honour_the_offset(self) -> None:
        graph, handle, q, k, v, o, _ = _built_forward("NUMPY_REFERENCE_ENGINE", NO_STATS())
        data = _random((q, k, v), seed=5)
        arena = np.zeros(sum(a.size for a in data.values()) + o.get_volume() + 8, np.float32)
        base = _get_data_ptr(arena)
        pack, at = {}, 2  # start two floats in: a nonzero offset
        for uid, array in data.items():
            arena[at : at + array.size] = array.ravel()
            pack[uid] = base + 4 * at
            at += array.size
        pack[o.get_uid()] = base + 4 * at
        assert graph.execute(handle, pack).is_good()
        out = arena[at : at + o.get_volume()].reshape(o.get_dim())
        expected = _torch_forward(*(data[t.get_uid()] for t in (q, k, v)))
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)

    def test_addresses_of_torch_tensors_and_their_views(self) -> None:
        graph, handle, q, k, v, o, _ = _built_forward("TORCH_SDPA_MATH_ENGINE", NO_STATS())
        data = _random((q, k, v), seed=8)
        arena = torch.zeros(sum(a.size for a in data.values()) + o.get_volume() + 2)
        pack, at = {}, 1
        for uid, array in data.items():
            arena[at : at + array.size] = torch.from_numpy(array.ravel())
            pack[uid] = _get_data_ptr(arena[at:])  # the view dies; its base stays known
            at += array.size
        pack[o.get_uid()] = arena.data_ptr() + 4 * at
        assert graph.execute(handle, pack).is_good()
        out = arena[at : at + o.get_volume()].reshape(o.get_dim()).numpy()
        expected = _torch_forward(*(data[t.get_uid()] for t in (q, k, v)))
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
        pack[o.get_uid()] += 1  # not a multiple of the element size
        error = graph.execute(handle, pack)
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
        assert "cannot hold FLOAT" in error.get_message()

    def test_runtime_scalar_from_a_host_array_or_a_float(self) -> None:
        scale = hipdnn.Graph.tensor_like(np.array([0.25], np.float32), "scale")
        assert scale.get_is_pass_by_value() and scale.get_dim() == [1]
        attributes = hipdnn.SdpaAttributes().set_attn_scale(scale)
        graph, handle, q, k, v, o, _ = _built_forward("NUMPY_REFERENCE_ENGINE", attributes)
        data = _random((q, k, v), seed=6)
        qd, kd, vd = (data[t.get_uid()] for t in (q, k, v))
        for value, expected_scale in ((np.array([0.25], np.float32), 0.25), (0.5, 0.5)):
            out = np.zeros(o.get_dim(), np.float32)
            pack = {q: qd, k: kd, v: vd, o: out, scale: value}
            assert graph.execute(handle, pack).is_good()
            expected = _torch_forward(qd, kd, vd, scale=expected_scale)
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


class TestErrorPaths:
    def _ready(self) -> tuple[Any, ...]:
        return _built_forward("NUMPY_REFERENCE_ENGINE", NO_STATS())

    def test_missing_entry_is_a_bad_error(self) -> None:
        graph, handle, q, *_ = self._ready()
        error = graph.execute(handle, {q: np.zeros(q.get_dim(), np.float32)}, 0)
        assert error.is_bad() and error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
        assert "missing tensor" in error.get_message()

    def test_wrong_shape_is_a_bad_error_naming_the_tensor(self) -> None:
        graph, handle, q, k, v, o, _ = self._ready()
        pack = {t: np.zeros(t.get_dim(), np.float32) for t in (k, v, o)}
        pack[q] = np.zeros((1, 1), np.float32)
        error = graph.execute(handle, pack)
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
        assert f"uid {q.get_uid()}" in error.get_message()

    def test_unknown_address_is_a_bad_error(self) -> None:
        graph, handle, q, k, v, o, _ = self._ready()
        pack: dict[Any, Any] = {t: np.zeros(t.get_dim(), np.float32) for t in (k, v, o)}
        pack[q] = 0x1000
        error = graph.execute(handle, pack)
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
        assert "0x1000" in error.get_message() and "not inside memory" in error.get_message()
        pack[q] = 0
        assert "is null" in graph.execute(handle, pack).get_message()

    def test_too_small_buffer_is_a_bad_error(self) -> None:
        graph, handle, q, k, v, o, _ = self._ready()
        pack: dict[Any, Any] = {t: np.zeros(t.get_dim(), np.float32) for t in (k, v, o)}
        pack[q] = hipdnn.DeviceBuffer(16)
        assert graph.execute(handle, pack).get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK

    @pytest.mark.parametrize(
        ("key", "value", "error", "match"),
        [
            ("uid", True, TypeError, "bool is not a data pointer"),
            ("uid", "0x10", TypeError, "__dlpack__"),
            ("uid", 1.5, TypeError, "__dlpack__"),  # floats only for pass-by-value tensors
            ("no_uid", 0, ValueError, "has no uid"),
            ("str", 0, TypeError, "keys must be Tensor objects or int tensor UIDs"),
            ("bool", 0, TypeError, "keys must be Tensor objects or int tensor UIDs"),
        ],
    )
    def test_rejected_keys_and_values_raise_as_upstream(
        self, key: str, value: Any, error: type, match: str
    ) -> None:
        graph, handle, q, *_ = self._ready()
        keys = {"uid": q.get_uid(), "no_uid": hipdnn.Tensor(), "str": "q", "bool": True}
        with pytest.raises(error, match=match) as caught:
            graph.execute(handle, {keys[key]: value})
        assert isinstance(caught.value, hg.HipdnnError)

    def test_pack_must_be_a_dict(self) -> None:
        graph, handle, *_ = self._ready()
        with pytest.raises(TypeError):
            graph.execute(handle, [1, 2])  # type: ignore[arg-type]

    def test_execute_before_plans(self) -> None:
        graph, *_ = sdpa_graph()
        error = graph.execute(hipdnn.create_handle(), {})
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == hg.graph.execution.NO_PLAN_MESSAGE

    def test_destroyed_handle_raises(self) -> None:
        graph, handle, *_ = self._ready()
        hipdnn.destroy_handle(handle)
        with pytest.raises(RuntimeError, match="Handle has been destroyed"):
            graph.execute(handle, {})
        with pytest.raises(TypeError):
            graph.build_operation_graph(None)

    def test_validation_errors_are_returned(self) -> None:
        graph = float_graph()
        a = hipdnn.Tensor.create([2, 8, 16, 64], hipdnn.DataType.FLOAT).set_uid(1)
        b = hipdnn.Tensor.create([2, 8, 16, 64], hipdnn.DataType.FLOAT).set_uid(1)
        graph.sdpa(a, b, b, hipdnn.SdpaAttributes())
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == "Duplicate tensor UIDs found in the graph: 1"
        assert graph.build_operation_graph(hipdnn.create_handle()).is_bad()

    def test_missing_dims_fail_validation(self) -> None:
        graph = float_graph()
        q = hipdnn.Tensor().set_name("q")
        k = hipdnn.Tensor.create([1, 1, 4, 8], hipdnn.DataType.FLOAT)
        graph.sdpa(q, k, k, hipdnn.SdpaAttributes())
        error = graph.validate()
        assert error.is_bad() and "q" in error.get_message()

    def test_no_engine_is_graph_not_supported(self) -> None:
        graph, *_ = sdpa_graph()
        with hg.backend.isolated_registry(load_entry_points=False):
            assert graph.validate().is_good()
            error = graph.check_support()
        assert error.get_code() == hipdnn.ErrorCode.GRAPH_NOT_SUPPORTED
        assert "no backend is registered" in error.get_message()

    def test_queries_without_plans_raise_runtime_error(self) -> None:
        graph, *_ = sdpa_graph()
        for query in (graph.get_workspace_size, graph.get_plan_name):
            with pytest.raises(RuntimeError) as caught:
                query()
            assert caught.value.code == hg.ErrorCode.INVALID_VALUE  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match="out of bounds"):
            graph.get_plan_name_at_index(0)


class TestPlans:
    def test_plan_queries(self) -> None:
        graph, *_ = _built_forward("NUMPY_REFERENCE_ENGINE")
        count = graph.get_execution_plan_count()
        assert count >= 2  # the NumPy reference and the torch math engine apply on any machine
        ranked = graph.get_ranked_engine_ids([hipdnn.HeuristicMode.FALLBACK])
        assert len(ranked) == count
        assert ranked[0] == graph.get_preferred_engine_id_ext()
        assert [graph.get_plan_name_at_index(i) for i in range(count)] == [
            hipdnn.engine_id_to_name(e) for e in ranked
        ]
        assert graph.get_workspace_size() == 0 == graph.get_workspace_size_plan_at_index(0)
        assert graph.get_behavior_notes_for_engine(ranked[0]) == []
        with pytest.raises(RuntimeError):
            graph.get_behavior_notes_for_engine(12345)

    def test_build_and_execute_every_plan_index(self) -> None:
        graph, q, k, v, o, _ = sdpa_graph(
            sq=8, skv=8, attributes=hipdnn.SdpaAttributes(), dims=DIMS
        )
        assert graph.validate().is_good()
        assert graph.build_operation_graph(hipdnn.create_handle()).is_good()
        assert graph.create_execution_plans([hipdnn.HeuristicMode.FALLBACK]).is_good()
        assert graph.check_support().is_good()
        count = graph.get_execution_plan_count()
        assert graph.build_plan_at_index(count).get_code() == hipdnn.ErrorCode.INVALID_VALUE
        data = _random((q, k, v), seed=7)
        expected = _torch_forward(*(data[t.get_uid()] for t in (q, k, v)))
        for index in range(count):
            assert graph.build_plan_at_index(index).is_good()
            out = np.zeros(o.get_dim(), np.float32)
            assert graph.execute_plan_at_index(
                hipdnn.create_handle(), {**data, o.get_uid(): out}, 0, index
            ).is_good()
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
        error = graph.execute_plan_at_index(hipdnn.create_handle(), data, 0, count)
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE

    def test_enum_arguments_are_checked(self) -> None:
        graph, *_ = sdpa_graph()
        assert graph.validate().is_good()
        with pytest.raises(TypeError, match="mode must be a HeuristicMode, got 9"):
            graph.create_execution_plans([9])
        with pytest.raises(TypeError, match="policy must be a BuildPlanPolicy, got 7"):
            graph.build_plans(7)
        assert graph.create_execution_plans([0]).is_good()  # the integer of a member is one

    def test_build_plans_all(self) -> None:
        graph, *_ = sdpa_graph()
        build_all(graph)
        assert graph.build_plans(hipdnn.BuildPlanPolicy.ALL).is_good()

    def test_execute_timed_ext(self) -> None:
        graph, handle, q, k, v, o, stats = _built_forward("NUMPY_REFERENCE_ENGINE")
        data = _random((q, k, v))
        pack = {**data, o.get_uid(): np.zeros(o.get_dim(), np.float32)}
        pack[stats.get_uid()] = np.zeros(stats.get_dim(), np.float32)
        error, timing = graph.execute_timed_ext(handle, pack, 0)
        assert error.is_good() and not timing.timed_out
        assert timing.quality == hipdnn.TimingQuality.DEVICE_ONLY
        assert timing.elapsed_ms is not None and math.isfinite(timing.elapsed_ms)
        assert timing.elapsed_ms >= 0.0
        error, timing = graph.execute_timed_ext(handle, {}, 0)
        assert error.is_bad() and timing.elapsed_ms is None
        assert timing.quality == hipdnn.TimingQuality.INVALID

    def test_execute_timed_ext_without_a_plan(self) -> None:
        class NullHandle:
            def get(self) -> int:
                return 0

        error, timing = hipdnn.Graph().execute_timed_ext(NullHandle(), {}, 0)
        assert error.is_bad() and not timing.timed_out and timing.elapsed_ms is None
        assert timing.quality == hipdnn.TimingQuality.INVALID
