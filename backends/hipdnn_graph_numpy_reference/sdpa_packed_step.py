"""One SDPA node over packed (ragged) tensors in a NumPy reference plan: each call gathers the
tokens of every slot (:class:`hipdnn_graph.backend.packed_sdpa.PackedCall`; a packed buffer's
tokens are read in place), runs the packed definition (:mod:`.sdpa_packed`, sequence by
sequence) and scatters O and Stats, or dQ, dK and dV, into the caller's buffers. Inputs are
never written.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> off = g.tensor(name="off", dim=[3, 1, 1, 1], data_type=hg.DataType.INT32)
    >>> q, k, v = (g.tensor(name=n, dim=[2, 1, 4, 2], stride=[8, 2, 2, 1]) for n in "QKV")
    >>> for t in (q, k, v): _ = t.set_ragged_offset(off)
    >>> o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False)
    >>> _ = o.set_output(True).set_stride([8, 2, 2, 1]).set_ragged_offset(off)
    >>> _ = g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    >>> tokens = np.ones((5, 1, 2), np.float32)  # sequences of 3 and 2 tokens
    >>> offsets = np.array([0, 6, 10], np.int32).reshape(3, 1, 1, 1)  # elements: 2 a token
    >>> out = g.run({off: offsets, q: tokens, k: tokens, v: tokens})
    >>> out[o].shape, out[o][:, 0, 0].tolist()
    ((5, 1, 2), [1.0, 1.0, 1.0, 1.0, 1.0])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem
from hipdnn_graph.backend.dtypes import numpy_dtype
from hipdnn_graph.backend.packed_sdpa import PackedResult, PackedSdpa, packed_results

from .sdpa_packed import Packing, packed_sdpa_backward, packed_sdpa_forward

__all__ = ["PackedSdpaStep"]

_COMPUTE = {hg.DataType.FLOAT: np.float32, hg.DataType.DOUBLE: np.float64}


@dataclass(frozen=True)
class PackedSdpaStep:
    """A packed node resolved when the plan is built: its slots, flags and result types."""

    name: str
    backward: bool
    packed: PackedSdpa
    #: keyword arguments of the packed definition known now (mask window, compute dtype)
    static: dict[str, Any]
    #: (slot, uid, fill, storage dtype, dims) of every result the node has
    results: tuple[PackedResult, ...]

    @classmethod
    def of(cls, p: SdpaProblem) -> PackedSdpaStep:
        static: dict[str, Any] = {
            "bottom_right": p.window.bottom_right,
            "left_bound": p.window.left_bound,
            "right_bound": p.window.right_bound,
            "compute_dtype": _COMPUTE[p.compute_data_type],
        }
        results = packed_results(p, numpy_dtype)
        return cls(p.name, p.backward, PackedSdpa.of(p), static, results)

    def inputs(self) -> set[int]:
        """The uids this node reads: its token inputs, offsets, sequence lengths and scale."""
        uids = self.packed.input_uids(self.backward)
        uids |= {layout.offsets_uid for layout in self.packed.layouts.values()}
        uids |= set(self.packed.seq_lens.values())
        if self.packed.scale_source.uid is not None:
            uids.add(self.packed.scale_source.uid)
        return uids

    def outputs(self) -> set[int]:
        """The uids this node writes."""
        return {uid for _, uid, _, _, _ in self.results}

    def execute(self, buffers: dict[int, Any], internal: frozenset[int]) -> None:
        """Run the node on ``buffers`` (uid → array); a virtual result some later node reads
        (``internal``, a dense Stats) is stored there in its declared data type."""
        call = self.packed.call(buffers)
        args = call.inputs(self.backward, buffers)
        pq, pkv = Packing.from_lengths(call.lengths("q")), Packing.from_lengths(call.lengths("kv"))
        scale = self.packed.scale(buffers)
        values: tuple[Any, ...]
        if self.backward:
            q, k, v, o, do, stats = args
            values = packed_sdpa_backward(
                q, k, v, o, do, stats, pq, pkv, scale=scale, **self.static
            )
        else:
            q, k, v = args
            values = packed_sdpa_forward(q, k, v, pq, pkv, scale=scale, **self.static)
        call.store(self.results, values, buffers, internal, np.empty)
