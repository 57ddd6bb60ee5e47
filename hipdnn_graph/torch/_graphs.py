"""Graph-level building blocks of the torch op: one SDPA forward or backward graph per call.

:func:`sdpa_forward` runs an ``SdpaFwd`` graph that produces O and Stats; :func:`sdpa_backward`
runs an ``SdpaBwd`` graph fed exactly those. Both build their graph through the public
:class:`~hipdnn_graph.Graph` API, keep it in the shared LRU cache (:func:`graph_cache`) keyed by
everything that changes it, and let the graph's engines allocate the outputs (``Graph.run``,
no copies). There is no autograd here: :mod:`hipdnn_graph.torch` wraps these in a custom op.

These two functions are semi-public: other parts of hipdnn-graph (context parallelism) call
them directly, and their signatures are kept stable.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch._graphs import sdpa_backward, sdpa_forward
    >>> q = k = v = torch.randn(1, 2, 8, 4)
    >>> o, stats = sdpa_forward(q, k, v, is_causal=True)
    >>> o.shape, stats.shape, stats.dtype
    (torch.Size([1, 2, 8, 4]), torch.Size([1, 2, 8, 1]), torch.float32)
    >>> dq, dk, dv, dbias = sdpa_backward(q, k, v, o, torch.ones_like(o), stats, is_causal=True)
    >>> dq.shape, dbias is None
    (torch.Size([1, 2, 8, 4]), True)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from .. import list_backends
from ..errors import HipdnnError, NotSupportedError
from ..graph import Graph
from ..tensor import TensorAttributes
from ..types import DataType, DiagonalAlignment, ErrorCode
from ._args import (
    IO_TYPES,
    SeqLens,
    as_mask,
    check_qkv,
    check_tensor,
    checked_options,
    fail,
    materialized,
    no_zero_strides,
    seq_lens,
    strides_like,
)
from ._cached import (
    CachedGraph,
    Entry,
    Options,
    cached_graphs,
    graph_cache,
    run_cached,
)
from ._keys import cache_key

__all__ = [
    "CachedGraph",
    "as_bias",
    "cached_graphs",
    "checked_options",
    "graph_cache",
    "mask_to_bias",
    "optional_slots",
    "run_backward",
    "run_forward",
    "sdpa_backward",
    "sdpa_forward",
]

Tensor = torch.Tensor

#: the op's graph cache (:func:`graph_cache`), looked up directly on the hot path
_GRAPHS = graph_cache()


def sdpa_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None = None,
    scale: float | None = None,
    is_causal: bool = False,
    diagonal_alignment: DiagonalAlignment | str | None = None,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: SeqLens = None,
    seq_len_kv: SeqLens = None,
    alibi: bool = False,
    dropout_mask: Tensor | None = None,
    dropout_scale: float | None = None,
    engine: str | None = None,
    prefer: str | None = None,
) -> tuple[Tensor, Tensor]:
    """Run a cached SDPA forward graph; returns ``(O, Stats)``.

    Args:
        q: ``[B, H, Sq, D]`` queries (float16, bfloat16, float32 or float64).
        k: ``[B, Hk, Skv, D]`` keys; Hk divides H (GQA/MQA).
        v: ``[B, Hv, Skv, Dv]`` values; Hv divides H.
        attn_mask: additive float bias broadcastable to ``[B, H, Sq, Skv]`` (rank ≤ 4, each dim
            full or 1), or a bool mask with True = attend.
        scale: the score scale; ``1/sqrt(D)`` when ``None``.
        is_causal: causal mask, aligned by ``diagonal_alignment`` (top-left by default).
        diagonal_alignment: ``"top_left"``/``"bottom_right"`` or a
            :class:`~hipdnn_graph.DiagonalAlignment`, for the causal mask and the band.
        left_bound: band: key ``j`` is visible from query ``i`` when ``j ≥ i − left_bound``.
        right_bound: band: ``j ≤ i + right_bound``.
        seq_len_q: valid query length per batch (padding); the full length where ``None``.
        seq_len_kv: valid key length per batch (padding).
        alibi: add ALiBi slopes.
        dropout_mask: keep mask ``[B or 1, H or 1, Sq, Skv]`` (1 keeps, 0 drops).
        dropout_scale: factor on kept probabilities (``1/(1 − p)``); needs ``dropout_mask``.
        engine: force this engine by name; ``None`` takes what ``Graph.build()`` picks.
        prefer: rank this engine first without forcing it (the kernel torch would pick).

    Returns:
        O ``[B, H, Sq, Dv]`` in q's dtype and Stats ``[B, H, Sq, 1]``, the natural-log
        log-sum-exp of each (undropped) score row: float32 (float64 for float64 inputs, so
        that float64 gradients are exact).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments (the graph's own rules included).
        NotSupportedError: when no engine (or not the forced one) runs the graph.
    """
    check_qkv(q, k, v)
    options = checked_options(q.shape[-1], scale, is_causal, diagonal_alignment, left_bound,
                              right_bound, alibi, engine)  # fmt: skip
    tensors = _optional_inputs(q, k, attn_mask, seq_len_q, seq_len_kv, dropout_mask, dropout_scale)
    if prefer is not None and options.engine is None:
        options = options._replace(prefer=prefer)
    return run_forward({"Q": q, "K": k, "V": v, **tensors}, options)


def sdpa_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    *,
    attn_mask: Tensor | None = None,
    scale: float | None = None,
    is_causal: bool = False,
    diagonal_alignment: DiagonalAlignment | str | None = None,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: SeqLens = None,
    seq_len_kv: SeqLens = None,
    alibi: bool = False,
    dropout_mask: Tensor | None = None,
    dropout_scale: float | None = None,
    engine: str | None = None,
    dbias_shape: Sequence[int] | None = None,
    prefer: str | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Run a cached SDPA backward graph fed the forward's O and Stats; returns dQ, dK, dV, dBias.

    Takes the keywords of :func:`sdpa_forward` (they must be the forward's), plus
    ``dbias_shape``: when given (``attn_mask`` must be a float bias), dBias is computed and
    returned summed to that shape (a shape the bias broadcasts from, e.g. the caller's own
    mask shape); otherwise the fourth result is ``None``.

    Args:
        q: as given to the forward.
        k: as given to the forward.
        v: as given to the forward.
        o: the forward's O.
        do: gradient of the loss with respect to O.
        stats: the forward's Stats.
        attn_mask: see :func:`sdpa_forward`; likewise every other keyword.
        scale: see :func:`sdpa_forward`.
        is_causal: see :func:`sdpa_forward`.
        diagonal_alignment: see :func:`sdpa_forward`.
        left_bound: see :func:`sdpa_forward`.
        right_bound: see :func:`sdpa_forward`.
        seq_len_q: see :func:`sdpa_forward`.
        seq_len_kv: see :func:`sdpa_forward`.
        alibi: see :func:`sdpa_forward`.
        dropout_mask: the forward's mask.
        dropout_scale: the forward's scale.
        engine: see :func:`sdpa_forward`.
        dbias_shape: the shape of the bias gradient wanted, or ``None`` for no dBias.
        prefer: see :func:`sdpa_forward`.

    Returns:
        dQ, dK, dV shaped like q, k, v (their dtype), and dBias or ``None``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments.
        NotSupportedError: when no engine (or not the forced one) runs the graph.
    """
    check_qkv(q, k, v)
    for name, t in (("o", o), ("do", do), ("stats", stats)):
        check_tensor(name, t, q)
    options = checked_options(q.shape[-1], scale, is_causal, diagonal_alignment, left_bound,
                              right_bound, alibi, engine)  # fmt: skip
    tensors = _optional_inputs(q, k, attn_mask, seq_len_q, seq_len_kv, dropout_mask, dropout_scale)
    if dbias_shape is not None and (attn_mask is None or attn_mask.dtype == torch.bool):
        raise HipdnnError(ErrorCode.INVALID_VALUE, "dbias_shape needs a floating-point attn_mask")
    pack = {"Q": q, "K": k, "V": v, "O": o, "dO": materialized(do, o), "Stats": stats, **tensors}
    if prefer is not None and options.engine is None:
        options = options._replace(prefer=prefer)
    return run_backward(pack, options, dbias_shape)


def run_forward(pack: dict[str, Any], options: Options) -> tuple[Tensor, Tensor]:
    """:func:`sdpa_forward` on arguments already checked: ``pack`` maps slot names to values
    (Q, K, V and :func:`optional_slots`), ``options`` comes from :func:`checked_options`."""
    key = cache_key("fwd", pack, options)
    entry = _GRAPHS.get(key)  # a hit runs the plan's launcher, nothing else
    if entry is None:
        entry, out = run_cached(key, pack, options, _forward_graph)
    else:
        out = entry.run(pack)
    return out[0], out[1]


def run_forward_on(pack: dict[str, Any], options: Options) -> tuple[Tensor, Tensor, str]:
    """:func:`run_forward` and the engine that ran it (a philox forward's backward must run on
    the same engine: ``pack`` then holds the ints ``Seed`` and ``Offset``)."""
    entry, (o, stats) = run_cached(cache_key("fwd", pack, options), pack, options, _forward_graph)
    return o, stats, entry.engine


def run_backward(
    pack: dict[str, Any], options: Options, dbias_shape: Sequence[int] | None
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """:func:`sdpa_backward` on arguments already checked (``pack`` also holds O, a dense dO
    and Stats)."""
    with_dbias = dbias_shape is not None
    key = (cache_key("bwd", pack, options), with_dbias)
    entry = _GRAPHS.get(key)
    if entry is None:
        _, grads = run_cached(key, pack, options, _BACKWARD_GRAPH[with_dbias])
    else:
        grads = entry.run(pack)
    if dbias_shape is None:
        return grads[0], grads[1], grads[2], None
    return grads[0], grads[1], grads[2], grads[3].sum_to_size(tuple(dbias_shape))


# ----- arguments -----
def mask_to_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """The additive bias of a boolean mask (True = attend): 0 where True, -inf where False.

    Example:
        >>> mask_to_bias(torch.tensor([True, False]), torch.float32)
        tensor([0., -inf])
    """
    return mask.to(dtype).log_()  # log 1 = 0, log 0 = -inf, exactly: two kernels


def as_bias(mask: Tensor, q: Tensor) -> Tensor:
    """The graph's Bias for ``attn_mask``: :func:`as_mask`, and a bool mask becomes an additive
    bias of q's dtype. The conversion is made afresh on every call: a mask's memory can change
    without its version counter moving (writes through ``.data`` or ``.numpy()``), so no
    earlier conversion is ever reused.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a mask of another dtype, rank > 4 or another device.
    """
    mask = as_mask(mask, q)
    return mask_to_bias(mask, q.dtype) if mask.dtype == torch.bool else mask


def _optional_inputs(
    q: Tensor,
    k: Tensor,
    attn_mask: Tensor | None,
    seq_len_q: SeqLens,
    seq_len_kv: SeqLens,
    dropout_mask: Tensor | None,
    dropout_scale: float | None,
) -> dict[str, Any]:
    """The optional graph inputs by slot name, after checking the arguments."""
    bias = None if attn_mask is None else as_bias(attn_mask, q)
    lens = seq_lens(q, k, seq_len_q, seq_len_kv)
    scale = 1.0
    if dropout_mask is not None:
        check_tensor("dropout_mask", dropout_mask, q)
        scale = 1.0 if dropout_scale is None else dropout_scale
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
            raise fail(f"dropout_scale must be a positive number, got {dropout_scale!r}")
        dropout_mask = no_zero_strides(dropout_mask)
    elif dropout_scale is not None:
        raise fail("dropout_scale needs a dropout_mask")
    slq, slkv = lens if lens is not None else (None, None)
    return optional_slots(q.dtype, bias, slq, slkv, dropout_mask, float(scale))


def optional_slots(
    dtype: torch.dtype,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_mask: Tensor | None,
    dropout_scale: float,
) -> dict[str, Any]:
    """The optional graph inputs by slot name (tensors, or floats for pass-by-value scalars),
    from arguments already checked and shaped: a rank-4 bias (a bool one becomes the additive
    bias of ``dtype`` here, on every call, so that no stale conversion is ever reused), both
    padding tensors or neither, a dropout mask without stride-0 dims and its scale."""
    out: dict[str, Any] = {}
    if bias is not None:
        out["Bias"] = mask_to_bias(bias, dtype) if bias.dtype == torch.bool else bias
    if seq_len_q is not None:
        out["SEQ_LEN_Q"], out["SEQ_LEN_KV"] = seq_len_q, seq_len_kv
    if dropout_mask is not None:
        out["Dropout_mask"] = dropout_mask
        out["Dropout_scale"] = dropout_scale
        out["Dropout_scale_inv"] = 1.0 / dropout_scale
    return out


# ----- graphs -----
def _graph(pack: dict[str, Any], name: str) -> tuple[Graph, dict[str, TensorAttributes]]:
    q = pack["Q"]
    io = IO_TYPES[q.dtype]
    wide = DataType.DOUBLE if io == DataType.DOUBLE else DataType.FLOAT
    g = Graph(name=name, io_data_type=io, intermediate_data_type=wide, compute_data_type=wide)
    slots: dict[str, TensorAttributes] = {}
    for slot, value in pack.items():
        if isinstance(value, torch.Tensor):
            slots[slot] = g.tensor(
                name=slot,
                dim=list(value.shape),
                stride=list(value.stride()),
                data_type=_data_type(value.dtype),
            )
        else:  # a runtime pass-by-value scalar (Seed and Offset: 64-bit integers)
            slots[slot] = g.tensor(
                name=slot, dim=[1], stride=[1], is_pass_by_value=True,
                data_type=DataType.INT64 if slot in _PHILOX_SLOTS else DataType.FLOAT,
            )  # fmt: skip
    return g, slots


_PHILOX_SLOTS = ("Seed", "Offset")


def _data_type(dtype: torch.dtype) -> DataType:
    if dtype in IO_TYPES:
        return IO_TYPES[dtype]
    if dtype == torch.int32:
        return DataType.INT32
    if dtype == torch.uint8:
        return DataType.UINT8
    raise fail(f"tensors of dtype {dtype} are not supported")


def _keywords(options: Options, slots: dict[str, TensorAttributes]) -> dict[str, Any]:
    bottom_right = options.alignment == DiagonalAlignment.BOTTOM_RIGHT
    kw: dict[str, Any] = {
        "attn_scale": options.scale,  # None: unset, 1/sqrt(D) in the data's precision
        "use_alibi_mask": options.alibi or None,
        "use_causal_mask": (options.causal and not bottom_right) or None,
        "use_causal_mask_bottom_right": (options.causal and bottom_right) or None,
        "bias": slots.get("Bias"),
    }
    if options.left_bound is not None or options.right_bound is not None:
        kw["diagonal_alignment"] = options.alignment
        kw["diagonal_band_left_bound"] = options.left_bound
        kw["diagonal_band_right_bound"] = options.right_bound
    if "SEQ_LEN_Q" in slots:
        kw.update(use_padding_mask=True, seq_len_q=slots["SEQ_LEN_Q"],
                  seq_len_kv=slots["SEQ_LEN_KV"])  # fmt: skip
    return kw


#: the engines whose kernels write O, dQ, dK and dV with [B, S, H, D] memory whatever Q's layout
#: (torch's memory-efficient kernels allocate their outputs so); F.sdpa hands them back as they are
_SEQUENCE_MAJOR_OUTPUT = frozenset({"TORCH_SDPA_EFFICIENT_ENGINE"})


def output_strides(q: Tensor, o_shape: Sequence[int], engine: str | None) -> tuple[int, ...]:
    """The strides the op declares for O (and dQ, dK, dV): those of the kernel the op expects to
    run, so that its outputs are handed back without a copy (its backward reads O as it wrote
    it), else Q's layout.

    Example:
        >>> import torch
        >>> q = torch.zeros(2, 4, 8, 16)
        >>> output_strides(q, [2, 4, 8, 16], "TORCH_SDPA_EFFICIENT_ENGINE")
        (512, 16, 64, 1)
        >>> output_strides(q, [2, 4, 8, 16], "TORCH_SDPA_CUDNN_ENGINE")
        (512, 128, 16, 1)
    """
    if engine in _SEQUENCE_MAJOR_OUTPUT:
        _, heads, seq, dv = o_shape
        return (seq * heads * dv, dv, heads * dv, 1)
    return tuple(strides_like(q, o_shape))


def _forward_graph(pack: dict[str, Any], options: Options, prefer: str | None = None) -> Entry:
    pack = {s: t for s, t in pack.items() if s != "Dropout_scale_inv"}
    g, slots = _graph(pack, "hipdnn_torch_sdpa_fwd")
    kw = _keywords(options, slots)
    if "Dropout_mask" in slots:
        kw["dropout"] = (slots["Dropout_mask"], slots["Dropout_scale"])
    elif options.dropout_p:
        kw["dropout"] = (options.dropout_p, slots["Seed"], slots["Offset"])
    o, stats = g.sdpa(slots["Q"], slots["K"], slots["V"], name="fwd", generate_stats=True, **kw)
    assert stats is not None
    q = pack["Q"]
    o_shape = [*q.shape[:3], pack["V"].shape[3]]
    engine = options.engine or prefer or options.prefer
    o.set_dim(o_shape).set_stride(list(output_strides(q, o_shape, engine)))
    if q.dtype == torch.float64:  # exact float64 gradients (gradcheck) need exact Stats
        stats.set_data_type(DataType.DOUBLE)
    for t in (o, stats):
        t.set_output(True)
    _build(g, options.engine or prefer or options.prefer, forced=options.engine is not None,
           on_host=q.device.type == "cpu")  # fmt: skip
    return Entry(g, slots, (o, stats))


def _backward_graph(
    pack: dict[str, Any], options: Options, prefer: str | None = None, *, dbias: bool = False
) -> Entry:
    g, slots = _graph(pack, "hipdnn_torch_sdpa_bwd")
    kw = _keywords(options, slots)
    if "Dropout_mask" in slots:
        kw["dropout"] = (slots["Dropout_mask"], slots["Dropout_scale"], slots["Dropout_scale_inv"])
    elif options.dropout_p:
        kw["dropout"] = (options.dropout_p, slots["Seed"], slots["Offset"])
    dbias_t = None
    if dbias:
        bias = slots["Bias"]
        dbias_t = g.tensor(name="dBias", dim=list(bias.dim), data_type=bias.data_type)
        kw["dBias"] = dbias_t
    dq, dk, dv = g.sdpa_backward(
        slots["Q"], slots["K"], slots["V"], slots["O"], slots["dO"], slots["Stats"], name="bwd",
        **kw,
    )  # fmt: skip
    engine = options.engine or prefer or options.prefer
    heads = pack["Q"].shape[1]
    for grad, slot in ((dq, "Q"), (dk, "K"), (dv, "V")):
        like = pack[slot]
        own = engine if like.shape[1] == heads else None  # GQA: expanded heads summed anew
        grad.set_dim(list(like.shape)).set_stride(list(output_strides(like, like.shape, own)))
    outputs = (dq, dk, dv) if dbias_t is None else (dq, dk, dv, dbias_t)
    for t in outputs:
        t.set_output(True)
    _build(g, options.engine or prefer or options.prefer, forced=options.engine is not None,
           on_host=pack["Q"].device.type == "cpu")  # fmt: skip
    return Entry(g, slots, outputs)


#: the backward graph's builder without and with dBias (made once: the hot path builds none)
_BACKWARD_GRAPH = {
    with_dbias: functools.partial(_backward_graph, dbias=with_dbias) for with_dbias in (False, True)
}


#: the engine the op ranks first when the call prefers none: its plans have a pre-bound launcher
#: and call aten's cuDNN attention directly, the lightest path per call. Graph users rank
#: ``CUDNN_FRONTEND_ENGINE`` first (it writes their own buffers); the op allocates its outputs,
#: which takes that engine's advantage away, and its per-call host time is larger. Where this
#: engine refuses a node (padding, dBias, ...) the ranking goes on, to the cuDNN-frontend engine.
OP_DEFAULT_ENGINE = "TORCH_SDPA_CUDNN_ENGINE"
#: the engine the op ranks first for host tensors: it computes where they are, as F.sdpa does
OP_HOST_ENGINE = "TORCH_SDPA_MATH_ENGINE"


def _build(g: Graph, engine: str | None, *, forced: bool, on_host: bool = False) -> None:
    """``g.build()``, with ``engine`` (else :data:`OP_DEFAULT_ENGINE`, or :data:`OP_HOST_ENGINE`
    for host tensors, when registered) ranked first; a forced engine must be the one chosen."""
    if engine is None:
        known = {name for info in list_backends() for name in info.engines}
        default = OP_HOST_ENGINE if on_host else OP_DEFAULT_ENGINE
        if default in known:
            g.set_preferred_engine_id_ext(default)
    else:
        try:
            g.set_preferred_engine_id_ext(engine)
        except HipdnnError:  # a name no registered engine has
            raise _not_supported(g, engine, None) from None
    try:
        g.build()
    except NotSupportedError as err:
        if forced:
            raise _not_supported(g, engine, str(err)) from None
        raise
    if forced and g.get_plan_name() != engine:
        raise _not_supported(g, engine, g.get_engine_refusals().get(str(engine)))


def _not_supported(g: Graph, engine: str | None, reason: str | None) -> NotSupportedError:
    known = sorted(name for info in list_backends() for name in info.engines)
    if engine not in known:
        return NotSupportedError(
            f"engine '{engine}' is not registered; registered engines: {', '.join(known)}"
        )
    return NotSupportedError(f"engine '{engine}' cannot run graph '{g.get_name()}': {reason}")
