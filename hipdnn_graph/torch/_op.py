"""``scaled_dot_product_attention``: torch's SDPA semantics on hipdnn-graph, with autograd.

Two routes reach the same cached graphs (:mod:`._graphs`):

* eager calls go through a plain ``torch.autograd.Function`` (:class:`_SdpaFunction`): its
  forward runs the SdpaFwd graph (O and Stats), its backward the SdpaBwd graph fed exactly
  those. The arguments are checked once, in the public function; a call whose graph is cached
  builds nothing, and the graph's plan is called directly (see :mod:`hipdnn_graph.prepared`).
* under ``torch.compile`` two ``torch.library`` custom ops carry the work:
  ``hipdnn_graph::sdpa_fwd`` and ``hipdnn_graph::sdpa_bwd``, with an autograd formula
  (``register_autograd``) and fake kernels (``register_fake``), so that
  ``torch.compile(fullgraph=True)`` traces them without graph breaks. The custom-op
  dispatcher's layers cost far more host time than the kernels of a small problem, which is
  why eager calls do not take them.

The Python wrapper does what must stay differentiable outside the graphs: it shapes the mask
for the graph (a bool mask is turned into a bias by each graph call, afresh). Dropout is philox
dropout inside the graphs (no mask tensor): the forward draws its seed and offset from torch's
generator as ``F.scaled_dot_product_attention`` does, prefers the fused kernel torch would run,
and hands the seed, the offset and the engine that ran to the backward, which runs on that
engine with the same seed and offset, so both use one mask (:mod:`._dropout`).
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import HipdnnError
from ..types import DiagonalAlignment, ErrorCode
from . import _dropout
from ._args import SeqLens, as_mask, check_qkv, fail, materialized, seq_lens, strides_like
from ._autocast import AutocastOff, cast, enabled
from ._cached import Options
from ._graphs import (
    checked_options,
    optional_slots,
    run_backward,
    run_forward,
    sdpa_backward,
    sdpa_forward,
)
from ._hot import (
    Hit,
    backward_qkv,
    forward_qkv,
    fused_choice,
    learn_route,
    lookup,
    philox_backward_qkv,
    philox_forward_pack,
    philox_forward_qkv,
    with_dropout,
)
from ._philox_graphs import philox_backward, philox_forward, philox_slots

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
            return o, stats, torch.empty(0, dtype=torch.int64)
        seed, offset = _dropout.draw(q.device)
        o, stats, ran = philox_forward(
            q, k, v, dropout_p=dropout_p, seed=seed, offset=offset, prefer=prefer, **kw
        )
        _dropout.advance(q.device, offset, ran, (*q.shape[:3], k.shape[2]))
        return o, stats, _dropout.pack_state(seed, offset, ran)


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


class _SdpaFunction(torch.autograd.Function):
    """The eager route: the forward and backward graphs without the custom-op layers.

    Takes what the public function checked and shaped: Q, K, V, the rank-4 mask (bool or
    float), the padding tensors, the dropout probability, the graph options and, for a common
    call (Q, K and V alone), what :func:`._hot.lookup` found (None: look it up here); the
    backward of a call that hit a forward graph whose autograd route is unknown learns it
    (:func:`._hot.learn_route`).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: Tensor | None,
        slq: Tensor | None,
        slkv: Tensor | None,
        dropout_p: float,
        options: Options,
        hit: Hit | None,
    ) -> Tensor:
        # the graphs read detached tensors (as the variant-pack check hands them to engines);
        # detached once here, and saved so, the backward has none left to detach
        if q.requires_grad:  # plain statements: this runs on every call
            q = q.detach()
        if k.requires_grad:
            k = k.detach()
        if v.requires_grad:
            v = v.detach()
        ctx.options = options
        ctx.philox = None
        ctx.learn = None
        if bias is None and slq is None:  # the common calls: Q, K and V alone
            if dropout_p:  # training: philox dropout
                o, stats, ctx.philox = philox_forward_qkv(q, k, v, dropout_p, options, hit)
            else:
                o, stats = forward_qkv(q, k, v, options, hit)
            entry = None if hit is None else hit.entry
            if entry is not None and entry.autograd is None:  # a hit with its route unknown
                ctx.learn = entry
            ctx.save_for_backward(q, k, v, None, None, None, o.detach(), stats)
            return o
        pack: dict[str, Any] = {"Q": q, "K": k, "V": v}
        if bias is not None or slq is not None:
            if bias is not None and bias.requires_grad:
                bias = bias.detach()
            pack.update(optional_slots(q.dtype, bias, slq, slkv, None, 1.0))
        if dropout_p:
            o, stats, ctx.philox, _, _ = philox_forward_pack(pack, dropout_p, options)
        else:
            o, stats = run_forward(pack, options)
        ctx.save_for_backward(q, k, v, bias, slq, slkv, o.detach(), stats)
        return o

    @staticmethod
    def backward(ctx: Any, do: Tensor) -> tuple[Any, ...]:
        if enabled():  # a backward called inside an autocast region: the graphs' precision
            with AutocastOff(do.device.type):
                return _SdpaFunction.gradients(ctx, do)
        return _SdpaFunction.gradients(ctx, do)

    @staticmethod
    def gradients(ctx: Any, do: Tensor) -> tuple[Any, ...]:
        """The backward's gradients (autocast is off for the device type)."""
        # the graphs read detached tensors, so no autograd history is recorded even under
        # create_graph=True: the gradients are not differentiable again (as with the custom op)
        q, k, v, bias, slq, slkv, o, stats = ctx.saved_tensors
        if bias is None and slq is None:  # the common calls
            if 0 in do.stride():  # a broadcast gradient (x.sum()'s) is made dense
                do = do.contiguous()
            philox = ctx.philox
            if philox is None:
                dq, dk, dv = backward_qkv(q, k, v, o, do, stats, ctx.options)
            else:
                dq, dk, dv = philox_backward_qkv(q, k, v, o, do, stats, philox)
            if ctx.learn is not None:
                options = ctx.options if philox is None else philox[2]
                learn_route(ctx.learn, q, k, v, o, do, stats, options, philox is not None)
            return dq, dk, dv, None, None, None, None, None, None
        bias_grad = bias is not None and ctx.needs_input_grad[3]
        pack: dict[str, Any] = {
            "Q": q,
            "K": k,
            "V": v,
            "O": o,
            "dO": materialized(do),
            "Stats": stats,
        }
        if bias is not None or slq is not None:
            pack.update(optional_slots(q.dtype, bias, slq, slkv, None, 1.0))
        options = ctx.options
        if ctx.philox is not None:
            seed, offset, options = ctx.philox
            pack.update(philox_slots(seed, offset))
        dq, dk, dv, dbias = run_backward(pack, options, bias.shape if bias_grad else None)
        return dq, dk, dv, dbias, None, None, None, None, None


