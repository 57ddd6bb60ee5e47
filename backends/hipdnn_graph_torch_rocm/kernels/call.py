"""One SDPA call as every kernel takes it: :class:`SdpaCall`, what a plan fixes (the scale, the
mask window, ALiBi, dBias, dropout), and :class:`SdpaInputs`, what each call hands over beside
Q, K and V (the optional tensors, and the values of the scalars the call leaves open).

A leaf of the kernels package. An engine builds the call once per node, from the node's public
:class:`hipdnn_graph.backend.SdpaProblem` (:meth:`SdpaCall.of`), when it builds the plan; the
kernels (:mod:`.math`, :mod:`.fused`, the fused ops' rules and :mod:`.flex`'s spec) read it
from there, so a new fact about a call is one field here.

Example:
    >>> call = SdpaCall(scale=0.125, right_bound=0, bottom_right=True)
    >>> call.causal, call.scale_or(None), call.scale_or(0.5)
    (True, 0.125, 0.5)
    >>> SdpaCall().scale_or(None)
    Traceback (most recent call last):
    ...
    ValueError: sdpa: the call leaves the scale open and none was given
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import torch

if TYPE_CHECKING:
    from hipdnn_graph.backend import SdpaProblem

__all__ = [
    "OPEN_SCALE",
    "PLAIN",
    "SdpaCall",
    "SdpaDims",
    "SdpaInputs",
    "problem_dims",
    "tensor_dims",
]

Tensor = torch.Tensor
#: why a kernel call fails that has no scale (the call leaves it open and none is given)
OPEN_SCALE = "sdpa: the call leaves the scale open and none was given"
#: ``(B, H, Hk, Hv, Sq, Skv, D, Dv)``, the fields of :class:`SdpaDims` in order
Dims = tuple[int, int, int, int, int, int, int, int]


@dataclass(frozen=True)
class SdpaDims:
    """The sizes of one SDPA call: Q ``[B,H,Sq,D]``, K ``[B,Hk,Skv,D]``, V ``[B,Hv,Skv,Dv]``.

    The first fields of every kernel record that depends on them (the fused ops' case, the
    flex spec), declared once here."""

    b: int
    h: int
    hk: int
    hv: int
    sq: int
    skv: int
    d: int
    dv: int


def tensor_dims(q: Tensor, k: Tensor, v: Tensor) -> Dims:
    """The :class:`SdpaDims` fields of rank-4 Q, K and V (not checked against each other).

    Example:
        >>> q, kv = torch.zeros(2, 8, 16, 64), torch.zeros(2, 2, 32, 64)
        >>> tensor_dims(q, kv, kv)
        (2, 8, 2, 2, 16, 32, 64, 64)
    """
    b, h, sq, d = (int(x) for x in q.shape)
    return b, h, int(k.shape[1]), int(v.shape[1]), sq, int(k.shape[2]), d, int(v.shape[3])


def problem_dims(p: SdpaProblem) -> Dims:
    """The :class:`SdpaDims` fields of a node's public
    :class:`~hipdnn_graph.backend.SdpaProblem`."""
    return (p.batch, p.heads, p.heads_k, p.heads_v, p.seq_q, p.seq_kv, p.head_dim,
            p.head_dim_v)  # fmt: skip


@dataclass(frozen=True)
class SdpaCall:
    """What a plan fixes about one SDPA call (frozen, hashable: a cache key).

    A scalar that the graph reads from the variant pack on every call (a runtime pass-by-value
    scale, dropout scale, Seed or Offset) is ``None`` here; its value comes with each call, as the
    :class:`SdpaInputs` entry of the same name.

    Attributes:
        scale: multiplies Q·Kᵀ (None: given per call).
        alibi: add ``slope_h·(j − i)``.
        bottom_right: the diagonal is offset by ``Skv − Sq`` (per batch with padding).
        left_bound, right_bound: key j is visible to query i iff
            ``i+off−left ≤ j ≤ i+off+right`` (a missing bound does not restrict).
        dbias_shape: the backward computes dBias in this shape (None: no dBias).
        dropout_p: philox dropout's probability (0: none; a mask tensor is an input instead).
        dropout_scale: multiplies kept probabilities (None: given per call).
        dropout_seed, dropout_offset: philox dropout's Seed and Offset (None: given per call).
    """

    scale: float | None = None
    alibi: bool = False
    bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None
    dbias_shape: tuple[int, ...] | None = None
    dropout_p: float = 0.0
    dropout_scale: float | None = 1.0
    dropout_seed: int | None = None
    dropout_offset: int | None = None

    @classmethod
    def of(cls, p: SdpaProblem) -> SdpaCall:
        """The call of a validated SDPA node, from its public
        :class:`~hipdnn_graph.backend.SdpaProblem` (read by attribute: the kernels import
        without ``hipdnn_graph``).

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT)
            >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
            >>> _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), attn_scale=0.5,
            ...            use_causal_mask_bottom_right=True)
            >>> g.validate()
            >>> call = SdpaCall.of(hg.backend.SdpaProblem.from_node(g.nodes[0]))
            >>> call.scale, call.causal, call.bottom_right, call.dropout_p, call.dbias_shape
            (0.5, True, True, 0.0, None)
        """
        w = p.window
        dbias = tuple(p.tensors["dBias"].dim) if p.has("dBias") else None
        scale = p.scale.value if p.scale.uid is None else None
        philox = p.philox
        if philox is None:
            ds = p.dropout_scale
            return cls(
                scale, p.alibi, w.bottom_right, w.left_bound, w.right_bound, dbias,
                dropout_scale=(ds.value or 1.0) if ds.uid is None else None,
            )  # fmt: skip
        return cls(
            scale, p.alibi, w.bottom_right, w.left_bound, w.right_bound, dbias,
            philox.probability, philox.scale, philox.seed.value, philox.offset.value,
        )  # fmt: skip

    @property
    def causal(self) -> bool:
        """A causal mask and nothing more: ``right_bound == 0`` and no left bound."""
        return self.right_bound == 0 and self.left_bound is None

    @property
    def band(self) -> bool:
        """A window other than causal: a left bound, or a right bound other than 0."""
        return self.left_bound is not None or self.right_bound not in (None, 0)

    @property
    def masked(self) -> bool:
        """Whether the window hides any key (a bound is set)."""
        return self.left_bound is not None or self.right_bound is not None

    def scale_or(self, given: float | None) -> float:
        """The scale of this call: ``given`` (a runtime value), else the plan's.

        Raises:
            ValueError: neither is known.
        """
        if given is not None:
            return given
        if self.scale is None:
            raise ValueError(OPEN_SCALE)
        return self.scale


#: a call with nothing set: no mask, no bias gradient, no dropout; the scale given per call
PLAIN = SdpaCall()


class SdpaInputs(TypedDict, total=False):
    """What one kernel call takes beside Q, K, V (O, dO, Stats) and its :class:`SdpaCall`:
    the optional input tensors, and the per-call values of the scalars the call leaves open
    (a value given here takes the place of the call's)."""

    bias: Tensor | None
    seq_len_q: Tensor | None
    seq_len_kv: Tensor | None
    dropout_mask: Tensor | None
    scale: float | None
    dropout_scale: float | None
    dropout_seed: int | Tensor | None
    dropout_offset: int | Tensor | None
