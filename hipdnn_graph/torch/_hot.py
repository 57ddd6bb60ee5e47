"""The torch op's common calls: Q, K and V alone (no mask or padding), without dropout or with
philox dropout (a training call), once the op's corridor (:mod:`._op`) has looked them up.

The corridor looks a common call up with one key made from the tensors
(:func:`._keys.qkv_key`, the same tuple as the pack's :func:`._keys.cache_key`; with dropout
:func:`._keys.philox_signature`, under which :data:`PHILOX` keeps what the first call found
out) and hands its :class:`Hit` here: a hit calls the plan's launcher on the tensors
(:class:`~hipdnn_graph.graph.prepared.PreparedLaunch`), a miss goes through
:func:`._graphs.run_forward` / :func:`._graphs.run_backward`, which build the graph (the slow
path branches off here and rejoins). The backward keys its six tensors the same way
(:func:`._keys.backward_key`).

A philox forward's first call per signature (its options prefer the fused op torch would run)
remembers the forward graph's key, the engine that ran and how far it moves the generator; a
later call takes its seed and offset from torch's generator (moving it on) and launches, and
nothing else.

**The autograd route.** Where a forward graph's kernel is one torch op whose own autograd formula
is exactly the backward graph's kernel (the launchers' :class:`~hipdnn_graph.backend.
AutogradForm` pairs are equal: aten's cuDNN attention called directly, with or without philox
dropout, or torch's fused CPU kernel on a plain CPU problem), the op learns so in the backward of
the first call that hit both graphs (:func:`learn_route`) and stores the forward's
differentiable call in the forward entry. Later calls (the corridor's lookup finds it) run that
op on the caller's tensors and let torch's autograd record it: the backward runs no Python,
exactly as ``F.scaled_dot_product_attention``'s does, and computes what the backward graph would
(the same op on the same arguments). With dropout, the op draws its seed and offset from the
device's generator itself: the pair the graph path draws (:func:`._dropout.draw`), moved on by
the same increment.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch._args import checked_options
    >>> from hipdnn_graph.torch._hot import Hit, forward_qkv
    >>> from hipdnn_graph.torch._keys import qkv_key
    >>> q = torch.randn(1, 2, 8, 4)
    >>> options = checked_options(4, None, True, None, None, None, False, None)
    >>> o, stats = forward_qkv(q, q, q, options, Hit(qkv_key(q, q, q, options), None))
    >>> o.shape, stats.shape
    (torch.Size([1, 2, 8, 4]), torch.Size([1, 2, 8, 1]))
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from ..backend import AutogradForm, in_layout
from . import _choice, _dropout
from ._cached import Entry, Options, graph_cache, remember
from ._graphs import run_backward, run_forward, run_forward_on
from ._keys import backward_key, cache_key
from ._philox_graphs import philox_slots

__all__ = [
    "PHILOX",
    "Hit",
    "Philox",
    "backward_qkv",
    "forward_qkv",
    "learn_route",
    "philox_backward_qkv",
    "philox_forward_pack",
    "philox_forward_qkv",
]

Tensor = torch.Tensor

#: the op's graph cache (:func:`graph_cache`), looked up directly
_GRAPHS = graph_cache()
_LOG = logging.getLogger("hipdnn_graph.torch")

_QKV = ("Q", "K", "V")
_QKV_BACKWARD = ("Q", "K", "V", "O", "dO", "Stats")
_QKV_PHILOX = (*_QKV, "Seed", "Offset")
_QKV_BACKWARD_PHILOX = (*_QKV_BACKWARD, "Seed", "Offset")

#: what a philox forward hands to its backward: the seed, the offset and the backward's options
#: (the forward's, pinned to the engine that ran, so that both draw one mask)
Philox = tuple[int, int, Options]


class Remembered(NamedTuple):
    """What the first philox forward of a signature found out (see :func:`philox_forward_qkv`)."""

    #: the forward graph's cache key (its options prefer the fused op torch would run)
    forward_key: Any
    #: how far the forward moves the generator's offset (:func:`._dropout.increment`)
    increment: int
    #: the backward's options: the forward's, on the engine that ran
    backward_options: Options


#: a philox forward's signature (:func:`._keys.philox_signature`, or the general route's cache
#: key) -> what its first call found out; bounded, and cleared with torch's choices
PHILOX: dict[Any, Remembered] = {}
_choice.on_clear(PHILOX.clear)


class Hit(NamedTuple):
    """What the corridor's lookup found for a common call (Q, K and V alone)."""

    #: the forward graph's cache key (no dropout) or the philox signature
    key: Any
    #: the forward graph's cache entry (counted as a hit), or None on a miss
    entry: Entry | None
    #: a philox call's :class:`Remembered` (None without dropout or before the first call)
    known: Remembered | None = None


