"""Hugging Face transformers integration: ``attn_implementation="hipdnn"``.

:func:`register_transformers` adds :func:`hipdnn_attention_forward` to transformers'
``AttentionInterface`` and registers transformers' own SDPA mask builder for the same name, so
that models get exactly the masks (causal, padding, sliding window) they build for ``"sdpa"``.
Packed batches (padding-free training) run through the packed graphs (:mod:`._varlen`).
transformers is imported only when :func:`register_transformers` runs.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import HipdnnError, NotSupportedError
from ..types import ErrorCode
from ._op import scaled_dot_product_attention
from ._varlen import varlen_attention

__all__ = ["hipdnn_attention_forward", "register_transformers"]

Tensor = torch.Tensor


def hipdnn_attention_forward(
    module: torch.nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    position_bias: Tensor | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """An attention function for transformers' ``AttentionInterface``.

    It follows transformers' ``sdpa_attention_forward`` rule for rule: ``is_causal`` from the
    call or the module, used only without a mask and for more than one query; the mask as the
    model built it (bool or additive float, ``[B, 1 or H, Sq, Skv]``); ``dropout`` as the
    layer passes it (0 in eval mode); a ``position_bias`` folded into the mask. K and V keep
    their own heads (GQA runs natively, no ``repeat_kv``). Returns ``(output [B, Sq, H, Dv],
    None)``: attention weights are never materialized.

    A packed batch (padding-free training: one row of sequences back to back, as
    ``DataCollatorWithFlattening`` makes it) runs as transformers' FlashAttention path runs it:
    recognised by ``cu_seq_lens_q/k`` and ``max_length_q/k`` in the call, or by position ids
    that restart, it goes through :func:`~._varlen.varlen_attention` (each sequence attends
    only to itself; causal aligned bottom-right, as FlashAttention aligns it), and the mask
    transformers built for it is not read. With dropout, a position bias or a sliding window
    it takes the dense route with that mask.

    Raises:
        NotSupportedError: for attention sinks (``s_aux``), which hipDNN has no slot for, and
            for a packed batch the packed route cannot take that comes without a mask.
    """
    if kwargs.get("s_aux") is not None:
        raise NotSupportedError("attention sinks (s_aux) are not supported by hipdnn-graph")
    packing = _packing(query, key, kwargs)
    if packing is not None:
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        if not dropout and position_bias is None and kwargs.get("sliding_window") is None:
            return _packed_forward(query, key, value, packing, scaling, bool(causal)), None
        if attention_mask is None:  # the dense route would attend across sequences
            raise NotSupportedError(
                "a packed batch (cu_seq_lens or restarting position_ids) with dropout, a "
                "position bias or a sliding window needs the mask transformers builds for it"
            )
    q_length, kv_length = query.shape[2], key.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = bool(q_length > 1 and attention_mask is None and is_causal)
    if is_causal and kv_length > q_length:  # top-left causal never sees the extra keys
        key, value = key[:, :, :q_length], value[:, :, :q_length]
        if position_bias is not None:
            position_bias = position_bias[..., :q_length]
    if position_bias is not None:
        attention_mask = _with_position_bias(position_bias, attention_mask, is_causal, key)
        is_causal = False
    out = scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
        is_causal=is_causal, enable_gqa=True,
    )  # fmt: skip
    return out.transpose(1, 2).contiguous(), None


#: cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k of a packed batch
_Packing = tuple[Tensor, Tensor, Any, Any]
_VARLEN_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")


def _packing(query: Tensor, key: Tensor, kwargs: dict[str, Any]) -> _Packing | None:
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


def _packed_forward(
    query: Tensor, key: Tensor, value: Tensor, packing: _Packing, scale: float | None,
    causal: bool,
) -> Tensor:  # fmt: skip
    """``[1, H, T, D]`` tensors of one packed batch through :func:`~._varlen.varlen_attention`
    (causal aligned bottom-right, as FlashAttention aligns it); returns ``[1, T, H, Dv]``."""
    cu_q, cu_k, max_q, max_k = packing
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))
    out = varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, is_causal=causal, scale=scale,
                           diagonal_alignment="bottom_right", enable_gqa=True)  # fmt: skip
    return out.unsqueeze(0)


def _with_position_bias(
    position_bias: Tensor, mask: Tensor | None, is_causal: bool, key: Tensor
) -> Tensor:
    """One additive mask from a learned position bias and the model's mask (as transformers'
    ``create_position_bias_mask``): masked pairs get the dtype's lowest value."""
    lowest = torch.finfo(key.dtype).min
    if mask is None:
        if not is_causal:
            return position_bias
        q_len, kv_len = position_bias.shape[-2], key.shape[2]
        rows = torch.arange(q_len, device=key.device)[:, None]
        causal = rows >= torch.arange(kv_len, device=key.device)[None, :]
        return torch.where(causal, position_bias, lowest)
    if mask.dtype == torch.bool:
        return torch.where(mask, position_bias, lowest)
    return position_bias + mask


def register_transformers(name: str = "hipdnn") -> None:
    """Register :func:`hipdnn_attention_forward` with transformers as ``name``.

    After it, ``AutoModelForCausalLM.from_config(cfg, attn_implementation="hipdnn")`` (or
    ``model.set_attn_implementation("hipdnn")``) runs every attention layer through
    hipdnn-graph. Calling it again is harmless.

    Example:
        >>> import hipdnn_graph.torch as hgt
        >>> hgt.register_transformers()
        >>> from transformers import AttentionInterface
        >>> "hipdnn" in AttentionInterface()
        True

    Raises:
        HipdnnError: ``INVALID_VALUE`` when transformers is not installed.
    """
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError as exc:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            "register_transformers() needs transformers: pip install 'hipdnn-graph[transformers]'"
            f" ({exc})",
        ) from None
    AttentionInterface.register(name, hipdnn_attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
