"""The eager route of the torch op: a plain ``torch.autograd.Function`` whose forward runs the
SdpaFwd graph (O and Stats) and whose backward runs the SdpaBwd graph fed exactly those.

The corridor (:mod:`._op`) calls it through :data:`APPLY`, the Function's C-level ``apply``,
with what it normalised and looked up; a hit launches the cached plan directly (see
:mod:`hipdnn_graph.graph.prepared`), a miss branches off to the slow path (:mod:`._graphs` builds
the graphs) and rejoins. Nothing here checks an argument again.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch import scaled_dot_product_attention
    >>> q = torch.randn(1, 2, 5, 3, dtype=torch.float64, requires_grad=True)
    >>> type(scaled_dot_product_attention(q, q, q).grad_fn).__name__
    '_SdpaFunctionBackward'
"""

from __future__ import annotations

from typing import Any

import torch

from ._args import materialized
from ._autocast import enabled as autocast_enabled
from ._cached import Options
from ._graphs import optional_slots, run_backward, run_forward
from ._hot import (
    Hit,
    backward_qkv,
    forward_qkv,
    philox_backward_qkv,
    philox_forward_pack,
    philox_forward_qkv,
)
from ._philox_graphs import philox_slots

__all__ = ["APPLY", "SdpaFunction", "transforms_active", "unwrap"]

Tensor = torch.Tensor


class _SdpaFunction(torch.autograd.Function):
    """The eager route: the forward and backward graphs without the custom-op layers.

    Takes what the corridor (:mod:`._op`) normalised and looked up: Q, K, V, the rank-4 mask
    (bool or float), the padding tensors, the dropout probability, the graph options (dropout
    and the engine torch's choice prefers included) and, for a common call (Q, K and V alone),
    the :class:`~._hot.Hit` of its key; the backward of a call that hit a forward graph whose
    autograd route is unknown learns it (:func:`._hot.learn_route`).
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
        hit: Hit,
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
            entry = hit.entry
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
        # a backward called inside an autocast region runs the graphs in their own precision:
        # autocast off for the device type (C calls: no module is entered for it)
        device_type = do.device.type
        off = autocast_enabled() and torch.is_autocast_enabled(device_type)
        if off:
            torch.set_autocast_enabled(device_type, False)
        try:
            return _gradients(ctx, do)
        finally:
            if off:
                torch.set_autocast_enabled(device_type, True)


def _gradients(ctx: Any, do: Tensor) -> tuple[Any, ...]:
    """:meth:`_SdpaFunction.backward`'s gradients (autocast is off for the device type)."""
    # the graphs read detached tensors, so no autograd history is recorded even under
    # create_graph=True: the gradients are not differentiable again (as with the custom op)
    q, k, v, bias, slq, slkv, o, stats = ctx.saved_tensors
    if bias is None and slq is None:  # the common calls
        if 0 in do.stride():  # a broadcast gradient (x.sum()'s) is made dense, laid out as O
            do = torch.empty_like(o, dtype=do.dtype).copy_(do)  # (see _args.materialized)
        philox = ctx.philox
        if philox is None:
            dq, dk, dv = backward_qkv(q, k, v, o, do, stats, ctx.options, ctx.learn)
        else:
            dq, dk, dv = philox_backward_qkv(q, k, v, o, do, stats, philox, ctx.learn)
        return dq, dk, dv, None, None, None, None, None, None
    bias_grad = bias is not None and ctx.needs_input_grad[3]
    pack: dict[str, Any] = {
        "Q": q,
        "K": k,
        "V": v,
        "O": o,
        "dO": materialized(do, o),
        "Stats": stats,
    }
    options = ctx.options
    scalars = None
    if ctx.philox is not None:  # made before the graph calls: each module entered once
        seed, offset, options = ctx.philox
        scalars = philox_slots(seed, offset)
    pack.update(optional_slots(q.dtype, bias, slq, slkv, None, 1.0))
    if scalars is not None:
        pack.update(scalars)
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


#: the Function's C-level apply, and the two checks made before it (see :func:`_c_apply`)
APPLY, transforms_active, unwrap = _c_apply()
#: the Function itself (``SdpaFunction.apply`` where :data:`APPLY` is None, or under
#: functorch transforms)
SdpaFunction = _SdpaFunction
