"""Direct calls of cuDNN attention for a plan's plain nodes: the aten op with its arguments bound.

:func:`.fused.forward` and :func:`.fused.backward` serve every node the fused ops run (bias,
GQA expansion, padding, bands, philox dropout), so each call goes through the op's generic
wrapper (:mod:`._fused_ops`): masking rules, K/V heads, bias layout, the RNG-state bookkeeping,
the Stats mapping. For a *plain* node on the cuDNN op, every one of those answers is fixed by the
plan (shapes, dtypes, flags) and the device, so :func:`direct` binds them once: a call is the
aten op itself with its constant arguments, and the Stats passed through when they already have
the op's own ``[B, H, Sq, 1]`` float32 layout (an op whose forward returns ``[B, H, Sq]`` gets
them mapped as the generic call maps them).

Plain means: cuDNN, no bias, dBias, ALiBi, padding or dropout mask, no query row without a
visible key, K and V heads the op takes natively, and a scale fixed at build time. Philox dropout
is plain too: the forward runs with the device's generator at the graph's seed and offset, the
backward takes them in the op's form, as the generic call does (:mod:`._fused_philox`).
Any other node keeps the generic call. The results are the generic call's, bit for bit: the same
op on the same arguments (checked on the GPU by ``tests/gpu/test_torch_op_hot_path_gpu.py``).

Each direct call carries the fields of its :class:`~hipdnn_graph.backend.AutogradForm`
(``autograd_form``, a ``(pair, call)`` tuple: kernels import without the core package). The
forward's and the backward's share one ``pair`` (the op, causal, scale, dropout probability),
because the backward call is exactly the one torch's autograd formula of
``aten._scaled_dot_product_cudnn_attention`` makes (``_scaled_dot_product_cudnn_attention_
backward`` on the forward's inputs, output, logsumexp, philox seed and offset, the lengths and
the same flags). The forward's call runs the op on tensors that may require grad.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._fused_common import RNG_STATE, aten_op, masking, remember_rng, rng_state
from ._fused_ops import _stats_out
from ._fused_philox import backward_rng, generator_at, host_int
from ._fused_rules import FusedOp, FusedSdpaCase, OpCaps

__all__ = ["direct"]

Tensor = torch.Tensor


def direct(
    op: FusedOp,
    forward: bool,
    p: FusedSdpaCase,
    c: OpCaps,
    empty_rows: Tensor | None,
    device: torch.device,
) -> Callable[..., Any] | None:
    """The op on positional tensors (``q, k, v`` or ``q, k, v, o, do, stats``, and a philox
    node's ``dropout_seed``/``dropout_offset`` keywords when its call leaves them open) for a
    plain node on ``device``, or None where the node is not plain (see the module).

    Example:
        >>> from .call import SdpaCall
        >>> p = FusedSdpaCase(b=1, h=1, hk=1, hv=1, sq=8, skv=8, d=64, dv=64,
        ...                   dtype=torch.bfloat16, device="cpu",
        ...                   call=SdpaCall(scale=0.125, alibi=True))
        >>> caps = OpCaps(FusedOp.CUDNN, True, lse_rank=4)
        >>> direct(FusedOp.CUDNN, True, p, caps, None, torch.device("cpu"))
    """
    w = p.call
    plain = (
        op is FusedOp.CUDNN
        and empty_rows is None
        and p.bias_shape is None
        and not (p.dbias or w.alibi or p.padding or p.dropout_mask)
        and (p.hk == p.h == p.hv or (c.gqa_native and p.hk == p.hv))
    )
    if not plain or w.scale is None:  # a scale given per call: the generic call reads it
        return None
    causal = masking(op, c, p)[0]
    scale = float(w.scale)
    stats_shape = (p.b, p.h, p.sq, 1)
    dense = (p.h * p.sq, p.sq, 1, 1)
    f32 = torch.float32
    drop = float(w.dropout_p)  # philox dropout: the graph's Seed and Offset
    seed0, offset0 = w.dropout_seed, w.dropout_offset
    pair = ("_scaled_dot_product_cudnn_attention", causal, scale, drop)
    if forward:
        fwd = aten_op("_scaled_dot_product_cudnn_attention")
        rng_key = (op, device)

        def run_forward(
            q: Tensor,
            k: Tensor,
            v: Tensor,
            dropout_seed: Any = seed0,
            dropout_offset: Any = offset0,
        ) -> tuple[Tensor, Tensor]:
            if drop:  # the op draws from the device's generator, set to the graph's seed/offset
                if dropout_seed is None or dropout_offset is None:
                    raise ValueError("philox dropout needs a seed and an offset")
                at = generator_at(op, device, host_int(dropout_seed, "Seed"),
                                  host_int(dropout_offset, "Offset"))  # fmt: skip
                with at:
                    res = fwd(q, k, v, None, True, drop, causal, False, scale=scale)
            else:
                res = fwd(q, k, v, None, True, 0.0, causal, False, scale=scale)
            lse = res[1]
            if lse.dtype is not f32 or lse.shape != stats_shape:
                lse = _stats_out(lse, p)  # the generic call's mapping of a [B, H, Sq] LSE
            if rng_key not in RNG_STATE:
                remember_rng(op, device, res[6], res[7])
            return res[0], lse

        def differentiable(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            # with dropout the op draws from the device's generator as it stands (see the form)
            return fwd(q, k, v, None, True, drop, causal, False, scale=scale)[0]  # type: ignore[no-any-return]

        run_forward.autograd_form = (pair, differentiable)  # type: ignore[attr-defined]
        return run_forward
    rank4 = c.lse_rank == 4  # the LSE the op takes back: its forward's [B, H, Sq(, 1)]
    lse_shape = stats_shape if rank4 else stats_shape[:3]
    bwd = aten_op("_scaled_dot_product_cudnn_attention_backward")
    no_drop = rng_state(op, device)  # without dropout: never read
    sq, skv = p.sq, p.skv

    def run_backward(
        q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor,
        dropout_seed: Any = seed0, dropout_offset: Any = offset0,
    ) -> tuple[Tensor, Tensor, Tensor, None]:  # fmt: skip
        seed, offset = no_drop
        if drop:  # the forward's seed and offset, in the op's own argument form
            if dropout_seed is None or dropout_offset is None:
                raise ValueError("philox dropout needs a seed and an offset")
            seed, offset = backward_rng(op, device, dropout_seed, dropout_offset)
        if rank4 and stats.dtype is f32 and stats.stride() == dense:
            lse = stats  # the op's own layout, as its forward returned it
        else:
            lse = stats.reshape(lse_shape).float().contiguous()
        dtype = q.dtype
        if do.dtype is not dtype:
            do = do.to(dtype)
        if o.dtype is not dtype:
            o = o.to(dtype)
        dq, dk, dv = bwd(do, q, k, v, o, lse, seed, offset, None, None, None, sq, skv, drop,
                         causal, scale=scale)  # fmt: skip
        return dq, dk, dv, None

    run_backward.autograd_form = (pair, None)  # type: ignore[attr-defined]
    return run_backward
