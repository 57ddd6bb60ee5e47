"""An SDPA node over packed (ragged) tensors as engines see it: which of its slots are packed
(:class:`PackedSdpa`, resolved when the plan is built), each side's sequences for one call, and
each slot's tokens gathered into, or scattered from, one ``[T, H, D]`` array
(:class:`PackedCall`), in NumPy or torch alike.

The query side (Q, O, dO, dQ, Stats) and the key side (K, V, dK, dV) each have their own
sequence lengths: those the offsets of the side's packed tensors give (every packed tensor of a
side must give the same ones), or the padded ``S`` where none of the side is packed. A tensor of
a packed side that is itself dense (``[B, H, S_max, D]``, often Stats) holds sequence ``b`` in
its rows ``[b, :, :len_b]``. With the padding mask, sequence ``b`` attends with its first
``SEQ_LEN`` tokens (clipped to its length), as the dense definition's padding does.

What the engine computes per call is one packed problem over the gathered tokens (the NumPy
reference's ``packed_sdpa_forward``/``_backward``, torch's variable-length kernels), with
``Packing.from_lengths(call.lengths("q"))``. Scattering writes each sequence's results, the
rows past a padded length get ``fill`` (0; +inf for Stats) as the definition gives them, and
so do a dense output's rows past its sequence; tokens of a packed buffer that no sequence holds
are left as they are.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> from hipdnn_graph.backend import SdpaProblem
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> off = g.tensor(name="off", dim=[3, 1, 1, 1], data_type=hg.DataType.INT32)
    >>> q, k, v = (g.tensor(name=n, dim=[2, 1, 4, 2], stride=[8, 2, 2, 1]) for n in "QKV")
    >>> for t in (q, k, v): _ = t.set_ragged_offset(off).set_ragged_offset_multiplier(2)
    >>> o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False)
    >>> _ = o.set_output(True).set_stride([8, 2, 2, 1]).set_ragged_offset(off)
    >>> _ = g.build_operation_graph()  # validates, gives uids
    >>> packed = PackedSdpa.of(SdpaProblem.from_node(g.nodes[0]))
    >>> call = packed.call({off.uid: np.array([0, 3, 4]), q.uid: np.arange(8.0)})
    >>> call.lengths("q"), call.gather("Q", np.arange(8.0))[:, 0, 1].tolist()
    ([3, 1], [1.0, 3.0, 5.0, 7.0])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from ..errors import HipdnnError
from ..types import DataType
from .buffers import is_torch_tensor
from .ragged import RaggedLayout, host_integers, is_ragged
from .sdpa_problem import ScalarSource, SdpaProblem
from .tensor_spec import pack_error

__all__ = [
    "KEY_SLOTS",
    "QUERY_SLOTS",
    "PackedCall",
    "PackedResult",
    "PackedSdpa",
    "is_packed",
    "packed_refusal",
    "packed_results",
]

#: the slots packed by the query side's sequences, and by the key side's
QUERY_SLOTS = ("Q", "O", "dO", "dQ", "Stats")
KEY_SLOTS = ("K", "V", "dK", "dV")
_SIDES = {"q": QUERY_SLOTS, "kv": KEY_SLOTS}
#: the positional inputs of a forward (False) and a backward (True) node
_INPUTS = {False: ("Q", "K", "V"), True: ("Q", "K", "V", "O", "dO", "Stats")}
#: (slot, fill) of each direction's results, in the order the packed definitions return them
_RESULTS = {
    False: (("O", 0.0), ("Stats", float("inf"))),
    True: (("dQ", 0.0), ("dK", 0.0), ("dV", 0.0)),
}
#: a result of a packed node: (slot, uid, fill, storage dtype, dims)
PackedResult = tuple[str, int, float, Any, tuple[int, ...]]


def packed_results(p: SdpaProblem, dtype: Callable[[DataType], Any]) -> tuple[PackedResult, ...]:
    """Every result the node has, in the order the packed definitions return them, with the
    storage dtype ``dtype`` gives for its data type (``numpy_dtype``, ``torch_dtype``)."""
    return tuple(
        (slot, p.uid(slot), fill, dtype(p.tensors[slot].data_type), tuple(p.tensors[slot].dim))
        for slot, fill in _RESULTS[p.backward]
        if p.has(slot)
    )


def is_packed(p: SdpaProblem) -> bool:
    """Whether a tensor of the node is packed (ragged)."""
    return any(is_ragged(t) for t in p.tensors.values())


def packed_refusal(p: SdpaProblem) -> str | None:
    """Why a packed SDPA node cannot run sequence by sequence, or ``None``: a packed slot other
    than the attention's tokens, a layout a packed buffer cannot hold, or a feature the packed
    definition lacks (bias, dBias, ALiBi, dropout)."""
    node = f"node '{p.name}'"
    for slot, tensor in p.tensors.items():
        if not is_ragged(tensor):
            continue
        if slot not in QUERY_SLOTS + KEY_SLOTS:
            return f"{node}: {slot} '{tensor.name}' is ragged; only the tokens' slots may be"
        try:
            RaggedLayout.of(tensor)
        except HipdnnError as exc:
            return f"{node}: {exc.message}"
    features = (
        ("a bias", p.has("Bias")),
        ("dBias", p.has("dBias")),
        ("ALiBi", p.alibi),
        ("dropout", p.uses_dropout or p.dropout_probability not in (None, 0.0)),
    )
    for feature, used in features:
        if used:
            return f"{node}: packed (ragged) SDPA with {feature} is not implemented"
    return None


@dataclass(frozen=True)
class PackedSdpa:
    """What a plan resolves of a packed node: every token slot's uid, dims and layout."""

    batch: int
    #: slot -> uid of every set token slot
    uids: Mapping[str, int]
    #: slot -> layout of the packed ones
    layouts: Mapping[str, RaggedLayout]
    #: side ("q", "kv") -> padded sequence length
    padded: Mapping[str, int]
    #: side -> uid of its SEQ_LEN tensor (padding mask on), absent otherwise
    seq_lens: Mapping[str, int]
    #: the attention scale (known now, or a runtime pass-by-value tensor) and head dim
    scale_source: ScalarSource
    head_dim: int

    @classmethod
    def of(cls, p: SdpaProblem) -> PackedSdpa:
        slots = [s for s in QUERY_SLOTS + KEY_SLOTS if p.has(s)]
        seq_lens = {}
        if p.padding:
            for side, slot in (("q", "SEQ_LEN_Q"), ("kv", "SEQ_LEN_KV")):
                if p.has(slot):
                    seq_lens[side] = p.uid(slot)
        return cls(
            batch=p.batch,
            uids={s: p.uid(s) for s in slots},
            layouts={s: RaggedLayout.of(p.tensors[s]) for s in slots if is_ragged(p.tensors[s])},
            padded={"q": p.seq_q, "kv": p.seq_kv},
            seq_lens=seq_lens,
            scale_source=p.scale,
            head_dim=p.head_dim,
        )

    def input_uids(self, backward: bool) -> set[int]:
        """The uids of the token inputs a forward or backward node reads."""
        return {self.uids[s] for s in _INPUTS[backward]}

    def scale(self, buffers: Mapping[int, Any]) -> float:
        """The attention scale of this call (``1/sqrt(D)`` where the node gives none)."""
        value = self.scale_source.resolve(buffers)
        return 1.0 / math.sqrt(self.head_dim) if value is None else float(value)

    def call(self, buffers: Mapping[int, Any]) -> PackedCall:
        """The sequences of one call, from the offsets (and sequence lengths) in ``buffers``.

        Raises:
            HipdnnError: ``INVALID_VARIANT_PACK`` when two packed tensors of one side give
                different sequence lengths, or for offsets :meth:`RaggedLayout.token_bounds`
                refuses.
        """
        starts: dict[str, list[int]] = {}
        spans: dict[str, list[int]] = {}
        used: dict[str, list[int]] = {}
        host: dict[int, list[int]] = {}  # each offsets tensor read once (a device sync)
        for side, slots in _SIDES.items():
            first: tuple[RaggedLayout, list[int]] | None = None
            for slot in slots:
                layout = self.layouts.get(slot)
                if layout is None or self.uids[slot] not in buffers:
                    continue
                uid = layout.offsets_uid
                if uid not in host:
                    host[uid] = host_integers(buffers[uid])
                bounds = [int(x) for x in layout.token_bounds(host[uid])]
                lengths = [b - a for a, b in pairwise(bounds)]
                starts[slot] = bounds
                if first is None:
                    first = (layout, lengths)
                elif lengths != first[1]:
                    raise pack_error(
                        f"Ragged offsets '{layout.offsets_name}' of tensor '{layout.name}' give "
                        f"sequence lengths {lengths}, but '{first[0].offsets_name}' of tensor "
                        f"'{first[0].name}' give {first[1]}; the tensors of one side of the "
                        "attention share their sequences"
                    )
            spans[side] = first[1] if first is not None else [self.padded[side]] * self.batch
            lens_uid = self.seq_lens.get(side)
            if lens_uid is None:
                used[side] = spans[side]
                continue
            given = host_integers(buffers[lens_uid])
            if len(given) != self.batch:
                raise pack_error(f"{len(given)} sequence lengths given, {self.batch} needed")
            used[side] = [max(0, min(n, span)) for n, span in zip(given, spans[side], strict=True)]
        return PackedCall(self, starts, spans, used)


