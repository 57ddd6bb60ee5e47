"""hipdnn_graph.frontend: tensor_like from DLPack producers and the value→address conversion
(_get_data_ptr), with hipDNN's precedence and error types (ported from hipDNN's wheel tests)."""

from __future__ import annotations

import ctypes
from typing import Any, ClassVar

import numpy as np
import pytest
from frontend_cases import build_all, float_graph

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.frontend.hipdnn_frontend_python import _get_data_ptr


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _Type(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Managed(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _Type),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class HandMadeProducer:
    """A producer whose capsule we write by hand: any device, dtype, lanes and byte offset
    (NumPy and torch fold offsets into the data pointer, so they never exercise that field)."""

    def __init__(
        self,
        base: int,
        byte_offset: int = 0,
        device: int = 1,
        dtype: tuple[int, int, int] = (2, 32, 1),
        shape: tuple[int, ...] = (1,),
    ) -> None:
        self.args = (base, byte_offset, device, dtype, shape)
        self.keep: list[Any] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        base, byte_offset, device, (code, bits, lanes), shape = self.args
        dims = (ctypes.c_int64 * len(shape))(*shape)
        managed = _Managed(
            data=base,
            device=_Device(device, 0),
            ndim=len(shape),
            dtype=_Type(code, bits, lanes),
            shape=dims,
            byte_offset=byte_offset,
        )
        self.keep += [dims, managed]
        return _new_capsule(ctypes.addressof(managed), b"dltensor", None)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.args[2], 0)


class NoneDlpack:
    def __dlpack__(self, *args: Any, **kwargs: Any) -> None:
        return None


class RaisingDlpack:
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("producer refused export")


class CopyOnlyProducer:
    """Can export only a copy, so it refuses ``copy=False``."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, *, copy: bool | None = None, **kwargs: Any) -> Any:
        if copy is False:
            raise BufferError("export requires a copy")
        return self.array.copy().__dlpack__(**kwargs)


class LegacyProducer:
    """The signature from before the 2023.12 array API: no max_version, no copy."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.array.__dlpack__()


