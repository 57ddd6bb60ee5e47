"""``CUDNN_FRONTEND_ENGINE``: SDPA forward and backward graphs on NVIDIA's cudnn-frontend.

hipDNN's graph was modelled on cuDNN's, so an SDPA node maps onto cuDNN's SDPA operation
feature for feature: masks and their alignment, bands, padding lengths, bias and dBias, ALiBi,
philox and explicit-mask dropout, GQA/MQA, ``D ≠ Dv``, the graph's own O and Stats. Each node
becomes one cuDNN graph (:mod:`.node_graph`), checked by cuDNN in ``check()`` and built (plans,
workspace) in ``build_plans()``; ``execute`` hands cuDNN the caller's buffers as its variant pack,
so nothing is copied in or out.

The package (``nvidia-cudnn-frontend``, the extra ``hipdnn-graph[cudnn]``) is imported only
when the engine checks a graph; without it, on ROCm builds of torch and without a CUDA device the
engine refuses every graph with the reason (:func:`.rules.environment_refusal`).
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import ENGINE_API_VERSION, SdpaProblem, Support, engine_id
from hipdnn_graph.errors import HipdnnError

from .._sdpa_support import common_refusal, flex_accepts
from ..engine_knobs import REPLAY_KNOB, apply_replay_knob
from ..replay import CudaGraphReplay
from . import lifetime
from .node_graph import PLAN_INDEX_KNOB, CudnnNodeGraph, build_node_graph
from .rules import ENGINE_NAME, PRIORITY, environment_refusal, flex_deferral, node_refusal

__all__ = ["CudnnFrontendEngine", "CudnnFrontendPlan"]

#: built cuDNN graphs kept per node signature (check() builds them, build_plan() reuses them)
_CACHE_SIZE = 64


def _environment() -> str | None:
    torch_found = importlib.util.find_spec("torch") is not None
    if not torch_found:
        return environment_refusal(torch_found=False, hip=False, cuda=False, cudnn_found=False)
    import torch

    return environment_refusal(
        torch_found=True,
        hip=bool(torch.version.hip),
        cuda=torch.cuda.is_available(),
        cudnn_found=importlib.util.find_spec("cudnn") is not None,
    )


def _signature(p: SdpaProblem, device: int) -> tuple[Any, ...]:
    """Everything the cuDNN graph of a node depends on."""
    tensors = tuple(
        (
            slot,
            t.get_uid(),
            tuple(t.get_dim()),
            tuple(t.get_stride() or ()),
            t.data_type,
            t.is_pass_by_value,
            t.value,
        )
        for slot, t in sorted(p.tensors.items())
    )
    scalars = (p.scale, p.dropout_probability, p.dropout_scale, p.window, p.alibi, p.padding)
    return (device, p.backward, p.name, tensors, scalars)


class CudnnFrontendPlan:
    """One cuDNN graph per node, run in the graph's order on the caller's buffers."""

    engine_name = ENGINE_NAME
    workspace_size = 0

    def __init__(
        self,
        steps: list[CudnnNodeGraph],
        virtual: list[hg.TensorAttributes],
        output_uids: frozenset[int],
    ) -> None:
        self.steps = steps
        self.workspace_bytes = max((s.workspace_size for s in steps), default=0)
        #: virtual tensors the nodes write (passed between nodes, or read by none), allocated
        #: per call
        self.virtual = virtual
        #: repeated calls on the same buffers replay a captured CUDA graph (pass-by-value
        #: numbers are part of the key, so a new value captures anew)
        self.replay = CudaGraphReplay(output_uids)
        self.released = False

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        self.execute_at(variant_pack, workspace, None)

    def execute_at(self, variant_pack: Mapping[int, Any], workspace: Any, addresses: Any) -> None:
        """:meth:`execute` of a pack whose buffers' ``addresses`` the frontend read already (the
        CUDA-graph replay is keyed by them; ``None``: read here)."""
        pack: dict[int, Any] = dict(variant_pack)
        # a captured graph keeps its own workspace (the caller may pass another one next time);
        # a replay needs no device check: its buffers are the ones captured, on their device
        if not self.replay.run(
            pack, lambda buffers: self._run(buffers, None, _device_of(buffers)), addresses
        ):
            self._run(pack, workspace, _device_of(pack))

    def release(self) -> None:
        """Drop the cuDNN graphs (at interpreter exit, :mod:`.lifetime`): an eager run then
        raises ``HipdnnError``; a captured CUDA graph replays on without them."""
        self.released = True
        for step in self.steps:
            step.release()

    def _run(self, pack: dict[int, Any], workspace: Any, device: Any) -> None:
        if self.released:
            raise HipdnnError(
                hg.ErrorCode.GRAPH_EXECUTION_FAILED,
                f"{ENGINE_NAME}: the plan's cuDNN graphs were released at interpreter exit",
            )
        import torch

        from .handles import handle_for_current_stream

        if self.virtual:
            from hipdnn_graph.backend.dtypes import torch_dtype

            for t in self.virtual:
                pack[t.get_uid()] = torch.empty_strided(
                    t.get_dim(), t.get_stride(), dtype=torch_dtype(t.data_type), device=device
                )
        handle = handle_for_current_stream(device)
        scratch = _workspace(workspace, self.workspace_bytes, device, torch)
        for step in self.steps:
            try:
                step.graph.execute(
                    step.buffers(pack), scratch, handle=handle, tensor_uids=step.uids
                )
            except Exception as exc:
                raise HipdnnError(
                    hg.ErrorCode.GRAPH_EXECUTION_FAILED, f"{ENGINE_NAME}: cuDNN failed: {exc}"
                ) from exc
            if step.fixup is not None:
                step.fixup(pack)


def _device_of(pack: Mapping[int, Any]) -> Any:
    """The CUDA device of the variant pack's tensors (every device buffer must be on it).

    Raises:
        HipdnnError: ``GRAPH_EXECUTION_FAILED`` for host buffers or several devices (the engine
            contract has no device: a plan chosen on a GPU machine meets CPU tensors only here,
            and callers such as the torch op then try the next engine).
    """
    device = None
    for buffer in pack.values():
        dev = getattr(buffer, "device", None)
        if dev is None or (dev.type == "cpu" and buffer.numel() == 1):
            continue  # pass-by-value numbers and one-element host scalars
        if dev.type != "cuda":
            raise HipdnnError(
                hg.ErrorCode.GRAPH_EXECUTION_FAILED,
                f"{ENGINE_NAME} runs on CUDA tensors; a buffer is on {dev}",
            )
        if device is None:
            device = dev
        elif dev != device:
            raise HipdnnError(
                hg.ErrorCode.GRAPH_EXECUTION_FAILED,
                f"{ENGINE_NAME} runs on one device; buffers are on {device} and {dev}",
            )
    if device is None:
        raise HipdnnError(
            hg.ErrorCode.GRAPH_EXECUTION_FAILED, f"{ENGINE_NAME}: no CUDA buffer was given"
        )
    return device


def _workspace(given: Any, needed: int, device: Any, torch: Any) -> Any:
    """The caller's workspace when it is a large enough CUDA tensor, else one from torch's
    caching allocator (the engine reports no workspace of its own: hipDNN callers need not
    allocate one)."""
    if needed == 0:
        return None
    if (
        isinstance(given, torch.Tensor)
        and given.is_cuda
        and given.numel() * given.element_size() >= needed
    ):
        return given
    return torch.empty(needed, dtype=torch.uint8, device=device)


class CudnnFrontendEngine:
    """The engine; cuDNN graphs are built in ``check()`` (cuDNN's own support check) and kept
    for ``build_plan()``."""

    name = ENGINE_NAME
    priority = PRIORITY
    array_kind = "torch"
    node_types = frozenset({hg.NodeType.SDPA_FWD, hg.NodeType.SDPA_BWD})
    api_version = ENGINE_API_VERSION
    knobs = (PLAN_INDEX_KNOB, REPLAY_KNOB)
    supports_override_shapes = False
    override_shapes_reason = (
        "its cuDNN graphs and execution plans are built for the declared shapes (cuDNN's own "
        "override shapes, cuDNN 9.18+, are not used by this engine)"
    )

    def __init__(self) -> None:
        self._built: OrderedDict[tuple[Any, ...], CudnnNodeGraph] = OrderedDict()
        self._lock = threading.Lock()
        lifetime.hold(self)

    def __repr__(self) -> str:
        return f"CudnnFrontendEngine({self.name})"

    def check(self, graph: hg.Graph) -> Support:
        reason = _environment()
        if reason is not None:
            return Support.no(reason)
        preferred = graph.get_preferred_engine_id_ext() == engine_id(self.name)
        problems = []
        for node in graph.nodes:
            p = SdpaProblem.from_node(node)
            reason = common_refusal(p) or node_refusal(p, preferred=preferred)
            if reason is None and p.has("dBias"):
                io = p.tensors["Q"].data_type
                accepts = flex_accepts(p, io)
                reason = flex_deferral(p, flex_accepts=accepts, preferred=preferred)
            if reason is not None:
                return Support.no(reason)
            problems.append(p)
        for p in problems:
            try:
                self._node_graph(p)
            except Exception as exc:  # cuDNN's refusal, with its message
                text = " ".join(str(exc).split())[:400]
                return Support.no(f"node '{p.name}': cuDNN cannot run it: {text}")
        return Support.yes()

    def release(self) -> None:
        """Forget the built cuDNN graphs (at interpreter exit, :mod:`.lifetime`)."""
        with self._lock:
            self._built.clear()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(
        self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None
    ) -> CudnnFrontendPlan:
        """The plan: each node's cuDNN graph, built with the plan index the knob names."""
        index = int((knobs or {}).get(PLAN_INDEX_KNOB.knob_id, 0))
        problems = [SdpaProblem.from_node(node) for node in graph.nodes]
        steps = [self._node_graph(p, index) for p in problems]
        produced = {id(t) for node in graph.nodes for t in node.outputs()}
        # every virtual tensor a node writes gets a buffer per call: those passed between nodes
        # and those no node reads (a virtual Stats cuDNN still writes)
        virtual = [t for t in graph.graph_tensors() if t.is_virtual and id(t) in produced]
        outputs = frozenset(
            t.get_uid() for t in graph.graph_tensors() if id(t) in produced and not t.is_virtual
        )
        plan = CudnnFrontendPlan(steps, virtual, outputs)
        apply_replay_knob(plan.replay, knobs)
        lifetime.hold(plan)
        return plan

    def _node_graph(self, p: SdpaProblem, plan_index: int = 0) -> CudnnNodeGraph:
        import torch

        from .handles import handle_for_device

        device = torch.cuda.current_device()
        key = (*_signature(p, device), plan_index)
        with self._lock:
            built = self._built.get(key)
            if built is not None:
                self._built.move_to_end(key)
                return built
        built = build_node_graph(p, handle_for_device(device), plan_index)
        with self._lock:
            self._built[key] = built
            while len(self._built) > _CACHE_SIZE:
                self._built.popitem(last=False)
        return built
