"""Wrappers over torch's fused SDPA ops, fed with the user's O and Stats.

Three op families, each with a forward (O and Stats ``[B,H,Sq,1]`` natural-log LSE fp32) and a
backward that reads the GIVEN O and Stats (the forward is never recomputed):

* cudnn: ``aten._scaled_dot_product_cudnn_attention_backward``; BHSD; LSE of the rank its own
  forward returns (``[B,H,Sq,1]`` or ``[B,H,Sq]``, torch versions differ).
* flash: ``aten._flash_attention_backward`` (dense or varlen); BSHD views; LSE ``[B,H,Sq]``,
  varlen ``[H, total_q]``; windows through ``window_size_left/right`` (bottom-right aligned).
* efficient: ``aten._efficient_attention_backward`` (dense or varlen, ``custom_mask_type``,
  bias + dBias, ``window_size``); BMHK views; LSE ``[B,H,ceil(Sq/32)·32]`` +inf-padded on CUDA,
  unpadded on ROCm (the padding is measured from its own forward, not assumed).

What each op cannot do is stated by :func:`static_reason` (API facts, no device needed) and by
:func:`check` (adds what :func:`capabilities` measured on the device: causal alignment, native
GQA, bias broadcasting, varlen, windows). Every reason names the feature, so an engine can refuse
with it and let ranking fall through to the math engine.

Philox dropout (probability, seed, offset; no mask tensor) runs on every op: the forward with
the device's generator set to the seed and offset for the call, the backward with them in the
op's own argument form (:mod:`._fused_philox`, which also names each op's Philox stream).

Never supported by a fused op here: a dropout mask (no fused op takes an explicit mask), ALiBi
(flash's backward has no slopes; torch exposes ALiBi nowhere else), float64 inputs, negative
band bounds; float32 inputs run on the memory-efficient op only, as in torch
(:data:`._fused_rules.DTYPES`). cuDNN additionally: dBias, padding, band/window masks. flash: bias,
``Dv ≠ D``. efficient: band masks other than causal(+window), bias together with padding.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Unpack

import torch

from . import _fused_direct, _fused_ops, probe
from ._fused_common import PLAN_GENERATION, PLANS, clear_empty_rows, empty_rows
from ._fused_philox import backward_rng, generator_at, host_int
from ._fused_rules import (
    FusedOp,
    FusedSdpaCase,
    FusedUnsupportedError,
    OpCaps,
    dtype_reason,
    measured_reason,
    static_reason,
)
from .call import OPEN_SCALE, PLAIN, SdpaCall, SdpaInputs

__all__ = [
    "FusedOp",
    "FusedSdpaCase",
    "FusedUnsupportedError",
    "Kernel",
    "OpCaps",
    "backward",
    "capabilities",
    "check",
    "clear_empty_rows",
    "dtype_reason",
    "empty_rows",
    "forward",
    "static_reason",
]

Tensor = torch.Tensor


def capabilities(device: torch.device | str, dtype: torch.dtype) -> dict[FusedOp, OpCaps]:
    """Measured capabilities of every fused op on ``(device, dtype)``; cached (:mod:`.probe`)."""
    return probe.capabilities(device, dtype)


def check(op: FusedOp, p: FusedSdpaCase) -> str | None:
    """Why ``op`` cannot run ``p`` exactly on its device (static rules + measured caps).

    The static rules come first, so a problem they refuse never starts a device probe.

    Example:
        >>> import torch
        >>> p = FusedSdpaCase(b=1, h=1, hk=1, hv=1, sq=8, skv=8, d=64, dv=64,
        ...                   dtype=torch.bfloat16, device="cpu")
        >>> check(FusedOp.FLASH, p)
        'flash needs a CUDA or ROCm device; the tensors are on cpu'
    """
    reason = static_reason(op, p)
    if reason is not None:
        return reason
    return measured_reason(op, p, capabilities(p.device, p.dtype)[op])


# ------------------------------------------------------------------------------------------
# public entry points


def _guard(
    op: FusedOp,
    check_it: bool,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    call: SdpaCall,
    inputs: SdpaInputs,
    forward: bool,
    memo: list[Any] | None = None,
) -> tuple[FusedSdpaCase, OpCaps, Tensor | None]:
    """(case, caps, rows-without-keys) for this call; cached per call signature.

    The case, its :func:`check` verdict and (without padding) the rows to zero are computed
    once per signature, so the per-call cost is one tuple hash and a dict lookup. A ``memo``
    (a plan's, :meth:`Kernel.bind`: everything but the tensors' device is fixed) keeps the
    accepted answer for its device, so a later call on that device costs a comparison.
    """
    if memo:
        generation, device, answer = memo  # one read: another thread may refill it
        if generation == PLAN_GENERATION[0] and device == q.device:
            p, c, er = answer
            if p.padding:
                er = empty_rows(p, q.device, inputs.get("seq_len_q"), inputs.get("seq_len_kv"))
            return p, c, er
    bias = inputs.get("bias")
    seq_len_q, seq_len_kv = inputs.get("seq_len_q"), inputs.get("seq_len_kv")
    dropout_mask = inputs.get("dropout_mask")
    key = (
        op, call, q.shape, k.shape, v.shape, q.dtype, q.device,
        None if bias is None else bias.shape, seq_len_q is not None, seq_len_kv is not None,
        dropout_mask is not None, forward,
    )  # fmt: skip
    hit = PLANS.get(key)
    if hit is None:
        p = FusedSdpaCase.from_tensors(q, k, v, call, forward=forward, **inputs)
        reason = check(op, p)
        er = None if p.padding else empty_rows(p, q.device)
        if len(PLANS) > 4096:
            PLANS.clear()
        hit = (p, capabilities(q.device, q.dtype)[op], reason, er)
        PLANS[key] = hit
    p, c, reason, er = hit
    if reason is not None and (check_it or p.dropout_mask or call.alibi or not c.available):
        raise FusedUnsupportedError(op, reason)
    if memo is not None:
        memo[:] = [PLAN_GENERATION[0], q.device, (p, c, er)]
    if p.padding:
        er = empty_rows(p, q.device, seq_len_q, seq_len_kv)
    return p, c, er


class Kernel:
    """:func:`forward` (or :func:`backward`) of one op, as a plan's step calls it; :meth:`bind`
    binds a plan's keywords once."""

    __slots__ = ("_fn", "op")

    def __init__(self, op: FusedOp, forward_pass: bool) -> None:
        self.op = op
        self._fn: Callable[..., Any] = forward if forward_pass else backward

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self._fn(self.op, *args, **kw)

    #: :meth:`bind`'s result takes the keywords read per call (runtime scalars) too
    binds_runtime = True

    def bind(self, static: dict[str, Any]) -> Callable[..., Any]:
        """The op with ``static`` (the plan's keywords) bound and its per-signature check
        (:func:`check`, the capabilities) done on the first call only, per device (a plan's
        tensors have fixed shapes, dtypes and flags); a plain node's calls on that device then
        go straight to the aten op (:mod:`._fused_direct`)."""
        return _Bound(self.op, self._fn is forward, static)