class TestTensorLike:
    def test_host_array_gives_dims_strides_type_and_a_pass_by_value_tensor(self) -> None:
        t = hipdnn.Graph.tensor_like(np.zeros((2, 3, 4), np.float32), "x")
        assert isinstance(t, hipdnn.Tensor)
        assert (t.get_dim(), t.get_stride()) == ([2, 3, 4], [12, 4, 1])
        assert t.get_data_type() == hipdnn.DataType.FLOAT and t.get_name() == "x"
        assert t.has_uid() is False
        # as hipDNN's binding: every host producer is pass-by-value, whatever its size
        assert t.get_is_pass_by_value() is True

    @pytest.mark.parametrize("shape", [(1,), (1, 1, 1, 1), ()])
    def test_one_element_host_array_is_a_runtime_scalar(self, shape: tuple[int, ...]) -> None:
        t = hipdnn.Graph.tensor_like(np.full(shape, 0.125, np.float32))
        assert t.get_is_pass_by_value() is True and t.get_dim() == list(shape)

    def test_non_contiguous_strides_are_element_strides(self) -> None:
        t = hipdnn.Graph.tensor_like(np.zeros((4, 6), np.float32)[:, ::2])
        assert (t.get_dim(), t.get_stride()) == ([4, 3], [6, 2])
        t = hipdnn.Graph.tensor_like(np.zeros((4, 6), np.float32).T)
        assert (t.get_dim(), t.get_stride()) == ([6, 4], [1, 6])

    def test_zero_dim_keeps_empty_shape(self) -> None:
        t = hipdnn.Graph.tensor_like(np.array(2.5, np.float32))
        assert t.get_dim() == [] and t.get_stride() == [] and t.get_is_pass_by_value()

    @pytest.mark.parametrize(
        ("dtype", "data_type"),
        [
            (np.float16, hipdnn.DataType.HALF),
            (np.float32, hipdnn.DataType.FLOAT),
            (np.float64, hipdnn.DataType.DOUBLE),
            (np.int8, hipdnn.DataType.INT8),
            (np.int32, hipdnn.DataType.INT32),
            (np.int64, hipdnn.DataType.INT64),
            (np.uint8, hipdnn.DataType.UINT8),
            (np.bool_, hipdnn.DataType.BOOLEAN),
        ],
    )
    def test_numpy_dtypes(self, dtype: Any, data_type: hg.DataType) -> None:
        assert hipdnn.Graph.tensor_like(np.zeros((1,), dtype)).get_data_type() == data_type

    def test_torch_dtypes_and_device(self) -> None:
        torch = pytest.importorskip("torch")
        for dtype, data_type in [
            (torch.bfloat16, hipdnn.DataType.BFLOAT16),
            (torch.float8_e4m3fn, hipdnn.DataType.FP8_E4M3),
            (torch.float8_e5m2, hipdnn.DataType.FP8_E5M2),
        ]:
            t = hipdnn.Graph.tensor_like(torch.zeros(2, 3, dtype=dtype))
            assert t.get_data_type() == data_type and t.get_stride() == [3, 1]
        t = hipdnn.Graph.tensor_like(torch.zeros(16).view(4, 4).t())
        assert (t.get_dim(), t.get_stride()) == ([4, 4], [1, 4])
        assert t.get_is_pass_by_value() is True  # CPU memory: pass-by-value, as in hipDNN
        assert hipdnn.Graph.tensor_like(torch.tensor([0.5])).get_is_pass_by_value() is True

    def test_device_memory_is_not_pass_by_value(self) -> None:
        host = np.zeros(4, np.float32)
        for device in (2, 10):  # cuda, rocm: read from the capsule, never dereferenced
            t = hipdnn.Graph.tensor_like(HandMadeProducer(host.ctypes.data, device=device))
            assert t.get_is_pass_by_value() is False and t.get_dim() == [1]

    @pytest.mark.parametrize(
        ("producer", "error", "match"),
        [
            (
                lambda: np.zeros((2, 2), np.uint16),
                ValueError,
                r"unsupported DLPack dtype \(code=1, bits=16\)",
            ),
            (lambda: object(), TypeError, "__dlpack__"),
            (lambda: NoneDlpack(), ValueError, "valid DLPack capsule"),
            (lambda: HandMadeProducer(8, dtype=(2, 32, 4)), ValueError, "lanes != 1"),
            (lambda: HandMadeProducer(8, device=4), ValueError, "unsupported DLPack device_type=4"),
        ],
    )
    def test_rejections(self, producer: Any, error: type, match: str) -> None:
        with pytest.raises(error, match=match) as caught:
            hipdnn.Graph.tensor_like(producer())
        assert isinstance(caught.value, hg.HipdnnError)

    def test_tensor_source_and_pass_by_value_flag(self) -> None:
        src = hipdnn.Tensor.create([2, 2], hipdnn.DataType.FLOAT)
        t = hipdnn.Graph.tensor_like(src, "copy")
        assert t.get_dim() == [2, 2] and t.get_name() == "copy" and not t.get_is_pass_by_value()
        one = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        assert one.set_is_pass_by_value(True).get_is_pass_by_value() is True

    def test_read_only_producer(self) -> None:
        host = np.zeros((2, 3), np.float32)
        host.setflags(write=False)
        assert hipdnn.Graph.tensor_like(host).get_dim() == [2, 3]
        assert _get_data_ptr(host) == host.ctypes.data

    def test_producer_exception_propagates(self) -> None:
        with pytest.raises(RuntimeError, match="producer refused export") as caught:
            hipdnn.Graph.tensor_like(RaisingDlpack())
        assert type(caught.value) is RuntimeError  # the producer's own, not a wrapper

    def test_legacy_producer_signature(self) -> None:
        host = np.zeros((2, 3), np.float32)
        assert hipdnn.Graph.tensor_like(LegacyProducer(host)).get_dim() == [2, 3]
        assert _get_data_ptr(LegacyProducer(host)) == host.ctypes.data


