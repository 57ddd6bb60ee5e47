"""Engine configurations: asking which engines apply and what they let a caller tune, choosing
one engine with knob settings (``create_execution_plan_ext``), and collecting plan specs
(``add_engine*``) for an autotuner to time.

hipDNN's ``Graph.hpp`` autotune section, to its rules and messages: every query needs the
operation graph built; an engine id names an engine that applies to the graph; knob settings
are checked against the engine's :class:`~hipdnn_graph.backend.knobs.Knob` records
(``add_engine*`` refuses unknown knobs, ``create_execution_plan_ext`` ignores them); the
plan-spec path and the compiled-plan path (``create_execution_plans``) exclude each other.
Engines are named by their 64-bit id (:func:`~hipdnn_graph.backend.engine_id`) or their name.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[4])
    >>> _ = g.pointwise(x, mode=hg.PointwiseMode.EXP).set_output(True)
    >>> _ = g.build_operation_graph()
    >>> [k.knob_id for k in g.get_knobs_for_engine("NUMPY_REFERENCE_ENGINE")]
    ['numpy_reference.sdpa_block_q']
    >>> knob = {"numpy_reference.sdpa_block_q": 8}
    >>> _ = g.create_execution_plan_ext("NUMPY_REFERENCE_ENGINE", knob).build_plans()
    >>> g.get_plan_name(), dict(g.get_execution_plan_knobs())
    ('NUMPY_REFERENCE_ENGINE', {'numpy_reference.sdpa_block_q': 8})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self, cast

from ..backend.contract import Engine, checked_support, engine_id
from ..backend.knobs import (
    BehaviorNote,
    Knob,
    KnobSetting,
    KnobValue,
    engine_behavior_notes,
    engine_knobs,
    resolve_knob_settings,
    settings_list,
)
from ..backend.registry import current_registry
from ..descriptors.engine_wire import EngineConfig, EngineDetails
from ..errors import HipdnnError
from ..types import ErrorCode, HeuristicMode
from .engine_plans import rank_engines
from .lifecycle import PlanState, active_plan

if TYPE_CHECKING:
    from . import Graph

__all__ = ["BENCHMARKING_KNOB", "EngineConfigInfo", "EngineConfigs", "PlanSpec"]

#: hipDNN's knob that makes an engine prime its caches when tuned exhaustively
BENCHMARKING_KNOB = "global.benchmarking"
_NOT_BUILT = "Graph has not been built. Call build_operation_graph() first."
_MASK64 = (1 << 64) - 1
_EXCLUSIVE = "The plan-spec path and compiled-plan path are mutually exclusive."

EngineRef = int | str
Settings = Iterable[KnobSetting] | Mapping[str, KnobValue] | None


@dataclass
class EngineConfigInfo:
    """One engine that applies to a graph (hipDNN's ``EngineConfigInfo``; defaults as there)."""

    engine_id: int = -1
    engine_name: str = ""
    knobs: list[Knob] = field(default_factory=list)
    supports_exhaustive: bool = False
    estimated_workspace_size: int = 0


@dataclass(frozen=True)
class PlanSpec:
    """An engine and knob settings to compile and time later (hipDNN's ``PlanSpec``).

    ``knob_settings`` holds what the caller asked for, checked; ``knob_values`` every knob's
    value the plan is built with (the defaults filled in).
    """

    engine_id: int
    engine_name: str
    knob_settings: tuple[KnobSetting, ...]
    knob_values: Mapping[str, KnobValue]
    workspace_size: int


def _require_lowered(state: PlanState, message: str = _NOT_BUILT) -> None:
    if not state.lowered:
        raise HipdnnError(ErrorCode.INVALID_VALUE, message)


def _find(ref: EngineRef) -> Engine | None:
    """The engine named ``ref``: a name, or a 64-bit id (hipDNN's signed int64 form too)."""
    for engine in current_registry().engines():
        if isinstance(ref, str):
            if engine.name == ref:
                return engine
        elif engine_id(engine.name) == ref & _MASK64:
            return engine
    return None


def engine_for_graph(graph: Graph, ref: EngineRef) -> Engine:
    """The registered engine ``ref`` names when it applies to ``graph``.

    Raises:
        HipdnnError: ``HIPDNN_BACKEND_ERROR``: ``"Failed to finalize engine descriptor Backend
            error: ..."`` (hipDNN's wording) saying that no engine has that id or why it
            refuses the graph.
    """
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"An engine is named by its id or its name; got {ref!r}"
        )
    engine = _find(ref)
    if engine is None:
        shown = repr(ref) if isinstance(ref, str) else f"{ref}"
        why = f"no loaded engine has the id {shown}"
    else:
        ok, reason = checked_support(engine, graph)
        if ok:
            return engine
        why = f"engine {engine.name} does not apply to this graph: {reason}"
    raise HipdnnError(
        ErrorCode.HIPDNN_BACKEND_ERROR, f"Failed to finalize engine descriptor Backend error: {why}"
    )


