"""The torch op's common call on a cache hit: Q, K and V alone (no mask, padding or dropout).

The key of such a call is :func:`._cached.cache_key`'s tuple for the pack ``{"Q", "K", "V"}``
(and for the backward's six tensors), built straight from the tensors without the pack; a hit
calls the plan's launcher on them (:class:`~hipdnn_graph.prepared.PreparedLaunch`), a miss goes
through :func:`._graphs.run_forward` / :func:`._graphs.run_backward`, which build the graph.

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

import torch

from ._cached import Options, graph_cache
from ._graphs import run_backward, run_forward

__all__ = ["backward_qkv", "forward_qkv"]

Tensor = torch.Tensor

#: the op's graph cache (:func:`graph_cache`), looked up directly
_GRAPHS = graph_cache()


def forward_qkv(q: Tensor, k: Tensor, v: Tensor, options: Options) -> tuple[Tensor, Tensor]:
    """:func:`run_forward` of a pack holding Q, K and V alone (the common call), with the cache
    key (:func:`cache_key`'s, the same tuple) built without the pack; a hit calls the plan's
    launcher on the three tensors."""
    key = ("fwd", q.device, (("Q", q.shape, q.stride(), q.dtype), ("K", k.shape, k.stride(),
           k.dtype), ("V", v.shape, v.stride(), v.dtype)), options)  # fmt: skip
    entry = _GRAPHS.get(key)
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
    sig = (("Q", q.shape, q.stride(), q.dtype), ("K", k.shape, k.stride(), k.dtype),
           ("V", v.shape, v.stride(), v.dtype), ("O", o.shape, o.stride(), o.dtype),
           ("dO", do.shape, do.stride(), do.dtype),
           ("Stats", stats.shape, stats.stride(), stats.dtype))  # fmt: skip
    entry = _GRAPHS.get((("bwd", q.device, sig, options), False))
    pack = None
    if entry is None or entry.launch is None or entry.launch_slots != _QKV_BACKWARD:
        pack = {"Q": q, "K": k, "V": v, "O": o, "dO": do, "Stats": stats}
    if entry is None:
        dq, dk, dv, _ = run_backward(pack, options, None)  # type: ignore[arg-type]
        return dq, dk, dv
    grads = entry.launch([q, k, v, o, do, stats]) if pack is None else entry.run(pack)
    return grads[0], grads[1], grads[2]


_QKV = ("Q", "K", "V")
_QKV_BACKWARD = ("Q", "K", "V", "O", "dO", "Stats")
