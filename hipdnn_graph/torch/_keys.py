"""The torch op's cache keys: everything a graph and its variant-pack check depend on.

:func:`cache_key` makes the key of any pack (slot name -> tensor, or a scalar's name alone);
:func:`qkv_key` and :func:`backward_key` make the same tuples for the op's common calls (Q, K
and V alone; the backward's six tensors) straight from the tensors, without a pack, and
:func:`philox_signature` the key under which the op remembers what the first philox forward of a
common call found out. One module makes them all, so the keys of every route agree (a graph
built by one route is a hit for the others).

Example:
    >>> import torch
    >>> from hipdnn_graph.torch._args import checked_options
    >>> q = torch.zeros(1, 2, 8, 4)
    >>> options = checked_options(4, None, True, None, None, None, False, None)
    >>> qkv_key(q, q, q, options) == cache_key("fwd", {"Q": q, "K": q, "V": q}, options)
    True
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import torch

from ._cached import Options

__all__ = ["backward_key", "cache_key", "philox_signature", "qkv_key"]

Tensor = torch.Tensor


def cache_key(kind: str, pack: dict[str, Any], options: Options) -> Hashable:
    """Everything the graph and the variant-pack check depend on: each slot's shape, strides
    and dtype (its name alone for a scalar), Q's device, the options."""
    signature: list[Any] = []  # a plain loop: no generator frame resumed per slot
    add = signature.append
    for slot, t in pack.items():
        add((slot, t.shape, t.stride(), t.dtype) if isinstance(t, Tensor) else slot)
    return (kind, pack["Q"].device, tuple(signature), options)


def qkv_key(q: Tensor, k: Tensor, v: Tensor, options: Options) -> Hashable:
    """:func:`cache_key` of the forward pack ``{"Q": q, "K": k, "V": v}``, without the pack."""
    return ("fwd", q.device, (("Q", q.shape, q.stride(), q.dtype), ("K", k.shape, k.stride(),
            k.dtype), ("V", v.shape, v.stride(), v.dtype)), options)  # fmt: skip


def backward_key(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, options: Options, *,
    philox: bool,
) -> Hashable:  # fmt: skip
    """The backward graph's key (without dBias: :func:`._graphs.run_backward`'s) of the pack
    holding the backward's six tensors (and, for ``philox``, the ints ``Seed`` and
    ``Offset``), without the pack."""
    sig: tuple[Any, ...] = (
        ("Q", q.shape, q.stride(), q.dtype), ("K", k.shape, k.stride(), k.dtype),
        ("V", v.shape, v.stride(), v.dtype), ("O", o.shape, o.stride(), o.dtype),
        ("dO", do.shape, do.stride(), do.dtype),
        ("Stats", stats.shape, stats.stride(), stats.dtype),
    )  # fmt: skip
    if philox:
        sig = (*sig, "Seed", "Offset")
    return (("bwd", q.device, sig, options), False)


def philox_signature(q: Tensor, k: Tensor, v: Tensor, p: float, options: Options) -> Hashable:
    """A philox forward's signature: the tensors' facts, the probability and the options (which
    hold the engine torch's choice prefers, made with its switches)."""
    return (q.shape, q.stride(), q.dtype, k.shape, k.stride(), k.dtype, v.shape, v.stride(),
            v.dtype, q.device, p, options)  # fmt: skip
