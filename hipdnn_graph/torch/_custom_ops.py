"""The torch op under ``torch.compile``: two ``torch.library`` custom ops carry the work,
``hipdnn_graph::sdpa_fwd`` and ``hipdnn_graph::sdpa_bwd``, with an autograd formula
(``register_autograd``) and fake kernels (``register_fake``), so that
``torch.compile(fullgraph=True)`` traces them without graph breaks. The custom-op dispatcher's
layers cost far more host time than the kernels of a small problem, which is why eager calls do
not take them (they take :mod:`._function`).

Each op runs with autocast off for its device type (the op's caller cast the inputs) and asks
torch's choice of kernel itself (:func:`._choice.fused_choice`, as for a training call: the ops
see detached tensors).

Example:
    >>> import torch
    >>> q = torch.randn(1, 2, 8, 4)
    >>> o, stats, state = sdpa_fwd_op(q, q, q, None, None, None, 0.0, None, True, 0, None, None,
    ...                               False, None)
    >>> o.shape, stats.shape, state.numel()
    (torch.Size([1, 2, 8, 4]), torch.Size([1, 2, 8, 1]), 0)
"""

from __future__ import annotations

from typing import Any

import torch

from ..backend.layout import in_layout
from ..types import DiagonalAlignment
from . import _dropout
from ._args import checked_options, strides_like
from ._autocast import AutocastOff
from ._choice import fused_choice
from ._graphs import sdpa_backward, sdpa_forward
from ._philox_graphs import philox_backward, philox_forward

__all__ = ["sdpa_bwd_op", "sdpa_fwd_op"]

Tensor = torch.Tensor


@torch.library.custom_op("hipdnn_graph::sdpa_fwd", mutates_args=())
def sdpa_fwd_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float,
    scale: float | None,
    is_causal: bool,
    alignment: int,
    left_bound: int | None,
    right_bound: int | None,
    alibi: bool,
    engine: str | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The forward custom op: ``(O, Stats, dropout state)`` of one SdpaFwd graph (see
    :func:`sdpa_forward`); the state is empty without dropout (:mod:`._dropout`)."""
    kw: dict[str, Any] = {
        "attn_mask": bias, "scale": scale, "is_causal": is_causal,
        "diagonal_alignment": DiagonalAlignment(alignment), "left_bound": left_bound,
        "right_bound": right_bound, "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv,
        "alibi": alibi, "engine": engine,
    }  # fmt: skip
    with AutocastOff(q.device.type):  # the graphs run in their own precision
        options = checked_options(q.shape[-1], scale, is_causal, DiagonalAlignment(alignment),
                                  left_bound, right_bound, alibi, engine)  # fmt: skip
        prefer = fused_choice(q, k, v, bias, dropout_p, options, padded=seq_len_q is not None,
                              training=True)  # fmt: skip
        if not dropout_p:
            o, stats = sdpa_forward(q, k, v, prefer=prefer, **kw)
            return _as_faked(o, q), stats, torch.empty(0, dtype=torch.int64)
        seed, offset = _dropout.draw(q.device)
        o, stats, ran = philox_forward(
            q, k, v, dropout_p=dropout_p, seed=seed, offset=offset, prefer=prefer, **kw
        )
        _dropout.advance(q.device, offset, ran, (*q.shape[:3], k.shape[2]))
        return _as_faked(o, q), stats, _dropout.pack_state(seed, offset, ran)


def _as_faked(out: Tensor, like: Tensor) -> Tensor:
    """``out`` laid out as the fake kernels declare it (``like``'s layout): a graph may declare
    the kernel's own layout (the memory-efficient kernel's [B, S, H, D] O and gradients), and
    torch.compile plans its code by the fake's strides."""
    return in_layout(out, strides_like(like, out.shape))  # type: ignore[no-any-return]


@sdpa_fwd_op.register_fake
def _sdpa_fwd_fake(
    q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, slq: Tensor | None,
    slkv: Tensor | None, dropout_p: float, *args: Any,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    b, h, sq, _ = q.shape
    shape = (b, h, sq, v.shape[-1])
    o = q.new_empty_strided(shape, strides_like(q, shape))
    stats = q.new_empty((b, h, sq, 1), dtype=_stats_dtype(q.dtype))
    return o, stats, torch.empty(3 if dropout_p else 0, dtype=torch.int64)


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
    dropout_state: Tensor,
    dropout_p: float,
    scale: float | None,
    is_causal: bool,
    alignment: int,
    left_bound: int | None,
    right_bound: int | None,
    alibi: bool,
    engine: str | None,
    bias_grad: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The backward custom op: dQ, dK, dV and dBias (empty unless ``bias_grad``); with dropout,
    on the forward's engine with its seed and offset (``dropout_state``)."""
    kw: dict[str, Any] = {
        "attn_mask": bias, "scale": scale, "is_causal": is_causal,
        "diagonal_alignment": DiagonalAlignment(alignment), "left_bound": left_bound,
        "right_bound": right_bound, "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv,
        "alibi": alibi,
        "dbias_shape": tuple(bias.shape) if bias_grad and bias is not None else None,
    }  # fmt: skip
    with AutocastOff(q.device.type):  # the graphs run in their own precision
        if dropout_p:
            seed, offset, ran = _dropout.unpack_state(dropout_state)
            dq, dk, dv, dbias = philox_backward(
                q, k, v, o, do, stats, dropout_p=dropout_p, seed=seed, offset=offset,
                engine=ran, **kw,
            )  # fmt: skip
        else:
            options = checked_options(q.shape[-1], scale, is_causal,
                                      DiagonalAlignment(alignment), left_bound, right_bound,
                                      alibi, engine)  # fmt: skip
            prefer = fused_choice(q, k, v, bias, 0.0, options, padded=seq_len_q is not None,
                                  training=True)  # the forward's choice  # fmt: skip
            dq, dk, dv, dbias = sdpa_backward(
                q, k, v, o, do, stats, engine=engine, prefer=prefer, **kw
            )
    dq, dk, dv = _as_faked(dq, q), _as_faked(dk, k), _as_faked(dv, v)
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
_N_TENSORS = 6  # q, k, v, bias, seq_len_q, seq_len_kv


def _setup_context(
    ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor, Tensor]
) -> None:
    o, stats, state = output
    ctx.save_for_backward(*inputs[:_N_TENSORS], o, stats, state)
    ctx.flags = inputs[_N_TENSORS:]


def _backward(
    ctx: Any, do: Tensor, _dstats: Tensor | None, _dstate: Tensor | None
) -> tuple[Any, ...]:
    q, k, v, bias, slq, slkv, o, stats, state = ctx.saved_tensors
    bias_grad = bias is not None and ctx.needs_input_grad[3]
    dq, dk, dv, dbias = sdpa_bwd_op(
        q, k, v, o, do, stats, bias, slq, slkv, state, *ctx.flags, bias_grad
    )
    grads: list[Any] = [None] * (_N_TENSORS + len(ctx.flags))
    grads[:4] = [dq, dk, dv, dbias if bias_grad else None]
    return tuple(grads)


sdpa_fwd_op.register_autograd(_backward, setup_context=_setup_context)
