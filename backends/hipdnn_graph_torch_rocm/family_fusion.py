"""The fusion engine of the node families (``TORCH_FUSION_ENGINE``): a connected graph as one
``torch.compile`` d function, raced against the eager one on a GPU (see
:mod:`.family_engines` for the whole picture).

Example:
    >>> from hipdnn_graph_torch_rocm.family_fusion import TorchFusionEngine
    >>> TorchFusionEngine().name
    'TORCH_FUSION_ENGINE'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import ENGINE_API_VERSION, Support, compiling, engine_id

from .engine_knobs import REPLAY_KNOB, apply_replay_knob
from .family_eager import (
    EAGER_ENGINE,
    FAMILY_NODE_TYPES,
    FUSION_ENGINE,
    FamilyEagerPlan,
    _node_by_node,
    _node_refusal,
    _replay,
    _torch_refusal,
)
from .family_program import FamilyProgram
from .fusion_compile import (
    COMPILE_MODE_KNOB,
    CountingBackend,
    FusionConfig,
    compiler_refusal,
    cpu_compile_deferral,
    example_buffers,
    inductor_cache_counts,
    inductor_cache_outcome,
    measure,
)
from .replay import ReplayedPlan

__all__ = ["PLAN_FORMAT", "FamilyFusionPlan", "TorchFusionEngine"]

#: graph signature -> "fused" or "eager": the measured verdict (see :mod:`.family_engines`)
_VERDICTS: dict[tuple[Any, ...], str] = {}
#: the format of the bytes ``TorchFusionEngine.serialize_plan`` writes
PLAN_FORMAT = 1
_VERDICTS_LOCK = threading.Lock()


def _device() -> str:
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"


class FamilyFusionPlan(ReplayedPlan):
    """The graph as one compiled function (or, where the eager one measured faster, that)."""

    workspace_size = 0

    def __init__(
        self,
        program: FamilyProgram,
        device: str,
        compiled: Callable[..., Any] | None,
        backend: CountingBackend,
        choice: str,
        timings: dict[str, float],
        tail: _Tail | None = None,
    ) -> None:
        self.engine_name = FUSION_ENGINE
        self.program = program
        #: the eager tail of writers after the compiled function (None: it runs every step)
        self.tail = tail
        self.device = device
        self.compiled = compiled
        self.backend = backend
        #: "fused" (the compiled function runs) or "eager" (measured faster: node by node)
        self.choice = choice
        #: median seconds per call measured in build_plan ({} when not measured)
        self.timings = timings
        #: seconds the build's compile and warm-up took (0.0: nothing compiled)
        self.compile_seconds = 0.0
        #: Inductor's FX-graph cache in the build: "hit" (loaded from disk, compiled by an
        #: earlier process), "miss" (compiled and stored), None (no Inductor compile)
        self.inductor_cache: str | None = None
        #: repeated calls on the same CUDA buffers replay a captured graph (:mod:`.replay`)
        self.replay = _replay(program)
        self._layouts = [
            program.specs[uid][:2] for uid in (*program.feeds, *program.outputs)
            if uid not in program.scalars
        ]  # fmt: skip

    @property
    def cut(self) -> int | None:
        """Where the eager tail begins (:meth:`FamilyProgram.writer_tail`), or None."""
        return None if self.tail is None else self.tail.cut

    @property
    def compiles(self) -> int:
        """How many times ``torch.compile`` compiled for this plan (all in ``build_plan``)."""
        return self.backend.compiles

    def run_now(self, buffers: Mapping[int, Any]) -> None:
        """The chosen function now (no replay)."""
        if self.choice != "fused" or self.compiled is None:
            _node_by_node(self.program, buffers)
            return
        args = self.arguments(buffers)
        if args is None:  # buffers on another device than compiled for: no compile here
            _node_by_node(self.program, buffers)
            return
        try:
            returned = self.compiled(*args)
        except Exception:
            if not self.backend.refused:
                raise
            # a guard failed (aliased input buffers, ...) and the compile was refused before
            # anything ran: this call runs node by node
            self.backend.refused = False
            _node_by_node(self.program, buffers)
            return
        if self.tail is not None:
            self.tail.run(args, returned)
            return
        if returned is not None:  # a graph whose lowerings check their data (see _whole)
            results, ok = returned
            if not bool(ok):  # node by node: the lowering that refuses the data raises
                _node_by_node(self.program, buffers)
                return
            for out, value in zip(args[len(self.program.feeds) :], results, strict=True):
                out.copy_(value.reshape(out.shape))

    def arguments(self, buffers: Mapping[int, Any]) -> list[Any] | None:
        """The compiled function's arguments (feeds, then outputs) from a variant pack, laid
        out exactly as compiled; None when a buffer is on another device."""
        import torch

        program = self.program
        args: list[Any] = []
        layouts = iter(self._layouts)
        for uid in (*program.feeds, *program.outputs):
            value = buffers[uid]
            if uid in program.scalars:
                args.append(torch.tensor(float(value), dtype=torch.float64, device=self.device))
                continue
            dims, strides = next(layouts)
            if str(value.device) != self.device:
                return None
            if value.requires_grad:
                value = value.detach()
            if value.stride() != strides:  # differs only on dims of size 1 (checked by the binder)
                value = value.as_strided(dims, strides, value.storage_offset())
            args.append(value)
        return args


#: families whose torch kernel is a library call (cuBLAS, cuDNN, grouped GEMMs): compiled alone
#: it is the same call, then a copy into the caller's buffer, as node by node
_LIBRARY_KERNELS = frozenset(
    {
        hg.NodeType.MATMUL,
        hg.NodeType.CONVOLUTION_FPROP,
        hg.NodeType.CONVOLUTION_DGRAD,
        hg.NodeType.CONVOLUTION_WGRAD,
        hg.NodeType.MOE_GROUPED_MATMUL,
        hg.NodeType.MOE_GROUPED_MATMUL_BWD,
    }
)


def _single_node_refusal(node: Any, config: FusionConfig, device: str) -> str | None:
    """Why the fusion engine leaves a graph of one node to the eager engine, or None.

    One node has nothing to fuse with, but node by node its result is copied into the caller's
    buffer afterwards (torch's norms, pointwise ops, reductions and pooling have no ``out=``
    kernel), where a compiled kernel stores it there itself: one pass over the output instead
    of two. So a single node is taken where ``build_plan`` races the compiled function against
    the eager one (autotune: on by default on a GPU) and its family's kernel is not a library
    call, which compiled alone is the same call followed by the same copy.
    """
    kind = node.get_node_type()
    if kind in _LIBRARY_KERNELS:
        return (
            f"a single {kind.name} node has nothing to fuse; {EAGER_ENGINE} runs it (the torch "
            "op called directly: a library kernel, compiled alone the same call)"
        )
    if not config.races(device):
        return (
            f"a single node has nothing to fuse; {EAGER_ENGINE} runs it (the torch op called "
            "directly; a GPU build races the two, as does autotune=True)"
        )
    return None


def _fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of ``fn`` with its own code object: dynamo caches compiled code per code object,
    so every plan gets its own cache (and its own recompile limit)."""
    return types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )


