"""The steps after ``validate()``: lowering, engine selection, plans and execution.

``Graph`` methods of the same names delegate here, so that ``graph.py`` stays about declaring
graphs. The flow mirrors hipDNN::

    validate → build_operation_graph → create_execution_plans → check_support → build_plans
             → get_workspace_size → execute

Running a built plan (``execute``, ``run``) is :mod:`hipdnn_graph.graph.execution`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from ..backend.allocation import check_allocation
from ..backend.buffers import device_visible
from ..backend.contract import Engine, engine_id
from ..backend.heuristics import rank_by_modes
from ..backend.knobs import KnobValue, knob_defaults
from ..errors import HipdnnError, NotSupportedError
from ..tensor import TensorAttributes, assign_uid
from ..types import BuildPlanPolicy, ErrorCode, HeuristicMode
from .engine_plans import binder_for, build_one_plan, deselected, rank_engines
from .execution import NO_PLAN_MESSAGE, BuiltPlan, execute, out_of_bounds, run, run_plan
from .overrides import check_pack, normalize_overrides, plan_at_shapes

if TYPE_CHECKING:
    from . import Graph

__all__ = [
    "GraphLifecycle",
    "PlanState",
    "active_plan",
    "assign_uids",
    "binder_for",
    "build_one_plan",
    "rank_engines",
]

_E = TypeVar("_E", bound=IntEnum)

#: engine choices and refusals, at DEBUG (``logging.getLogger("hipdnn_graph").setLevel(DEBUG)``
#: with a handler shows them; nothing is formatted while DEBUG is off); a preferred engine that
#: is not used, at INFO
_LOG = logging.getLogger("hipdnn_graph.engines")


def _enum_argument(kind: type[_E], value: Any, what: str) -> _E:
    """``value`` as a member of ``kind`` (a member or its integer value, never a bool).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the accepted members.
    """
    if isinstance(value, kind):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return kind(value)
        except ValueError:
            pass
    members = ", ".join(f"{m.name} ({m.value})" for m in kind)
    raise HipdnnError(ErrorCode.INVALID_VALUE, f"{what} must be one of {members}; got {value!r}")


def _heuristic_modes(modes: Any) -> list[HeuristicMode]:
    """The modes as a checked list; none given (``None`` or ``[]``) means mode A (see
    :mod:`hipdnn_graph.backend.heuristics`)."""
    if modes is None:
        return [HeuristicMode.A]
    if isinstance(modes, str | bytes) or not isinstance(modes, Iterable):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Heuristic modes must be a list of HeuristicMode values; got {modes!r}",
        )
    checked = [_enum_argument(HeuristicMode, m, "A heuristic mode") for m in modes]
    return checked or [HeuristicMode.A]


@dataclass
class PlanState:
    """Per-graph state of the lifecycle after validation."""

    lowered: bool = False
    descriptor: Any = None
    modes: list[HeuristicMode] = field(default_factory=list)
    candidates: list[Engine] | None = None
    refusals: list[tuple[str, str]] = field(default_factory=list)
    plans: list[BuiltPlan] = field(default_factory=list)
    active: BuiltPlan | None = None
    #: engine name → knob values chosen by ``create_execution_plan_ext`` (others: defaults)
    knob_values: dict[str, dict[str, KnobValue]] = field(default_factory=dict)
    #: plan specs collected by ``add_engine*`` (see :mod:`hipdnn_graph.graph.engine_configs`)
    plan_specs: list[Any] = field(default_factory=list)


def assign_uids(graph: Graph) -> None:
    """Give every tensor without a uid the next unused integer, in declaration order (from 1).

    The graph stays validated: an unused uid cannot break a rule (see :func:`assign_uid`).
    """
    tensors = graph.wire_tensors()
    used = {t.uid for t in tensors if t.uid is not None}
    next_uid = 1
    for tensor in tensors:
        if tensor.uid is None:
            while next_uid in used:
                next_uid += 1
            assign_uid(tensor, next_uid)
            used.add(next_uid)


def build_operation_graph(graph: Graph, state: PlanState) -> None:
    """Validate if needed, assign missing uids, lower to a finalized OPERATIONGRAPH descriptor.

    Raises:
        HipdnnError: the validation error, or ``INVALID_VALUE`` for a graph without nodes (it
            validates, as in hipDNN, but there is nothing to build).
    """
    if not graph.is_validated:
        graph.validate()
    if not graph.nodes:
        name = graph.get_name() or "<unnamed>"
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Graph '{name}' has no nodes: there is nothing to build"
        )
    assign_uids(graph)
    from ..lowering import lower_graph

    state.descriptor = lower_graph(graph.to_parts())
    state.lowered = True


def _ensure_lowered(graph: Graph, state: PlanState) -> None:
    if not state.lowered:
        build_operation_graph(graph, state)


def create_execution_plans(
    graph: Graph, state: PlanState, modes: Iterable[HeuristicMode | int] | None
) -> None:
    """Rank every registered engine that accepts the graph (preferred engine first).

    Raises:
        HipdnnError: ``INVALID_VALUE`` after ``add_engine*`` (the two paths exclude each other).
    """
    checked = _heuristic_modes(modes)
    if state.plan_specs:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            "Cannot call create_execution_plans() after add_engine_*(). "
            "The plan-spec path and compiled-plan path are mutually exclusive.",
        )
    _ensure_lowered(graph, state)
    state.modes = checked
    ranked, state.refusals = rank_engines(graph)
    ranked = deselected(graph, ranked, state.refusals)
    on_device = HeuristicMode.FALLBACK in checked and device_visible()
    ranked = rank_by_modes(ranked, checked, graph, on_device)
    preferred = graph.get_preferred_engine_id_ext()
    if preferred is not None:
        ranked.sort(key=lambda e: engine_id(e.name) != preferred)
        if not ranked or engine_id(ranked[0].name) != preferred:
            _preferred_passed_over(graph, state, preferred, ranked)
    state.candidates = ranked
    state.knob_values = {}
    state.plans = []
    state.active = None
    if _LOG.isEnabledFor(logging.DEBUG):
        name = graph.get_name() or "<unnamed>"
        for engine_name, reason in state.refusals:
            _LOG.debug("graph '%s': engine %s refuses: %s", name, engine_name, reason)
        best_first = ", ".join(e.name for e in ranked) or "none"
        _LOG.debug("graph '%s': engines that apply, best first: %s", name, best_first)


def _preferred_passed_over(
    graph: Graph, state: PlanState, preferred: int, ranked: list[Engine]
) -> None:
    """Say at INFO why the preferred engine will not run ``graph``."""
    if not _LOG.isEnabledFor(logging.INFO):
        return
    refused = {engine_id(name): (name, reason) for name, reason in state.refusals}
    if preferred in refused:
        name, reason = refused[preferred]
        why = f"the preferred engine {name} refuses it: {reason}"
    else:
        why = f"no registered engine has the preferred engine id {preferred:#018x}"
    instead = f"the best ranked, {ranked[0].name}" if ranked else "none"
    _LOG.info("graph '%s': %s; the engine to run it is %s", graph.get_name() or "<unnamed>",
              why, instead)  # fmt: skip


def check_support(graph: Graph, state: PlanState) -> None:
    """Raise :class:`NotSupportedError` listing every engine's reason when none applies."""
    if state.candidates is None:
        create_execution_plans(graph, state, None)
    if state.candidates:
        return
    name = graph.get_name() or "<unnamed>"
    if not state.refusals:
        raise NotSupportedError(f"No engine supports graph '{name}': no backend is registered")
    lines = "\n".join(f"  {engine}: {reason}" for engine, reason in state.refusals)
    raise NotSupportedError(f"No engine supports graph '{name}':\n{lines}")


