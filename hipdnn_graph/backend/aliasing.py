"""Whether variant-pack buffers share memory, and the error that says so.

torch tensors are compared by address span first, then exactly from their layouts (interleaved
views do not alias), through NumPy's ``shares_memory`` on address-only views, which works for
device memory too; NumPy arrays through ``np.shares_memory``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import HipdnnError
from .buffers import is_torch_tensor
from .tensor_spec import TensorSpec, pack_error

__all__ = ["alias_error", "check_output_kind", "overlap"]


class _AddressView:
    """Exposes raw (pointer, shape, byte strides) through the array interface, never read."""

    def __init__(
        self, pointer: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int
    ):
        self.__array_interface__ = {
            "version": 3,
            "data": (pointer, False),
            "shape": shape,
            "strides": strides,
            "typestr": f"|V{itemsize}",
        }


def _torch_layout(t: Any) -> np.ndarray[Any, Any]:
    itemsize = t.element_size()
    strides = tuple(s * itemsize for s in t.stride())
    return np.asarray(_AddressView(t.data_ptr(), tuple(t.shape), strides, itemsize))


def check_output_kind(value: Any, spec: TensorSpec, torch_kind: bool) -> None:
    """Reject, before any conversion, output buffers that cannot be written in place."""
    if isinstance(value, np.ndarray):
        if not value.flags.writeable:  # checked here: torch.from_numpy would drop the flag
            raise pack_error(f"Variant pack output {spec.label} is read-only")
    elif is_torch_tensor(value):
        if value.requires_grad:
            raise pack_error(
                f"Variant pack output {spec.label} requires grad; engines write outputs in "
                "place, so pass a tensor that does not (for example out.detach())"
            )
        if not torch_kind and (value.is_neg() or value.is_conj()):
            raise pack_error(
                f"Variant pack output {spec.label} has its negative or conjugate bit set; "
                "pass a tensor without it (resolve_neg() / resolve_conj())"
            )


def overlap(a: Any, b: Any, sa: TensorSpec, sb: TensorSpec, torch_kind: bool) -> bool:
    if torch_kind:
        lo_a, lo_b = a.data_ptr(), b.data_ptr()
        meet = lo_a < lo_b + _span(b, sb) and lo_b < lo_a + _span(a, sa)
        return meet and _torch_shares(a, b)
    return bool(np.may_share_memory(a, b)) and bool(np.shares_memory(a, b))


def _span(t: Any, spec: TensorSpec) -> int:
    """The bytes a tensor's elements span: the declared extent, or for a packed (ragged)
    tensor, whose buffer has its own shape, the buffer's."""
    if spec.ragged is None:
        return spec.span_bytes
    extent = sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride(), strict=True))
    return int((extent + 1) * t.element_size())


def _torch_shares(a: Any, b: Any) -> bool:
    """Whether two tensors whose address spans meet share memory, decided exactly from their
    layouts (interleaved views do not alias); shares_memory only does address arithmetic, so
    this works for device memory too."""
    if a.device != b.device:
        return False
    return bool(np.shares_memory(_torch_layout(a), _torch_layout(b)))


def alias_error(out: TensorSpec, other: TensorSpec) -> HipdnnError:
    kind = "output" if other.is_output else "input"
    return pack_error(
        f"Variant pack output {out.label} shares memory with {kind} {other.label}; "
        "outputs must not alias other tensors"
    )
