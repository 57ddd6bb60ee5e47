"""Reading DLPack exports without handing them to a consumer first: the capsule's layout.

Consumers such as ``torch.from_dlpack`` trust the layout they are given; torch aborts the whole
process on a negative stride or on an extent that overflows 64 bits. So every DLPack producer is
exported once here, its ``DLTensor`` read through ``ctypes`` (the capsule is not consumed), its
layout checked, and only then is the same capsule given to NumPy or torch
(:func:`checked_export`, which variant packs use).

:func:`export_capsule` calls ``__dlpack__`` the way hipDNN's bindings do: DLPack 1.x keywords
first (``max_version``, ``copy``, ``stream``), the bare call for producers older than the 2023.12
array API. The producer's own exceptions pass through unchanged.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.backend.dlpack import export_capsule, layout_problem, read_capsule
    >>> layout = read_capsule(export_capsule(np.zeros((2, 3), np.float32)[::-1], copy=False))
    >>> layout.dims, layout.strides, layout.data_type.name, layout.is_host
    ([2, 3], [-3, 1], 'FLOAT', True)
    >>> layout_problem(layout, negative_strides=False)
    'has negative strides (-3, 1)'
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from ..errors import HipdnnError
from ..types import DataType, ErrorCode

__all__ = [
    "HOST_DEVICES",
    "DlpackLayout",
    "Exported",
    "checked_export",
    "export_capsule",
    "layout_problem",
    "read_capsule",
    "runtime_scalar",
]

CPU, CUDA, CUDA_HOST, ROCM, ROCM_HOST = 1, 2, 3, 10, 11
#: DLPack device types of host memory
HOST_DEVICES = frozenset({CPU, CUDA_HOST, ROCM_HOST})
_INT64_MAX = 2**63 - 1
#: the flag of ``DLManagedTensorVersioned`` that marks read-only memory
_READ_ONLY = 1


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):
    """DLPack 1.x ``DLManagedTensorVersioned`` (the tensor comes after the header)."""

    _fields_ = [
        ("version", _Version),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# (DLPack type code, bits) -> hipDNN data type (codes 7.. are DLPack 1.1's low-precision floats)
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6
_TYPES: dict[tuple[int, int], DataType] = {
    (_FLOAT, 16): DataType.HALF,
    (_FLOAT, 32): DataType.FLOAT,
    (_FLOAT, 64): DataType.DOUBLE,
    (_BFLOAT, 16): DataType.BFLOAT16,
    (_INT, 8): DataType.INT8,
    (_INT, 32): DataType.INT32,
    (_INT, 64): DataType.INT64,
    (_UINT, 8): DataType.UINT8,
    (_BOOL, 8): DataType.BOOLEAN,
    (10, 8): DataType.FP8_E4M3,
    (11, 8): DataType.FP8_E4M3_FNUZ,
    (12, 8): DataType.FP8_E5M2,
    (13, 8): DataType.FP8_E5M2_FNUZ,
    (14, 8): DataType.FP8_E8M0,
    (15, 6): DataType.FP6_E2M3,
    (16, 6): DataType.FP6_E3M2,
    (17, 4): DataType.FP4_E2M1,
}


@dataclass(frozen=True)
class DlpackLayout:
    """What one DLPack export describes (``data_type`` is ``None`` for a type hipDNN lacks).

    ``pointer`` is the address of the first element (``data + byte_offset``); ``strides`` are
    in elements (compact row-major when the capsule gives none).
    """

    pointer: int
    device_type: int
    device_id: int
    dims: list[int]
    strides: list[int]
    code: int
    bits: int
    lanes: int
    read_only: bool = False

    @property
    def is_host(self) -> bool:
        """Whether the memory is host memory (``cpu`` or a pinned ``*_host`` device)."""
        return self.device_type in HOST_DEVICES

    @property
    def data_type(self) -> DataType | None:
        return _TYPES.get((self.code, self.bits)) if self.lanes == 1 else None

    @property
    def volume(self) -> int:
        """The number of elements."""
        count = 1
        for dim in self.dims:
            count *= dim
        return count

    def dtype_text(self) -> str:
        return f"(code={self.code}, bits={self.bits})"


def export_capsule(producer: Any, *, copy: bool | None, stream: int | None = None) -> Any:
    """Call ``producer.__dlpack__`` as hipDNN's bindings do and return what it returns.

    DLPack 1.x keywords first: ``max_version=(1, 1)``, ``copy`` when it is not ``None``
    (``copy=False``: the export must be the producer's own memory, never a temporary) and
    ``stream`` when given; on ``TypeError`` (a producer from before the 2023.12 array API) the
    call is made again without them (``stream`` kept when given).

    Raises:
        AttributeError: ``producer`` has no ``__dlpack__``.
        Exception: whatever the producer raises (for example ``BufferError`` when it cannot
            export without a copy), unchanged.
    """
    method = producer.__dlpack__
    keywords: dict[str, Any] = {"max_version": (1, 1)}
    if copy is not None:
        keywords["copy"] = copy
    if stream is not None:
        keywords["stream"] = stream
    try:
        return method(**keywords)
    except TypeError:
        pass
    return method() if stream is None else method(stream=stream)


def read_capsule(capsule: Any) -> DlpackLayout | None:
    """The layout a ``dltensor`` or ``dltensor_versioned`` capsule describes, without consuming
    it (its producer still frees it); ``None`` when ``capsule`` is no valid, unused capsule."""
    versioned = False
    if _is_valid(capsule, b"dltensor"):
        tensor = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
        flags = 0
    elif _is_valid(capsule, b"dltensor_versioned"):
        managed = _ManagedVersioned.from_address(_get_pointer(capsule, b"dltensor_versioned"))
        tensor, flags, versioned = managed.dl_tensor, int(managed.flags), True
    else:
        return None
    ndim = int(tensor.ndim)
    if ndim < 0 or (ndim and not tensor.shape):
        return None
    dims = [int(tensor.shape[i]) for i in range(ndim)]
    if tensor.strides:
        strides = [int(tensor.strides[i]) for i in range(ndim)]
    else:  # DLPack: no strides means compact row-major
        strides, running = [0] * ndim, 1
        for i in reversed(range(ndim)):
            strides[i] = running
            running *= dims[i]
    return DlpackLayout(
        pointer=(tensor.data or 0) + int(tensor.byte_offset),
        device_type=int(tensor.device.device_type),
        device_id=int(tensor.device.device_id),
        dims=dims,
        strides=strides,
        code=int(tensor.dtype.code),
        bits=int(tensor.dtype.bits),
        lanes=int(tensor.dtype.lanes),
        read_only=versioned and bool(flags & _READ_ONLY),
    )


def runtime_scalar(on_cpu: bool, dims: list[int]) -> bool:
    """Whether the core's ``Graph.tensor_like`` of an array makes a runtime pass-by-value
    tensor: the array is in ``cpu`` memory and holds exactly one element.

    hipDNN's binding (like cuDNN's), and ``hipdnn_graph.frontend``'s ``Graph.tensor_like``
    which follows it, mark *every* ``cpu`` producer pass-by-value, because on a GPU machine
    host memory only carries runtime values (a runtime ``attn_scale``). The core's
    ``tensor_like`` keeps host arrays of more elements ordinary tensors, so that Q, K and V
    declared from host arrays (a pass-by-value Q is refused by ``validate()``) run on the NumPy
    and CPU torch engines.
    """
    volume = 1
    for dim in dims:
        volume *= dim
    return on_cpu and volume == 1


def layout_problem(layout: DlpackLayout, *, negative_strides: bool) -> str | None:
    """What makes ``layout`` unsafe to hand to a consumer, as a phrase ("has …"), or ``None``.

    Refused: a negative dim; a tensor whose elements, or whose memory span in bytes, do not fit
    in 64 bits; and, unless ``negative_strides`` (NumPy takes them, torch does not), a negative
    stride on a tensor that has elements.
    """
    if any(d < 0 for d in layout.dims):
        return f"has a negative dim in {tuple(layout.dims)}"
    if layout.volume == 0:
        return None
    if not negative_strides and any(s < 0 for s in layout.strides):
        return f"has negative strides {tuple(layout.strides)}"
    itemsize = max(layout.bits * max(layout.lanes, 1) // 8, 1)
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(layout.dims, layout.strides, strict=True))
    if layout.volume * itemsize > _INT64_MAX or span * itemsize > _INT64_MAX:
        return (
            f"has dims {tuple(layout.dims)} and strides {tuple(layout.strides)}, whose extent "
            "does not fit in 64 bits"
        )
    return None


class Exported:
    """Hands one already exported (and checked) capsule to a consumer's ``from_dlpack``."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule
        layout = read_capsule(capsule)
        self._device = (layout.device_type, layout.device_id) if layout else (1, 0)

    def __dlpack__(self, **keywords: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def checked_export(value: Any, label: str, torch_kind: bool) -> Any:
    """Export a DLPack producer once, without a copy (``copy=False``: engines write outputs in
    place, so a temporary would lose them), and check the layout before any consumer sees it:
    torch aborts the process on a negative stride or a 64-bit overflow.

    Raises:
        HipdnnError: ``INVALID_VARIANT_PACK`` when the producer raises (its exception is the
            cause), returns no valid capsule, or describes a layout the consumer cannot take.
    """
    stream = _consumer_stream(value) if torch_kind else None
    try:
        capsule = export_capsule(value, copy=False, stream=stream)
    except Exception as exc:
        raise _fail(f"Variant pack tensor {label} cannot be read through DLPack: {exc}") from exc
    layout = read_capsule(capsule)
    if layout is None:
        raise _fail(
            f"Variant pack tensor {label}: __dlpack__ did not return a valid DLPack capsule"
        )
    problem = layout_problem(layout, negative_strides=not torch_kind)
    if problem is not None:
        hint = (
            "; torch cannot view memory backwards, so pass a copy (np.ascontiguousarray)"
            if torch_kind and "negative strides" in problem
            else ""
        )
        raise _fail(f"Variant pack tensor {label} {problem}{hint}")
    return capsule


def _consumer_stream(value: Any) -> int | None:
    """The stream a CUDA/ROCm producer must order its export on (torch's current stream, with
    the array API's value 1 for CUDA's legacy default stream), as ``torch.from_dlpack`` passes."""
    device = getattr(value, "__dlpack_device__", None)
    if not callable(device):
        return None
    try:
        kind, index = device()
    except Exception:
        return None  # the export itself reports what is wrong
    if kind not in (CUDA, ROCM):
        return None
    import torch

    if not torch.cuda.is_available():
        return None  # no stream to order on: torch refuses the device memory itself
    pointer = int(torch.cuda.current_stream(f"cuda:{int(index)}").cuda_stream)
    return 1 if kind == CUDA and pointer == 0 else pointer


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VARIANT_PACK, message)
