"""Direct calls of cuDNN attention for a plan's plain nodes: the aten op with its arguments bound.

:func:`.fused.forward` and :func:`.fused.backward` serve every node the fused ops run (bias,
GQA expansion, padding, bands, philox dropout), so each call goes through the op's generic
wrapper (:mod:`._fused_ops`): masking rules, K/V heads, bias layout, the RNG-state bookkeeping,
the Stats mapping. For a *plain* node on the cuDNN op, every one of those answers is fixed by the
plan (shapes, dtypes, flags) and the device, so :func:`direct` binds them once: a call is the
aten op itself with its constant arguments, and the Stats passed through when they already have
the op's own ``[B, H, Sq, 1]`` float32 layout (an op whose forward returns ``[B, H, Sq]`` gets
them mapped as the generic call maps them).

Plain means: cuDNN, no bias, dBias, ALiBi, padding, dropout (mask or philox), no query row
without a visible key, K and V heads the op takes natively, and a scale fixed at build time.
Any other node keeps the generic call. The results are the generic call's, bit for bit: the same
op on the same arguments (checked on the GPU by ``tests/gpu/test_torch_op_hot_path_gpu.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._fused_common import RNG_STATE, aten_op, masking, remember_rng, rng_state
from ._fused_ops import _stats_out
from ._fused_rules import FusedOp, OpCaps, SdpaProblem

__all__ = ["direct"]

Tensor = torch.Tensor

#: the static keywords a plain node's step has (anything else: not plain)
_PLAIN_KEYS = frozenset(
    {"alibi", "bottom_right", "left_bound", "right_bound", "scale", "dropout_scale", "check"}
)


def direct(
    op: FusedOp,
    forward: bool,
    p: SdpaProblem,
    c: OpCaps,
    empty_rows: Tensor | None,
    static: dict[str, Any],
    device: torch.device,
) -> Callable[..., Any] | None:
    """The op on positional tensors alone (``q, k, v`` or ``q, k, v, o, do, stats``) for a
    plain node on ``device``, or None where the node is not plain (see the module).

    Example:
        >>> p = SdpaProblem(b=1, h=1, hk=1, hv=1, sq=8, skv=8, d=64, dv=64,
        ...                 dtype=torch.bfloat16, device="cpu", alibi=True)
        >>> caps = OpCaps(FusedOp.CUDNN, True, lse_rank=4)
        >>> direct(FusedOp.CUDNN, True, p, caps, None, {"scale": 0.125}, torch.device("cpu"))
    """
    plain = (
        op is FusedOp.CUDNN
        and static.keys() <= _PLAIN_KEYS
        and isinstance(static.get("scale"), float)
        and not static.get("alibi")
        and empty_rows is None
        and p.bias_shape is None
        and not (p.dbias or p.alibi or p.padding or p.dropout_mask)
        and (p.hk == p.h == p.hv or (c.gqa_native and p.hk == p.hv))
    )
    if not plain:
        return None
    causal = masking(op, c, p.sq, p.skv, p.bottom_right, p.left_bound, p.right_bound, False)[0]
    scale: float = static["scale"]
    stats_shape = (p.b, p.h, p.sq, 1)
    dense = (p.h * p.sq, p.sq, 1, 1)
    f32 = torch.float32
    if forward:
        fwd = aten_op("_scaled_dot_product_cudnn_attention")
        rng_key = (op, device)

        def run_forward(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
            res = fwd(q, k, v, None, True, 0.0, causal, False, scale=scale)
            lse = res[1]
            if lse.dtype is not f32 or lse.shape != stats_shape:
                lse = _stats_out(lse, p)  # the generic call's mapping of a [B, H, Sq] LSE
            if rng_key not in RNG_STATE:
                remember_rng(op, device, res[6], res[7])
            return res[0], lse

        return run_forward
    rank4 = c.lse_rank == 4  # the LSE the op takes back: its forward's [B, H, Sq(, 1)]
    lse_shape = stats_shape if rank4 else stats_shape[:3]
    bwd = aten_op("_scaled_dot_product_cudnn_attention_backward")
    seed, offset = rng_state(op, device)  # dropout 0: never read
    sq, skv = p.sq, p.skv

    def run_backward(
        q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, None]:
        if rank4 and stats.dtype is f32 and stats.stride() == dense:
            lse = stats  # the op's own layout, as its forward returned it
        else:
            lse = stats.reshape(lse_shape).float().contiguous()
        dtype = q.dtype
        if do.dtype is not dtype:
            do = do.to(dtype)
        if o.dtype is not dtype:
            o = o.to(dtype)
        dq, dk, dv = bwd(do, q, k, v, o, lse, seed, offset, None, None, None, sq, skv, 0.0,
                         causal, scale=scale)  # fmt: skip
        return dq, dk, dv, None

    return run_backward
