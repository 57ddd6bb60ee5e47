"""The functions :mod:`.flex` compiles, and the helpers around its compiled calls.

Module-level functions without closures over state, so that each kernel can compile its own
copy of the code object (:func:`fresh`; dynamo's compile cache and its recompile limit are per
code object), and the ``make_fx`` tracing of the modifiers that flex's backward operator takes.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from . import _flex_blocks as blocks
from . import _flex_mods as mods

Tensor = torch.Tensor
_LN2 = math.log(2.0)

# ------------------------------------------------------------------------------ compiled bodies
# Module-level functions without closures, so that each kernel can get its own copy of the code
# object (dynamo's compile cache, and its recompile limit, are per code object).


def _aux_kw() -> dict[str, Any]:
    from torch.nn.attention import flex_attention as fa

    aux = getattr(fa, "AuxRequest", None)
    return {"return_aux": aux(lse=True)} if aux is not None else {"return_lse": True}


def _forward_body(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None,
    slopes: Tensor | None,
    scale_t: Tensor | None,
    block_mask: Any,
    cfg: tuple[mods.Features, float, bool, bool, tuple[tuple[str, Any], ...]],
) -> tuple[Tensor, Tensor | None]:
    from torch.nn.attention.flex_attention import flex_attention

    f, scale, gqa, want_lse, options = cfg
    sm = mods.score_mod(f, bias, slopes, scale_t)
    kernel_options: Any = dict(options) or None  # flex's FlexKernelOptions: a TypedDict
    if not want_lse:
        out = flex_attention(q, k, v, score_mod=sm, block_mask=block_mask, scale=scale,
                             enable_gqa=gqa, kernel_options=kernel_options)  # fmt: skip
        return out, None
    out, aux = flex_attention(q, k, v, score_mod=sm, block_mask=block_mask, scale=scale,
                              enable_gqa=gqa, kernel_options=kernel_options,
                              **_aux_kw())  # fmt: skip
    return out, getattr(aux, "lse", aux)


def _padding_blocks_body(len_q: Tensor, len_kv: Tensor, f: mods.Features) -> tuple[Tensor, ...]:
    """A padding block mask's tensors from the lengths (:func:`._flex_blocks.padding_blocks`)."""
    return blocks.padding_blocks(f, len_q, len_kv)


#: per kernel tag: the score modifier, its joint graph and the mask modifier, traced once
#: (``make_fx``) at build time. Dynamo passes pretraced graphs to flex's backward operator only
#: when they come from a dict like this one (torch 2.11 traces no other form).
GRAPHS: dict[str, dict[str, Any]] = {}


def _backward_body(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    score_buffers: tuple[Tensor, ...],
    mask_buffers: tuple[Tensor, ...],
    block_mask: tuple[Any, ...],
    outs: tuple[Tensor | None, ...],
    cfg: tuple[str, float, dict[str, Any], bool],
) -> Tensor | None:
    """Writes dQ, dK, dV (and dBias where ``outs`` has a tensor for it) into ``outs``: the
    conversions to the outputs' types fuse with the kernels' own stores. ``stats`` are the
    node's fp32 natural-log Stats ``[B,H,Sq,1]`` (``+inf`` on rows without keys), turned into
    flex's base-2 log-sum-exp here, in one fused kernel. Returns dBias where it still needs
    summing over broadcast dims, else None."""
    from torch._higher_order_ops.flex_attention import flex_attention_backward

    tag, scale, options, dbias = cfg
    g = GRAPHS[tag]
    lse = stats.reshape(stats.shape[:-1])
    lse2 = torch.where(torch.isinf(lse), math.inf, lse) / _LN2
    dq, dk, dv, grads = flex_attention_backward(
        q, k, v, o, lse2, do, None, g["fw"], g["joint"], (*block_mask, g["mask"]), scale,
        options, score_buffers, mask_buffers,
    )  # fmt: skip
    grad = grads[0] if dbias and grads else None
    for dest, value in zip(outs, (dq, dk, dv, grad), strict=True):
        if dest is not None and value is not None:
            dest.copy_(value if value.shape == dest.shape else value.reshape(dest.shape))
    return grad if outs[3] is None else None


def trace_graphs(
    f: mods.Features,
    score_buffers: Sequence[Tensor],
    mask_buffers: Sequence[Tensor],
    names: tuple[bool, bool, bool],
    dtype: torch.dtype,
    device: torch.device,
) -> dict[str, Any]:
    """``make_fx`` graphs of the score modifier (buffers as inputs), its joint (gradient) graph
    and the mask modifier, as flex's backward operator takes them."""
    from torch._higher_order_ops.flex_attention import create_fw_bw_graph
    from torch.fx.experimental.proxy_tensor import make_fx

    has_bias, has_slopes, has_scale = names

    def score(s: Tensor, b: Tensor, h: Tensor, q: Tensor, k: Tensor, *bufs: Tensor) -> Tensor:
        it = iter(bufs)
        bias = next(it) if has_bias else None
        slopes = next(it) if has_slopes else None
        scale = next(it) if has_scale else None
        return mods.score_mod(f, bias, slopes, scale)(s, b, h, q, k)

    def mask(b: Tensor, h: Tensor, q: Tensor, k: Tensor, *bufs: Tensor) -> Tensor:
        lq, lk = bufs if bufs else (None, None)
        return mods.mask_mod(f, lq, lk)(b, h, q, k)

    idx = tuple(torch.zeros((), dtype=torch.int, device=device) for _ in range(4))
    example = (torch.zeros((), dtype=dtype, device=device, requires_grad=True), *idx)
    fw = make_fx(score)(*example, *score_buffers)
    # the joint graph from the Python modifier (as flex's own autograd path does), so that the
    # gradient of an indexed buffer is mod_index's zeros_and_scatter, not a traced aten.index's
    _, joint = create_fw_bw_graph(score, example, tuple(score_buffers))  # type: ignore[arg-type]
    return {"fw": fw, "joint": joint, "mask": make_fx(mask)(*idx, *mask_buffers)}


def fresh(fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
    """A copy of ``fn`` with a code object of its own (named ``<fn>_<tag>``)."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


@contextlib.contextmanager
def no_recompile(building: bool) -> Iterator[None]:
    """Calls after the build may not compile: a recompile raises instead."""
    stance = getattr(torch.compiler, "set_stance", None)
    if building or stance is None:
        yield
        return
    with stance("fail_on_recompile"):
        yield


def distinct(*tensors: Tensor) -> list[Tensor]:
    """Tensors in the row-major strides the kernels were compiled for, a copy where one object
    is passed twice or where a contiguous tensor has other strides on a dim of size 1 (dynamo
    guards every stride: either would make a call compile a different graph, which it may not)."""
    out: list[Tensor] = []
    for t in tensors:
        c = t if t.stride() == row_major(t.shape) else _fresh_copy(t)
        out.append(_fresh_copy(c) if any(c is o for o in out) else c)
    return out


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides of a dense row-major tensor of ``shape``."""
    strides: list[int] = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _fresh_copy(t: Tensor) -> Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t)


def kernel_options(q: Tensor, k: Tensor, v: Tensor) -> dict[str, Any]:
    from torch.nn.attention import flex_attention as fa

    apply = getattr(fa, "_apply_kernel_options", None)
    if apply is None:
        return {"OUTPUT_LOGSUMEXP": True}
    return dict(apply(q, k, v, True, None))
