"""Arguments of the torch op: checks, the graph options, padding lengths and output layouts.

Everything here turns torch-level arguments into what the graphs take, and raises
``HipdnnError(INVALID_VALUE)`` naming the argument when one is wrong. :func:`normalise` does
it for one call of the op, once: its :class:`Call` is the call's immutable description (the
tensors after autocast's casts, with their dtypes and layouts, the mask shaped for the graph,
the padding lengths, the dropout probability and the graph options, dropout included).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from ..errors import HipdnnError
from ..types import DataType, DiagonalAlignment, ErrorCode
from ._cached import Options, remember

__all__ = [
    "IO_TYPES",
    "Call",
    "SeqLens",
    "alignment_of",
    "as_mask",
    "check_probability",
    "check_qkv",
    "check_tensor",
    "checked_options",
    "fail",
    "materialized",
    "no_zero_strides",
    "normalise",
    "seq_lens",
    "strides_like",
    "with_dropout",
]

Tensor = torch.Tensor
#: a per-batch valid length: a tensor of B integers (any shape with B elements) or B ints
SeqLens = Tensor | Sequence[int] | None

#: torch dtype -> hipDNN data type of the tensors the op takes
IO_TYPES: dict[torch.dtype, DataType] = {
    torch.float16: DataType.HALF,
    torch.bfloat16: DataType.BFLOAT16,
    torch.float32: DataType.FLOAT,
    torch.float64: DataType.DOUBLE,
}


def strides_like(t: Tensor, shape: Sequence[int]) -> tuple[int, ...]:
    """Packed strides for ``shape`` with ``t``'s dimension order (outermost first).

    Outputs take their input's layout: O takes Q's and dQ, dK, dV take Q's, K's and V's, so
    that transformers' ``[B, S, H, D]`` activations flow through without copies (the fused
    kernels write that layout, and ``o.transpose(1, 2).contiguous()`` is then free).

    Example:
        >>> q = torch.empty(2, 16, 4, 8).transpose(1, 2)  # [B, H, S, D] over [B, S, H, D] memory
        >>> strides_like(q, (2, 4, 16, 32))
        (2048, 32, 128, 1)
    """
    order = sorted(range(t.dim()), key=lambda d: (-int(t.stride()[d]), d))
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(strides)


def fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def check_qkv(q: Any, k: Any, v: Any) -> None:
    if (  # the common case, all at once; anything off is found and named by the checks below
        isinstance(q, torch.Tensor)
        and isinstance(k, torch.Tensor)
        and isinstance(v, torch.Tensor)
        and q.dim() == 4
        and k.dim() == 4
        and v.dim() == 4
        and q.dtype in IO_TYPES
        and k.dtype == q.dtype
        and v.dtype == q.dtype
        and k.device == q.device
        and v.device == q.device
        and k.layout is torch.strided
        and v.layout is torch.strided
    ):
        h, hk, hv = q.shape[1], k.shape[1], v.shape[1]
        if hk and hv and not h % hk and not h % hv:
            return
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, torch.Tensor):
            raise fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise fail(f"{name} must be rank-4 [B, H, S, D], got shape {list(t.shape)}")
    if q.dtype not in IO_TYPES:
        raise fail(f"query dtype {q.dtype} is not supported (float16, bfloat16, float32, float64)")
    for name, t in (("key", k), ("value", v)):
        check_tensor(name, t, q)
        if t.dtype != q.dtype:
            raise fail(
                f"{name} dtype {t.dtype} differs from query dtype {q.dtype}: pass query, key and "
                f"value in one dtype (e.g. {name}.to(query.dtype)), or call under torch.autocast, "
                "which casts float16, bfloat16 and float32 inputs to its dtype"
            )
        if t.shape[1] == 0 or q.shape[1] % t.shape[1]:
            raise fail(
                f"{name} heads ({t.shape[1]}) must divide query heads ({q.shape[1]}) for GQA"
            )


def check_tensor(name: str, t: Any, q: Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != q.device:
        raise fail(f"{name} is on {t.device} but query is on {q.device}")
    if t.layout is not torch.strided:
        raise fail(f"{name} must be a dense (strided) tensor, got layout {t.layout}")


class Call(NamedTuple):
    """One call of the op, normalised (see :func:`normalise`)."""

    query: Tensor
    key: Tensor
    value: Tensor
    #: ``attn_mask`` shaped for the graph (:func:`as_mask`: rank 4, still bool when it is)
    mask: Tensor | None
    #: both padding lengths as int32 ``[B, 1, 1, 1]`` tensors, or both None
    seq_len_q: Tensor | None
    seq_len_kv: Tensor | None
    dropout_p: float
    #: the graph options, with the dropout probability (:func:`with_dropout`)
    options: Options


def normalise(
    q: Any, k: Any, v: Any, attn_mask: Any, dropout_p: Any, is_causal: Any, scale: Any,
    enable_gqa: Any, diagonal_alignment: Any, left_bound: Any, right_bound: Any,
    seq_len_q: SeqLens, seq_len_kv: SeqLens, alibi: Any, engine: Any,
) -> Call:  # fmt: skip
    """Every argument of one op call checked, once, and turned into its :class:`Call`.

    Example:
        >>> q = torch.zeros(1, 4, 8, 16)
        >>> call = normalise(q, q[:, :2], q[:, :2], None, 0.1, True, None, True, None, None,
        ...                  None, None, None, False, None)
        >>> call.dropout_p, call.options.causal, call.options.dropout_p
        (0.1, True, 0.1)

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first bad argument.
    """
    check_qkv(q, k, v)
    if not isinstance(enable_gqa, bool):
        raise fail(f"enable_gqa must be True or False, got {enable_gqa!r}")
    h = q.shape[1]
    if not enable_gqa and (k.shape[1] != h or v.shape[1] != h):
        raise fail(
            f"key/value heads ({k.shape[1]}, {v.shape[1]}) differ from query heads ({h}); "
            "pass enable_gqa=True for grouped-query attention"
        )
    options = checked_options(q.shape[-1], scale, is_causal, diagonal_alignment, left_bound,
                              right_bound, alibi, engine)  # fmt: skip
    mask = None if attn_mask is None else as_mask(attn_mask, q)
    p = 0.0 if dropout_p.__class__ is float and dropout_p == 0.0 else check_probability(dropout_p)
    if p:
        options = with_dropout(options, p)
    slq = slkv = None
    if seq_len_q is not None or seq_len_kv is not None:
        slq, slkv = seq_lens(q, k, seq_len_q, seq_len_kv)  # type: ignore[misc]
    return Call(q, k, v, mask, slq, slkv, p, options)


def check_probability(p: Any) -> float:
    """``p`` as a float in ``[0, 1)``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p < 1.0:
        raise fail(f"dropout_p must be in [0, 1), got {p!r}")
    return float(p)


