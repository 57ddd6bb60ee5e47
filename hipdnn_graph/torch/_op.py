"""``scaled_dot_product_attention``: torch's SDPA semantics on hipdnn-graph, with autograd.

Two ``torch.library`` custom ops carry the work: ``hipdnn_graph::sdpa_fwd`` runs the SdpaFwd
graph (O and Stats) and ``hipdnn_graph::sdpa_bwd`` the SdpaBwd graph fed exactly those. The
forward op has an autograd formula (``register_autograd``) and both have fake kernels
(``register_fake``), so ``torch.compile(fullgraph=True)`` traces them without graph breaks.
The Python wrapper does what must stay differentiable or random outside the ops: it turns a
bool mask into a bias, shapes the bias for the graph, and draws the dropout mask from torch's
generator.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..errors import HipdnnError
from ..types import DiagonalAlignment, ErrorCode
from ._args import SeqLens, alignment_of, as_bias, check_qkv, seq_lens, strides_like
from ._graphs import sdpa_backward, sdpa_forward

__all__ = ["scaled_dot_product_attention"]

Tensor = torch.Tensor


@torch.library.custom_op("hipdnn_graph::sdpa_fwd", mutates_args=())
def sdpa_fwd_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_mask: Tensor | None,
    dropout_scale: float,
    scale: float,
    is_causal: bool,
    alignment: int,
    left_bound: int | None,
    right_bound: int | None,
    alibi: bool,
    engine: str | None,
) -> tuple[Tensor, Tensor]:
    """The forward custom op: ``(O, Stats)`` of one SdpaFwd graph (see :func:`sdpa_forward`)."""
    return sdpa_forward(
        q, k, v, attn_mask=bias, scale=scale, is_causal=is_causal,
        diagonal_alignment=DiagonalAlignment(alignment), left_bound=left_bound,
        right_bound=right_bound, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, alibi=alibi,
        dropout_mask=dropout_mask,
        dropout_scale=dropout_scale if dropout_mask is not None else None, engine=engine,
    )  # fmt: skip


@sdpa_fwd_op.register_fake
def _sdpa_fwd_fake(q: Tensor, k: Tensor, v: Tensor, *args: Any) -> tuple[Tensor, Tensor]:
    b, h, sq, _ = q.shape
    shape = (b, h, sq, v.shape[-1])
    o = q.new_empty_strided(shape, strides_like(q, shape))
    stats = q.new_empty((b, h, sq, 1), dtype=_stats_dtype(q.dtype))
    return o, stats


@torch.library.custom_op("hipdnn_graph::sdpa_bwd", mutates_args=())
def sdpa_bwd_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_mask: Tensor | None,
    dropout_scale: float,
    scale: float,
    is_causal: bool,
    alignment: int,
    left_bound: int | None,
    right_bound: int | None,
    alibi: bool,
    engine: str | None,
    bias_grad: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The backward custom op: dQ, dK, dV and dBias (empty unless ``bias_grad``)."""
    dq, dk, dv, dbias = sdpa_backward(
        q, k, v, o, do, stats, attn_mask=bias, scale=scale, is_causal=is_causal,
        diagonal_alignment=DiagonalAlignment(alignment), left_bound=left_bound,
        right_bound=right_bound, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, alibi=alibi,
        dropout_mask=dropout_mask,
        dropout_scale=dropout_scale if dropout_mask is not None else None, engine=engine,
        dbias_shape=tuple(bias.shape) if bias_grad and bias is not None else None,
    )  # fmt: skip
    return dq, dk, dv, dbias if dbias is not None else q.new_empty(0)


@sdpa_bwd_op.register_fake
def _sdpa_bwd_fake(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, bias: Tensor | None,
    *args: Any,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    bias_grad = args[-1]
    dbias = bias.new_empty(bias.shape) if bias_grad and bias is not None else q.new_empty(0)
    dq, dk, dv = (t.new_empty_strided(t.shape, strides_like(t, t.shape)) for t in (q, k, v))
    return dq, dk, dv, dbias


def _stats_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


# ----- autograd -----
_N_TENSORS = 7  # q, k, v, bias, seq_len_q, seq_len_kv, dropout_mask


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor]) -> None:
    o, stats = output
    ctx.save_for_backward(*inputs[:_N_TENSORS], o, stats)
    ctx.flags = inputs[_N_TENSORS:]