def forward_qkv(
    q: Tensor, k: Tensor, v: Tensor, options: Options, hit: Hit
) -> tuple[Tensor, Tensor]:
    """:func:`run_forward` of a pack holding Q, K and V alone (the common call): a hit calls the
    plan's launcher on the three tensors; a miss builds the graph under the same key."""
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
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, options: Options,
    learn: Entry | None = None,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """:func:`run_backward` without dBias of a pack holding Q, K, V, O, a dense dO and Stats
    alone, keyed without the pack (:func:`._keys.backward_key`); ``learn``: the forward entry
    whose autograd route this backward teaches (:func:`learn_route`)."""
    entry = _GRAPHS.get(backward_key(q, k, v, o, do, stats, options, philox=False))
    pack = None
    if entry is None or entry.launch is None or entry.launch_slots != _QKV_BACKWARD:
        pack = {"Q": q, "K": k, "V": v, "O": o, "dO": do, "Stats": stats}
    if entry is None:
        dq, dk, dv, _ = run_backward(pack, options, None)  # type: ignore[arg-type]
    else:
        grads = entry.launch([q, k, v, o, do, stats]) if pack is None else entry.run(pack)
        dq, dk, dv = grads[0], grads[1], grads[2]
    if learn is not None:
        learn_route(learn, q, k, v, o, do, stats, options, False)
    return dq, dk, dv


def philox_forward_qkv(
    q: Tensor, k: Tensor, v: Tensor, p: float, options: Options, hit: Hit
) -> tuple[Tensor, Tensor, Philox]:
    """The philox forward of a pack holding Q, K and V alone: ``(O, Stats, what the backward
    needs)``, with a new seed and offset from torch's generator (:mod:`._dropout`), which moves
    on past them; ``hit``: the corridor's lookup of the call's signature in :data:`PHILOX`.

    The first call of a signature runs through :func:`philox_forward_pack` and remembers the
    graph's key, the engine that ran and its generator increment, so a later call takes its
    seed and offset (moving the generator on) and launches.
    """
    known, entry = hit.known, hit.entry
    if (
        known is not None
        and entry is not None
        and entry.launch is not None
        and entry.launch_slots == _QKV_PHILOX
    ):
        seed, offset = _dropout.take(q.device, known.increment)
        out = entry.launch([q, k, v, seed, offset])
        return out[0], out[1], (seed, offset, known.backward_options)
    pack: dict[str, Any] = {"Q": q, "K": k, "V": v}
    o, stats, philox, forward_key, increment = philox_forward_pack(pack, p, options)
    if hit.key is not None:  # (a call under functorch transforms is looked up by its pack)
        remember(PHILOX, hit.key, Remembered(forward_key, increment, philox[2]))
    return o, stats, philox


def philox_forward_pack(
    pack: dict[str, Any], p: float, options: Options
) -> tuple[Tensor, Tensor, Philox, Any, int]:
    """A philox forward through the general route: ``pack`` (Q, K, V and the optional slots,
    checked) gets this call's Seed and Offset from torch's generator, the graph runs with
    ``options`` (probability ``p`` set; the engine torch's choice prefers), and the generator
    moves on past the engine that ran. Returns ``(O, Stats, what the backward needs, the
    graph's cache key, the generator increment)``.

    The first call of a key remembers the engine's increment and the backward's options in
    :data:`PHILOX`, so a later call takes its seed and offset (moving the generator on) and
    runs the cached graph.
    """
    del p  # the options carry it
    q, k = pack["Q"], pack["K"]
    pack.update(philox_slots(0, 0))  # the slots (scalars: keyed by name), set below
    key = cache_key("fwd", pack, options)
    known = PHILOX.get(key)
    entry = None if known is None else _GRAPHS.get(key)
    if known is not None and entry is not None:
        seed, offset = _dropout.take(q.device, known.increment)
        pack["Seed"], pack["Offset"] = seed, offset
        out = entry.run(pack)
        return out[0], out[1], (seed, offset, known.backward_options), key, known.increment
    seed, offset = _dropout.draw(q.device)
    pack["Seed"], pack["Offset"] = seed, offset
    o, stats, ran = run_forward_on(pack, options)
    increment = _dropout.increment(ran, q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    _dropout.advance_by(q.device, offset, increment)
    # the backward runs on the engine that ran, with the same seed and offset: one mask
    philox = (seed, offset, _pinned(options, ran))
    remember(PHILOX, key, Remembered(key, increment, philox[2]))
    return o, stats, philox, key, increment


def _pinned(options: Options, engine: str) -> Options:
    """A philox forward's ``options`` for its backward: ``engine`` forced, nothing preferred;
    made once per combination (``NamedTuple._replace`` costs microseconds per call)."""
    key = (options, engine)
    made = _PINNED.get(key)
    if made is None:
        made = remember(_PINNED, key, options._replace(prefer=None, engine=engine))
    return made


_PINNED: dict[tuple[Options, str], Options] = {}


def philox_backward_qkv(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, philox: Philox,
    learn: Entry | None = None,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """The philox backward of :func:`philox_forward_qkv`'s call (a dense dO), on the engine the
    forward ran with its seed and offset, as :func:`backward_qkv`."""
    seed, offset, options = philox
    entry = _GRAPHS.get(backward_key(q, k, v, o, do, stats, options, philox=True))
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
    if learn is not None:
        learn_route(learn, q, k, v, o, do, stats, options, True)
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
    backward = _GRAPHS.peek(backward_key(q, k, v, o, do, stats, options, philox=philox))
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