def _c_apply() -> tuple[Any, Any, Any]:
    """``(apply, transforms_active, unwrap_if_dead)``: the C-level ``apply`` of
    :class:`_SdpaFunction` and the two checks ``torch.autograd.Function.apply`` makes before
    calling it (functorch transforms active; dead functorch wrappers unwrapped), or Nones on a
    torch that lacks one of them (``_SdpaFunction.apply`` is called then)."""
    apply = getattr(super(torch.autograd.Function, _SdpaFunction), "apply", None)
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    unwrap = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", None)
    if apply is None or active is None or unwrap is None:
        return None, None, None
    return apply, active, unwrap


_APPLY, _transforms_active, _unwrap = _c_apply()


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
    pairs where it is True (converted on every call, never cached), ``is_causal`` is top-left,
    ``scale`` defaults to ``1/sqrt(D)``, ``enable_gqa`` lets K and V have fewer heads (dividing
    Q's). ``dropout_p > 0`` is philox dropout: the seed and offset come from torch's generator
    as for ``F.scaled_dot_product_attention`` (``torch.manual_seed`` reproduces a run), the
    forward runs on the fused kernel torch would pick, and the backward on the same engine with
    the same seed and offset, so both use one mask and no ``[B, H, Sq, Skv]`` tensor is made.
    Unlike torch, ``attn_mask`` and ``is_causal`` may be combined (hipDNN applies both).

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

    Flags (``is_causal``, ``enable_gqa``, ``alibi``) must be bools and the band bounds int64
    integers (no bools, no floats); padding lengths given as a sequence or a CPU tensor must lie
    in ``[0, 2**31 - 1]`` (a device tensor is never read on the host: its lengths are clamped
    to that range, a negative length counting as 0).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments.
        NotSupportedError: when no engine (or not the forced one) runs the problem.
    """
    if torch.compiler.is_compiling():
        query, key, value, attn_mask = cast(query, key, value, attn_mask)
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                          diagonal_alignment, left_bound, right_bound, seq_len_q, seq_len_kv,
                          alibi, engine)  # fmt: skip
    if not enabled():
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                          diagonal_alignment, left_bound, right_bound, seq_len_q, seq_len_kv,
                          alibi, engine)  # fmt: skip
    # torch.autocast's rule for the op (inputs cast once, here); the graphs then run with
    # autocast off for the device, in the precision they declare
    query, key, value, attn_mask = cast(query, key, value, attn_mask)
    with AutocastOff(query.device.type if isinstance(query, Tensor) else "cpu"):
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                          diagonal_alignment, left_bound, right_bound, seq_len_q, seq_len_kv,
                          alibi, engine)  # fmt: skip


def _attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float,
    is_causal: bool, scale: float | None, enable_gqa: bool,
    diagonal_alignment: DiagonalAlignment | str | None, left_bound: int | None,
    right_bound: int | None, seq_len_q: SeqLens, seq_len_kv: SeqLens, alibi: bool,
    engine: str | None,
) -> Tensor:  # fmt: skip
    """:func:`scaled_dot_product_attention` on its inputs after autocast's casts."""
    check_qkv(query, key, value)
    if not isinstance(enable_gqa, bool):
        raise fail(f"enable_gqa must be True or False, got {enable_gqa!r}")
    h = query.shape[1]
    if not enable_gqa and (key.shape[1] != h or value.shape[1] != h):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"key/value heads ({key.shape[1]}, {value.shape[1]}) differ from query heads ({h}); "
            "pass enable_gqa=True for grouped-query attention",
        )
    options = checked_options(query.shape[-1], scale, is_causal, diagonal_alignment, left_bound,
                              right_bound, alibi, engine)  # fmt: skip
    bias = None if attn_mask is None else as_mask(attn_mask, query)
    p = (
        0.0
        if dropout_p.__class__ is float and dropout_p == 0.0
        else (_dropout.check_probability(dropout_p))
    )
    slq = slkv = None
    if seq_len_q is not None or seq_len_kv is not None:
        slq, slkv = seq_lens(query, key, seq_len_q, seq_len_kv)  # type: ignore[misc]
    if not torch.compiler.is_compiling():
        # the kernel F.sdpa would run for this call (its own selection), preferred by name
        prefer = fused_choice(query, key, value, attn_mask, p, options, padded=slq is not None)
        if prefer is not None:
            options = with_dropout(options, p, prefer, None)
        if _APPLY is not None and not _transforms_active():
            # Function.apply's own steps for a Function without setup_context, outside functorch
            # transforms, without its Python frame and generic argument loop
            query, key, value = _unwrap(query), _unwrap(key), _unwrap(value)
            hit = None
            if bias is None and slq is None:  # the common calls: Q, K and V alone
                hit = lookup(query, key, value, p, options)
                if hit.entry is not None:
                    route = hit.entry.autograd
                    # the forward op under torch's autograd (see _hot); autocast is off for
                    # the device here, so it takes the inputs as the graphs would
                    if route:
                        return route(query, key, value)  # type: ignore[no-any-return]
            else:
                if bias is not None:
                    bias = _unwrap(bias)
                if slq is not None:
                    slq, slkv = _unwrap(slq), _unwrap(slkv)
            out = _APPLY(query, key, value, bias, slq, slkv, p, options, hit)
        else:  # functorch transforms: the graphs look up the unwrapped tensors themselves
            out = _SdpaFunction.apply(  # type: ignore[no-untyped-call]
                query, key, value, bias, slq, slkv, p, options, None
            )
        return out  # type: ignore[no-any-return]
    o, _, _ = sdpa_fwd_op(
        query, key, value, bias, slq, slkv, p, options.scale, options.causal,
        int(options.alignment), options.left_bound, options.right_bound, options.alibi,
        options.engine,
    )  # fmt: skip
    return o  # type: ignore[no-any-return]
