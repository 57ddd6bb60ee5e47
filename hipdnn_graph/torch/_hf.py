"""Hugging Face transformers integration: ``attn_implementation="hipdnn"``.

:func:`register_transformers` adds :func:`hipdnn_attention_forward` to transformers'
``AttentionInterface`` and registers transformers' own SDPA mask builder for the same name, so
that models get exactly the masks (causal, padding, sliding window) they build for ``"sdpa"``.
Packed batches (padding-free training) run through the packed graphs (:mod:`._hf_packed`),
and the mask builder builds no mask for them.
transformers is imported only when :func:`register_transformers` runs.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import HipdnnError, NotSupportedError
from ..types import ErrorCode
from ._hf_packed import block_mask, check_not_skipped, packed_forward, packed_mask, packing
from ._op import scaled_dot_product_attention

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
    only to itself; causal aligned bottom-right, as FlashAttention aligns it); no mask is built
    for it (:mod:`._hf_packed`). With dropout, a position bias or a sliding window it takes the
    dense route with the row's block-diagonal mask.

    Raises:
        NotSupportedError: for attention sinks (``s_aux``), which hipDNN has no slot for; for
            a packed row whose call carries no packing (see
            :func:`~._hf_packed.check_not_skipped`); for packed cross-attention the packed
            route cannot take.
    """
    if kwargs.get("s_aux") is not None:
        raise NotSupportedError("attention sinks (s_aux) are not supported by hipdnn-graph")
    packed = packing(query, key, kwargs)
    if packed is None:
        check_not_skipped(query, attention_mask)
    else:
        causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
        if not dropout and position_bias is None and kwargs.get("sliding_window") is None:
            return packed_forward(query, key, value, packed, scaling, causal), None
        if attention_mask is None:  # the dense route: the row's mask, made here
            if query.shape[2] != key.shape[2] or not torch.equal(packed[0], packed[1]):
                raise NotSupportedError(
                    "a packed batch with dropout, a position bias or a sliding window needs a "
                    "mask, and one is made only for self-attention (cu_seq_lens_q = _k)"
                )
            attention_mask = block_mask(packed[0], query.shape[2], causal)
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
        from transformers.masking_utils import AttentionMaskInterface
    except ImportError as exc:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            "register_transformers() needs transformers: pip install 'hipdnn-graph[transformers]'"
            f" ({exc})",
        ) from None
    AttentionInterface.register(name, hipdnn_attention_forward)
    AttentionMaskInterface.register(name, packed_mask)