def _whole(program: FamilyProgram, tail: _Tail | None = None) -> Callable[..., Any]:
    """The graph as one function of (feeds, outputs) that writes the outputs; where a lowering
    checks its data (its CHECK result), it returns the results and the verdict instead, and
    the plan writes the outputs only when the data is valid (one host synchronisation).

    With a ``tail`` the function runs the steps before it only, writes their outputs and
    returns what the tail reads (:class:`_Tail`)."""
    count = len(program.feeds)
    feeds = program.feeds
    if tail is not None:
        cut, carried = tail.cut, tail.carried
        made = program.made_before(cut)
        head_outputs = [(count + i, uid) for i, uid in enumerate(program.outputs) if uid in made]

        def fused_head(*args: Any) -> tuple[Any, ...]:
            local: dict[int, Any] = {}
            program.run_steps(0, cut, dict(zip(feeds, args[:count], strict=True)), local)
            for index, uid in head_outputs:
                args[index].copy_(local[uid].reshape(args[index].shape))
            return tuple(local[uid] for uid in carried)

        return _fresh(fused_head)

    def fused_graph(*args: Any) -> Any:
        results, ok = program.checked_results(dict(zip(feeds, args[:count], strict=True)))
        if ok is not None:
            return results, ok
        for out, value in zip(args[count:], results, strict=True):
            out.copy_(value.reshape(out.shape))
        return None

    return _fresh(fused_graph)


