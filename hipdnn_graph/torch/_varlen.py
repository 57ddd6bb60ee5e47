"""``varlen_attention``: attention over a packed batch (sequences of different lengths back to
back on one token axis, no padding), with autograd, through packed (ragged) SDPA graphs.

The tensors follow FlashAttention's ``flash_attn_varlen_func`` (which transformers' padding-free
path calls): ``[T, H, D]`` tokens and cumulative sequence lengths ``cu_seqlens`` of ``B + 1``
entries. They become hipDNN's packed tensors as they lie: Q, K, V and O declare
``[B, H, S_max, D]`` with token-major strides and carry the offsets as their ragged offsets
(multiplier ``H·D``: the offsets count tokens); Stats is a dense ``[B, H, S_max, 1]``. The
forward graph (SdpaFwd: O and Stats) and the backward graph (SdpaBwd fed exactly those) are
kept in the op's graph cache (:func:`hipdnn_graph.torch.graph_cache`), keyed by the graphs'
facts (B, each side's S_max, heads, head dims, dtypes, device, flags), never by the offsets'
values, which are runtime data: a batch packed differently hits the same graphs. S_max is
``max_seqlen`` rounded up to a power of two, or the side's token count rounded so where that is
smaller (a ``max_seqlen`` far past the tokens must not size Stats). Each call runs through
``Graph.run``, so the variant-pack checks of the packed buffers run every time.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch import varlen_attention
    >>> q = torch.randn(7, 2, 8, dtype=torch.float64, requires_grad=True)
    >>> cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    >>> out = varlen_attention(q, q, q, cu, cu, 4, 4, is_causal=True)
    >>> alone = torch.nn.functional.scaled_dot_product_attention(
    ...     *(q[3:].transpose(0, 1),) * 3, is_causal=True).transpose(0, 1)
    >>> out.shape, torch.allclose(out[3:], alone)
    (torch.Size([7, 2, 8]), True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

import torch

from ..graph import Graph
from ..tensor import TensorAttributes
from ..types import DataType, DiagonalAlignment
from ._args import IO_TYPES
from ._autocast import AutocastOff, cast
from ._autocast import enabled as autocast_enabled
from ._cached import Entry, Options, run_cached
from ._graphs import _build
from ._varlen_args import VarlenCall, normalise_varlen

__all__ = ["varlen_attention"]

Tensor = torch.Tensor

_OFFSET_TYPES = {torch.int32: DataType.INT32, torch.int64: DataType.INT64}


def varlen_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int | Tensor,
    max_seqlen_k: int | Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    diagonal_alignment: DiagonalAlignment | str | None = None,
    enable_gqa: bool = False,
    engine: str | None = None,
) -> Tensor:
    """Attention over a packed batch, each sequence attending only to its own keys.

    Sequence ``b`` is query tokens ``q[cu_seqlens_q[b]:cu_seqlens_q[b + 1]]`` and key/value
    tokens ``k[cu_seqlens_k[b]:cu_seqlens_k[b + 1]]`` (``Sq ≠ Skv`` allowed); the result is
    what ``F.scaled_dot_product_attention`` gives each sequence alone, packed the same way. A
    query that sees no key (causal with ``Skv = 0``) gets zeros. Differentiable in q, k and v.

    Args:
        q: ``[Tq, H, D]`` queries (float16, bfloat16, float32 or float64).
        k: ``[Tk, Hk, D]`` keys; Hk divides H (with ``enable_gqa``).
        v: ``[Tk, Hv, Dv]`` values; Hv divides H.
        cu_seqlens_q: ``[B + 1]`` int32/int64 cumulative query lengths: 0, ..., ``Tq``; on q's
            device (read on the host: a GPU tensor is copied there).
        cu_seqlens_k: ``[B + 1]`` cumulative key lengths: 0, ..., ``Tk``.
        max_seqlen_q: an upper bound of the query lengths (an int, or an integer tensor of one
            element, as transformers passes it).
        max_seqlen_k: an upper bound of the key lengths.
        is_causal: causal mask per sequence, top-left by default as in torch (FlashAttention
            aligns it bottom-right: pass ``diagonal_alignment="bottom_right"``; both agree
            where ``Sq = Skv``).
        scale: the score scale; ``1/sqrt(D)`` when ``None``.
        diagonal_alignment: ``"top_left"`` or ``"bottom_right"`` (each sequence's own
            ``Skv − Sq`` offsets the diagonal).
        enable_gqa: K and V may have fewer heads than Q.
        engine: force an engine by name; ``None`` takes the best that runs packed graphs.

    Returns:
        O ``[Tq, H, Dv]`` in q's dtype.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments (offsets that do not start at 0,
            decrease, do not end at the token count, or exceed ``max_seqlen``; wrong ranks,
            dtypes, devices or head counts).
        NotSupportedError: when no engine (or not the forced one) runs the packed graphs.
    """
    return _EAGER(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal,
                  scale, diagonal_alignment, enable_gqa, engine)  # fmt: skip


def _eager(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
    max_seqlen_q: int | Tensor, max_seqlen_k: int | Tensor, is_causal: bool,
    scale: float | None, diagonal_alignment: DiagonalAlignment | str | None, enable_gqa: bool,
    engine: str | None,
) -> Tensor:  # fmt: skip
    """:func:`varlen_attention`'s body: autocast's casts, the checks, the autograd Function."""
    if autocast_enabled():  # torch.autocast's rule for SDPA, as the dense op applies it
        q, k, v, _ = cast(q, k, v, None)
    call = normalise_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            is_causal, scale, diagonal_alignment, enable_gqa, engine)  # fmt: skip
    with AutocastOff(call.query.device.type):  # the graphs run in the precision they declare
        out: Tensor = _VarlenFunction.apply(  # type: ignore[no-untyped-call]
            call.query, call.key, call.value, call.cu_seqlens_q, call.cu_seqlens_k, call
        )
    return out


#: :func:`_eager` kept out of ``torch.compile``'s tracing (graph building and the offsets' host
#: reads run eagerly, behind a graph break)
_EAGER: Callable[..., Tensor] = torch.compiler.disable(_eager)  # type: ignore[no-untyped-call]


class _VarlenFunction(torch.autograd.Function):
    """The packed forward graph (O, Stats saved) and the packed backward graph fed them."""

    @staticmethod
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, cu_q: Tensor, cu_k: Tensor, call: VarlenCall
    ) -> Tensor:
        q, k, v = q.detach(), k.detach(), v.detach()
        pack = {"Q": q, "K": k, "V": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
        key = _key("varlen_fwd", pack, call)
        _, (o, stats) = run_cached(key, pack, call.options, _builder(_forward_graph, call))
        ctx.call = call
        ctx.save_for_backward(q, k, v, cu_q, cu_k, o.detach(), stats)
        return o

    @staticmethod
    def backward(ctx: Any, do: Tensor) -> tuple[Any, ...]:
        with AutocastOff(do.device.type):  # a backward called inside an autocast region
            return _gradients(ctx, do)


def _gradients(ctx: Any, do: Tensor) -> tuple[Any, ...]:
    """:meth:`_VarlenFunction.backward`'s gradients: the packed backward graph."""
    q, k, v, cu_q, cu_k, o, stats = ctx.saved_tensors
    call: VarlenCall = ctx.call
    pack = {"Q": q, "K": k, "V": v, "O": o, "dO": do.contiguous(), "Stats": stats,
            "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}  # fmt: skip
    key = _key("varlen_bwd", pack, call)
    _, (dq, dk, dv) = run_cached(key, pack, call.options, _builder(_backward_graph, call))
    return dq, dk, dv, None, None, None


def _key(kind: str, pack: dict[str, Tensor], call: VarlenCall) -> Hashable:
    """The graph's facts: per slot its dtype and the dims it declares (heads and head dim of a
    packed tensor, not its token count), B, each side's S_max, Q's device, the options."""
    signature = tuple((slot, t.dtype, tuple(t.shape[1:])) for slot, t in pack.items())
    return (kind, pack["Q"].device, signature, call.batch, call.seq_max, call.options)


def _builder(build: Any, call: VarlenCall) -> Any:
    """``build(pack, options, prefer=None)`` for :func:`._cached.run_cached`."""
    return functools.partial(build, call=call)


def _graph(pack: dict[str, Tensor], name: str) -> tuple[Graph, dict[str, TensorAttributes]]:
    """A graph of the pack's dtype with both offsets tensors (``[B + 1]``) as inputs."""
    io = IO_TYPES[pack["Q"].dtype]
    wide = DataType.DOUBLE if io == DataType.DOUBLE else DataType.FLOAT
    g = Graph(name=name, io_data_type=io, intermediate_data_type=wide, compute_data_type=wide)
    slots = {}
    for slot in ("cu_seqlens_q", "cu_seqlens_k"):
        cu = pack[slot]
        slots[slot] = g.tensor(name=slot, dim=[cu.shape[0]], stride=[1],
                               data_type=_OFFSET_TYPES[cu.dtype])  # fmt: skip
    return g, slots


def _packed(t: TensorAttributes, offsets: TensorAttributes, batch: int, seq: int, like: Tensor
            ) -> TensorAttributes:  # fmt: skip
    """``t`` declared ``[B, H, S_max, D]`` over a packed ``[T, H, D]`` buffer like ``like``."""
    _, heads, width = like.shape
    t.set_dim([batch, heads, seq, width]).set_stride([seq * heads * width, width, heads * width, 1])
    return t.set_ragged_offset(offsets).set_ragged_offset_multiplier(heads * width)


def _tokens(g: Graph, slots: dict[str, TensorAttributes], pack: dict[str, Tensor],
            call: VarlenCall, names: tuple[str, ...]) -> None:  # fmt: skip
    """Graph inputs for the packed slots ``names`` (query side: Q, O, dO; else K, V)."""
    for slot in names:
        side = 0 if slot in ("Q", "O", "dO") else 1
        offsets = slots["cu_seqlens_q" if side == 0 else "cu_seqlens_k"]
        t = g.tensor(name=slot, dim=[1, 1, 1, 1], data_type=IO_TYPES[pack[slot].dtype])
        slots[slot] = _packed(t, offsets, call.batch, call.seq_max[side], pack[slot])


def _mask(options: Options) -> dict[str, Any]:
    bottom_right = options.alignment == DiagonalAlignment.BOTTOM_RIGHT
    return {
        "attn_scale": options.scale,
        "use_causal_mask": (options.causal and not bottom_right) or None,
        "use_causal_mask_bottom_right": (options.causal and bottom_right) or None,
    }


def _forward_graph(pack: dict[str, Tensor], options: Options, prefer: str | None = None, *,
                   call: VarlenCall) -> Entry:  # fmt: skip
    g, slots = _graph(pack, "hipdnn_torch_varlen_fwd")
    _tokens(g, slots, pack, call, ("Q", "K", "V"))
    o, stats = g.sdpa(slots["Q"], slots["K"], slots["V"], name="fwd", generate_stats=True,
                      **_mask(options))  # fmt: skip
    assert stats is not None
    o_like = pack["Q"].new_empty((0, pack["Q"].shape[1], pack["V"].shape[2]))
    _packed(o, slots["cu_seqlens_q"], call.batch, call.seq_max[0], o_like).set_output(True)
    if pack["Q"].dtype == torch.float64:  # exact float64 gradients need exact Stats
        stats.set_data_type(DataType.DOUBLE)
    stats.set_output(True)
    _run_on(g, options, prefer, pack)
    return Entry(g, slots, (o, stats))


def _backward_graph(pack: dict[str, Tensor], options: Options, prefer: str | None = None, *,
                    call: VarlenCall) -> Entry:  # fmt: skip
    g, slots = _graph(pack, "hipdnn_torch_varlen_bwd")
    _tokens(g, slots, pack, call, ("Q", "K", "V", "O", "dO"))
    stats = pack["Stats"]
    slots["Stats"] = g.tensor(name="Stats", dim=list(stats.shape), stride=list(stats.stride()),
                              data_type=IO_TYPES[stats.dtype])  # fmt: skip
    grads = g.sdpa_backward(slots["Q"], slots["K"], slots["V"], slots["O"], slots["dO"],
                            slots["Stats"], name="bwd", **_mask(options))  # fmt: skip
    for grad, slot, side in zip(grads, "QKV", (0, 1, 1), strict=True):
        offsets = slots["cu_seqlens_q" if side == 0 else "cu_seqlens_k"]
        _packed(grad, offsets, call.batch, call.seq_max[side], pack[slot]).set_output(True)
    _run_on(g, options, prefer, pack)
    return Entry(g, slots, tuple(grads))


def _run_on(g: Graph, options: Options, prefer: str | None, pack: dict[str, Tensor]) -> None:
    """Build ``g`` as the op builds its graphs: the forced engine, or the op's ranking (engines
    that do not run packed graphs refuse them by name, and the ranking goes on to one that does:
    flash or efficient on a GPU, the math engine otherwise)."""
    _build(g, options.engine or prefer, forced=options.engine is not None,
           on_host=pack["Q"].device.type == "cpu")  # fmt: skip
