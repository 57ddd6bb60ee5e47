"""Memory behind raw pointers: ``DeviceBuffer``, ``_get_data_ptr`` and pointer resolution.

hipDNN's bindings pass every variant-pack value to the engines as a raw address. hipdnn-graph's
engines take arrays, so an address has to be turned back into an array. That is possible, without
guessing, for memory whose extent is known:

* a :class:`DeviceBuffer` (host NumPy memory without a device, torch device memory with one);
* a NumPy array or torch tensor whose address went through :func:`get_data_ptr` or
  ``Graph.tensor_like`` (they are remembered, weakly, while they live);
* with a CUDA/ROCm device, a span that lies inside one allocated block of torch's caching
  allocator (``torch.cuda.memory_snapshot()``).

Any other address is refused with ``INVALID_VARIANT_PACK`` (reading unknown host memory could
crash the process). Passing the array itself always works.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.frontend import DeviceBuffer
    >>> from hipdnn_graph.frontend.hipdnn_frontend_python import _get_data_ptr
    >>> buf = DeviceBuffer(16)
    >>> buf.copy_from_host(np.arange(4, dtype=np.float32).tobytes())
    >>> _get_data_ptr(buf) == buf.ptr(), np.frombuffer(buf.copy_to_host(), np.float32)[3]
    (True, np.float32(3.0))
"""

from __future__ import annotations

import operator
import sys
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend.buffers import device_visible
from ..backend.dtypes import numpy_dtype
from ..errors import HipdnnError
from ..types import DataType, ErrorCode
from ._dlpack import read_dlpack
from ._errors import FrontendRuntimeError, FrontendTypeError

__all__ = [
    "DeviceBuffer",
    "get_data_ptr",
    "remember",
    "resolve_pointer",
    "torch_device_available",
    "view_in",
]


#: whether torch is installed and sees a CUDA or ROCm device (torch is imported lazily)
torch_device_available = device_visible