@dataclass(frozen=True)
class PackedCall:
    """The sequences of one call: per side the spans each sequence takes and the tokens it
    attends with (fewer where padded), per packed slot where each sequence starts."""

    packed: PackedSdpa
    #: packed slot -> its B + 1 token bounds
    starts: Mapping[str, list[int]]
    #: side -> tokens each sequence takes in the side's tensors
    spans: Mapping[str, list[int]]
    #: side -> tokens each sequence attends with (its span, or its clipped SEQ_LEN)
    used: Mapping[str, list[int]]

    def lengths(self, side: str) -> list[int]:
        """The lengths of the side's sequences in the gathered arrays (``"q"`` or ``"kv"``)."""
        return list(self.used[side])

    def _rows(self, slot: str, buffer: Any) -> list[Any]:
        """Each sequence's span of ``slot`` as a ``[span, H, D]`` view of ``buffer``."""
        side = "q" if slot in QUERY_SLOTS else "kv"
        spans = self.spans[side]
        layout = self.packed.layouts.get(slot)
        if layout is None:  # dense [B, H, S, D]: sequence b is rows [b, :, :span]
            return [buffer[b].swapaxes(0, 1)[: spans[b]] for b in range(len(spans))]
        bounds = self.starts[slot]
        view = layout.token_view(buffer, bounds[-1])
        return [view[bounds[b] : bounds[b] + spans[b]] for b in range(len(spans))]

    def _whole(self, slot: str) -> bool:
        """Whether the slot's sequences are its packed buffer's tokens as they lie."""
        side = "q" if slot in QUERY_SLOTS else "kv"
        return slot in self.packed.layouts and self.used[side] == self.spans[side]

    def gather(self, slot: str, buffer: Any) -> Any:
        """The tokens each sequence attends with, back to back: ``[T, H, D]`` (a view of a
        packed buffer, a copy otherwise)."""
        if self._whole(slot):
            bounds = self.starts[slot]
            return self.packed.layouts[slot].token_view(buffer, bounds[-1])[bounds[0] :]
        side = "q" if slot in QUERY_SLOTS else "kv"
        rows = self._rows(slot, buffer)
        shape = (sum(self.used[side]), *rows[0].shape[1:])
        torch_kind = is_torch_tensor(buffer)
        out = buffer.new_empty(shape) if torch_kind else np.empty(shape, buffer.dtype)
        at = 0
        for piece, n in zip(rows, self.used[side], strict=True):
            out[at : at + n] = piece[:n]
            at += n
        return out

    def scatter(self, slot: str, buffer: Any, value: Any, fill: float) -> None:
        """Write ``value`` (``[T, H, D]``, as :meth:`gather` lays tokens out) into ``buffer``,
        cast to its type; the rest of each sequence's span (a dense output's rows past it too)
        gets ``fill``."""
        if self._whole(slot):
            bounds = self.starts[slot]
            self.packed.layouts[slot].token_view(buffer, bounds[-1])[bounds[0] :] = value
            return
        side = "q" if slot in QUERY_SLOTS else "kv"
        if slot in self.packed.layouts:
            spans = self._rows(slot, buffer)
        else:  # a dense output: every row of it, past each sequence too
            spans = [buffer[b].swapaxes(0, 1) for b in range(self.packed.batch)]
        at = 0
        for rows, n in zip(spans, self.used[side], strict=True):
            rows[:n] = value[at : at + n]
            rows[n:] = fill
            at += n

    def inputs(self, backward: bool, buffers: Mapping[int, Any]) -> list[Any]:
        """The gathered token inputs of a forward (Q, K, V) or backward (Q, K, V, O, dO,
        Stats) node, as its packed definition takes them."""
        return [self.gather(s, buffers[self.packed.uids[s]]) for s in _INPUTS[backward]]

    def store(
        self,
        results: tuple[PackedResult, ...],
        values: tuple[Any, ...],
        buffers: dict[int, Any],
        internal: frozenset[int],
        empty: Callable[[tuple[int, ...], Any], Any],
    ) -> None:
        """Scatter the node's ``values`` into the caller's buffers; a virtual result a later
        node reads (``internal``, a dense Stats) is stored in ``buffers`` in a new array
        (``empty(dims, dtype)``), the others are dropped."""
        for (slot, uid, fill, dtype, dims), value in zip(results, values, strict=False):
            out = buffers.get(uid)
            if out is None:  # a virtual tensor: kept if a later node reads it
                if uid not in internal:
                    continue
                out = buffers[uid] = empty(dims, dtype)
            self.scatter(slot, out, value, fill)
