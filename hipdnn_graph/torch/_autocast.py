"""``torch.autocast`` for the torch op: torch's own rule for ``scaled_dot_product_attention``.

Autocast lists ``scaled_dot_product_attention`` among its lower-precision ops on CUDA and on the
CPU: inside an enabled region for the inputs' device type, every floating-point input on that
device type that is not float64 is cast to the region's dtype (bfloat16 or float16) before the
op runs, the attention mask included (a bool mask is no floating-point tensor: it stays), and
float64 inputs are left as they are. So float32 query and key with a bfloat16 value (the rotary
embeddings of Llama-style models hand them so) become one dtype and run, while a float64 input
beside float32 ones still differs and is refused, as torch refuses it.

:func:`cast` applies that rule once, where the op takes its arguments (the casts are ordinary
differentiable ``Tensor.to`` calls, so the gradients come back in the callers' dtypes, as
torch's do). :class:`AutocastOff` then turns autocast off for the device type around the
graphs, as ``torch.amp.custom_fwd(cast_inputs=...)`` does around a custom function: the engines'
own matmuls and softmaxes must run in the precision the graph declares, not be cast again.

Example:
    >>> import torch
    >>> q = torch.randn(1, 2, 8, 4)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     q2, k2, v2, _ = cast(q, q, q.bfloat16(), None)
    >>> q2.dtype, v2.dtype
    (torch.bfloat16, torch.bfloat16)
    >>> cast(q, q, q, None)[0] is q  # outside autocast nothing changes
    True
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import HipdnnError
from ..types import ErrorCode

__all__ = ["AutocastOff", "cast", "enabled"]

Tensor = torch.Tensor

#: whether autocast is on for any device type (one C call), else a stand-in that says it may be
enabled = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)

#: the device types whose autocast has a rule for ``scaled_dot_product_attention``
_DEVICE_TYPES = frozenset({"cpu", "cuda"})


def region_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast casts to for ``device_type`` (None: autocast is off there).

    Example:
        >>> with torch.autocast("cpu", dtype=torch.float16):
        ...     region_dtype("cpu")
        torch.float16
        >>> region_dtype("cpu") is None
        True
    """
    if device_type not in _DEVICE_TYPES or not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def cast(q: Any, k: Any, v: Any, mask: Any) -> tuple[Any, Any, Any, Any]:
    """``q, k, v, mask`` as autocast hands them to ``scaled_dot_product_attention`` (see the
    module): unchanged outside an autocast region of q's device type.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when, after the casts, the floating-point inputs still
            differ in dtype (a float64 input beside others), saying what to do.
    """
    if not isinstance(q, Tensor) or not q.is_floating_point():
        return q, k, v, mask  # the argument checks name what is wrong
    dtype = region_dtype(q.device.type)
    if dtype is None:
        return q, k, v, mask
    device_type = q.device.type
    q, k, v, mask = (_cast(t, dtype, device_type) for t in (q, k, v, mask))
    for name, t in (("key", k), ("value", v)):  # others than floats: the checks name them
        if isinstance(t, Tensor) and t.is_floating_point() and t.dtype != q.dtype:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{name} dtype {t.dtype} differs from query dtype {q.dtype} under "
                f"torch.autocast({device_type!r}, {dtype}), which casts float16, bfloat16 and "
                "float32 inputs but leaves float64 ones as they are: pass query, key and value "
                "in one dtype",
            )
    return q, k, v, mask


def _cast(t: Any, dtype: torch.dtype, device_type: str) -> Any:
    """``t`` cast to ``dtype`` where autocast would cast it (a floating-point tensor on
    ``device_type`` that is not float64), else ``t`` itself."""
    if (
        isinstance(t, Tensor)
        and t.is_floating_point()
        and t.dtype != torch.float64
        and t.dtype != dtype
        and t.device.type == device_type
    ):
        return t.to(dtype)
    return t


class AutocastOff:
    """Autocast turned off for one device type inside the block, and put back as it was after.

    Example:
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     with AutocastOff("cpu"):
        ...         inside = torch.is_autocast_enabled("cpu")
        ...     after = torch.is_autocast_enabled("cpu")
        >>> inside, after
        (False, True)
    """

    __slots__ = ("_device_type", "_was")

    def __init__(self, device_type: str) -> None:
        self._device_type = device_type
        self._was = False

    def __enter__(self) -> None:
        self._was = torch.is_autocast_enabled(self._device_type)
        if self._was:
            torch.set_autocast_enabled(self._device_type, False)

    def __exit__(self, *exc: object) -> None:
        if self._was:
            torch.set_autocast_enabled(self._device_type, True)