def _is_torch(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


@dataclass
class _Region:
    """A known allocation, read through its owner: a :class:`DeviceBuffer`, a NumPy array (the
    root of a ``base`` chain) or a torch tensor (its current storage).

    The bounds are read from the owner each time (:meth:`bounds`), never remembered: a torch
    tensor re-pointed with ``set_()`` resolves to its new storage, and one whose storage was
    resized (``resize_``) or freed no longer covers its old addresses.
    """

    owner: weakref.ref[Any]

    def bounds(self) -> tuple[int, int] | None:
        """``(start, nbytes)`` of the owner's memory now; ``None`` once the owner is gone or
        holds no memory."""
        owner = self.owner()
        if owner is None:
            return None
        if isinstance(owner, DeviceBuffer):
            return owner.ptr(), owner.nbytes
        if _is_torch(owner):
            storage = owner.untyped_storage()
            start, nbytes = int(storage.data_ptr()), int(storage.nbytes())
        else:
            start, nbytes = int(owner.ctypes.data), int(owner.nbytes)
        return (start, nbytes) if start and nbytes else None

    def flat(self) -> Any:
        """The owner's memory as a flat uint8 array or tensor (call after :meth:`bounds`)."""
        owner: Any = self.owner()
        if owner is None:
            return None
        if isinstance(owner, DeviceBuffer):
            return owner._flat
        if _is_torch(owner):
            import torch

            storage = owner.untyped_storage()
            return torch.empty(0, dtype=torch.uint8, device=owner.device).set_(storage)
        return owner.reshape(-1, order="A").view(np.uint8)


_regions: dict[int, _Region] = {}


def remember(owner: Any) -> None:
    """Remember the allocation behind a NumPy array or torch tensor (weakly)."""
    owners = [owner]
    if _is_torch(owner):
        while owner._base is not None:  # a view lives shorter than the tensor it views
            owner = owner._base
        owners.append(owner)  # the view too: set_() can re-point it away from its base
    else:
        owner = _contiguous_base(owner)
        if not (owner.flags.c_contiguous or owner.flags.f_contiguous):
            return
        owners = [owner]
    for each in owners:
        key = id(each)
        if key not in _regions:
            _regions[key] = _Region(weakref.ref(each, _forget(key)))


def _forget(key: int) -> Any:
    return lambda _ref: _regions.pop(key, None)


def _contiguous_base(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The array that owns ``array``'s memory (the root of its ``base`` chain) when that one is
    contiguous, else ``array`` itself."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root if root.flags.c_contiguous or root.flags.f_contiguous else array


def _allocate(size: int, *, device: bool) -> Any:
    """``size`` bytes of device (torch) or host (NumPy) memory.

    Raises:
        FrontendRuntimeError: ``INVALID_VALUE`` when the memory cannot be had (out of memory,
            or more bytes than an address space holds).
    """
    try:
        if device:
            import torch

            return torch.empty(size, dtype=torch.uint8, device="cuda")
        return np.zeros(size, np.uint8)
    except (MemoryError, ValueError, OverflowError, RuntimeError) as exc:
        where = "device" if device else "host"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FrontendRuntimeError(
            f"DeviceBuffer of {size} bytes cannot be allocated in {where} memory: {reason}"
        ) from None


class DeviceBuffer:
    """``nbytes`` of memory with an address: torch device memory when a CUDA/ROCm device is
    visible, host (NumPy) memory otherwise.

    Args:
        nbytes: the size in bytes (``> 0``).

    Raises:
        FrontendTypeError: ``nbytes`` is not an integer.
        FrontendRuntimeError: ``INVALID_VALUE`` for a size that is not positive, or memory that
            cannot be allocated (out of memory, or a size no address space holds).
    """

    def __init__(self, nbytes: int) -> None:
        if isinstance(nbytes, bool) or not hasattr(nbytes, "__index__"):
            raise FrontendTypeError(
                f"DeviceBuffer size must be an integer, got {type(nbytes).__name__}"
            )
        size = operator.index(nbytes)
        if size <= 0:
            raise FrontendRuntimeError(f"DeviceBuffer size must be positive, got {size}")
        self._nbytes = size
        if torch_device_available():
            self._flat: Any = _allocate(size, device=True)
            self._address = int(self._flat.data_ptr())
        else:
            self._flat = _allocate(size, device=False)
            self._address = int(self._flat.ctypes.data)
        _regions[id(self)] = _Region(weakref.ref(self, _forget(id(self))))

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def ptr(self) -> int:
        """The buffer's address."""
        return self._address

    def copy_from_host(self, data: bytes | bytearray | memoryview) -> None:
        """Copy exactly ``nbytes`` bytes into the buffer.

        Raises:
            FrontendRuntimeError: the data has another size.
        """
        view = memoryview(data).cast("B")
        if view.nbytes != self._nbytes:
            raise FrontendRuntimeError(
                f"copy_from_host: {view.nbytes} bytes given for a {self._nbytes}-byte buffer"
            )
        host = np.frombuffer(view, np.uint8)
        if _is_torch(self._flat):
            import torch

            self._flat.copy_(torch.from_numpy(host.copy()))
        else:
            self._flat[:] = host

    def copy_to_host(self) -> bytes:
        """The buffer's bytes."""
        if _is_torch(self._flat):
            return bytes(self._flat.cpu().numpy().tobytes())
        return bytes(self._flat.tobytes())

    def __repr__(self) -> str:
        where = "device" if _is_torch(self._flat) else "host"
        return (
            f"<hipdnn_frontend.DeviceBuffer {self._nbytes} bytes at {self._address:#x} ({where})>"
        )


def get_data_ptr(value: Any, what: str = "value") -> int:
    """The address a variant-pack value stands for, in hipDNN's order: ``int`` (not ``bool``),
    :class:`DeviceBuffer`, ``data_ptr()``, ``__dlpack__`` (byte offset included), ``__index__``.

    NumPy arrays and torch tensors seen here are remembered so that their addresses resolve.

    Raises:
        FrontendTypeError: a ``bool``, or a value of none of those kinds.
        FrontendValueError: a ``__dlpack__`` that returns no valid capsule, or an unsupported
            device.
        Exception: what a producer's ``__dlpack__(copy=False)`` raises, unchanged (for example
            ``BufferError`` from a producer that can only export a copy, whose address would
            be freed at once).
    """
    if isinstance(value, bool | np.bool_):
        raise FrontendTypeError(f"{what}: bool is not a data pointer")
    if isinstance(value, int):
        return value
    if isinstance(value, DeviceBuffer):
        return value.ptr()
    data_ptr = getattr(value, "data_ptr", None)
    if callable(data_ptr):
        if _is_torch(value):
            remember(value)
        return operator.index(data_ptr())
    if hasattr(value, "__dlpack__"):
        pointer = read_dlpack(value, what, copy=False).pointer
        if isinstance(value, np.ndarray):
            remember(value)
        return pointer
    if hasattr(type(value), "__index__"):
        return operator.index(value)
    raise FrontendTypeError(
        f"{what}: expected an integer, DeviceBuffer, an object with data_ptr(), or an object "
        f"implementing __dlpack__, got {type(value).__name__}"
    )


def resolve_pointer(
    address: int, shape: tuple[int, ...], strides: tuple[int, ...], data_type: DataType, label: str
) -> Any:
    """A NumPy array or torch tensor viewing ``address`` with the given layout (no copy).

    Raises:
        HipdnnError: ``INVALID_VARIANT_PACK`` when the address is null or not inside memory known
            as described in the module docstring.
    """
    span = _span(shape, strides, data_type)
    if address == 0:
        raise HipdnnError(ErrorCode.INVALID_VARIANT_PACK, f"Variant pack tensor {label} is null")
    for region in list(_regions.values()):
        bounds = region.bounds()
        if bounds is None:
            continue
        offset = address - bounds[0]
        flat = region.flat() if offset >= 0 and offset + span <= bounds[1] else None
        if flat is not None:
            return _view(flat, offset, span, shape, strides, data_type, label)
    block = _torch_block(address, span)
    if block is not None:
        return _view(block, 0, span, shape, strides, data_type, label)
    raise HipdnnError(
        ErrorCode.INVALID_VARIANT_PACK,
        f"Variant pack tensor {label} is the raw address {address:#x} ({span} bytes), which is "
        "not inside memory hipdnn_graph.frontend knows (a DeviceBuffer, an array whose address "
        "came from _get_data_ptr or tensor_like, or torch device memory); pass the array itself",
    )


def _span(shape: tuple[int, ...], strides: tuple[int, ...], data_type: DataType) -> int:
    """The bytes a layout reaches from its first element's address."""
    extent = sum((d - 1) * s for d, s in zip(shape, strides, strict=True) if d > 0)
    return (extent + 1) * numpy_dtype(data_type).itemsize


def view_in(
    owner: Any,
    address: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    data_type: DataType,
    label: str,
) -> Any:
    """The declared layout at ``address``, inside ``owner``'s memory (a NumPy array's root
    allocation, a torch tensor's storage); ``None`` when that memory cannot be viewed without a
    copy (a NumPy root that is not contiguous).

    hipDNN's execute reads a variant-pack value only through its address; this is that read,
    bounded by the memory the value owns.

    Raises:
        HipdnnError: ``INVALID_VARIANT_PACK`` when the layout runs past that memory (hipDNN
            would read past it), or the address cannot hold the data type.
    """
    root = owner if _is_torch(owner) else _contiguous_base(owner)
    if not _is_torch(root) and not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    region = _Region(weakref.ref(root))
    span = _span(shape, strides, data_type)
    bounds = region.bounds()
    offset = address - bounds[0] if bounds is not None else -1
    held = bounds[1] - offset if bounds is not None and offset >= 0 else 0
    if bounds is None or offset < 0 or span > held:
        raise HipdnnError(
            ErrorCode.INVALID_VARIANT_PACK,
            f"Variant pack tensor {label} is read from its value's address as the graph "
            f"declares it (dims {list(shape)}, strides {list(strides)}, {data_type.name}: "
            f"{span} bytes), but the value holds {max(held, 0)} bytes from there",
        )
    return _view(region.flat(), offset, span, shape, strides, data_type, label)


def _view(
    flat: Any,
    offset: int,
    span: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    data_type: DataType,
    label: str,
) -> Any:
    piece = flat[offset : offset + span]
    if _is_torch(flat):
        import torch

        from ..backend.dtypes import torch_dtype

        try:
            typed = piece.view(torch_dtype(data_type))
        except RuntimeError as exc:  # an address not aligned to the element size
            raise HipdnnError(
                ErrorCode.INVALID_VARIANT_PACK,
                f"Variant pack tensor {label}: the address cannot hold {data_type.name}: {exc}",
            ) from None
        return torch.as_strided(typed, shape, strides)
    dtype = numpy_dtype(data_type)
    byte_strides = tuple(s * dtype.itemsize for s in strides)
    return np.ndarray(shape, dtype, buffer=piece, offset=0, strides=byte_strides)


def _torch_block(address: int, span: int) -> Any:
    """A uint8 torch view of ``[address, address + span)`` when it lies inside one allocated
    block of torch's device allocator, else ``None``."""
    if not torch_device_available():
        return None
    import torch

    for segment in torch.cuda.memory_snapshot():  # type: ignore[no-untyped-call]
        start = int(segment["address"])
        if not start <= address < start + int(segment["total_size"]):
            continue
        for block in segment.get("blocks", []):
            block_start = int(block.get("address", start))
            size = int(block["size"])
            if (
                block.get("state") == "active_allocated"
                and block_start <= address
                and address + span <= block_start + size
            ):
                interface = {
                    "shape": (span,),
                    "typestr": "|u1",
                    "data": (address, False),
                    "strides": None,
                    "version": 2,
                }
                holder = type("_Block", (), {"__cuda_array_interface__": interface})()
                return torch.as_tensor(holder, device=f"cuda:{int(segment['device'])}")
            start = block_start + size  # blocks are listed in address order
    return None
