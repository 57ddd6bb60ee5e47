"""The torch engines' plan for graphs over packed (ragged) tensors. On the math engine each node
gathers its tokens (:class:`hipdnn_graph.backend.packed_sdpa.PackedCall`; a packed buffer's
tokens are read in place), runs the math kernel on each sequence
(:func:`.kernels.varlen.varlen_math_forward` / ``_backward``, on the tensors' device) and
scatters its results into the caller's buffers; on the flash and efficient engines each node is
a :class:`~._packed_fused.PackedFusedStep` (one variable-length kernel launch for the whole
batch), which keeps the math step for the calls its kernel's causal alignment does not serve.
Inputs are never written.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> off = g.tensor(name="off", dim=[3, 1, 1, 1], data_type=hg.DataType.INT32)
    >>> q, k, v = (g.tensor(name=n, dim=[2, 1, 4, 2], stride=[8, 2, 2, 1]) for n in "QKV")
    >>> for t in (q, k, v): _ = t.set_ragged_offset(off).set_ragged_offset_multiplier(2)
    >>> o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False)
    >>> _ = o.set_output(True).set_stride([8, 2, 2, 1]).set_ragged_offset(off)
    >>> _ = o.set_ragged_offset_multiplier(2)
    >>> _ = g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    >>> tokens = torch.ones(5, 1, 2)  # sequences of 3 and 2 tokens (token offsets)
    >>> offsets = torch.tensor([0, 3, 5], dtype=torch.int32).reshape(3, 1, 1, 1)
    >>> out = g.run({off: offsets, q: tokens, k: tokens, v: tokens})
    >>> out[o].shape, out[o][:, 0, 0].tolist()
    (torch.Size([5, 1, 2]), [1.0, 1.0, 1.0, 1.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem
from hipdnn_graph.backend.dtypes import torch_dtype
from hipdnn_graph.backend.packed_sdpa import PackedResult, PackedSdpa, packed_results

from ._packed_fused import PackedFusedStep
from .kernels.call import SdpaCall
from .kernels.varlen import cu_seqlens, varlen_math_backward, varlen_math_forward

__all__ = ["PackedTorchPlan", "PackedTorchStep"]

_COMPUTE = {hg.DataType.FLOAT: torch.float32, hg.DataType.DOUBLE: torch.float64}


@dataclass(frozen=True)
class PackedTorchStep:
    """One node resolved when the plan is built: its slots, mask window and result types."""

    backward: bool
    packed: PackedSdpa
    window: hg.MaskWindow
    compute: torch.dtype
    #: (slot, uid, fill, torch dtype, dims) of every result the node has
    results: tuple[PackedResult, ...]

    @classmethod
    def of(cls, p: SdpaProblem) -> PackedTorchStep:
        results = packed_results(p, torch_dtype)
        return cls(p.backward, PackedSdpa.of(p), p.window, _COMPUTE[p.compute_data_type], results)

    def reads(self) -> set[int]:
        """The uids of the token inputs this node reads."""
        return self.packed.input_uids(self.backward)

    def execute(self, buffers: dict[int, Any], internal: frozenset[int]) -> None:
        """Run the node on ``buffers``; a virtual result a later node reads (``internal``, a
        dense Stats) is stored there in its declared data type."""
        call = self.packed.call(buffers)
        args = call.inputs(self.backward, buffers)
        device = args[0].device
        cu_q = cu_seqlens(call.lengths("q"), device=device)
        cu_kv = cu_seqlens(call.lengths("kv"), device=device)
        w = self.window
        sdpa = SdpaCall(
            scale=self.packed.scale(buffers), bottom_right=w.bottom_right,
            left_bound=w.left_bound, right_bound=w.right_bound,
        )  # fmt: skip
        values: tuple[Any, ...]
        if self.backward:
            q, k, v, o, do, stats = args
            values = varlen_math_backward(
                q, k, v, o, do, stats, cu_q, cu_kv, sdpa, compute_dtype=self.compute
            )
        else:
            q, k, v = args
            values = varlen_math_forward(q, k, v, cu_q, cu_kv, sdpa, compute_dtype=self.compute)
        call.store(
            self.results, values, buffers, internal,
            lambda dims, dtype: torch.empty(dims, dtype=dtype, device=device),
        )  # fmt: skip


class PackedTorchPlan:
    """The nodes of one graph in topological order, each through :class:`PackedTorchStep`
    (``op`` None: the math engine) or the fused kernel family ``op``'s
    :class:`~._packed_fused.PackedFusedStep`."""

    workspace_size = 0

    def __init__(self, engine_name: str, graph: hg.Graph, op: str | None = None) -> None:
        self.engine_name = engine_name
        self.steps: list[Any] = []
        for node in graph.nodes:
            p = SdpaProblem.from_node(node)
            step: Any = PackedTorchStep.of(p)
            if op is not None:
                step = PackedFusedStep.of(p, op, step)
            self.steps.append(step)
        produced = {uid for step in self.steps for _, uid, _, _, _ in step.results}
        consumed = set().union(*(step.reads() for step in self.steps))
        #: virtual tensors passed between nodes (kept in a private copy of the variant pack)
        self.internal = frozenset(produced & consumed)

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        buffers = dict(variant_pack)
        for step in self.steps:
            step.execute(buffers, self.internal)