def with_dropout(options: Options, p: float) -> Options:
    """``options`` with philox dropout ``p``, made once per combination
    (``NamedTuple._replace`` costs microseconds per call)."""
    key = (options, p)
    made = _WITH.get(key)
    return made if made is not None else remember(_WITH, key, options._replace(dropout_p=p))


_WITH: dict[tuple[Options, float], Options] = {}


_INT64 = range(-(2**63), 2**63)


def checked_options(
    head_dim: int,
    scale: float | None,
    is_causal: bool,
    alignment: DiagonalAlignment | str | None,
    left_bound: int | None,
    right_bound: int | None,
    alibi: bool,
    engine: str | None,
) -> Options:
    """The graph-changing keywords, checked as the core API checks them (flags are bools, bounds
    int64 integers, the scale a finite number).

    The default scale (none given, or exactly 1/sqrt(D) as torch passes it on) stays None: left
    unset in the graph, the engine computes 1/sqrt(D) in the data's precision, so a float64
    user gets float64's value and not a binary32 attribute.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the argument.
    """
    if (
        scale is None
        and alignment is None
        and left_bound is None
        and right_bound is None
        and alibi is False
        and engine is None
        and (is_causal is True or is_causal is False)
    ):  # the common call, checked without a loop (every argument is valid as it is)
        return _PLAIN_OPTIONS[is_causal]
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale)
    ):
        raise fail(f"scale must be a finite number, got {scale!r}")
    if scale is not None and head_dim and scale == 1.0 / math.sqrt(head_dim):
        scale = None
    for name, flag in (("is_causal", is_causal), ("alibi", alibi)):
        if not isinstance(flag, bool):
            raise fail(f"{name} must be True or False, got {flag!r}")
    for name, bound in (("left_bound", left_bound), ("right_bound", right_bound)):
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, int) or bound not in _INT64
        ):
            raise fail(f"{name} must be an integer (int64) or None, got {bound!r}")
    if engine is not None and not isinstance(engine, str):
        raise fail(f"engine must be an engine name or None, got {engine!r}")
    return Options(None if scale is None else float(scale), is_causal, alignment_of(alignment),
                   left_bound, right_bound, alibi, engine)  # fmt: skip


#: the options of a call with only ``is_causal`` set, by its value
_PLAIN_OPTIONS = {
    causal: Options(None, causal, DiagonalAlignment.TOP_LEFT, None, None, False, None)
    for causal in (False, True)
}


