"""Reading DLPack capsules without copying: data pointer, device, dims, strides and data type.

This mirrors what hipDNN's bindings read from a ``__dlpack__`` producer (they use nanobind's
importer; here the capsule's ``DLManagedTensor`` is read through ``ctypes``). The capsule is not
consumed: its producer keeps ownership and frees it as usual.

Devices accepted: ``cpu`` (1), ``cuda`` (2), ``cuda_host`` (3), ``rocm`` (10), ``rocm_host`` (11).
hipDNN's own wheel accepts the ROCm ones; the CUDA ones are added here because hipdnn-graph also
runs on CUDA builds of torch.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.frontend._dlpack import read_dlpack
    >>> info = read_dlpack(np.zeros((2, 3), np.float32), "example")
    >>> info.dims, info.strides, info.data_type.name, info.is_host
    ([2, 3], [3, 1], 'FLOAT', True)
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from ..types import DataType
from ._errors import FrontendTypeError, FrontendValueError

__all__ = ["SUPPORTED_DEVICES", "DlpackInfo", "read_dlpack"]

CPU, CUDA, CUDA_HOST, ROCM, ROCM_HOST = 1, 2, 3, 10, 11
#: DLPack device types accepted, and whether each is host memory
SUPPORTED_DEVICES = {CPU: True, CUDA: False, CUDA_HOST: True, ROCM: False, ROCM_HOST: True}


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
class DlpackInfo:
    """What a DLPack producer exports (``data_type`` is ``None`` for a type hipDNN lacks)."""

    pointer: int
    device_type: int
    device_id: int
    dims: list[int]
    strides: list[int]
    code: int
    bits: int
    lanes: int

    @property
    def is_host(self) -> bool:
        """Whether the memory is host memory (``cpu`` or a pinned ``*_host`` device)."""
        return SUPPORTED_DEVICES.get(self.device_type, False)

    @property
    def data_type(self) -> DataType | None:
        return _TYPES.get((self.code, self.bits)) if self.lanes == 1 else None

    def dtype_text(self) -> str:
        return f"(code={self.code}, bits={self.bits})"


def _tensor_of(capsule: Any, what: str) -> _DLTensor:
    for name, versioned in ((b"dltensor", False), (b"dltensor_versioned", True)):
        if _is_valid(capsule, name):
            address = _get_pointer(capsule, name)
            if versioned:
                tensor: _DLTensor = _ManagedVersioned.from_address(address).dl_tensor
                return tensor
            return _DLTensor.from_address(address)
    raise FrontendValueError(f"{what}: __dlpack__ did not return a valid DLPack capsule")


def read_dlpack(producer: Any, what: str) -> DlpackInfo:
    """Read ``producer.__dlpack__()`` (no copy, capsule left to its producer).

    Raises:
        FrontendTypeError: ``producer`` has no ``__dlpack__``.
        FrontendValueError: not a valid capsule, or a device other than those listed above.
    """
    export = getattr(producer, "__dlpack__", None)
    if export is None:
        raise FrontendTypeError(f"{what}: expected an object implementing __dlpack__")
    try:
        try:  # DLPack 1.x first: it can also export read-only memory (NumPy needs it for that)
            capsule = export(max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0
            capsule = export()
    except Exception as exc:
        raise FrontendValueError(f"{what}: __dlpack__() failed: {exc}") from None
    tensor = _tensor_of(capsule, what)
    device = tensor.device.device_type
    if device not in SUPPORTED_DEVICES:
        raise FrontendValueError(
            f"{what}: unsupported DLPack device_type={device}; expected cpu (1), cuda (2), "
            "cuda_host (3), rocm (10), or rocm_host (11)"
        )
    ndim = tensor.ndim
    dims = [int(tensor.shape[i]) for i in range(ndim)]
    if tensor.strides:
        strides = [int(tensor.strides[i]) for i in range(ndim)]
    else:  # DLPack: no strides means compact row-major
        strides, running = [0] * ndim, 1
        for i in reversed(range(ndim)):
            strides[i] = running
            running *= dims[i]
    info = DlpackInfo(
        pointer=(tensor.data or 0) + int(tensor.byte_offset),
        device_type=device,
        device_id=int(tensor.device.device_id),
        dims=dims,
        strides=strides,
        code=int(tensor.dtype.code),
        bits=int(tensor.dtype.bits),
        lanes=int(tensor.dtype.lanes),
    )
    del capsule  # the producer's destructor frees its export
    return info
