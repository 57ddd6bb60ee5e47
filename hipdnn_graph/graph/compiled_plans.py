"""Compiled plans: a built plan written to bytes and run again, in this or another process,
without planning (hipDNN's RFC 0009; the bytes: :mod:`hipdnn_graph.descriptors.compiled_plan`).

A mixin of :class:`~hipdnn_graph.Graph`. :meth:`CompiledPlans.to_compiled_plan_binary` writes
hipDNN's ``SerializedExecutionPlan`` envelope around the active plan: the engine id, the workspace
size, the tensor uids and a payload holding the graph, the knob settings (hipDNN's
``EngineConfig``) and the engine's own bytes (its optional ``serialize_plan`` hook).
:meth:`CompiledPlans.from_compiled_plan_binary` reads them back into a graph whose plan is ready:
the engine is found in the registry by its id and handed the graph with the saved knob values
(its ``deserialize_plan`` hook with its bytes, else ``build_plan``). No engine is ranked or asked
whether it supports the graph, nothing is timed or tuned. :meth:`CompiledPlans.serialize_with_plan`
writes the graph and its plan together in hipDNN's ``HDGP`` container;
``Graph.deserialize(data, restore_plan=True)`` reads both.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(name="p", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="X", dim=[2, 3])
    >>> y = g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    >>> _ = y.set_output(True).set_data_type(hg.DataType.FLOAT)
    >>> _ = g.build_operation_graph().create_execution_plans().build_plans()
    >>> loaded = hg.Graph.from_compiled_plan_binary(g.to_compiled_plan_binary())
    >>> loaded.get_plan_name() == g.get_plan_name()
    True
    >>> a = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    >>> out = np.empty_like(a)
    >>> loaded.execute({x.uid: a, y.uid: out}, None)
    >>> out.tolist()
    [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..backend.allocation import check_allocation
from ..backend.contract import Engine, build_engine_plan, engine_id
from ..backend.knobs import (
    BehaviorNote,
    engine_behavior_notes,
    engine_knobs,
    resolve_knob_settings,
)
from ..backend.registry import current_registry
from ..descriptors.compiled_plan import (
    CompiledPlanRecord,
    container_plan_blob,
    read_compiled_plan,
    write_compiled_plan,
    write_container,
)
from ..descriptors.fb_read import CONTAINER_IDENTIFIER
from ..errors import HipdnnError
from ..tensor_input import as_flag
from ..types import ErrorCode
from .engine_plans import binder_for
from .execution import BuiltPlan, warm_up
from .lifecycle import PlanState, build_operation_graph

if TYPE_CHECKING:
    from . import Graph

__all__ = ["NO_COMPILED_PLAN", "CompiledPlans", "embedded_plan", "install_compiled_plan"]

#: hipDNN's message when there is no built plan to write
NO_COMPILED_PLAN = "Graph has no compiled execution plan. Call build() or build_plans() first."


def _failed(message: str) -> HipdnnError:
    return HipdnnError(
        ErrorCode.HIPDNN_BACKEND_ERROR, f"Failed to deserialize compiled plan: {message}"
    )


def _registered(engine: int) -> Engine:
    for candidate in current_registry().engines():
        if engine_id(candidate.name) == engine:
            return candidate
    raise _failed(f"Invalid engine ID {engine:#x}: no registered engine has it")


def install_compiled_plan(graph: Graph, state: PlanState, record: CompiledPlanRecord) -> None:
    """Make ``record``'s plan the active plan of ``graph`` (the graph ``record.graph`` holds):
    lower the graph, then let the engine named by id build its plan from the saved knob values
    (``deserialize_plan`` with the engine's bytes when it has that hook and wrote bytes).

    Raises:
        HipdnnError: ``HIPDNN_BACKEND_ERROR`` when no registered engine has the id, the tensor
            uids differ from the graph's, a saved knob is not the engine's or breaks its
            constraint (the knob model's message), the saved workspace
            size is not the engine's, or the engine fails; ``INVALID_VALUE`` for a graph above
            the allocation limit (:mod:`hipdnn_graph.backend.allocation`), as ``build_plans``.
    """
    engine = _registered(record.engine_id)
    build_operation_graph(graph, state)
    uids = tuple(t.uid for t in graph.graph_tensors())
    if sorted(uids) != sorted(record.tensor_uids):  # type: ignore[type-var]
        raise _failed(f"the plan's tensor uids {list(record.tensor_uids)} are not the graph's")
    try:  # every saved value checked against the engine's knobs, as add_engine checks them
        knobs = resolve_knob_settings(engine_knobs(engine), dict(record.knobs), engine=engine.name)
    except HipdnnError as err:
        raise _failed(f"the saved knob settings of engine {engine.name}: {err.message}") from None
    check_allocation(graph, f"Running graph '{graph.get_name() or '<unnamed>'}'")
    hook = getattr(engine, "deserialize_plan", None)
    try:
        workspace = int(engine.workspace_size(graph))
        if workspace != record.workspace_size:
            raise _failed(
                f"the plan's workspace size {record.workspace_size} is not engine "
                f"{engine.name}'s {workspace} for its graph (corrupt or forged)"
            )
        if hook is not None and record.engine_payload:
            plan = hook(graph, record.engine_payload, dict(knobs))
        else:
            plan = build_engine_plan(engine, graph, knobs)
        binder = binder_for(graph, getattr(engine, "array_kind", "numpy"))
    except HipdnnError:
        raise
    except Exception as exc:
        raise _failed(f"engine {engine.name} could not restore its plan: "
                      f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
    built = BuiltPlan(engine, plan, workspace, binder, knobs)
    state.candidates, state.refusals = [engine], []
    state.plans, state.active = [built], built


def embedded_plan(data: bytes | bytearray | memoryview) -> bytes | None:
    """The plan blob of an ``HDGP`` container (None for a bare graph or a container without one).

    Raises:
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for a container that does not verify.
    """
    if len(data) < 8 or bytes(data[4:8]) != CONTAINER_IDENTIFIER:
        return None
    return container_plan_blob(bytes(data))


class CompiledPlans:
    """hipDNN's compiled-plan methods (see the module docstring)."""

    _state: PlanState
    embedded_plan: bytes | None = None
    """The plan blob of the ``HDGP`` container this graph was read from (None: there was none);
    :meth:`restore_embedded_plan` makes it the active plan."""

    def _graph(self) -> Graph:
        return cast("Graph", self)

    def restore_embedded_plan(self) -> Graph:
        """Make the plan of the ``HDGP`` container this graph was read from its active plan
        (see :meth:`from_compiled_plan_binary`, warmed as there); returns the graph.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when the graph was read without a plan, else as
                :meth:`from_compiled_plan_binary`.
        """
        if self.embedded_plan is None:
            raise HipdnnError(ErrorCode.INVALID_VALUE,
                              "The graph was not read from a container holding a plan")  # fmt: skip
        record = read_compiled_plan(self.embedded_plan)
        graph = self._graph()
        if record.graph != graph.serialize():
            raise _failed("the container's plan was built for another graph than its graph blob")
        install_compiled_plan(graph, self._state, record)
        warm_up(cast("BuiltPlan", self._state.active))
        return graph

    def plan_serializable(self) -> bool:
        """Whether a plan is built and its engine reports ``SUPPORTS_EXECUTION_PLAN_SERIALIZATION``
        (hipDNN writes the plan into ``to_binary``'s container only then; every plan can be
        written with :meth:`to_compiled_plan_binary` and :meth:`serialize_with_plan`)."""
        built = self._state.active
        notes = () if built is None else engine_behavior_notes(built.engine)
        return BehaviorNote.SUPPORTS_EXECUTION_PLAN_SERIALIZATION in notes

    def to_compiled_plan_binary(self) -> bytes:
        """The active plan as hipDNN's ``SerializedExecutionPlan`` bytes.

        Raises:
            HipdnnError: ``INVALID_VALUE`` before a plan is built (hipDNN's message);
                ``HIPDNN_BACKEND_ERROR`` when the engine's ``serialize_plan`` fails.
        """
        built = self._state.active
        if built is None:
            raise HipdnnError(ErrorCode.INVALID_VALUE, NO_COMPILED_PLAN)
        graph = self._graph()
        engine: Any = built.engine
        own = b""
        if hasattr(engine, "serialize_plan"):
            try:
                own = bytes(engine.serialize_plan(built.plan))
            except Exception as exc:
                raise HipdnnError(ErrorCode.HIPDNN_BACKEND_ERROR,
                                  f"Failed to serialize compiled plan: engine {engine.name}: "
                                  f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
        record = CompiledPlanRecord(
            engine_id=engine_id(engine.name),
            workspace_size=built.workspace_size,
            tensor_uids=tuple(int(t.uid) for t in graph.graph_tensors()),  # type: ignore[arg-type]
            graph=graph.serialize(),
            knobs=tuple(built.knobs.items()),
            engine_payload=own,
            is_override_shape_enabled=graph.wire_metadata.is_override_shape_enabled,
        )
        return write_compiled_plan(record)

    @classmethod
    def from_compiled_plan_binary(
        cls, data: bytes | bytearray | memoryview, *, warm: bool = True
    ) -> Graph:
        """A graph with the plan in ``data`` (from :meth:`to_compiled_plan_binary`) built and
        active, ready to execute: no engine ranking, support check, timing or tuning.

        ``warm`` (an extension; default on): a plan on torch tensors runs once on scratch
        device buffers here, so that its kernels are loaded before the first execute (as
        loading a cuDNN plan does); see :func:`~hipdnn_graph.graph.execution.warm_up`.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a ``warm`` that is not a bool; see
                :func:`~hipdnn_graph.descriptors.compiled_plan.read_compiled_plan` and
                :func:`install_compiled_plan`.
        """
        from . import Graph

        warm = as_flag(warm, "warm")  # "false" is refused, not read as a truthy string
        record = read_compiled_plan(data)
        graph = Graph.deserialize(record.graph)
        install_compiled_plan(graph, graph._state, record)
        if warm:
            warm_up(cast("BuiltPlan", graph._state.active))
        return graph

    def serialize_with_plan(self) -> bytes:
        """hipDNN's ``HDGP`` container: the graph's bytes and its active plan's
        (:meth:`to_compiled_plan_binary`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` before a plan is built.
        """
        plan = self.to_compiled_plan_binary()
        return write_container(self._graph().serialize(), plan)