def alignment_of(value: DiagonalAlignment | str | None) -> DiagonalAlignment:
    """``None`` (top-left), a name (``"bottom_right"``) or an enum value as the enum."""
    if value is None:
        return DiagonalAlignment.TOP_LEFT
    if isinstance(value, str):
        try:
            return DiagonalAlignment[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return DiagonalAlignment(value)
        except ValueError:
            pass
    raise fail(f"diagonal_alignment must be 'top_left' or 'bottom_right', got {value!r}")


def as_mask(mask: Tensor, q: Tensor) -> Tensor:
    """``attn_mask`` checked and shaped for the graph, still bool when it is: the rank padded
    to 4, broadcast (stride-0) dims narrowed to 1. A view (no copy), differentiable.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a mask of another dtype, rank > 4 or another device.
    """
    check_tensor("attn_mask", mask, q)
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise fail(f"attn_mask must be bool or floating point, got {mask.dtype}")
    if mask.dim() > 4:
        raise fail(f"attn_mask must have rank ≤ 4, got shape {list(mask.shape)}")
    return no_zero_strides(mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape)))


def no_zero_strides(t: Tensor) -> Tensor:
    """A broadcast (stride-0) dim of size > 1 narrowed to size 1: same values, no copy."""
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        if stride == 0 and size > 1:
            t = t.narrow(dim, 0, 1)
    return t


def seq_lens(
    q: Tensor, k: Tensor, seq_len_q: SeqLens, seq_len_kv: SeqLens
) -> tuple[Tensor, Tensor] | None:
    """Both padding lengths as int32 ``[B, 1, 1, 1]`` tensors on q's device (the full length
    where one is ``None``), or ``None`` when neither is given.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for non-integers or a count other than B.
    """
    if seq_len_q is None and seq_len_kv is None:
        return None
    b = q.shape[0]
    return (
        _seq_lens("seq_len_q", seq_len_q, b, q.shape[2], q.device),
        _seq_lens("seq_len_kv", seq_len_kv, b, k.shape[2], q.device),
    )


def _is_int(x: object) -> bool:
    """An integer that is no bool (Python or NumPy integers, as ``operator.index`` takes)."""
    if isinstance(x, bool) or type(x).__name__ == "bool_":
        return False
    try:
        operator.index(x)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def _int32_lengths(name: str, value: Tensor) -> Tensor:
    """An integer length tensor as int32 without wrapping: values of a host tensor outside
    [0, 2**31 - 1] are refused; a device tensor is never read on the host (that would stall
    the device), so its values are clamped to that range (a negative length is then 0, a length
    past the sequence is the whole sequence, as the engines read them).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a host tensor holding an out-of-range length.
    """
    if value.device.type == "cpu":
        if value.numel() and (int(value.min()) < 0 or int(value.max()) >= 2**31):
            bad = value[(value < 0) | (value >= 2**31)].reshape(-1)[0].item()
            raise fail(f"{name} lengths must be in [0, 2**31 - 1], got {bad}")
    elif value.dtype not in (torch.int8, torch.uint8, torch.int16, torch.int32):
        value = value.to(torch.int64).clamp(0, 2**31 - 1)
    return value.to(dtype=torch.int32)


def materialized(t: Tensor, like: Tensor) -> Tensor:
    """``t`` itself, or a dense copy laid out as ``like`` when it is broadcast (a stride-0 dim:
    ``x.sum()``'s grad). The upstream gradient dO is copied in O's layout: torch's fused
    backward kernels want dO laid out as O (the memory-efficient kernel packs a dO of another
    layout again, a second copy of the size of O).

    Example:
        >>> import torch
        >>> o = torch.zeros(1, 4, 2, 8).transpose(1, 2)  # [B, H, S, D] with [B, S, H, D] memory
        >>> materialized(torch.ones(()).expand(o.shape), o).stride() == o.stride()
        True
    """
    if 0 not in t.stride():
        return t
    if like.shape == t.shape:  # empty_like keeps a dense layout (else packs)
        return torch.empty_like(like, dtype=t.dtype).copy_(t)
    return t.contiguous()


#: the lengths a padding tensor (int32, as hipDNN's SEQ_LEN tensors) can hold
_LENGTHS = range(2**31)


def _seq_lens(name: str, value: SeqLens, batch: int, full: int, device: torch.device) -> Tensor:
    if value is None:
        return torch.full((batch, 1, 1, 1), full, dtype=torch.int32, device=device)
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise fail(f"{name} must hold integers, got {value.dtype}")
        t = _int32_lengths(name, value).to(device=device)
    else:
        lengths = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else 0
        if not isinstance(lengths, list) or not all(_is_int(x) for x in lengths):
            raise fail(f"{name} must be a tensor or a sequence of integers, got {value!r}")
        bad = next((x for x in lengths if int(x) not in _LENGTHS), None)
        if bad is not None:
            raise fail(f"{name} lengths must be in [0, 2**31 - 1], got {bad!r}")
        t = torch.tensor([int(x) for x in lengths], dtype=torch.int32, device=device)
    if t.numel() != batch:
        raise fail(f"{name} must have one length per batch ({batch}), got {t.numel()}")
    return t.reshape(batch, 1, 1, 1).contiguous()