class _Tail:
    """The eager tail ``steps[cut:]`` of a fusion plan (:meth:`FamilyProgram.writer_tail`):
    the compiled head runs the steps before it and returns what the tail reads
    (:attr:`carried`); each writer of the tail then writes the caller's buffers directly."""

    __slots__ = ("carried", "cut", "program")

    def __init__(self, program: FamilyProgram, cut: int) -> None:
        self.program, self.cut = program, cut
        #: the uids of the head's results the tail reads, in the order the head returns them
        self.carried = program.carried(cut)

    def run(self, args: list[Any], carried: tuple[Any, ...]) -> None:
        """The tail on the plan's arguments (feeds, then outputs), given the head's results."""
        program = self.program
        count = len(program.feeds)
        feeds = dict(zip(program.feeds, args[:count], strict=True))
        into = dict(zip(program.outputs, args[count:], strict=True))
        local = dict(zip(self.carried, carried, strict=True))
        program.run_steps(self.cut, len(program.steps), feeds, local, into)
        for step in program.steps[self.cut :]:  # a tail output not written in place is copied
            for _, uid, _ in step.outputs:
                out, value = into.get(uid), local[uid]
                if out is not None and value is not out:
                    out.copy_(value.reshape(out.shape))


class TorchFusionEngine:
    """Runs a connected graph of two or more supported nodes as one compiled function.

    Args:
        name: the engine's name.
        priority: its rank among the engines that accept a graph (lower first).
        backend: the ``torch.compile`` backend (a name or a callable); ``None``: the
            environment, else ``"inductor"`` (see :mod:`.fusion_compile`).
        mode: the Inductor mode; ``None``: the environment, else none.
        options: Inductor config patches.
        autotune: measure the compiled function against the eager one in ``build_plan``;
            ``None``: the environment, else on for GPUs and off on the CPU.
    """

    array_kind = "torch"
    node_types = FAMILY_NODE_TYPES
    api_version = ENGINE_API_VERSION
    knobs = (REPLAY_KNOB, COMPILE_MODE_KNOB)
    supports_override_shapes = False
    override_shapes_reason = (
        "it compiles the graph's function (torch.compile) for its exact shapes in build_plans; "
        "every new override shape would compile again"
    )

    def __init__(
        self,
        name: str = FUSION_ENGINE,
        priority: int = 600,
        *,
        backend: str | Callable[..., Any] | None = None,
        mode: str | None = None,
        options: Mapping[str, Any] | None = None,
        autotune: bool | None = None,
    ) -> None:
        self.name = name
        self.priority = priority
        self._backend, self._mode, self._options = backend, mode, options
        self._autotune = autotune

    def __repr__(self) -> str:
        return f"TorchFusionEngine({self.name})"

    def config(self) -> FusionConfig:
        """The configuration plans are built with now."""
        return FusionConfig.resolve(
            backend=self._backend, mode=self._mode, options=self._options, autotune=self._autotune
        )

    def check(self, graph: hg.Graph) -> Support:
        reason = _torch_refusal()
        if reason is not None:
            return Support.no(reason)
        config, device = self.config(), _device()
        if len(graph.nodes) < 2:
            reason = _single_node_refusal(graph.nodes[0], config, device)
        preferred = graph.get_preferred_engine_id_ext() == engine_id(self.name)
        reason = (
            reason
            or _node_refusal(graph)
            or compiler_refusal(config, device)
            or cpu_compile_deferral(config, device, preferred=preferred)
        )
        return Support.yes() if reason is None else Support.no(reason)

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(
        self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None, *, race: bool = True
    ) -> FamilyFusionPlan:
        """Compile the graph's function for its exact shapes, types and device, warm it up,
        and (autotune, unless ``race`` is off) measure it against the eager function.
        ``knobs``: the compile mode (:data:`~.fusion_compile.COMPILE_MODE_KNOB`) and the replay
        knob.

        Raises:
            HipdnnError: ``GRAPH_EXECUTION_PLAN_CREATION_FAILED`` when compiling fails.
        """
        plan = self._build_plan(graph, knobs or {}, race)
        apply_replay_knob(plan.replay, knobs)
        return plan

    def _build_plan(
        self, graph: hg.Graph, knobs: Mapping[str, Any], race: bool
    ) -> FamilyFusionPlan:
        import torch

        config = self.config()
        mode = knobs.get(COMPILE_MODE_KNOB.knob_id)
        if mode:
            config = dataclasses.replace(config, mode=str(mode))
        device = _device()
        program = FamilyProgram(graph)
        backend = CountingBackend(config)
        autotune = race and config.races(device)
        digest = _signature(graph)
        signature = (digest, device, config.key())
        with _VERDICTS_LOCK:
            verdict = _VERDICTS.get(signature) if autotune and digest else None
        if verdict == "eager":
            return FamilyFusionPlan(program, device, None, backend, "eager", {})
        cut = program.writer_tail()
        tail = None if cut is None else _Tail(program, cut)
        compiled = torch.compile(
            _whole(program, tail), backend=backend, fullgraph=True, dynamic=False
        )
        args = _examples(program, device)

        def fused() -> None:
            returned = compiled(*args)
            if tail is not None:
                tail.run(args, returned)

        backend.building = True
        before = inductor_cache_counts()
        try:
            with compiling(self.name, graph.get_name(), config.describe(device)) as note:
                fused()  # compiles
                fused()  # runs what was compiled (a failing guard compiles again here)
                cache = inductor_cache_outcome(before)
                note.outcome = f"Inductor cache {cache}" if cache else ""
        except Exception as exc:
            raise hg.HipdnnError(
                hg.ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED,
                f"{self.name}: torch.compile failed for graph '{graph.get_name()}': "
                f"{type(exc).__name__}: {exc}",
            ) from exc
        finally:
            backend.building = False
        timings: dict[str, float] = {}
        choice = "fused"
        if autotune and verdict is None:
            feeds, outs = args[: len(program.feeds)], args[len(program.feeds) :]
            by_uid = dict(zip((*program.feeds, *program.outputs), (*feeds, *outs), strict=True))
            eager = FamilyEagerPlan(program)
            try:
                timings = measure(
                    {"fused": fused, "eager": lambda: eager.run_now(by_uid)},
                    device,
                    replay=eager.replay.capacity > 0,
                )
            except hg.HipdnnError:  # the example data fails a lowering's data check (MoE
                timings = {}  # routes of zeros): the eager function cannot be timed on it
            choice = "fused" if not timings or timings["fused"] <= timings["eager"] else "eager"
            if digest is not None:
                with _VERDICTS_LOCK:
                    _VERDICTS[signature] = choice
        plan = FamilyFusionPlan(program, device, compiled, backend, choice, timings, tail)
        plan.compile_seconds, plan.inductor_cache = note.seconds, cache
        return plan

    # ----- compiled plans (hipdnn_graph.graph.compiled_plans) ------------------------------------

    def serialize_plan(self, plan: FamilyFusionPlan) -> bytes:
        """The plan's measured choice (``fused`` or ``eager``), kept so that a loaded plan skips
        the build-time race (:data:`PLAN_FORMAT`: one JSON object)."""
        return json.dumps({"format": PLAN_FORMAT, "choice": plan.choice}).encode()

    def deserialize_plan(
        self, graph: hg.Graph, payload: bytes, knobs: Mapping[str, Any]
    ) -> FamilyFusionPlan:
        """The plan of :meth:`build_plan` with the saved choice and no race: ``eager`` compiles
        nothing; ``fused`` compiles (Inductor's on-disk cache serves a graph compiled before).

        Raises:
            HipdnnError: ``GRAPH_EXECUTION_PLAN_CREATION_FAILED`` for a payload this engine
                did not write.
        """
        try:
            saved = json.loads(payload)
            choice = saved["choice"] if saved.get("format") == PLAN_FORMAT else None
        except (ValueError, AttributeError, KeyError, TypeError):
            choice = None
        if choice not in ("fused", "eager"):
            raise hg.HipdnnError(
                hg.ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED,
                f"{self.name}: the saved plan is not format {PLAN_FORMAT} with a choice of "
                f"'fused' or 'eager': {bytes(payload[:80])!r}",
            )
        if choice == "fused":
            return self.build_plan(graph, knobs, race=False)
        plan = FamilyFusionPlan(
            FamilyProgram(graph), _device(), None, CountingBackend(self.config()), "eager", {}
        )
        apply_replay_knob(plan.replay, knobs)
        return plan


def _examples(program: FamilyProgram, device: str) -> list[Any]:
    """Arguments to compile with: random feeds, empty outputs, scalars as 0-d float64."""
    import torch

    tensors = [u for u in (*program.feeds, *program.outputs) if u not in program.scalars]
    made = dict(zip(tensors, example_buffers(program.specs, tuple(tensors), device), strict=True))
    return [
        torch.tensor(1e-5, dtype=torch.float64, device=device) if u in program.scalars else made[u]
        for u in (*program.feeds, *program.outputs)
    ]


def _signature(graph: hg.Graph) -> str | None:
    """A digest of the graph as hipDNN serializes it (nodes, tensors, types, shapes); None
    when it cannot be serialized (its verdict is then not cached)."""
    try:
        return hashlib.sha256(graph.serialize()).hexdigest()
    except hg.HipdnnError:
        return None
