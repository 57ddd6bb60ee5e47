"""Buffers of a variant pack as the engine wants them: zero-copy NumPy or torch views.

NumPy arrays, torch tensors (CPU tensors for NumPy views) and DLPack producers are converted
without copies where their memory allows; the types NumPy holds through ml_dtypes (bfloat16 and
the FP8 types, E8M0 included) pass as views of their bits; anything else raises
``INVALID_VARIANT_PACK`` naming the tensor. torch is imported only when a torch tensor is at hand.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.backend.buffers import as_numpy, is_torch_tensor
    >>> a = np.zeros(3, np.float32)
    >>> as_numpy(a) is a, is_torch_tensor(a)
    (True, False)
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from ..dtype_names import DTYPE_NAMES
from ..errors import HipdnnError
from ..types import DataType, ErrorCode
from .dlpack import Exported, checked_export
from .dtypes import numpy_dtype
from .memory import tensor_storage_shortfall

__all__ = ["as_numpy", "as_torch", "device_visible", "is_torch_tensor"]


#: the ml_dtypes types torch also has (bfloat16 and the FP8 types), by their shared name: torch
#: and NumPy exchange them only as views of their bits
_BIT_VIEWED = {
    DTYPE_NAMES[t]: t
    for t in (DataType.BFLOAT16, DataType.FP8_E4M3, DataType.FP8_E5M2, DataType.FP8_E4M3_FNUZ,
              DataType.FP8_E5M2_FNUZ, DataType.FP8_E8M0)
}  # fmt: skip
_BITS = {1: np.uint8, 2: np.int16}


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VARIANT_PACK, message)


def _unreadable(label: str, exc: Exception) -> HipdnnError:
    return _fail(f"Variant pack tensor {label} cannot be read through DLPack: {exc}")


def _not_a_buffer(value: Any, label: str) -> HipdnnError:
    return _fail(
        f"Variant pack value for {label} is a {type(value).__name__}; pass a NumPy array, "
        "a torch tensor or a DLPack producer"
    )


def device_visible() -> bool:
    """Whether torch is installed and sees a CUDA or ROCm device (torch imported lazily)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a ``torch.Tensor`` (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _check_dense(value: Any, label: str) -> None:
    """Reject torch tensors that have no strides (sparse, mkldnn, nested)."""
    import torch

    if value.layout != torch.strided or value.is_nested:
        layout = "nested" if value.is_nested else str(value.layout)
        raise _fail(
            f"Variant pack tensor {label} has layout {layout}; pass a dense (strided) tensor"
        )


def as_numpy(value: Any, label: str = "buffer") -> np.ndarray[Any, Any]:
    """A zero-copy NumPy view of a NumPy array, CPU torch tensor or CPU DLPack producer.

    A torch tensor that requires grad is read through ``detach()``; one with its negative or
    conjugate bit set is resolved first (a copy: fine for inputs, and outputs with those bits are
    rejected by :class:`VariantPackBinder` before they get here).
    """
    if isinstance(value, np.ndarray):
        return value
    if is_torch_tensor(value):
        if value.device.type != "cpu":
            raise _fail(
                f"Variant pack tensor {label} is on {value.device}, but this engine runs on the CPU"
            )
        import torch

        _check_dense(value, label)
        if tensor_storage_shortfall(value) is not None:
            raise _fail(
                f"Variant pack tensor {label} reaches past the end of its storage "
                f"({value.untyped_storage().nbytes()} bytes: resized or freed under the view)"
            )
        if value.requires_grad:
            value = value.detach()
        if value.is_neg() or value.is_conj():
            value = value.resolve_neg().resolve_conj()
        viewed = _BIT_VIEWED.get(str(value.dtype).removeprefix("torch."))
        if viewed is not None:
            bits = {1: torch.uint8, 2: torch.int16}[value.element_size()]
            array: np.ndarray[Any, Any] = value.view(bits).numpy()
            return array.view(numpy_dtype(viewed))
        return value.numpy()  # type: ignore[no-any-return]
    if hasattr(value, "__dlpack__"):
        capsule = checked_export(value, label, torch_kind=False)
        try:
            return np.from_dlpack(Exported(capsule))
        except Exception as exc:  # a device NumPy cannot read, a type it lacks, ...
            raise _unreadable(label, exc) from exc
    raise _not_a_buffer(value, label)


def as_torch(value: Any, label: str = "buffer") -> Any:
    """A zero-copy torch view of a torch tensor, NumPy array or DLPack producer."""
    if is_torch_tensor(value):
        _check_dense(value, label)
        return value
    import torch

    if isinstance(value, np.ndarray):
        try:
            with warnings.catch_warnings():
                # a read-only array reaches here only as an input, which engines never write
                # (read-only outputs are refused before conversion): torch's warning is moot
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                if value.dtype.name in _BIT_VIEWED and hasattr(torch, value.dtype.name):
                    bits = value.view(_BITS[value.dtype.itemsize])
                    return torch.from_numpy(bits).view(getattr(torch, value.dtype.name))
                return torch.from_numpy(value)
        except (TypeError, ValueError, RuntimeError) as exc:  # negative strides, odd dtypes
            raise _fail(
                f"Variant pack tensor {label} cannot be viewed as a torch tensor: {exc}"
            ) from None
    if hasattr(value, "__dlpack__"):
        capsule = checked_export(value, label, torch_kind=True)
        try:
            from torch.utils.dlpack import from_dlpack

            return from_dlpack(capsule)
        except Exception as exc:
            raise _unreadable(label, exc) from exc
    raise _not_a_buffer(value, label)
