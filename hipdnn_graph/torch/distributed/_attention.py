"""``context_parallel_attention``: exact attention over a sequence sharded across ranks."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from typing import Any

import torch

from ...errors import HipdnnError
from ...types import ErrorCode
from .._args import check_qkv
from .._op import scaled_dot_product_attention
from ._agree import agree, code_labels, device_code, dtype_code
from ._group import Ring, resolve
from ._layout import LAYOUTS, check_layout
from ._ring import RingAttention

__all__ = ["context_parallel_attention"]

Tensor = torch.Tensor

#: the options' entries of an attention call's signature (:func:`option_signature`)
OPTION_NAMES = ("dtype", "is_causal", "scale", "enable_gqa", "layout", "device", "autograd")
_NAMES = (
    "batch", "query heads", "local query length", "query head dim", "key heads",
    "local key length", "key head dim", "value heads", "local value length", "value head dim",
    *OPTION_NAMES,
)  # fmt: skip
#: the options' labels (:func:`~._agree.agree`)
OPTION_LABELS = code_labels(LAYOUTS, "is_causal", "enable_gqa")


def context_parallel_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    group: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    layout: str = "zigzag",
) -> Tensor:
    """Exact attention over a sequence sharded along dim 2 across the ranks of ``group``.

    Each rank passes its own slice of the sequence (``[B, H, L, D]`` queries, ``[B, Hk, L, D]``
    keys and ``[B, Hk, L, Dv]`` values, ``L = S / W``, laid out by ``layout``; see
    :func:`shard_sequence`) and gets its slice of the output, equal to what
    :func:`~hipdnn_graph.torch.scaled_dot_product_attention` gives on the whole sequence.
    K/V slices travel around the ring of ranks with asynchronous point-to-point sends
    (``torch.distributed.batch_isend_irecv``: NCCL on GPUs, gloo on CPUs) while each rank
    computes its block with an SdpaFwd graph; blocks merge through their Stats. The backward
    (autograd) runs SdpaBwd graphs fed the merged O and Stats; dQ accumulates locally and the
    dK/dV partials travel with their slices back to their owners. Under ``is_causal`` each
    block gets its mask (full, top-left causal on the diagonal, or skipped); the ``"zigzag"``
    layout (rank ``r`` holds chunks ``r`` and ``2W−1−r`` of ``2W``) gives every rank the same
    causal work, ``"contiguous"`` (rank ``r`` holds ``[r·L, (r+1)·L)``) does not.

    This is a collective: every rank of the group calls it with the same shapes and options
    (checked with one small ``all_gather`` per call), and the backward is one too. A group of
    one (or ``group=None`` without an initialized torch.distributed) is plain attention through
    the op, for any sequence length.

    Args:
        query: this rank's ``[B, H, L, D]`` queries (float16, bfloat16, float32 or float64).
        key: this rank's ``[B, Hk, L, D]`` keys, the same local length as the queries.
        value: this rank's ``[B, Hk, L, Dv]`` values.
        group: the process group (``None``: the default group, the world).
        is_causal: causal attention over the whole sequence (query at position ``i`` sees
            keys at positions ``≤ i``).
        scale: the score scale; ``1/sqrt(D)`` when ``None``.
        enable_gqa: allow fewer key/value heads than query heads (dividing them).
        layout: ``"zigzag"`` or ``"contiguous"``: which positions each rank holds.

    Returns:
        This rank's ``[B, H, L, Dv]`` slice of the attention output, in query's dtype.

    Raises:
        HipdnnError: the same code and message on every rank when any rank's arguments are
            bad (the first refusing rank's error, prefixed
            ``"context_parallel_attention: rank R refused its arguments: "``): not rank-4
            tensors, unequal local lengths, a local length that is not a positive multiple of
            the layout's chunks per rank (zigzag: 2, i.e. a sequence not divisible by ``2W``),
            heads that differ without ``enable_gqa``, an unknown layout, a scale that is not a
            finite number, flags that are not bools, meta tensors, a ``group`` that is not a
            process group; or ``INVALID_VALUE`` when shapes, dtypes, device types, options or
            autograd (``requires_grad`` and grad mode) differ across ranks.
        NotSupportedError: when no engine runs a block's graph.

    Example:
        >>> import torch
        >>> from hipdnn_graph.torch.distributed import context_parallel_attention
        >>> q = k = v = torch.randn(1, 2, 16, 8, requires_grad=True)
        >>> out = context_parallel_attention(q, k, v, is_causal=True)  # one process here
        >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(
        ...     q, k, v, is_causal=True), atol=1e-6)
        True
    """
    grp = resolve(group)
    if grp.world == 1:
        if grp.error is not None:
            raise grp.error
        check_layout(layout)
        return scaled_dot_product_attention(
            query, key, value, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
        )
    error = grp.error or local_error(
        lambda: _reason(query, key, value, is_causal, scale, enable_gqa, layout)
    )
    signature = [0.0] * len(_NAMES)
    scale = resolved_scale(query, scale) if error is None else 0.0
    if error is None:
        shapes = map(float, (*query.shape, *key.shape[1:], *value.shape[1:]))
        flags = (is_causal, scale, enable_gqa, list(LAYOUTS).index(layout))
        signature = [*shapes, *option_signature(query, key, value, *flags)]
    agree(grp, "context_parallel_attention", error, signature, _NAMES, query, OPTION_LABELS)
    out: Tensor = RingAttention.apply(  # type: ignore[no-untyped-call]
        query, key, value, Ring(grp), bool(is_causal), float(scale), layout
    )
    return out


def local_error(check: Callable[[], str | None]) -> HipdnnError | None:
    """Why this rank's arguments are bad (an error to share with the other ranks), or ``None``:
    the reason ``check`` returns, or the error it raises."""
    try:
        reason = check()
    except HipdnnError as err:
        return err
    except Exception as err:  # anything unforeseen: refused together, never raised alone
        reason = f"bad arguments ({type(err).__name__}: {err})"
    return None if reason is None else HipdnnError(ErrorCode.INVALID_VALUE, reason)


def _reason(q: Any, k: Any, v: Any, causal: Any, scale: Any, gqa: Any, layout: Any) -> str | None:
    """What is wrong with this rank's arguments, or ``None`` (raises the op's own checks)."""
    check_layout(layout)
    reason = option_reason(causal, scale, gqa)
    if reason is not None:
        return reason
    check_qkv(q, k, v)
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.device.type == "meta" or t.layout != torch.strided:
            return (
                f"{name} has no data to exchange (a {kind_of(t)} tensor): context parallelism "
                "needs dense tensors on a CPU or GPU"
            )
    h = q.shape[1]
    if not gqa and (k.shape[1] != h or v.shape[1] != h):
        return gqa_reason(k.shape[1], v.shape[1], h)
    lengths = (q.shape[2], k.shape[2], v.shape[2])
    if len(set(lengths)) > 1:
        return (
            "query, key and value must have the same local sequence length, got "
            f"{', '.join(map(str, lengths))}"
        )
    if k.shape[0] != q.shape[0] or v.shape[0] != q.shape[0]:
        return f"batch sizes differ: query {q.shape[0]}, key {k.shape[0]}, value {v.shape[0]}"
    if k.shape[3] != q.shape[3]:
        return f"key head dim ({k.shape[3]}) differs from query head dim ({q.shape[3]})"
    chunks = LAYOUTS[layout]
    if lengths[0] == 0 or lengths[0] % chunks:
        return (
            f"the {layout} layout needs a local sequence length that is a positive multiple "
            f"of {chunks} (each rank holds {chunks} equal chunk{'s' if chunks > 1 else ''}), "
            f"got {lengths[0]}"
        )
    return None


def gqa_reason(hk: int, hv: int, h: int) -> str:
    """The refusal of fewer key/value heads than query heads without ``enable_gqa``."""
    return (
        f"key/value heads ({hk}, {hv}) differ from query heads ({h}); "
        "pass enable_gqa=True for grouped-query attention"
    )


def option_reason(causal: Any, scale: Any, gqa: Any) -> str | None:
    """What is wrong with the options (flags that are not bools, a scale that is not a finite
    number), or ``None``."""
    for name, flag in (("is_causal", causal), ("enable_gqa", gqa)):
        if not isinstance(flag, bool):
            return f"{name} must be a bool, got {reprlib.repr(flag)}"
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, int | float):
            return f"scale must be a finite number, got {reprlib.repr(scale)}"
        try:
            finite = math.isfinite(float(scale))
        except OverflowError:
            finite = False
        if not finite:
            return f"scale must be a finite number, got {reprlib.repr(scale)}"
    return None


def kind_of(t: Tensor) -> str:
    """``"meta"`` or the layout of a tensor that is not dense (``"sparse_coo"``)."""
    return "meta" if t.device.type == "meta" else str(t.layout).removeprefix("torch.")


def resolved_scale(query: Tensor, scale: float | None) -> float:
    """The score scale of a call: ``scale``, or ``1/sqrt(D)`` (1 for ``D = 0``)."""
    if scale is not None:
        return float(scale)
    return 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0


def option_signature(
    q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, gqa: bool, layout: int
) -> list[float]:
    """The entries :data:`OPTION_NAMES` of a call's signature: dtype, options, the layout's
    index, device type and whether autograd records the call (then every rank must run the
    backward's exchanges), as numbers."""
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    return [
        dtype_code(q.dtype),
        float(causal),
        float(scale),
        float(gqa),
        float(layout),
        device_code(q.device),
        float(grad),
    ]
