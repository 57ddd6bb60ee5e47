"""The torch op's common calls on a cache hit: Q, K and V alone (no mask or padding), without
dropout or with philox dropout (a training call).

The key of such a call is :func:`._cached.cache_key`'s tuple for the pack ``{"Q", "K", "V"}``
(and for the backward's six tensors; with dropout both packs also hold the ints ``Seed`` and
``Offset``), built straight from the tensors without the pack; a hit calls the plan's launcher
on them (:class:`~hipdnn_graph.prepared.PreparedLaunch`), a miss goes through
:func:`._graphs.run_forward` / :func:`._graphs.run_backward`, which build the graph.

A philox forward also depends on the fused op torch would run (:func:`fused_choice`), which the
first call of each signature asks and :func:`philox_forward_qkv` remembers, with the engine that
ran and how far it moves the generator, keyed by the tensors' facts, the probability, the options
and torch's switches: a later call draws its seed and offset, launches and moves the generator on,
and nothing else.

**The autograd route.** Where a forward graph's kernel is one torch op whose own autograd formula
is exactly the backward graph's kernel (the launchers' :class:`~hipdnn_graph.backend.
AutogradForm` pairs are equal: aten's cuDNN attention called directly, with or without philox
dropout, or torch's fused CPU kernel on a plain CPU problem), the op learns so in the backward of
the first call that hit both graphs (:func:`learn_route`) and stores the forward's
differentiable call in the forward entry. Later calls (:func:`lookup` finds it) run that op on
the caller's tensors and let torch's autograd record it: the backward runs no Python, exactly as
``F.scaled_dot_product_attention``'s does, and computes what the backward graph would (the same
op on the same arguments). With dropout, the op draws its seed and offset from the device's
generator itself: the pair the graph path draws (:func:`._dropout.draw`), moved on by the same
increment.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch._graphs import checked_options
    >>> from hipdnn_graph.torch._hot import forward_qkv
    >>> q = torch.randn(1, 2, 8, 4)
    >>> o, stats = forward_qkv(q, q, q, checked_options(4, None, True, None, None, None, False,
    ...                                                 None))
    >>> o.shape, stats.shape
    (torch.Size([1, 2, 8, 4]), torch.Size([1, 2, 8, 1]))
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from ..backend import AutogradForm, in_layout
from ..types import DiagonalAlignment
from . import _choice, _dropout
from ._cached import Entry, Options, cache_key, graph_cache
from ._graphs import run_backward, run_forward, run_forward_on
from ._philox_graphs import philox_slots

__all__ = [
    "Hit",
    "Philox",
    "backward_qkv",
    "forward_qkv",
    "fused_choice",
    "learn_route",
    "lookup",
    "philox_backward_qkv",
    "philox_forward_pack",
    "philox_forward_qkv",
    "with_dropout",
]

Tensor = torch.Tensor

#: the op's graph cache (:func:`graph_cache`), looked up directly
_GRAPHS = graph_cache()
_LOG = logging.getLogger("hipdnn_graph.torch")


def forward_qkv(
    q: Tensor, k: Tensor, v: Tensor, options: Options, hit: Hit | None = None
) -> tuple[Tensor, Tensor]:
    """:func:`run_forward` of a pack holding Q, K and V alone (the common call), with the cache
    key (:func:`cache_key`'s, the same tuple) built without the pack (or found by
    :func:`lookup` already: ``hit``); a hit calls the plan's launcher on the three tensors."""
    if hit is None:
        hit = lookup(q, k, v, 0.0, options)
    entry = hit.entry
    if entry is None:
        return run_forward({"Q": q, "K": k, "V": v}, options)
    launch = entry.launch
    if launch is not None and entry.launch_slots == _QKV:
        out = launch([q, k, v])
    else:
        out = entry.run({"Q": q, "K": k, "V": v})
    return out[0], out[1]


