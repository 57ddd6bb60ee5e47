"""``scaled_dot_product_attention``: torch's SDPA semantics on hipdnn-graph, with autograd.

This module owns the call: the public function is one corridor, walked once per call.

1. Under ``torch.autocast`` the inputs are cast by autocast's rule for SDPA (:mod:`._autocast`)
   and autocast is turned off for the device type until the call returns.
2. The arguments are normalised once (:func:`._args.normalise`) into the call's immutable
   description, :class:`~._args.Call`: the tensors (dtypes after autocast, layouts), the mask
   shaped for the graph (bool or float), the padding lengths, the dropout probability and the
   graph options.
3. On a GPU the options prefer the engine of the kernel torch would pick
   (:func:`._choice.preferring`).
4. A common call (Q, K and V alone) makes one key (:mod:`._keys`) and one lookup in the graph
   cache; where the forward graph's autograd route is known (:mod:`._hot`) the call runs it
   and returns.
5. Otherwise the autograd Function (:mod:`._function`) launches the cached plan, or, on a miss,
   branches off to build the graphs (:mod:`._graphs`) and rejoins.

No module is entered twice on a warm call (``tests/test_torch_op_corridor.py`` traces it). Under
``torch.compile`` the normalised call goes to the custom ops of :mod:`._custom_ops` instead.
Dropout is philox dropout inside the graphs (no mask tensor): the seed and offset come from
torch's generator as for ``F.scaled_dot_product_attention``, and the backward runs on the
forward's engine with the same seed and offset, so both use one mask (:mod:`._dropout`).
"""

from __future__ import annotations

import torch

from ..types import DiagonalAlignment
from . import _choice
from ._args import SeqLens, normalise
from ._autocast import cast
from ._autocast import enabled as autocast_enabled
from ._cached import graph_cache
from ._choice import preferring
from ._custom_ops import sdpa_fwd_op
from ._function import APPLY, SdpaFunction, transforms_active, unwrap
from ._hot import PHILOX, Hit
from ._keys import philox_signature, qkv_key

__all__ = ["scaled_dot_product_attention"]

Tensor = torch.Tensor

#: the op's graph cache, looked up directly
_GRAPHS = graph_cache()
#: the lookup of a call that is not a common one (a mask or padding: keyed by its pack)
_NO_HIT = Hit(None, None)


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
        return _compiled(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                         diagonal_alignment, left_bound, right_bound, seq_len_q, seq_len_kv,
                         alibi, engine)  # fmt: skip
    off = None  # the device type whose autocast this call turned off
    if autocast_enabled():  # torch.autocast's rule for the op: the inputs cast once, here
        query, key, value, attn_mask = cast(query, key, value, attn_mask)
        if isinstance(query, Tensor) and torch.is_autocast_enabled(query.device.type):
            off = query.device.type  # the graphs run in the precision they declare
            torch.set_autocast_enabled(off, False)
    try:
        q, k, v, mask, slq, slkv, p, options = normalise(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
            diagonal_alignment, left_bound, right_bound, seq_len_q, seq_len_kv, alibi, engine,
        )  # fmt: skip
        if q.device.type in _choice.DEVICE_TYPES:  # the kernel F.sdpa would run, by name
            options = preferring(q, k, v, attn_mask, p, options, padded=slq is not None)
        if APPLY is None or transforms_active():  # functorch: the graphs look tensors up
            return SdpaFunction.apply(  # type: ignore[no-any-return,no-untyped-call]
                q, k, v, mask, slq, slkv, p, options, _NO_HIT
            )
        # Function.apply's own steps for a Function without setup_context, outside functorch
        # transforms, without its Python frame and generic argument loop
        q, k, v = unwrap(q), unwrap(k), unwrap(v)
        if mask is None and slq is None:  # the common calls: one key, one lookup
            if not p:
                key_ = qkv_key(q, k, v, options)
                hit = Hit(key_, _GRAPHS.get(key_))
            else:
                key_ = philox_signature(q, k, v, p, options)
                known = PHILOX.get(key_)
                hit = Hit(key_, None if known is None else _GRAPHS.get(known.forward_key), known)
            entry = hit.entry
            if entry is not None and entry.autograd:
                # the forward op under torch's autograd (see _hot); autocast is off for the
                # device here, so it takes the inputs as the graphs would
                return entry.autograd(q, k, v)  # type: ignore[no-any-return]
        else:
            hit = _NO_HIT
            if mask is not None:
                mask = unwrap(mask)
            if slq is not None:
                slq, slkv = unwrap(slq), unwrap(slkv)
        return APPLY(q, k, v, mask, slq, slkv, p, options, hit)  # type: ignore[no-any-return]
    finally:
        if off is not None:
            torch.set_autocast_enabled(off, True)


def _compiled(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float,
    is_causal: bool, scale: float | None, enable_gqa: bool,
    diagonal_alignment: DiagonalAlignment | str | None, left_bound: int | None,
    right_bound: int | None, seq_len_q: SeqLens, seq_len_kv: SeqLens, alibi: bool,
    engine: str | None,
) -> Tensor:  # fmt: skip
    """The call under ``torch.compile``: autocast's casts, the same normalisation, and the
    custom ops (which turn autocast off and ask torch's choice themselves)."""
    query, key, value, attn_mask = cast(query, key, value, attn_mask)
    q, k, v, mask, slq, slkv, p, options = normalise(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
        diagonal_alignment, left_bound, right_bound, seq_len_q, seq_len_kv, alibi, engine,
    )  # fmt: skip
    o, _, _ = sdpa_fwd_op(
        q, k, v, mask, slq, slkv, p, options.scale, options.causal, int(options.alignment),
        options.left_bound, options.right_bound, options.alibi, options.engine,
    )  # fmt: skip
    return o  # type: ignore[no-any-return]
