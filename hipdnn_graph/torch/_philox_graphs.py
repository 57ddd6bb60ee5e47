"""The torch op's philox-dropout graphs: SDPA forward and backward graphs whose dropout mask is
drawn from the graph's pass-by-value Seed and Offset (no mask tensor).

They share everything with :mod:`._graphs` (the cache, the options, the graph builders): the
Seed and Offset are ints in the pack, so a new seed or offset reuses the cached graph, and the
backward is pinned to the engine the forward ran on, so that both draw one mask. Where the seed
and offset come from is :mod:`._dropout`'s business.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch._philox_graphs import philox_backward, philox_forward
    >>> q = torch.randn(1, 2, 8, 4)
    >>> o, stats, engine = philox_forward(q, q, q, dropout_p=0.5, seed=1, offset=0)
    >>> grads = philox_backward(q, q, q, o, torch.ones_like(o), stats, dropout_p=0.5, seed=1,
    ...                         offset=0, engine=engine)
    >>> engine, grads[0].shape
    ('TORCH_SDPA_MATH_ENGINE', torch.Size([1, 2, 8, 4]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import HipdnnError
from ..types import ErrorCode
from ._args import check_qkv, check_tensor, materialized
from ._cached import Options
from ._graphs import _optional_inputs, checked_options, run_backward, run_forward_on

__all__ = ["philox_backward", "philox_forward", "philox_slots"]

Tensor = torch.Tensor


def philox_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    dropout_p: float,
    seed: int,
    offset: int,
    prefer: str | None = None,
    **kw: Any,
) -> tuple[Tensor, Tensor, str]:
    """:func:`sdpa_forward` with philox dropout (no mask): ``(O, Stats, engine that ran)``.

    ``seed`` and ``offset`` are the graph's pass-by-value Seed and Offset (so they are not part
    of the cache key); ``prefer`` ranks an engine first without forcing it; ``kw`` are
    :func:`sdpa_forward`'s keywords other than the dropout ones.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments.
        NotSupportedError: when no engine (or not the forced one) runs the graph.
    """
    options, pack = _philox_pack(q, k, {"Q": q, "K": k, "V": v}, dropout_p, seed, offset, kw)
    if options.engine is None:
        options = options._replace(prefer=prefer)
    return run_forward_on(pack, options)


def philox_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    *,
    dropout_p: float,
    seed: int,
    offset: int,
    engine: str,
    dbias_shape: Sequence[int] | None = None,
    **kw: Any,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """:func:`sdpa_backward` with philox dropout, on ``engine`` (the forward's: same mask).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad arguments.
        NotSupportedError: when ``engine`` cannot run the backward graph.
    """
    for name, t in (("o", o), ("do", do), ("stats", stats)):
        check_tensor(name, t, q)
    base = {"Q": q, "K": k, "V": v, "O": o, "dO": materialized(do, o), "Stats": stats}
    options, pack = _philox_pack(q, k, base, dropout_p, seed, offset, {**kw, "engine": engine})
    mask = kw.get("attn_mask")
    if dbias_shape is not None and (mask is None or mask.dtype == torch.bool):
        raise HipdnnError(ErrorCode.INVALID_VALUE, "dbias_shape needs a floating-point attn_mask")
    return run_backward(pack, options, dbias_shape)


def _philox_pack(
    q: Tensor,
    k: Tensor,
    base: dict[str, Any],
    dropout_p: float,
    seed: int,
    offset: int,
    kw: dict[str, Any],
) -> tuple[Options, dict[str, Any]]:
    """The options and the pack of a philox graph (Seed and Offset as pass-by-value ints)."""
    check_qkv(q, k, base["V"])
    options = checked_options(q.shape[-1], kw.get("scale"), kw.get("is_causal", False),
                              kw.get("diagonal_alignment"), kw.get("left_bound"),
                              kw.get("right_bound"), kw.get("alibi", False),
                              kw.get("engine"))  # fmt: skip
    tensors = _optional_inputs(q, k, kw.get("attn_mask"), kw.get("seq_len_q"),
                               kw.get("seq_len_kv"), None, None)  # fmt: skip
    pack = {**base, **tensors, **philox_slots(seed, offset)}
    return options._replace(dropout_p=float(dropout_p)), pack


def philox_slots(seed: int, offset: int) -> dict[str, int]:
    """The pass-by-value Seed and Offset of a philox graph's pack (ints: not in the cache key)."""
    return {"Seed": int(seed), "Offset": int(offset)}