CPU_ENGINES = ["NUMPY_REFERENCE_ENGINE", "TORCH_EAGER_ENGINE"]


def _scaled_graph(engine: str, host_scale: np.ndarray[Any, Any]) -> tuple[Any, ...]:
    """hipDNN's pass-by-value probe: ``y = x * scale``, ``scale`` from ``tensor_like`` of a host
    array; built for ``engine``."""
    graph = float_graph()
    x = hipdnn.Tensor.create([2, 3, 4, 5], hipdnn.DataType.FLOAT)
    scale = hipdnn.Graph.tensor_like(host_scale, "scale")
    mul = hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.MUL)
    y = graph.pointwise(x, scale, mul)
    y.set_output(True)
    graph.set_preferred_engine_id_ext(engine)
    handle = build_all(graph)
    assert graph.get_plan_name() == engine
    return graph, handle, x, scale, y


@pytest.mark.parametrize("engine", CPU_ENGINES)
class TestHostPassByValueOnCpuEngines:
    """Host tensors from ``tensor_like`` are pass-by-value (hipDNN's rule); the CPU engines read
    them at execute, one element as a runtime scalar, more as a host buffer."""

    def test_one_element_is_read_at_each_execute(self, engine: str) -> None:
        if engine.startswith("TORCH"):
            pytest.importorskip("torch")
        host_scale = np.full((1, 1, 1, 1), 2.5, np.float32)
        graph, handle, x, scale, y = _scaled_graph(engine, host_scale)
        assert scale.get_is_pass_by_value() is True
        xs = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
        for value in (2.5, -7.0):  # two values through one plan: read at execute, not baked
            host_scale[...] = value
            out = np.zeros((2, 3, 4, 5), np.float32)
            error = graph.execute(handle, {x: xs, scale: host_scale, y: out})
            assert error.is_good(), error.get_message()
            np.testing.assert_array_equal(out, xs * np.float32(value))

    def test_many_elements_are_a_host_buffer(self, engine: str) -> None:
        if engine.startswith("TORCH"):
            pytest.importorskip("torch")
        host_scale = np.linspace(-1.0, 1.0, 20, dtype=np.float32).reshape(1, 1, 4, 5)
        graph, handle, x, scale, y = _scaled_graph(engine, host_scale)
        assert scale.get_is_pass_by_value() is True and scale.get_dim() == [1, 1, 4, 5]
        xs = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
        out = np.zeros((2, 3, 4, 5), np.float32)
        error = graph.execute(handle, {x: xs, scale: host_scale, y: out})
        assert error.is_good(), error.get_message()
        np.testing.assert_array_equal(out, xs * host_scale)


