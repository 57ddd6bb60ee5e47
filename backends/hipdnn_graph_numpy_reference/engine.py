"""``NUMPY_REFERENCE_ENGINE``: runs whole graphs of every family with a NumPy reference.

Written only against ``hipdnn_graph``'s public API, as a third-party plugin would be. Nodes run in
topological order, one step each, resolved when the plan is built: SDPA forward and backward
through :mod:`hipdnn_graph_numpy_reference.sdpa_step` (with its fast paths), every other family
through its record in :data:`~hipdnn_graph_numpy_reference.families.REFERENCE_FAMILY_OF`
(:mod:`hipdnn_graph_numpy_reference.family_step`). Virtual tensors between nodes are allocated
here, in their declared data types; outputs are written into the caller's buffers; inputs are
never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import ENGINE_API_VERSION, IntConstraint, Knob, SdpaProblem, Support
from hipdnn_graph.backend.packed_sdpa import is_packed, packed_refusal
from hipdnn_graph.backend.ragged import is_ragged

from .families import REFERENCE_FAMILY_OF
from .family_step import FamilyStep, family_refusal
from .sdpa_packed_step import PackedSdpaStep
from .sdpa_step import SDPA_NODE_TYPES, SdpaStep, sdpa_refusal

__all__ = ["BLOCK_Q_KNOB", "NumpyReferenceEngine", "NumpyReferencePlan"]

Step = SdpaStep | PackedSdpaStep | FamilyStep

#: the attention math's query rows per tile: 0 sizes tiles of about TILE_BYTES (whole problems
#: that fit take the untiled path); n > 0 takes tiles of n rows, the tiled path when n < Sq
BLOCK_Q_KNOB = Knob(
    "numpy_reference.sdpa_block_q",
    0,
    "SDPA query rows per tile (0: automatic, tiles of about 8 MiB; n < Sq forces the tiled path)",
    IntConstraint(0, 1 << 20),
)


def _step(node: Any, block_q: int) -> Step:
    if node.get_node_type() in SDPA_NODE_TYPES:
        problem = SdpaProblem.from_node(node)
        if is_packed(problem):
            return PackedSdpaStep.of(problem)
        return SdpaStep.of(problem, block_q)
    return FamilyStep.of(node)


def refusal(node: Any) -> str | None:
    """Why the reference cannot run ``node`` exactly, or ``None``. Packed (ragged) tensors
    are read by SDPA nodes only (:func:`~hipdnn_graph.backend.packed_sdpa.packed_refusal`)."""
    if node.get_node_type() in SDPA_NODE_TYPES:
        problem = SdpaProblem.from_node(node)
        return sdpa_refusal(problem) or (packed_refusal(problem) if is_packed(problem) else None)
    for slot, tensor in node.attributes.tensors_by_slot().items():
        if is_ragged(tensor):
            where = f"node '{node.name}': {slot} '{tensor.name}'"
            return f"{where} is ragged; only SDPA nodes read packed tensors"
    return family_refusal(node)


class NumpyReferencePlan:
    """Runs the nodes of one graph in topological order.

    Everything that does not depend on the buffers (which slots are set, flags, constant
    scalars, result dtypes, which results later nodes read) is resolved once here, so that
    ``execute`` is a few dictionary lookups and one call into the math per node.
    """

    engine_name = "NUMPY_REFERENCE_ENGINE"
    workspace_size = 0

    def __init__(self, graph: hg.Graph, block_q: int = 0) -> None:
        self.steps: list[Step] = [_step(n, block_q) for n in graph.nodes]
        produced = set().union(*(step.outputs() for step in self.steps))
        consumed = set().union(*(step.inputs() for step in self.steps))
        #: virtual tensors passed between nodes (kept in a private copy of the variant pack)
        self.internal = frozenset(produced & consumed)

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        buffers: Any = dict(variant_pack) if self.internal else variant_pack
        for step in self.steps:
            step.execute(buffers, self.internal)


class NumpyReferenceEngine:
    """The reference engine: every SDPA feature (philox dropout draws the stream of
    :mod:`hipdnn_graph.philox`) and every family with a runner, on the CPU."""

    name = "NUMPY_REFERENCE_ENGINE"
    priority = 1000
    #: heuristic mode FALLBACK ranks it first: it runs every graph on every machine
    fallback = 1
    array_kind = "numpy"
    api_version = ENGINE_API_VERSION
    knobs = (BLOCK_Q_KNOB,)
    #: its plan is a list of steps resolved from the graph: one per override shape is cheap
    supports_override_shapes = True
    #: packed (ragged) SDPA runs sequence by sequence through :mod:`.sdpa_packed`
    supports_ragged = True

    @property
    def node_types(self) -> frozenset[hg.NodeType]:
        """The node families this engine runs: attention and every family with a runner in
        :data:`~hipdnn_graph_numpy_reference.families.REFERENCE_FAMILY_OF` (others are refused
        by name before ``check``)."""
        return SDPA_NODE_TYPES | frozenset(REFERENCE_FAMILY_OF)

    def check(self, graph: hg.Graph) -> Support:
        for node in graph.nodes:
            reason = refusal(node)
            if reason is not None:
                return Support.no(reason)
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(
        self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None
    ) -> NumpyReferencePlan:
        block_q = (knobs or {}).get(BLOCK_Q_KNOB.knob_id, BLOCK_Q_KNOB.default_value)
        return NumpyReferencePlan(graph, int(block_q))


class NumpyReferenceBackend:
    """The built-in ``numpy`` backend plugin."""

    name = "numpy"

    def __init__(self) -> None:
        self._engines = [NumpyReferenceEngine()]

    def engines(self) -> list[NumpyReferenceEngine]:
        return self._engines