def _signed(value: int) -> int:
    """A 64-bit engine id as hipDNN's int64."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _workspace(engine: Engine, graph: Graph) -> int:
    """The engine's workspace estimate; 0 when it cannot tell (hipDNN's rule)."""
    try:
        return int(engine.workspace_size(graph))
    except Exception:
        return 0


class EngineConfigs:
    """The ``Graph`` methods of this module (a mixin of :class:`~hipdnn_graph.Graph`)."""

    _state: PlanState

    def _graph(self) -> Graph:
        return cast("Graph", self)

    # ----- discovery -----
    def get_engine_configs(
        self, modes: list[HeuristicMode] | list[int] | None = None
    ) -> list[EngineConfigInfo]:
        """Every engine that applies to this graph, best first, with its knobs and workspace.

        Raises:
            HipdnnError: ``INVALID_VALUE`` before ``build_operation_graph()``.
        """
        _require_lowered(self._state)
        ranked, _ = rank_engines(self._graph())
        configs = []
        for engine in ranked:
            knobs = list(engine_knobs(engine))
            configs.append(
                EngineConfigInfo(
                    engine_id=engine_id(engine.name),
                    engine_name=engine.name,
                    knobs=knobs,
                    supports_exhaustive=any(k.knob_id == BENCHMARKING_KNOB for k in knobs),
                    estimated_workspace_size=_workspace(engine, self._graph()),
                )
            )
        return configs

    def get_knobs_for_engine(self, engine: EngineRef) -> list[Knob]:
        """The knobs ``engine`` (an id or a name) declares, for this graph.

        Raises:
            HipdnnError: ``INVALID_VALUE`` before ``build_operation_graph()``;
                ``HIPDNN_BACKEND_ERROR`` for an engine that is not loaded or does not apply.
        """
        _require_lowered(
            self._state,
            "Graph has not been built, build the operation graph first. Cannot get knobs "
            "for engine.",
        )
        return list(engine_knobs(engine_for_graph(self._graph(), engine)))

    def get_knob_lookup_for_engine(self, engine: EngineRef) -> dict[str, Knob]:
        """:meth:`get_knobs_for_engine` keyed by knob id."""
        return {k.knob_id: k for k in self.get_knobs_for_engine(engine)}

    def get_behavior_notes_for_engine(self, engine: EngineRef) -> list[BehaviorNote]:
        """The behavior notes ``engine`` declares (see :meth:`get_knobs_for_engine`)."""
        _require_lowered(
            self._state,
            "Graph has not been built, build the operation graph first. Cannot get behavior "
            "notes for engine.",
        )
        return list(engine_behavior_notes(engine_for_graph(self._graph(), engine)))

    def get_engine_details(self, engine: EngineRef) -> EngineDetails:
        """What ``engine`` reports for this graph as hipDNN's ``EngineDetails`` record (its id
        as hipDNN's signed int64, knobs, behavior notes, name); bytes through
        :func:`~hipdnn_graph.descriptors.engine_wire.write_engine_details`.

        Raises:
            HipdnnError: as :meth:`get_knobs_for_engine`.
        """
        knobs = self.get_knobs_for_engine(engine)
        chosen = engine_for_graph(self._graph(), engine)
        return EngineDetails(
            _signed(engine_id(chosen.name)),
            tuple(knobs),
            tuple(int(n) for n in engine_behavior_notes(chosen)),
            chosen.name,
        )

    def get_execution_plan_engine_config(self) -> EngineConfig:
        """The active plan as hipDNN's ``EngineConfig`` record: its engine's id and every knob
        value it was built with (bytes through
        :func:`~hipdnn_graph.descriptors.engine_wire.write_engine_config`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` before plans are built.
        """
        built = active_plan(self._state)
        settings = tuple(KnobSetting(k, v) for k, v in built.knobs.items())
        return EngineConfig(_signed(engine_id(built.engine.name)), settings)

    # ----- hard selection -----
    def create_execution_plan_ext(self, engine: EngineRef, knob_settings: Settings = None) -> Self:
        """Choose ``engine`` with ``knob_settings`` (no fallback); ``build_plans()`` builds it.

        Settings of knobs the engine does not declare are ignored with a warning (hipDNN's
        rule); a declared knob's value is checked.

        Raises:
            HipdnnError: ``INVALID_VALUE`` before ``build_operation_graph()``, after
                ``add_engine*``, or for a refused knob value (the knob's message);
                ``HIPDNN_BACKEND_ERROR`` for an engine that is not loaded or does not apply.
        """
        state = self._state
        if state.plan_specs:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Cannot call create_execution_plan_ext() after add_engine_*(). {_EXCLUSIVE}",
            )
        _require_lowered(
            state,
            "Graph has not been built, build the operation graph first. Cannot create "
            "execution plan.",
        )
        chosen = engine_for_graph(self._graph(), engine)
        values = resolve_knob_settings(
            engine_knobs(chosen), knob_settings, engine=chosen.name, strict=False
        )
        state.candidates = [chosen]
        state.refusals = []
        state.knob_values = {chosen.name: values}
        state.plans = []
        state.active = None
        return self

    def get_execution_plan_engine_id(self) -> int:
        """The 64-bit id of the engine the active plan runs on.

        Raises:
            HipdnnError: ``INVALID_VALUE`` before plans are built.
        """
        return engine_id(active_plan(self._state).engine.name)

    def get_built_plan_count(self) -> int:
        """How many plans ``build_plans`` built (the indices ``execute_plan_at_index`` takes)."""
        return len(self._state.plans)

    def get_execution_plan_knobs(self) -> Mapping[str, KnobValue]:
        """Every knob value the active plan was built with (``{}`` for an engine without
        knobs)."""
        return dict(active_plan(self._state).knobs)

    # ----- plan specs (for an autotuner) -----
    def _add_preconditions(self, caller: str) -> None:
        state = self._state
        if state.candidates is not None or state.plans:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Cannot call {caller} after create_execution_plans()/build(). {_EXCLUSIVE}",
            )
        _require_lowered(state)

    def _spec(self, engine: Engine, settings: Settings, shown_id: EngineRef) -> PlanSpec:
        asked = [s for s in settings_list(settings) if s.knob_id != BENCHMARKING_KNOB]
        knobs = engine_knobs(engine)
        lookup = {k.knob_id: k for k in knobs}
        for setting in asked:
            if setting.knob_id not in lookup:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Knob '{setting.knob_id}' is not available for engine {shown_id}",
                )
            try:
                lookup[setting.knob_id].validate(setting)
            except HipdnnError as err:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Knob '{setting.knob_id}' has invalid value for engine {shown_id}: "
                    f"{err.message}",
                ) from None
        values = resolve_knob_settings(knobs, asked, engine=engine.name)
        return PlanSpec(
            engine_id(engine.name),
            engine.name,
            tuple(asked),
            values,
            _workspace(engine, self._graph()),
        )

    def _keep(self, spec: PlanSpec) -> None:
        same = (spec.engine_id, dict(spec.knob_values))
        if all((s.engine_id, dict(s.knob_values)) != same for s in self._state.plan_specs):
            self._state.plan_specs.append(spec)

    def add_engine(self, engine: EngineRef, knob_settings: Settings = None) -> Self:
        """Add a plan spec: ``engine`` with ``knob_settings`` (checked now, compiled later).

        Raises:
            HipdnnError: ``INVALID_VALUE``: before ``build_operation_graph()`` or after
                ``create_execution_plans()``; ``"Engine ID <id> is not valid for this graph:
                ..."``; ``"Knob '<k>' is not available for engine <id>"``; ``"Knob '<k>' has
                invalid value for engine <id>: ..."``.
        """
        self._add_preconditions("add_engine()")
        try:
            chosen = engine_for_graph(self._graph(), engine)
        except HipdnnError as err:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Engine ID {engine} is not valid for this graph: {err.message}",
            ) from None
        self._keep(self._spec(chosen, knob_settings, engine))
        return self

    def add_engines(self, engines: Sequence[EngineRef]) -> Self:
        """:meth:`add_engine` with default knobs for each engine; stops at the first error."""
        if self._state.candidates is not None or self._state.plans:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Cannot call add_engines() after create_execution_plans()/build(). {_EXCLUSIVE}",
            )
        if not engines:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, "add_engines() requires at least one engine ID."
            )
        _require_lowered(self._state)
        for engine in engines:
            self.add_engine(engine)
        return self

    def add_engine_configs(self, configs: Sequence[EngineConfigInfo]) -> Self:
        """A plan spec with default knobs per config (from :meth:`get_engine_configs`)."""
        self._add_preconditions("add_engine_configs()")
        if not configs:
            raise HipdnnError(ErrorCode.INVALID_VALUE, "Input list is empty")
        for config in configs:
            chosen = engine_for_graph(self._graph(), config.engine_id)
            self._keep(self._spec(chosen, None, config.engine_id))
        return self

    def add_engine_variants(
        self, variants: Sequence[tuple[EngineRef, Mapping[str, KnobValue]]]
    ) -> Self:
        """One plan spec per ``(engine, {knob_id: value})``; engines that do not apply are
        skipped (hipDNN's batch rule), a refused knob is an error naming the engine."""
        self._add_preconditions("add_engine_variants()")
        if not variants:
            raise HipdnnError(ErrorCode.INVALID_VALUE, "Input list is empty")
        for ref, settings in variants:
            try:
                chosen = engine_for_graph(self._graph(), ref)
            except HipdnnError:
                continue
            try:
                spec = self._spec(chosen, settings, ref)
            except HipdnnError as err:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE, f"Engine {ref} in add_engine_variants(): {err.message}"
                ) from None
            self._keep(spec)
        return self

    def add_all_engines(self, modes: list[HeuristicMode] | list[int] | None = None) -> Self:
        """Every applicable engine with default knobs (:meth:`get_engine_configs` then
        :meth:`add_engine_configs`)."""
        self._add_preconditions("add_all_engines()")
        return self.add_engine_configs(self.get_engine_configs(modes))

    def get_plan_specs(self) -> list[PlanSpec]:
        """The plan specs collected so far, in the order added (duplicates dropped)."""
        return list(self._state.plan_specs)

    def get_estimated_max_workspace_size(self) -> int:
        """The largest workspace estimate among the plan specs.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when no plan spec was added.
        """
        if not self._state.plan_specs:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "No plan specs have been added. Call add_engine_*() or add_engine_sweep() "
                "before querying workspace size.",
            )
        return int(max(s.workspace_size for s in self._state.plan_specs))