def build_plans(graph: Graph, state: PlanState, policy: BuildPlanPolicy | int) -> None:
    """Build the first buildable plan (HEURISTICS_CHOICE) or every candidate's plan (ALL),
    once the graph is within the allocation bound (:mod:`hipdnn_graph.backend.allocation`)."""
    policy = _enum_argument(BuildPlanPolicy, policy, "The build plan policy")
    check_support(graph, state)
    check_allocation(graph, f"Running graph '{graph.get_name() or '<unnamed>'}'")
    assert state.candidates is not None
    failures: list[str] = []
    state.plans = []
    for engine in state.candidates:
        try:
            knobs = knob_defaults(engine) | state.knob_values.get(engine.name, {})
            built = build_one_plan(graph, engine, knobs)
        except Exception as exc:
            failures.append(f"  {engine.name}: {type(exc).__name__}: {exc}")
            if _LOG.isEnabledFor(logging.DEBUG):
                _LOG.debug("graph '%s': engine %s failed to build a plan: %s: %s",
                           graph.get_name() or "<unnamed>", engine.name, type(exc).__name__,
                           exc)  # fmt: skip
            continue
        state.plans.append(built)
        if policy == BuildPlanPolicy.HEURISTICS_CHOICE:
            break
    if not state.plans:
        raise HipdnnError(
            ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED,
            "No execution plan could be built:\n" + "\n".join(failures),
        )
    state.active = state.plans[0]
    preferred = graph.get_preferred_engine_id_ext()
    first, used = state.candidates[0], state.active.engine
    if preferred is not None and engine_id(first.name) == preferred and used is not first:
        _LOG.info("graph '%s': the preferred engine failed to build a plan (%s); it runs on %s",
                  graph.get_name() or "<unnamed>", failures[0].strip(),
                  state.active.engine.name)  # fmt: skip
    if _LOG.isEnabledFor(logging.DEBUG):
        _LOG.debug("graph '%s' runs on engine %s", graph.get_name() or "<unnamed>",
                   state.active.engine.name)  # fmt: skip


