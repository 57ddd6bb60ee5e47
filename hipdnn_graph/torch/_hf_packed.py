"""Packed batches in transformers' attention calls (padding-free training), for
``attn_implementation="hipdnn"`` (:mod:`._hf`).

A packed batch is one row of sequences back to back (``DataCollatorWithFlattening``).
:func:`packing` finds its sequences as transformers' FlashAttention path finds them (the
``cu_seq_lens_q/k`` and ``max_length_q/k`` kwargs, or position ids that restart), and
:func:`packed_forward` runs it through :func:`~._varlen.varlen_attention`.

transformers builds a ``[1, 1, T, T]`` mask for such a row for every implementation but its
flash ones; :func:`packed_mask`, the mask builder registered for ``"hipdnn"``, builds none for
exactly the causal packed row (transformers' causal mask and its packed-sequence mask, no
padding, no cache: recognised by the mask functions transformers composes, else it is
transformers' ``sdpa_mask``), since the packed route never reads it. It notes the row's length,
so that an attention call that then finds no packing in its kwargs raises instead of attending
across sequences (:func:`check_not_skipped`); calls that must take the dense route (dropout, a
position bias, a sliding window) build the same mask themselves (:func:`block_mask`).

Example:
    >>> import torch
    >>> positions = torch.tensor([[0, 1, 2, 0, 1]])
    >>> cu, _, longest, _ = packing(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4),
    ...                             {"position_ids": positions})
    >>> cu.tolist(), int(longest)
    ([0, 3, 5], 3)
    >>> block_mask(cu, 5, causal=True)[0, 0].int().tolist()[3]
    [0, 0, 0, 1, 0]
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import torch

from ..errors import NotSupportedError
from ._args import fail
from ._varlen import varlen_attention
from ._varlen_args import check_cumulative

__all__ = [
    "Packing",
    "block_mask",
    "check_not_skipped",
    "packed_forward",
    "packed_mask",
    "packing",
]

Tensor = torch.Tensor

#: cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k of a packed batch
Packing = tuple[Tensor, Tensor, Any, Any]
_VARLEN_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")

#: the token count of the packed row whose mask the last :func:`packed_mask` call left out
_SKIPPED: ContextVar[int | None] = ContextVar("hipdnn_skipped_packed_mask", default=None)
_PACKED_MASK_FUNCTION = "packed_sequence_mask_function.<locals>.inner_mask"


def packing(query: Tensor, key: Tensor, kwargs: dict[str, Any]) -> Packing | None:
    """The sequences of a packed batch as transformers' FlashAttention path finds them, or
    ``None``: a batch of one whose call carries ``cu_seq_lens_q/k`` and ``max_length_q/k``
    (``DataCollatorWithFlattening(return_flash_attn_kwargs=True)``), or whose ``position_ids``
    restart (each sequence starts at the smallest position id), with as many keys as queries."""
    if query.shape[0] != 1:
        return None
    cu_q, cu_k, max_q, max_k = (kwargs.get(name) for name in _VARLEN_KWARGS)
    if cu_q is not None and cu_k is not None and max_q is not None and max_k is not None:
        return cu_q, cu_k, max_q, max_k
    position_ids = kwargs.get("position_ids")
    if not isinstance(position_ids, torch.Tensor) or key.shape[2] != query.shape[2]:
        return None
    positions = position_ids.reshape(-1)
    if positions.numel() != query.shape[2] or positions.numel() < 2:
        return None
    first = positions.min()
    if bool((positions == torch.arange(positions.numel(), device=positions.device) + first).all()):
        return None  # one sequence: the dense route
    starts = (positions == first).nonzero().view(-1).to(torch.int32)
    end = torch.tensor([positions.numel()], dtype=torch.int32, device=positions.device)
    cu = torch.cat((starts, end))
    longest = cu.diff().max()
    return cu, cu, longest, longest


def packed_forward(
    query: Tensor, key: Tensor, value: Tensor, packed: Packing, scale: float | None, causal: bool
) -> Tensor:
    """``[1, H, T, D]`` tensors of one packed batch through :func:`~._varlen.varlen_attention`
    (causal aligned bottom-right, as FlashAttention aligns it); returns ``[1, T, H, Dv]``."""
    cu_q, cu_k, max_q, max_k = packed
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))
    out = varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, is_causal=causal, scale=scale,
                           diagonal_alignment="bottom_right", enable_gqa=True)  # fmt: skip
    return out.unsqueeze(0)


def block_mask(cu_seqlens: Tensor, tokens: int, causal: bool) -> Tensor:
    """The ``[1, 1, T, T]`` bool mask of a packed row of self-attention (True = attend): each
    token sees its own sequence's tokens (those up to itself where ``causal``).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for cumulative lengths that do not start at 0, decrease
            or do not end at ``tokens``.
    """
    values = [int(x) for x in cu_seqlens.reshape(-1).tolist()]
    check_cumulative(values, "cu_seq_lens_q")
    if values[-1] != tokens:
        raise fail(f"cu_seq_lens_q must end at the row's token count ({tokens}), got {values[-1]}")
    lengths = cu_seqlens.reshape(-1).diff().to(torch.long)
    ids = torch.repeat_interleave(torch.arange(lengths.numel(), device=cu_seqlens.device), lengths)
    mask = ids[:, None] == ids[None, :]
    return (mask.tril() if causal else mask)[None, None]


def packed_mask(*args: Any, **kwargs: Any) -> Any:
    """transformers' ``sdpa_mask``, except that the causal packed row gets no mask (``None``):
    the packed route never reads it. Its length is noted for :func:`check_not_skipped`."""
    from transformers.masking_utils import sdpa_mask

    tokens = None if args else _causal_packed_row(kwargs)
    _SKIPPED.set(tokens)
    return None if tokens is not None else sdpa_mask(*args, **kwargs)


def check_not_skipped(query: Tensor, mask: Tensor | None) -> None:
    """Refuse a call without a mask over a row whose mask :func:`packed_mask` left out when the
    call itself shows no packing (a model that does not pass ``position_ids`` to attention):
    the dense route would attend across sequences.

    Raises:
        NotSupportedError: saying what the call lacks.
    """
    if mask is None and query.shape[0] == 1 and _SKIPPED.get() == query.shape[2]:
        raise NotSupportedError(
            "transformers found a packed batch (restarting position_ids) but this attention call "
            "carries neither position_ids nor cu_seq_lens_q/k and max_length_q/k; pass them on "
            "to the attention function, as padding-free FlashAttention needs them too"
        )


def _causal_packed_row(kwargs: dict[str, Any]) -> int | None:
    """The token count of a batch of one row whose mask is exactly transformers' causal mask
    and its packed-sequence mask (no padding mask, no cache offsets), else ``None``."""
    from transformers.masking_utils import causal_mask_function

    q_length, kv_length = kwargs.get("q_length"), kwargs.get("kv_length")
    if (
        kwargs.get("batch_size") != 1
        or kwargs.get("attention_mask") is not None
        or not isinstance(q_length, int)
        or q_length != kv_length
        or not _int_zero(kwargs.get("q_offset", 0))  # a tensor offset comes with a cache
        or not _int_zero(kwargs.get("kv_offset", 0))
    ):
        return None
    function = kwargs.get("mask_function")
    if getattr(function, "__name__", "") != "and_mask":  # transformers' and_masks(...)
        return None
    parts = _free_variable(function, "mask_functions")
    if not isinstance(parts, tuple) or len(parts) != 2:
        return None
    if parts[0] is not causal_mask_function:
        return None
    return q_length if getattr(parts[1], "__qualname__", "") == _PACKED_MASK_FUNCTION else None


def _free_variable(function: Any, name: str) -> Any:
    """The value of free variable ``name`` of a closure (transformers' ``and_masks``), or None."""
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None)
    if code is None or cells is None or name not in code.co_freevars:
        return None
    return cells[code.co_freevars.index(name)].cell_contents


def _int_zero(value: Any) -> bool:
    return type(value) is int and value == 0
