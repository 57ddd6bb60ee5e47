"""The score and mask modifiers that express an SDPA node in FlexAttention's terms.

A leaf of the flex kernel (:mod:`.flex`): pure functions of the node's static features and of
the tensors they read (bias, ALiBi slopes, a runtime scale, padding lengths). Tensors are read
with torch's own ``mod_index`` (what FlexAttention turns ``t[h, q, k]`` into while it traces a
modifier) rather than Python indexing: plain indexing of a captured tensor fails in some torch
versions (a data-dependent guard while deriving the joint graph), and ``mod_index``'s gradient is
flex's ``zeros_and_scatter``, which the backward kernel lowers (a plain ``aten.index``'s gradient
allocates a buffer inside the kernel's pointwise subgraph: "Buffers cannot be created while
lowering a pointwise subgraph", seen on the H200 for a bias with dBias).

Math (HIPDNN_SPEC.md §6, as :mod:`hipdnn_graph_numpy_reference.sdpa_math` defines it):
``S = scale·Q·Kᵀ + bias + slope_h·(j − i)``; key ``j`` is visible to query ``i`` iff
``j ≤ i + offset + right_bound`` and ``j ≥ i + offset − left_bound`` (each if set) and, with
padding, ``i < seq_len_q[b]`` and ``j < seq_len_kv[b]``; ``offset`` is 0 or, bottom-right
aligned, ``Skv − Sq`` (per batch ``seq_len_kv[b] − seq_len_q[b]`` with padding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Tensor = torch.Tensor
ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def _load_index() -> Callable[..., Tensor]:
    try:
        from torch._dynamo._trace_wrapped_higher_order_op import mod_index
    except ImportError:  # an older torch: plain indexing (no dBias there)
        return torch.ops.aten.index.Tensor
    return mod_index  # type: ignore[no-any-return]


_index = _load_index()


@dataclass(frozen=True)
class Features:
    """The static features of one SDPA node that decide its modifiers."""

    sq: int
    skv: int
    bias_dims: tuple[bool, ...] | None = None  # per [B,H,Sq,Skv] dim: bias varies along it
    alibi: bool = False
    runtime_scale: bool = False
    bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None
    padding: bool = False

    @property
    def masked(self) -> bool:
        """Whether any key is invisible to some query (a block mask is needed)."""
        return self.padding or self.left_bound is not None or self.right_bound is not None


def bias_dims(shape: tuple[int, ...]) -> tuple[bool, ...]:
    """Right-aligned ``[B,H,Sq,Skv]`` dims along which a bias of ``shape`` varies.

    Example:
        >>> bias_dims((8, 1, 128))
        (False, True, False, True)
    """
    full = (1,) * (4 - len(shape)) + tuple(shape)
    return tuple(n != 1 for n in full)


def compact_bias(bias: Tensor, dims: tuple[bool, ...]) -> Tensor:
    """The bias reshaped to the dims it varies along (what :func:`score_mod` indexes)."""
    full = (1,) * (4 - bias.dim()) + tuple(bias.shape)
    return bias.reshape(tuple(n for n, keep in zip(full, dims, strict=True) if keep))


def score_mod(
    f: Features, bias: Tensor | None, slopes: Tensor | None, scale: Tensor | None
) -> ScoreMod:
    """The score modifier: runtime scale, then bias (compacted), then ALiBi.

    ``bias`` is :func:`compact_bias`'s result, ``slopes`` the ``[H]`` ALiBi slopes, ``scale`` a
    0-d runtime scale (the kernel's own scale is then 1).
    """

    def mod(s: Tensor, b: Tensor, h: Tensor, q: Tensor, k: Tensor) -> Tensor:
        if scale is not None:
            s = s * scale
        if bias is not None and f.bias_dims is not None:
            idx = [i for i, keep in zip((b, h, q, k), f.bias_dims, strict=True) if keep]
            s = s + (_index(bias, idx) if idx else bias)
        if slopes is not None:
            s = s + _index(slopes, [h]) * (k - q)
        return s

    return mod


def mask_mod(f: Features, len_q: Tensor | None, len_kv: Tensor | None) -> MaskMod:
    """The mask modifier: band/causal bounds with their alignment, and padding.

    ``len_q``/``len_kv`` are ``[B]`` int32 lengths already clipped to ``[0, Sq]``/``[0, Skv]``
    (read at run time, so one modifier serves every call).
    """

    def mod(b: Tensor, h: Tensor, q: Tensor, k: Tensor) -> Tensor:
        del h
        ok = q >= 0
        off: Tensor | int = 0
        if f.padding and len_q is not None and len_kv is not None:
            lq = _index(len_q, [b])
            lk = _index(len_kv, [b])
            ok = ok & (q < lq) & (k < lk)
            if f.bottom_right:
                off = lk - lq
        elif f.bottom_right:
            off = f.skv - f.sq
        if f.right_bound is not None:
            ok = ok & (k <= q + off + f.right_bound)
        if f.left_bound is not None:
            ok = ok & (k >= q + off - f.left_bound)
        return ok

    return mod