def active_plan(state: PlanState) -> BuiltPlan:
    if state.active is None:
        raise HipdnnError(ErrorCode.INVALID_VALUE, NO_PLAN_MESSAGE)
    return state.active


class GraphLifecycle:
    """The ``Graph`` methods after ``validate()``: lowering, engine selection, plans, execution.

    A mixin of :class:`~hipdnn_graph.Graph`; each method delegates to this module's functions.
    """

    _state: PlanState

    def _graph(self) -> Graph:
        return cast("Graph", self)

    def build_operation_graph(self, handle: Any = None) -> Self:
        """Validate if needed, assign missing uids, and lower to backend descriptors.

        Uids go to tensors without one in declaration order, skipping uids already taken;
        ``validate()`` never assigns them. ``handle`` is accepted for hipDNN parity and unused.
        """
        build_operation_graph(self._graph(), self._state)
        return self

    def get_operation_graph_descriptor(self) -> Any:
        """The finalized OPERATIONGRAPH :class:`~hipdnn_graph.descriptors.BackendDescriptor`."""
        if not self._state.lowered:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "The operation graph has not been built. Call build_operation_graph() first.",
            )
        return self._state.descriptor

    def create_execution_plans(self, modes: list[HeuristicMode] | list[int] | None = None) -> Self:
        """Rank the engines that accept this graph (the preferred engine first when it does).

        Runs ``build_operation_graph()`` first if it has not run. The modes rank in the order
        given (A: the engines' declared priority, the default; B: the measured table;
        FALLBACK: the engines that always run first), as
        :mod:`hipdnn_graph.backend.heuristics` documents; engines the graph's ``deselect_*``
        filters bar are refused with the filter as the reason.
        """
        create_execution_plans(self._graph(), self._state, modes)
        return self

    def check_support(self, handle: Any = None) -> Self:
        """Raise :class:`NotSupportedError` when no engine applies, listing every engine's reason.

        Raises:
            NotSupportedError: ``GRAPH_NOT_SUPPORTED``.
        """
        check_support(self._graph(), self._state)
        return self

    def build_plans(
        self, policy: BuildPlanPolicy | int = BuildPlanPolicy.HEURISTICS_CHOICE, handle: Any = None
    ) -> Self:
        """Prepare the best applicable engine (or all of them with ``BuildPlanPolicy.ALL``).

        A graph whose tensors (and the padded inputs its convolutions and pooling imply) add up
        to more than the allocation limit is refused first, before any engine allocates
        (64 GiB unless ``HIPDNN_GRAPH_MAX_ALLOCATION`` says otherwise; see
        :mod:`hipdnn_graph.backend.allocation`).

        Raises:
            NotSupportedError: when no engine applies.
            HipdnnError: ``INVALID_VALUE`` above the allocation limit.
            HipdnnError: ``GRAPH_EXECUTION_PLAN_CREATION_FAILED`` when no plan could be built.
        """
        build_plans(self._graph(), self._state, policy)
        return self

    def build(
        self,
        modes: list[HeuristicMode] | list[int] | None = None,
        policy: BuildPlanPolicy | int = BuildPlanPolicy.HEURISTICS_CHOICE,
        handle: Any = None,
    ) -> Self:
        """``validate`` (if needed) → ``build_operation_graph`` → ``create_execution_plans`` →
        ``check_support`` → ``build_plans``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for unknown modes or policy (before any step runs),
                and whatever the steps raise.
        """
        _heuristic_modes(modes)
        _enum_argument(BuildPlanPolicy, policy, "The build plan policy")
        self.build_operation_graph()  # validates first when needed
        self.create_execution_plans(modes)
        return self.build_plans(policy)  # checks support first

    def get_workspace_size(self) -> int:
        """Bytes of workspace the active plan needs."""
        return active_plan(self._state).workspace_size

    def get_plan_name(self) -> str:
        """The engine name of the active plan."""
        return active_plan(self._state).engine.name

    def get_execution_plan_count(self) -> int:
        """How many engines were ranked as applicable by ``create_execution_plans``."""
        return len(self._state.candidates or [])

    def get_engine_names(self) -> list[str]:
        """The ranked applicable engines' names."""
        return [e.name for e in self._state.candidates or []]

    def get_engine_refusals(self) -> dict[str, str]:
        """Engines that refused this graph, with their reasons."""
        return dict(self._state.refusals)

    def execute(
        self,
        variant_pack: Mapping[Any, Any],
        workspace: Any = None,
        handle: Any = None,
        override_uids: Sequence[int | TensorAttributes] | None = None,
        override_shapes: Sequence[Sequence[int]] | None = None,
        override_strides: Sequence[Sequence[int]] | None = None,
        *,
        overrides: Mapping[Any, Any] | None = None,
    ) -> None:
        """Run the active plan, at the declared shapes or at override shapes.

        Args:
            variant_pack: ``{tensor or uid: buffer}`` for every non-virtual tensor (NumPy
                arrays, torch tensors or DLPack producers); outputs are written in place.
            workspace: a buffer of at least ``get_workspace_size()`` bytes (``None`` when 0).
            handle: accepted, like ``build_plans(handle=...)``, for cudnn-frontend's
                ``execute(variant_pack, workspace, handle=handle)``; unused: engines run on
                torch's current stream (select one with ``torch.cuda.stream(...)``).
            override_uids: tensors (uids or tensors) that take another shape in this call, for
                a graph that called ``set_override_shape_enabled(True)`` before its plans were
                built (cudnn-frontend's and hipDNN's names); the buffers in the pack have the
                override shapes. See :mod:`hipdnn_graph.graph.overrides`.
            override_shapes: each override tensor's dims, no larger than the declared ones.
            override_strides: each override tensor's element strides, in the declared order.
            overrides: hipDNN's map form instead of the three lists,
                ``{uid: OverrideEntry(shape, stride)}``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` before plans exist, or for overrides that break a
                rule (hipDNN's messages); ``INVALID_VARIANT_PACK`` naming the tensor when the
                pack does not match; ``GRAPH_EXECUTION_FAILED`` when the engine fails.
        """
        built = self._state.active  # the hot path: no frame between here and the binder
        if built is None:
            raise HipdnnError(ErrorCode.INVALID_VALUE, NO_PLAN_MESSAGE)
        if (
            override_uids is not None
            or override_shapes is not None
            or override_strides is not None
            or overrides is not None
        ):
            built = self._at_shapes(
                built, variant_pack, override_uids, override_shapes, override_strides, overrides
            )
        bound, addresses = built.binder.bind_keyed(variant_pack, workspace, built.workspace_size)
        run_plan(built, bound, workspace, addresses)

    def _at_shapes(
        self,
        built: BuiltPlan,
        variant_pack: Mapping[Any, Any],
        override_uids: Any,
        override_shapes: Any,
        override_strides: Any,
        overrides: Any,
    ) -> BuiltPlan:
        """The plan of ``built`` for the override shapes (itself when there are none)."""
        variants = built.variants
        try:  # a signature seen before, as given: one lookup
            signature: Any = (
                tuple(override_uids),
                tuple(map(tuple, override_shapes)),
                tuple(map(tuple, override_strides)),
            )
            variant = variants.get(signature)
        except TypeError:  # None, a map form, or values that are not lists
            variant = None
        if variant is not None and self._graph().wire_metadata.is_override_shape_enabled:
            variants.move_to_end(signature)
            check_pack(variant.required, variant_pack)
            return cast("BuiltPlan", variant.built)
        signature = normalize_overrides(override_uids, override_shapes, override_strides, overrides)
        if not any(signature):  # empty overrides: the non-override path, as in hipDNN
            return built
        return plan_at_shapes(self._graph(), built, variant_pack, signature)

    def run(
        self, inputs: Mapping[Any, Any], workspace: Any = None, handle: Any = None
    ) -> dict[Any, Any]:
        """Execute and return the outputs, allocated for you: ``{output tensor: buffer}``.

        A convenience on top of :meth:`execute` (whose outputs are caller-allocated, as in
        hipDNN): ``inputs`` holds the input buffers (outputs given there are written in place).
        Engines that can hand over their own result buffers do so without a copy, so this is
        the fastest way to run on the fused torch engines. The results are NumPy arrays unless
        some input buffer is a torch tensor, whichever engine runs the graph: a NumPy caller
        gets NumPy results even where torch is installed and a torch engine ranks first. Only
        real (non-virtual) outputs are returned: a graph whose outputs are all virtual
        (``set_output(True)`` forgotten) is an error rather than an empty result. ``handle``
        is accepted and unused, as in :meth:`execute`.

        Example:
            >>> import numpy as np, hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT)
            >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
            >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
            >>> _ = o.set_output(True)
            >>> _ = g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
            >>> x = np.ones((1, 1, 4, 8), np.float32)
            >>> g.run({t: x for t in g.graph_inputs()})[o].shape
            (1, 1, 4, 8)

        Raises:
            HipdnnError: ``INVALID_VALUE`` when no output is real, before plans exist, or for a
                variant pack that does not match (as :meth:`execute`).
        """
        return run(active_plan(self._state), inputs, workspace)

    def execute_plan_at_index(
        self, variant_pack: Mapping[Any, Any], workspace: Any, index: int, handle: Any = None
    ) -> None:
        """Run the plan built at ``index`` (see ``BuildPlanPolicy.ALL``); ``handle`` as in
        :meth:`execute`.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when ``index`` is not an integer in range.
        """
        plans = self._state.plans
        if not isinstance(index, int) or isinstance(index, bool):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"The plan index must be an integer; got {index!r}"
            )
        if not 0 <= index < len(plans):
            if not plans:
                raise HipdnnError(ErrorCode.INVALID_VALUE, NO_PLAN_MESSAGE)
            raise HipdnnError(ErrorCode.INVALID_VALUE, out_of_bounds(index, len(plans)))
        execute(plans[index], variant_pack, workspace)