@pytest.mark.skipif(
    hipdnn.hip_get_device_count() > 0, reason="DeviceBuffers are device memory here"
)
class TestBareProducerAddresses:
    """A bare ``__dlpack__`` producer is read through its address, as hipDNN reads every
    value (hipDNN's test_timed_execute_with_dlpack_only_producers exports one float at a
    DeviceBuffer's address for a 4-element tensor): the declared layout is read there when the
    address lies in known memory that holds it, and refused when it does not."""

    def _add_graph(self) -> tuple[Any, ...]:
        graph = float_graph()
        a = hipdnn.Tensor.create([1, 1, 2, 2], hipdnn.DataType.FLOAT)
        b = hipdnn.Tensor.create([1, 1, 2, 2], hipdnn.DataType.FLOAT)
        out = graph.pointwise(a, b, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.ADD))
        out.set_output(True)
        graph.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
        return graph, build_all(graph), a, b, out

    def test_one_element_export_at_a_device_buffer_reads_the_declared_layout(self) -> None:
        graph, handle, a, b, out = self._add_graph()
        values = {a: [1.0, 2.0, 3.0, 4.0], b: [10.0, 20.0, 30.0, 40.0], out: [0.0] * 4}
        buffers = {t: hipdnn.DeviceBuffer(16) for t in values}
        for t, data in values.items():
            buffers[t].copy_from_host(np.array(data, np.float32).tobytes())
        pack = {t: HandMadeProducer(buf.ptr()) for t, buf in buffers.items()}
        error = graph.execute(handle, pack)
        assert error.is_good(), error.get_message()
        result = np.frombuffer(buffers[out].copy_to_host(), np.float32)
        np.testing.assert_array_equal(result, [11.0, 22.0, 33.0, 44.0])

    def test_one_element_export_outside_known_memory_is_refused(self) -> None:
        graph, handle, a, b, out = self._add_graph()
        small = np.zeros(1, np.float32)  # the producer's own memory: one float, nothing known
        pack = {t: np.zeros((1, 1, 2, 2), np.float32) for t in (b, out)}
        error = graph.execute(handle, {**pack, a: HandMadeProducer(small.ctypes.data)})
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
        assert error.get_message() == (
            f"Variant pack tensor '{a.get_name()}' (uid {a.get_uid()}) is read from its value's "
            "address as the graph declares it (dims [1, 1, 2, 2], strides [4, 4, 2, 1], FLOAT: "
            "16 bytes), but the value holds 4 bytes from there"
        )


class TestGetDataPtr:
    def test_host_dlpack_honours_byte_offset(self) -> None:
        host = np.zeros(4, np.float32)
        assert _get_data_ptr(HandMadeProducer(host.ctypes.data, 8)) == host.ctypes.data + 8

    def test_views_point_at_their_first_element(self) -> None:
        host = np.zeros(16, np.float32)
        assert _get_data_ptr(host[3:]) == host.ctypes.data + 12

    def test_integer_like_values(self) -> None:
        assert _get_data_ptr(np.uint64(4096)) == 4096
        assert _get_data_ptr(np.int64(4096)) == 4096
        scalar = np.array(7, np.int64)  # __index__ too, but it is data: DLPack wins
        assert _get_data_ptr(scalar) == scalar.ctypes.data

    def test_data_ptr_comes_before_dlpack(self) -> None:
        class Both:
            def data_ptr(self) -> int:
                return 4096

            def __dlpack__(self, **kwargs: Any) -> Any:
                raise AssertionError("__dlpack__ must not be called")

        assert _get_data_ptr(Both()) == 4096

    def test_torch_tensor_uses_its_data_ptr(self) -> None:
        torch = pytest.importorskip("torch")
        x = torch.zeros(16)
        assert _get_data_ptr(x) == x.data_ptr() and _get_data_ptr(x[3:]) == x.data_ptr() + 12

    def test_int_and_device_buffer(self) -> None:
        assert _get_data_ptr(1234) == 1234
        buffer = hipdnn.DeviceBuffer(64)
        assert _get_data_ptr(buffer) == buffer.ptr() != 0

    @pytest.mark.parametrize(
        ("value", "error", "match"),
        [
            (True, TypeError, "bool"),
            (np.bool_(False), TypeError, "bool"),
            ("0x10", TypeError, "__dlpack__"),
            (1.5, TypeError, "__dlpack__"),
            (NoneDlpack(), ValueError, "valid DLPack capsule"),
        ],
    )
    def test_rejections(self, value: Any, error: type, match: str) -> None:
        with pytest.raises(error, match=match):
            _get_data_ptr(value)

    def test_producer_exception_propagates(self) -> None:
        with pytest.raises(RuntimeError, match="producer refused export") as caught:
            _get_data_ptr(RaisingDlpack())
        assert type(caught.value) is RuntimeError

    def test_pointer_path_refuses_copies(self) -> None:
        """A copy would be freed with the export, leaving a dangling address."""
        host = np.zeros(4, np.float32)
        with pytest.raises(BufferError, match="requires a copy"):
            _get_data_ptr(CopyOnlyProducer(host))
        # metadata needs no ownership, so tensor_like still accepts it
        assert hipdnn.Graph.tensor_like(CopyOnlyProducer(host)).get_dim() == [4]


