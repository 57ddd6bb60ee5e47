"""The eager engine of the node families (``TORCH_EAGER_ENGINE``: node by node, eager torch
ops, wherever the buffers are) and what the fusion engine shares with it (see
:mod:`.family_engines` for the whole picture).

Example:
    >>> from hipdnn_graph_torch_rocm.family_eager import TorchEagerEngine
    >>> TorchEagerEngine().name
    'TORCH_EAGER_ENGINE'
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any, cast

import hipdnn_graph as hg
from hipdnn_graph.backend import ENGINE_API_VERSION, Support, in_layout

from .engine_knobs import REPLAY_KNOB, apply_replay_knob
from .families import TORCH_FAMILY_OF, refusal
from .family_program import FamilyProgram
from .replay import CudaGraphReplay, ReplayedPlan

__all__ = [
    "EAGER_ENGINE",
    "FAMILY_NODE_TYPES",
    "FUSION_ENGINE",
    "FamilyEagerPlan",
    "TorchEagerEngine",
]

EAGER_ENGINE = "TORCH_EAGER_ENGINE"
FUSION_ENGINE = "TORCH_FUSION_ENGINE"
#: the families these engines take (SDPA stays on the SDPA engines): those with a lowering, and
#: the custom op, which ``check`` refuses with the reason (hipDNN defines no math for it)
FAMILY_NODE_TYPES = frozenset(TORCH_FAMILY_OF)


def _torch_refusal() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    return None


def _node_refusal(graph: hg.Graph) -> str | None:
    for node in graph.nodes:
        reason = refusal(node)
        if reason is not None:
            return reason
    return None


def _write(program: FamilyProgram, buffers: Mapping[int, Any], results: list[Any]) -> None:
    """Copy each result into the caller's buffer; hand over (as ``Graph.run`` asks, without a
    copy where the layout is already the declared one) those the caller did not pass."""
    handed = cast("dict[int, Any]", buffers)  # a fresh dict from the frontend
    for uid, value in zip(program.outputs, results, strict=True):
        out = buffers.get(uid)
        if out is value:  # written in place (a writer)
            continue
        if out is not None:
            out.copy_(value.reshape(out.shape))
        else:
            dims, strides, _ = program.specs[uid]
            handed[uid] = in_layout(value.reshape(dims), strides)


def _replay(program: FamilyProgram) -> CudaGraphReplay:
    """The CUDA-graph replay of a plan of ``program``: refused where a lowering checks its data
    on the host (a capture would fail at that check, and replaying would skip it)."""
    replay = CudaGraphReplay(frozenset(program.outputs))
    if program.host_checked:
        replay.refuse("a lowering checks its data on the host (MoE routes, quantize's X)")
    return replay


def _feeds(program: FamilyProgram, buffers: Mapping[int, Any]) -> dict[int, Any]:
    return {uid: buffers[uid] for uid in program.feeds}


class FamilyEagerPlan(ReplayedPlan):
    """Node by node: every lowering on the caller's tensors, then the outputs copied into the
    caller's buffers (outputs the caller leaves to ``Graph.run`` are handed over uncopied; a
    node with a writer writes the caller's buffers directly)."""

    workspace_size = 0
    allocates_outputs = True

    def __init__(self, program: FamilyProgram) -> None:
        self.engine_name = EAGER_ENGINE
        self.program = program
        #: repeated calls on the same CUDA buffers replay a captured graph (:mod:`.replay`)
        self.replay = _replay(program)

    def run_now(self, buffers: Mapping[int, Any]) -> None:
        """Every node now, node by node (no replay)."""
        _node_by_node(self.program, buffers)


def _node_by_node(program: FamilyProgram, buffers: Mapping[int, Any]) -> None:
    """Every lowering on the caller's tensors, the outputs written to the caller's buffers."""
    _write(program, buffers, program.results(_feeds(program, buffers), buffers))


class TorchEagerEngine:
    """Runs any graph of the supported families node by node with eager torch ops."""

    array_kind = "torch"
    node_types = FAMILY_NODE_TYPES
    api_version = ENGINE_API_VERSION
    knobs = (REPLAY_KNOB,)
    #: its plan is a list of eager steps: one per override shape is cheap
    supports_override_shapes = True

    def __init__(self, name: str = EAGER_ENGINE, priority: int = 700) -> None:
        self.name = name
        self.priority = priority

    def __repr__(self) -> str:
        return f"TorchEagerEngine({self.name})"

    def check(self, graph: hg.Graph) -> Support:
        reason = _torch_refusal() or _node_refusal(graph)
        return Support.yes() if reason is None else Support.no(reason)

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(
        self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None
    ) -> FamilyEagerPlan:
        plan = FamilyEagerPlan(FamilyProgram(graph))
        apply_replay_knob(plan.replay, knobs)
        return plan
