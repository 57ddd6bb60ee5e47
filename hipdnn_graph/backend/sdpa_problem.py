"""A resolved, engine-friendly view of one SDPA node.

Engines call :meth:`SdpaProblem.from_node` in ``check``/``build_plan`` to read shapes, the
effective mask window, where the scale comes from and which optional slots are in use, instead of
re-deriving them from the attributes.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.HALF, intermediate_data_type=hg.DataType.FLOAT,
    ...              compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 4, 128, 64]); k = g.tensor(name="K", dim=[1, 1, 256, 64])
    >>> o, stats = g.sdpa(q, k, g.tensor_like(k, "V"), use_causal_mask_bottom_right=True)
    >>> g.validate()
    >>> p = hg.backend.SdpaProblem.from_node(g.nodes[0])
    >>> p.heads, p.heads_k, p.window.bottom_right, p.scale.value
    (4, 1, True, 0.125)
    >>> p.visible_pairs()  # 4 heads x 128 rows, row i sees 128 + i + 1 keys
    98560
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attributes.base import MaskWindow
from ..attributes.sdpa import SdpaAttributes
from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..errors import HipdnnError
from ..nodes.base import Node
from ..nodes.sdpa_bwd import SDPA_BWD_SPEC
from ..nodes.sdpa_fwd import SDPA_FWD_SPEC
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
from .dropout import IntSource, PhiloxDropout, philox_refusal

__all__ = ["ScalarSource", "SdpaProblem", "visible_pairs"]


@dataclass(frozen=True)
class ScalarSource:
    """A scalar that is either known when the plan is built or read from the variant pack."""

    value: float | None = None
    uid: int | None = None

    def resolve(self, variant_pack: Mapping[int, Any]) -> float | None:
        """The value, reading the variant pack for runtime tensors (see :meth:`read`)."""
        if self.uid is not None:
            return self.read(variant_pack[self.uid])
        return self.value

    @staticmethod
    def read(buffer: Any) -> float:
        """A runtime scalar's value: a pass-by-value number, or the one element of the buffer a
        scalar slot may also take (``validate()`` checked that it holds one element).

        Example:
            >>> import numpy as np
            >>> ScalarSource.read(1.25), ScalarSource.read(np.array([1.25], np.float32))
            (1.25, 1.25)
        """
        if getattr(buffer, "ndim", 0):
            buffer = buffer.reshape(-1)[0]
        return float(buffer)

    @classmethod
    def of(cls, tensor: TensorAttributes | None, fallback: float | None = None) -> ScalarSource:
        if tensor is None:
            return cls(value=fallback)
        if tensor.value is not None and not tensor.is_pass_by_value:
            return cls(value=float(tensor.value))
        return cls(uid=tensor.get_uid())


@dataclass(frozen=True)
class SdpaProblem:
    """Everything an engine needs to know about one SDPA forward or backward node.

    Attributes:
        backward: ``True`` for an SDPA backward node, ``False`` for a forward one.
        name: the node's name (for ``Support.no`` reasons: ``"node '<name>': ..."``).
        batch: B.
        heads: the head count of Q.
        heads_k: the head count of K (fewer than ``heads`` for GQA/MQA).
        heads_v: the head count of V.
        seq_q: Sq, the query sequence length.
        seq_kv: Skv, the key/value sequence length.
        head_dim: D, the head dim of Q and K.
        head_dim_v: Dv, the head dim of V.
        window: the effective mask window: ``is_full`` (no mask), ``left_bound`` /
            ``right_bound`` (``None`` for unbounded; causal is ``right_bound == 0``) and
            ``bottom_right`` (the diagonal aligned to the bottom-right corner).
        alibi: the ALiBi bias is applied (``use_alibi_mask``).
        padding: the padding mask is on (SEQ_LEN_Q / SEQ_LEN_KV tensors give the lengths).
        scale: the attention scale, known now (``scale.value``) or read from the variant pack
            (``scale.uid``, a runtime pass-by-value tensor); ``1/sqrt(D)`` when none is given.
        dropout_probability: the dropout probability, or ``None``.
        dropout_scale: the scale applied to kept elements (``1.0`` when not given).
        compute_data_type: the node's compute type.
        tensors: slot name → tensor for every set slot. The slot names are those of the node
            pages' slot tables: inputs ``Q``, ``K``, ``V``, ``Attn_scale``, ``Bias``,
            ``SEQ_LEN_Q``, ``SEQ_LEN_KV``, ``Seed``, ``Offset``, ``Dropout_mask``,
            ``Dropout_scale`` (and for the backward ``O``, ``dO``, ``Stats``,
            ``Dropout_scale_inv``); outputs ``O``, ``Stats`` (forward) or ``dQ``, ``dK``,
            ``dV``, ``dBias`` (backward).
    """

    backward: bool
    name: str
    batch: int
    heads: int
    heads_k: int
    heads_v: int
    seq_q: int
    seq_kv: int
    head_dim: int
    head_dim_v: int
    window: MaskWindow
    alibi: bool
    padding: bool
    scale: ScalarSource
    dropout_probability: float | None
    dropout_scale: ScalarSource
    compute_data_type: DataType
    #: slot name → tensor for every set slot (``"Q"``, ``"dQ"``, ``"Bias"``, …)
    tensors: Mapping[str, TensorAttributes]

    @classmethod
    def from_node(cls, node: Node[Any]) -> SdpaProblem:
        """Describe a validated SDPA node.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when ``node`` is not an SDPA node.
        """
        a = node.attributes
        if not isinstance(a, SdpaAttributes | SdpaBackwardAttributes):
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"{node!r} is not an SDPA node")
        tensors = a.tensors_by_slot()
        q, k, v = tensors["Q"], tensors["K"], tensors["V"]
        b, h, sq, d = q.dim
        scale_fallback = a.attn_scale_value if a.attn_scale_value is not None else 1 / math.sqrt(d)
        return cls(
            backward=isinstance(a, SdpaBackwardAttributes),
            name=a.name,
            batch=b,
            heads=h,
            heads_k=k.dim[1],
            heads_v=v.dim[1],
            seq_q=sq,
            seq_kv=k.dim[2],
            head_dim=d,
            head_dim_v=v.dim[3],
            window=a.mask_window().within(sq, k.dim[2]),
            alibi=a.alibi_mask,
            padding=a.padding_mask,
            scale=ScalarSource.of(a.get_attn_scale(), scale_fallback),
            dropout_probability=a.dropout_probability,
            dropout_scale=ScalarSource.of(a.get_dropout_scale(), 1.0),
            compute_data_type=a.compute_data_type,
            tensors=tensors,
        )

    def has(self, slot: str) -> bool:
        """Whether the slot is set (``"Bias"``, ``"dBias"``, ``"Dropout_mask"``, …; the names
        of :attr:`tensors`)."""
        return slot in self.tensors

    def uid(self, slot: str) -> int:
        """The uid of the tensor in ``slot``."""
        return self.tensors[slot].get_uid()

    @property
    def uses_dropout(self) -> bool:
        """Whether the node applies dropout in either form: an explicit mask (the
        ``Dropout_mask`` slot is set, with ``dropout_scale``) or Philox dropout (a non-zero
        ``dropout_probability``, the mask drawn from the ``Seed`` and ``Offset`` tensors). An
        engine that computes neither refuses on this one flag."""
        return self.has("Dropout_mask") or bool(self.dropout_probability)

    @property
    def philox(self) -> PhiloxDropout | None:
        """The node's philox dropout (a probability above 0 and no Dropout_mask), or ``None``.

        Seed and Offset are read as :mod:`hipdnn_graph.philox` defines; call
        :meth:`philox_problem` first (a slot may be missing).
        """
        p = self.dropout_probability
        if not p or self.has("Dropout_mask"):
            return None
        seed, offset = self.tensors.get("Seed"), self.tensors.get("Offset")
        if seed is None or offset is None:
            return None
        return PhiloxDropout(
            float(p),
            IntSource.of(seed, f"Seed tensor '{seed.name}'"),
            IntSource.of(offset, f"Offset tensor '{offset.name}'"),
        )

    def philox_problem(self) -> str | None:
        """Why this node's philox dropout cannot run on the documented stream, or ``None``
        (also ``None`` without philox dropout)."""
        if not self.dropout_probability or self.has("Dropout_mask"):
            return None
        return philox_refusal(self.name, self.tensors)

    def data_type_problem(self) -> str | None:
        """Why a slot's data type is not one an SDPA engine computes with, or ``None``.

        Q/K/V/O/dO/Stats/Bias and the gradients must be FLOAT, HALF, BFLOAT16 or DOUBLE; the
        seq-len tensors INT32 or INT64; a dropout mask may also be UINT8, INT8 or BOOLEAN; a Bias
        may also be BOOLEAN (a mask: True attends, False hides the key, as torch's bool
        ``attn_mask``); pass-by-value scalar slots may be of any type.
        """
        for slot, tensor in self.tensors.items():
            if slot in _SCALAR_SLOTS:
                continue
            allowed = _SLOT_TYPES.get(slot, _FLOAT_TYPES)
            if tensor.data_type not in allowed:
                return f"node '{self.name}': {slot} has data type {tensor.data_type.name}"
        return None

    def visible_pairs(self) -> int:
        """Visible (query, key) pairs over all batches and heads, ignoring padding."""
        return self.batch * self.heads * visible_pairs(self.seq_q, self.seq_kv, self.window)

    def flops(self) -> int:
        """FLOPs by the spec's convention: ``2·B·H·N·(3·D + 2·Dv)`` for the backward,
        ``2·B·H·N·(D + Dv)`` for the forward (N = visible pairs)."""
        per_pair = (
            3 * self.head_dim + 2 * self.head_dim_v
            if self.backward
            else (self.head_dim + self.head_dim_v)
        )
        return 2 * self.visible_pairs() * per_pair


_FLOAT_TYPES = frozenset({DataType.FLOAT, DataType.HALF, DataType.BFLOAT16, DataType.DOUBLE})
#: the pass-by-value scalar slots, as the node specs declare them
_SCALAR_SLOTS = SDPA_BWD_SPEC.pass_by_value_slots | SDPA_FWD_SPEC.pass_by_value_slots
_SLOT_TYPES = {
    "SEQ_LEN_Q": frozenset({DataType.INT32, DataType.INT64}),
    "SEQ_LEN_KV": frozenset({DataType.INT32, DataType.INT64}),
    "Dropout_mask": _FLOAT_TYPES | {DataType.UINT8, DataType.INT8, DataType.BOOLEAN},
    "Bias": _FLOAT_TYPES | {DataType.BOOLEAN},
}


def visible_pairs(seq_q: int, seq_kv: int, window: MaskWindow) -> int:
    """Number of (i, j) with key ``j`` visible to query ``i`` for one (batch, head)."""
    if window.is_full:
        return seq_q * seq_kv
    offset = seq_kv - seq_q if window.bottom_right else 0
    i = np.arange(seq_q, dtype=np.int64)
    hi = np.full(seq_q, seq_kv - 1, dtype=np.int64)
    lo = np.zeros(seq_q, dtype=np.int64)
    if window.right_bound is not None:
        hi = np.minimum(hi, i + offset + window.right_bound)
    if window.left_bound is not None:
        lo = np.maximum(lo, i + offset - window.left_bound)
    return int(np.clip(hi - lo + 1, 0, None).sum())