class _Bound:
    """:meth:`Kernel.bind`'s callable: the generic call with a memo, then, for a plain node, the
    direct call bound for the device of the first call."""

    __slots__ = ("_bound", "_forward", "_generic", "_memo", "_op")

    def __init__(self, op: FusedOp, forward_pass: bool, static: dict[str, Any]) -> None:
        self._op, self._forward = op, forward_pass
        self._memo: list[Any] = []
        fn = forward if forward_pass else backward
        self._generic = functools.partial(fn, op, memo=self._memo, **static)
        #: (direct call or None, its device, the probe generation it was bound in), one value
        #: so that a thread never reads a call with another call's device
        self._bound: tuple[Callable[..., Any] | None, Any, int] = (None, _UNSET, -1)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        direct, device, generation = self._bound
        if direct is not None and args[0].device == device and generation == PLAN_GENERATION[0]:
            return direct(*args, **kw)  # kw: the runtime Seed and Offset of a philox node
        out = self._generic(*args, **kw)  # checks (once per device), fills the memo
        if (device is _UNSET or generation != PLAN_GENERATION[0]) and self._memo:
            # bound for the device of this call (again after the probe's cache was cleared)
            generation, device, (p, c, er) = self._memo  # one read, as in _guard
            direct = _fused_direct.direct(self._op, self._forward, p, c, er, device)
            self._bound = (direct, device, generation)
        return out

    def autograd(self) -> tuple[Any, Callable[..., Any] | None] | None:
        """The direct call's ``(pair, call)``, the fields of its
        :class:`~hipdnn_graph.backend.AutogradForm` (the aten op for a plain node), once a call
        has bound it; None before, or for any other node."""
        direct, _, generation = self._bound
        if direct is None or generation != PLAN_GENERATION[0]:
            return None
        return getattr(direct, "autograd_form", None)