def backward_qkv(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, options: Options
) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`run_backward` without dBias of a pack holding Q, K, V, O, a dense dO and Stats
    alone, as :func:`forward_qkv`."""
    entry = _GRAPHS.get(_backward_key(q, k, v, o, do, stats, options, philox=False))
    pack = None
    if entry is None or entry.launch is None or entry.launch_slots != _QKV_BACKWARD:
        pack = {"Q": q, "K": k, "V": v, "O": o, "dO": do, "Stats": stats}
    if entry is None:
        dq, dk, dv, _ = run_backward(pack, options, None)  # type: ignore[arg-type]
        return dq, dk, dv
    grads = entry.launch([q, k, v, o, do, stats]) if pack is None else entry.run(pack)
    return grads[0], grads[1], grads[2]


def _backward_key(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, options: Options, *,
    philox: bool,
) -> tuple[Any, ...]:  # fmt: skip
    """:func:`._graphs.run_backward`'s cache key (without dBias) of a pack holding the
    backward's six tensors (and, for ``philox``, the ints ``Seed`` and ``Offset``), built
    without the pack."""
    sig: tuple[Any, ...] = (
        ("Q", q.shape, q.stride(), q.dtype), ("K", k.shape, k.stride(), k.dtype),
        ("V", v.shape, v.stride(), v.dtype), ("O", o.shape, o.stride(), o.dtype),
        ("dO", do.shape, do.stride(), do.dtype),
        ("Stats", stats.shape, stats.stride(), stats.dtype),
    )  # fmt: skip
    if philox:
        sig = (*sig, "Seed", "Offset")
    return (("bwd", q.device, sig, options), False)


_QKV = ("Q", "K", "V")
_QKV_BACKWARD = ("Q", "K", "V", "O", "dO", "Stats")
_QKV_PHILOX = (*_QKV, "Seed", "Offset")
_QKV_BACKWARD_PHILOX = (*_QKV_BACKWARD, "Seed", "Offset")

#: what a philox forward hands to its backward: the seed, the offset and the backward's options
#: (the forward's, pinned to the engine that ran, so that both draw one mask)
Philox = tuple[int, int, Options]


class _Remembered(NamedTuple):
    """What the first philox forward of a signature found out (see :func:`philox_forward_qkv`)."""

    #: the forward graph's cache key (its options prefer the fused op torch would run)
    forward_key: Any
    #: how far the forward moves the generator's offset (:func:`._dropout.increment`)
    increment: int
    #: the backward's options: the forward's, on the engine that ran
    backward_options: Options


#: a philox forward's signature (tensors' facts, probability, options, torch's switches on a
#: GPU) -> what its first call found out; bounded, and cleared with torch's choices
_PHILOX: dict[tuple[Any, ...], _Remembered] = {}
_choice.on_clear(_PHILOX.clear)


class Hit(NamedTuple):
    """What :func:`lookup` found for a common call (Q, K and V alone)."""

    #: the forward graph's cache key (no dropout) or the philox signature (:func:`lookup`)
    key: Any
    #: the forward graph's cache entry (counted as a hit), or None on a miss
    entry: Entry | None
    #: a philox call's :class:`_Remembered` (None without dropout or before the first call)
    known: _Remembered | None = None


def lookup(q: Tensor, k: Tensor, v: Tensor, p: float, options: Options) -> Hit:
    """The forward graph of a common call, found with one key built from the tensors (the
    forward's cache key, or with dropout the philox signature and what its first call found
    out); its entry's ``autograd`` is the call's route once learnt (see the module)."""
    if not p:
        key = ("fwd", q.device, (("Q", q.shape, q.stride(), q.dtype), ("K", k.shape, k.stride(),
               k.dtype), ("V", v.shape, v.stride(), v.dtype)), options)  # fmt: skip
        return Hit(key, _GRAPHS.get(key))
    # the options hold the engine torch's choice prefers (:func:`fused_choice`), made with its
    # switches: the signature needs no more
    signature = (q.shape, q.stride(), q.dtype, k.shape, k.stride(), k.dtype, v.shape,
                 v.stride(), v.dtype, q.device, p, options)  # fmt: skip
    known = _PHILOX.get(signature)
    if known is None:
        return Hit(signature, None)
    return Hit(signature, _GRAPHS.get(known.forward_key), known)


def philox_forward_qkv(
    q: Tensor, k: Tensor, v: Tensor, p: float, options: Options, hit: Hit | None = None
) -> tuple[Tensor, Tensor, Philox]:
    """The philox forward of a pack holding Q, K and V alone: ``(O, Stats, what the backward
    needs)``, with a new seed and offset drawn from torch's generator (:mod:`._dropout`), which
    moves on past them; ``hit``: :func:`lookup`'s answer when the caller asked already.

    The first call of a signature prefers the fused op torch would run (:func:`fused_choice`)
    and runs through :func:`run_forward_on`; it remembers the graph's key, the engine that ran
    and its generator increment, so a later call draws, launches and moves the generator on.
    """
    if hit is None:
        hit = lookup(q, k, v, p, options)
    known, entry = hit.known, hit.entry
    if (
        known is not None
        and entry is not None
        and entry.launch is not None
        and entry.launch_slots == _QKV_PHILOX
    ):
        device = q.device
        seed, offset = _dropout.draw(device)
        out = entry.launch([q, k, v, seed, offset])
        _dropout.advance_by(device, offset, known.increment)
        return out[0], out[1], (seed, offset, known.backward_options)
    pack: dict[str, Any] = {"Q": q, "K": k, "V": v}
    o, stats, philox, forward_key, increment = philox_forward_pack(pack, p, options)
    if len(_PHILOX) > 1024:
        _PHILOX.clear()
    _PHILOX[hit.key] = _Remembered(forward_key, increment, philox[2])
    return o, stats, philox


def philox_forward_pack(
    pack: dict[str, Any], p: float, options: Options
) -> tuple[Tensor, Tensor, Philox, Any, int]:
    """A philox forward through the general route: ``pack`` (Q, K, V and the optional slots,
    checked) gets this call's Seed and Offset from torch's generator, the graph prefers the
    engine ``options`` prefer (the fused op torch would run, :func:`fused_choice`), and the
    generator moves on past the engine that ran. Returns ``(O, Stats, what the backward needs,
    the graph's cache key, the generator increment)``."""
    q, k = pack["Q"], pack["K"]
    forward_options = with_dropout(options, p, options.prefer, None)
    seed, offset = _dropout.draw(q.device)
    pack.update(philox_slots(seed, offset))
    o, stats, ran = run_forward_on(pack, forward_options)
    increment = _dropout.increment(ran, q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    _dropout.advance_by(q.device, offset, increment)
    # the backward runs on the engine that ran, with the same seed and offset: one mask
    philox = (seed, offset, with_dropout(options, p, None, ran))
    return o, stats, philox, cache_key("fwd", pack, forward_options), increment


def philox_backward_qkv(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, philox: Philox
) -> tuple[Tensor, Tensor, Tensor]:
    """The philox backward of :func:`philox_forward_qkv`'s call (a dense dO), on the engine the
    forward ran with its seed and offset, as :func:`backward_qkv`."""
    seed, offset, options = philox
    entry = _GRAPHS.get(_backward_key(q, k, v, o, do, stats, options, philox=True))
    if (
        entry is not None
        and entry.launch is not None
        and (entry.launch_slots == _QKV_BACKWARD_PHILOX)
    ):
        grads = entry.launch([q, k, v, o, do, stats, seed, offset])
    else:
        pack = {"Q": q, "K": k, "V": v, "O": o, "dO": do, "Stats": stats, "Seed": seed,
                "Offset": offset}  # fmt: skip
        grads = run_backward(pack, options, None)
    return grads[0], grads[1], grads[2]


def learn_route(
    forward: Entry,
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor,
    options: Options, philox: bool,
) -> None:  # fmt: skip
    """Set ``forward.autograd`` (see the module) from the backward graph this call's backward
    just ran (``options``: the backward's; ``philox``: with Seed and Offset): the route when
    both launchers' autograd forms pair, else False, so it is learnt once. A launcher that
    answers no form yet (it binds its kernel on its first calls) is asked again by the next
    calls, :data:`_TRIES` in all; one without ``autograd`` at all means no route."""
    backward = _GRAPHS.peek(_backward_key(q, k, v, o, do, stats, options, philox=philox))
    ask_forward, ask_backward = _asker(forward), _asker(backward)
    if ask_forward is None or ask_backward is None:  # a launcher that never knows a form
        forward.autograd = False
        return
    made, taken = ask_forward(), ask_backward()
    if made is None or taken is None:
        forward.route_tries += 1
        if forward.route_tries >= _TRIES:
            forward.autograd = False
        return
    if made.pair != taken.pair or made.call is None or taken.call is not None:
        forward.autograd = False
        return
    forward.autograd = _declared_output(made.call, tuple(forward.outputs[0].stride))
    if _LOG.isEnabledFor(logging.DEBUG):
        _LOG.debug("graph '%s' and its backward graph run one op and its own autograd formula "
                   "(%r): later calls run the op under torch's autograd",
                   forward.graph.get_name(), made.pair)  # fmt: skip


#: how many backwards :func:`learn_route` asks for the launchers' forms before it gives up
_TRIES = 3


def _asker(entry: Entry | None) -> Callable[[], AutogradForm | None] | None:
    """The entry's launcher's ``autograd`` (None: no launcher, or one that knows no form)."""
    launch = None if entry is None else entry.launch
    return None if launch is None else launch.autograd


def _declared_output(
    call: Callable[..., Tensor], strides: tuple[int, ...]
) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """``call`` returning O in the forward graph's declared layout, as the graph path does (a
    differentiable copy where the op laid it out otherwise, :func:`~hipdnn_graph.backend.
    in_layout`)."""

    def route(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return in_layout(call(q, k, v), strides)  # type: ignore[no-any-return]

    return route


def fused_choice(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, p: float, options: Options, *,
    padded: bool, training: bool = False,
) -> str | None:  # fmt: skip
    """The engine of the backend ``F.scaled_dot_product_attention`` would run this call on
    (:func:`._choice.choose_engine`), to prefer (not force): the same fused kernel, and with
    dropout the same mask; None on the CPU, for a forced engine, or where the call uses a
    feature torch's op lacks (its choice then means nothing). ``training``: decide as for
    inputs that need gradients (the custom ops see detached tensors)."""
    plain = (
        (options.alignment == DiagonalAlignment.TOP_LEFT or not options.causal)
        and options.left_bound is None
        and options.right_bound is None
        and not options.alibi
        and not padded
    )
    if q.device.type not in _choice.DEVICE_TYPES or options.engine is not None or not plain:
        return None
    gqa = k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]
    return _choice.choose_engine(
        q, k, v, mask, p, options.causal, options.scale, gqa, training=training
    )


def with_dropout(options: Options, p: float, prefer: str | None, engine: str | None) -> Options:
    """``options`` with philox dropout ``p`` and an engine preferred or (``engine``) forced,
    made once per combination (``NamedTuple._replace`` costs microseconds per call)."""
    key = (options, p, prefer, engine)
    made = _WITH.get(key)
    if made is None:
        made = options._replace(dropout_p=p, prefer=prefer)
        if engine is not None:
            made = made._replace(engine=engine)
        if len(_WITH) > 1024:
            _WITH.clear()
        _WITH[key] = made
    return made


_WITH: dict[tuple[Any, ...], Options] = {}