def _backward(ctx: Any, do: Tensor, _dstats: Tensor | None) -> tuple[Any, ...]:
    q, k, v, bias, slq, slkv, mask, o, stats = ctx.saved_tensors
    bias_grad = bias is not None and ctx.needs_input_grad[3]
    dq, dk, dv, dbias = sdpa_bwd_op(
        q, k, v, o, do, stats, bias, slq, slkv, mask, *ctx.flags, bias_grad
    )
    grads: list[Any] = [None] * (_N_TENSORS + len(ctx.flags))
    grads[:4] = [dq, dk, dv, dbias if bias_grad else None]
    return tuple(grads)


sdpa_fwd_op.register_autograd(_backward, setup_context=_setup_context)


# ----- the public op -----
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    diagonal_alignment: DiagonalAlignment | str | None = None,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: SeqLens = None,
    seq_len_kv: SeqLens = None,
    alibi: bool = False,
    engine: str | None = None,
) -> Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` on hipdnn-graph, with autograd.

    The arguments torch has mean what they mean there: a float ``attn_mask`` is added to the
    scores (broadcast from any shape with each dim full or 1; its gradient, when it requires
    one, comes from the graph's dBias reduced over its broadcast dims), a bool mask keeps the
    pairs where it is True, ``is_causal`` is top-left, ``scale`` defaults to ``1/sqrt(D)``,
    ``enable_gqa`` lets K and V have fewer heads (dividing Q's). ``dropout_p > 0`` draws one
    keep mask from torch's generator (``torch.manual_seed`` reproduces it) and feeds the same
    mask to the forward and backward graphs. Unlike torch, ``attn_mask`` and ``is_causal`` may
    be combined (hipDNN applies both).

    The keyword-only arguments are hipDNN features: ``diagonal_alignment``
    (``"top_left"``/``"bottom_right"``, for ``is_causal`` and the band), the band
    ``left_bound``/``right_bound``, padding through per-batch ``seq_len_q``/``seq_len_kv``,
    ``alibi``, and ``engine`` to force an engine by name (otherwise ``Graph.build()`` picks).

    Example:
        >>> import torch
        >>> from hipdnn_graph.torch import scaled_dot_product_attention
        >>> q = torch.randn(1, 4, 8, 16, requires_grad=True)
        >>> kv = torch.randn(1, 2, 8, 16)
        >>> out = scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        >>> out.sum().backward(); q.grad.shape
        torch.Size([1, 4, 8, 16])

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments.
        NotSupportedError: when no engine (or not the forced one) runs the problem.
    """
    check_qkv(query, key, value)
    h = query.shape[1]
    if not enable_gqa and (key.shape[1] != h or value.shape[1] != h):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"key/value heads ({key.shape[1]}, {value.shape[1]}) differ from query heads ({h}); "
            "pass enable_gqa=True for grouped-query attention",
        )
    bias = None if attn_mask is None else as_bias(attn_mask, query)
    mask, drop_scale = _dropout(query, key, dropout_p)
    lens = seq_lens(query, key, seq_len_q, seq_len_kv)
    slq, slkv = lens if lens is not None else (None, None)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    alignment = int(alignment_of(diagonal_alignment))
    o, _ = sdpa_fwd_op(
        query, key, value, bias, slq, slkv, mask, drop_scale, float(scale), bool(is_causal),
        alignment, left_bound, right_bound, bool(alibi), engine,
    )  # fmt: skip
    return o  # type: ignore[no-any-return]


def _dropout(q: Tensor, k: Tensor, p: float) -> tuple[Tensor | None, float]:
    """A keep mask drawn from torch's generator, and its scale ``1/(1 − p)``."""
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p < 1.0:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"dropout_p must be in [0, 1), got {p!r}")
    if p == 0.0:
        return None, 1.0
    b, h, sq, _ = q.shape
    keep = torch.rand((b, h, sq, k.shape[2]), device=q.device) >= p
    return keep.to(q.dtype), 1.0 / (1.0 - p)