class TestDeviceBuffer:
    def test_copies_in_and_out(self) -> None:
        buffer = hipdnn.DeviceBuffer(16)
        data = np.arange(4, dtype=np.float32).tobytes()
        buffer.copy_from_host(data)
        assert buffer.copy_to_host() == data and buffer.nbytes == 16

    def test_size_mismatch_raises_runtime_error(self) -> None:
        buffer = hipdnn.DeviceBuffer(16)
        before = buffer.copy_to_host()
        with pytest.raises(RuntimeError, match="32 bytes given for a 16-byte buffer") as caught:
            buffer.copy_from_host(np.ones(8, np.float32).tobytes())
        assert isinstance(caught.value, hg.HipdnnError)
        assert buffer.copy_to_host() == before

    def test_size_must_be_positive(self) -> None:
        with pytest.raises(RuntimeError):
            hipdnn.DeviceBuffer(0)


class TestTorchAllocatorBlocks:
    """Resolving an unknown address against torch's allocator snapshot: only inside one allocated
    block (torch.cuda is replaced by a fake snapshot here; the GPU suite uses the real one)."""

    SEGMENT: ClassVar[dict[str, Any]] = {
        "device": 1,
        "address": 0x1000,
        "total_size": 0x400,
        "blocks": [
            {"size": 0x100, "state": "active_allocated"},  # 0x1000 (no "address": computed)
            {"address": 0x1100, "size": 0x100, "state": "inactive"},
            {"address": 0x1200, "size": 0x200, "state": "active_allocated"},
        ],
    }

    @pytest.fixture
    def seen(self, monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], str]]:
        torch = pytest.importorskip("torch")
        from hipdnn_graph.frontend import _memory

        calls: list[tuple[dict[str, Any], str]] = []
        monkeypatch.setattr(_memory, "torch_device_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [self.SEGMENT])

        def as_tensor(holder: Any, device: str) -> Any:
            calls.append((holder.__cuda_array_interface__, device))
            return torch.zeros(holder.__cuda_array_interface__["shape"], dtype=torch.uint8)

        monkeypatch.setattr(torch, "as_tensor", as_tensor)
        return calls

    @pytest.mark.parametrize(
        ("address", "nbytes", "found"),
        [
            (0x1000, 0x100, True),
            (0x1010, 0x10, True),
            (0x10F0, 0x20, False),  # runs into the next block
            (0x1100, 0x10, False),  # a free block
            (0x1200, 0x200, True),
            (0x1300, 0x101, False),  # past the segment's end
            (0x2000, 0x10, False),  # no segment
        ],
    )
    def test_only_inside_an_allocated_block(
        self, seen: list[tuple[dict[str, Any], str]], address: int, nbytes: int, found: bool
    ) -> None:
        from hipdnn_graph.frontend._memory import resolve_pointer

        if found:
            view = resolve_pointer(address, (nbytes,), (1,), hipdnn.DataType.UINT8, "'t'")
            assert tuple(view.shape) == (nbytes,)
            interface, device = seen[-1]
            assert interface["data"] == (address, False) and interface["shape"] == (nbytes,)
            assert device == "cuda:1"
        else:
            with pytest.raises(hg.HipdnnError, match="not inside memory") as caught:
                resolve_pointer(address, (nbytes,), (1,), hipdnn.DataType.UINT8, "'t'")
            assert caught.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
            assert not seen