_UNSET: Any = object()


def forward(
    op: FusedOp,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    call: SdpaCall = PLAIN,
    *,
    check: bool = True,
    memo: list[Any] | None = None,
    **inputs: Unpack[SdpaInputs],
) -> tuple[Tensor, Tensor]:
    """O ``[B,H,Sq,Dv]`` (input dtype) and Stats ``[B,H,Sq,1]`` fp32 from the fused op.

    ``call`` and ``inputs`` as in :func:`hipdnn_graph_torch_rocm.kernels.math.sdpa_forward`;
    philox dropout (``call.dropout_p`` with the Seed and Offset: ints, or one-element tensors
    read on the host) runs in the op itself, with the device's generator set to them for the
    call (:mod:`._fused_philox`; no mask tensor). :func:`check` runs once per call signature
    (cached); with ``check=False`` a failed check raises only for what can never run (dropout
    mask, ALiBi, op unavailable) and otherwise the caller's plan-time check is trusted.

    Raises:
        FusedUnsupportedError: the op cannot run this exactly (the message names the feature).
    """
    p, c, er = _guard(op, check, q, k, v, call, inputs, True, memo)
    run = _fused_ops.FORWARD[op]
    scale = inputs.get("scale")
    if scale is None:  # not a runtime scale: the call's (inline: the hot path counts calls)
        scale = call.scale
        if scale is None:
            raise ValueError(OPEN_SCALE)
    bias, lq, lkv = inputs.get("bias"), inputs.get("seq_len_q"), inputs.get("seq_len_kv")
    if not call.dropout_p:
        return clear_empty_rows(er, *run(p, c, q, k, v, scale, bias, lq, lkv))
    s, off = _philox_values(call, inputs)
    with generator_at(op, q.device, host_int(s, "Seed"), host_int(off, "Offset")):
        o, st = run(p, c, q, k, v, scale, bias, lq, lkv)
    return clear_empty_rows(er, o, st)


def _philox_values(call: SdpaCall, inputs: SdpaInputs) -> tuple[int | Tensor, int | Tensor]:
    """The Seed and Offset of a philox call: given per call, else the call's."""
    seed = inputs.get("dropout_seed")
    offset = inputs.get("dropout_offset")
    seed = call.dropout_seed if seed is None else seed
    offset = call.dropout_offset if offset is None else offset
    if seed is None or offset is None:
        raise ValueError("philox dropout needs a seed and an offset")
    return seed, offset


def backward(
    op: FusedOp,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    call: SdpaCall = PLAIN,
    *,
    check: bool = True,
    memo: list[Any] | None = None,
    **inputs: Unpack[SdpaInputs],
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """dQ, dK, dV (input dtype) and dBias (fp32 where summed over broadcast dims, or None) from
    the fused backward op.

    The op reads the GIVEN ``o`` and ``stats`` (``[B,H,Sq,1]`` natural-log LSE); nothing is
    recomputed. dBias is produced when ``call.dbias_shape`` is set (efficient only). Philox
    dropout and ``check`` as in :func:`forward`; the Seed and Offset reach the op in its own
    form (:func:`._fused_philox.backward_rng`).

    Raises:
        FusedUnsupportedError: the op cannot run this exactly (the message names the feature).
    """
    p, c, er = _guard(op, check, q, k, v, call, inputs, False, memo)
    philox_rng = None
    if call.dropout_p:
        philox_rng = backward_rng(op, q.device, *_philox_values(call, inputs))
    scale = inputs.get("scale")
    if scale is None:  # as in forward
        scale = call.scale
        if scale is None:
            raise ValueError(OPEN_SCALE)
    dq, dk, dv, db = _fused_ops.BACKWARD[op](
        p, c, q, k, v, o, do, stats, scale, inputs.get("bias"), inputs.get("seq_len_q"),
        inputs.get("seq_len_kv"), philox_rng,
    )  # fmt: skip
    if er is not None:
        dq = dq.masked_fill(er, 0.0)
    return dq, dk, dv, db
