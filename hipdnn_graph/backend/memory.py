"""Whether a caller's buffer may be written: NumPy's ``writeable`` flag, who allocated the memory,
and, for memory neither NumPy nor torch allocated, the page protection the operating system
reports.

A NumPy array over a read-only ``mmap`` has ``writeable=False``, but a torch tensor or a DLPack
view of the same memory does not say so, and writing through it kills the process (SIGSEGV).
Memory that NumPy or torch allocated is always writable; for anything else (``mmap``, buffers of
other libraries, DLPack imports) the pages are looked up in ``/proc/self/maps`` on Linux. Where
the operating system does not tell (other systems), only the flags are checked.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.backend.memory import array_is_read_only
    >>> array_is_read_only(np.zeros(4))
    False
    >>> array_is_read_only(np.frombuffer(b"12345678", np.uint8))  # over an immutable bytes
    True
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = [
    "array_is_read_only",
    "pages_read_only",
    "tensor_is_read_only",
    "tensor_storage_shortfall",
]

_MAPS = "/proc/self/maps"


def pages_read_only(low: int, high: int) -> bool:
    """Whether a page of the address range ``[low, high)`` is mapped without write permission.

    Reads ``/proc/self/maps``; ``False`` where it cannot be read (not Linux) or for an empty
    range. Addresses not mapped at all are not reported (writing there is the caller's bug in
    any case, and NumPy/torch never hand such pointers out).
    """
    if high <= low:
        return False
    try:
        with open(_MAPS, "rb") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return False
    for line in lines:
        span, _, rest = line.partition(b" ")
        start_text, _, end_text = span.partition(b"-")
        try:
            start, end = int(start_text, 16), int(end_text, 16)
        except ValueError:
            continue
        if start < high and low < end and rest[1:2] != b"w":
            return True
    return False


def _byte_span(pointer: int, shape: Any, byte_strides: Any, itemsize: int) -> tuple[int, int]:
    """``[low, high)`` addresses a strided view starting at ``pointer`` touches."""
    if any(int(d) == 0 for d in shape):
        return pointer, pointer
    low = high = pointer
    for d, s in zip(shape, byte_strides, strict=True):
        reach = (int(d) - 1) * int(s)
        if reach < 0:
            low += reach
        else:
            high += reach
    return low, high + itemsize


def _allocated_by_numpy_or_torch(array: np.ndarray[Any, Any]) -> bool:
    """Whether ``array``'s memory comes from NumPy's or torch's own allocator (always writable)."""
    torch = sys.modules.get("torch")
    base: Any = array
    for _ in range(64):  # base chains are short; a bound keeps a strange object from looping
        if isinstance(base, np.ndarray):
            if base.flags.owndata:
                return True
            base = base.base
        elif torch is not None and isinstance(base, torch.Tensor):
            return _torch_allocated(base)
        elif isinstance(getattr(base, "base", None), np.ndarray):  # as_strided's DummyArray
            base = base.base
        else:
            return False
    return False


def _torch_allocated(tensor: Any) -> bool:
    # torch's own CPU storages are resizable; those over NumPy arrays, Python buffers or DLPack
    # imports are not
    return tensor.device.type == "cpu" and bool(tensor.untyped_storage().resizable())


def array_is_read_only(array: np.ndarray[Any, Any]) -> bool:
    """Whether writing into ``array`` would change read-only memory (or crash the process)."""
    if not array.flags.writeable:
        return True
    if _allocated_by_numpy_or_torch(array):
        return False
    pointer = int(array.__array_interface__["data"][0])
    return pages_read_only(*_byte_span(pointer, array.shape, array.strides, array.itemsize))


def tensor_is_read_only(tensor: Any) -> bool:
    """Whether writing into the CPU torch tensor ``tensor`` would hit read-only pages (``False``
    for device memory, whose protection the host cannot see)."""
    if tensor.device.type != "cpu" or _torch_allocated(tensor):
        return False
    itemsize = tensor.element_size()
    byte_strides = [s * itemsize for s in tensor.stride()]
    return pages_read_only(*_byte_span(tensor.data_ptr(), tensor.shape, byte_strides, itemsize))


def tensor_storage_shortfall(tensor: Any) -> int | None:
    """How many bytes a dense torch tensor's view reaches past the end of its storage (``None``
    when the storage covers it): a storage resized (``untyped_storage().resize_(0)``) or freed
    under a view leaves the view pointing at memory it no longer owns, which ``numpy()`` would
    read without a check."""
    if tensor.numel() == 0:
        return None
    reach = tensor.storage_offset() + sum(
        (d - 1) * s for d, s in zip(tensor.shape, tensor.stride(), strict=True)
    )
    needed = (reach + 1) * tensor.element_size()
    have = int(tensor.untyped_storage().nbytes())
    return needed - have if needed > have else None
