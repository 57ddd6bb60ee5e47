"""Which registered engines can run a graph, and how one engine's plan for it is built (the
lifecycle's :func:`~hipdnn_graph.graph.lifecycle.build_plans`, autotuning and override shapes
share these).

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> y = g.pointwise(g.tensor(name="x", dim=[4]), mode=hg.PointwiseMode.EXP).set_output(True)
    >>> g.validate()
    >>> ranked, refusals = rank_engines(g)
    >>> "NUMPY_REFERENCE_ENGINE" in [e.name for e in ranked]
    True
    >>> dict(refusals)["CUDNN_FRONTEND_ENGINE"].startswith("does not run POINTWISE nodes")
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..backend.contract import Engine, build_engine_plan, checked_support
from ..backend.knobs import KnobValue
from ..backend.registry import current_registry
from ..backend.variant_pack import TensorSpec, VariantPackBinder
from ..tensor import TensorAttributes
from .execution import BuiltPlan

if TYPE_CHECKING:
    from . import Graph

__all__ = ["binder_for", "build_one_plan", "deselected", "rank_engines"]


def rank_engines(graph: Graph) -> tuple[list[Engine], list[tuple[str, str]]]:
    """The registered engines that accept ``graph``, best (lowest ``priority``) first, and the
    ``(name, reason)`` of each that refuses it."""
    accepted: list[tuple[int, int, Engine]] = []
    refusals: list[tuple[str, str]] = []
    for order, engine in enumerate(current_registry().engines()):
        support_ok, reason = checked_support(engine, graph)
        if support_ok:
            accepted.append((int(getattr(engine, "priority", 100)), order, engine))
        else:
            refusals.append((engine.name, reason or "refused without a reason"))
    accepted.sort(key=lambda item: (item[0], item[1]))
    return [engine for _, _, engine in accepted], refusals


def deselected(graph: Graph, ranked: list[Engine], refusals: list[tuple[str, str]]) -> list[Engine]:
    """``ranked`` without the engines the graph's filters bar (each added to ``refusals`` with
    the filter's reason; see :mod:`hipdnn_graph.graph.selection`)."""
    filters = graph.engine_filters()
    if filters.is_empty():
        return ranked
    kept = []
    for engine in ranked:
        try:
            workspace: int | None = int(engine.workspace_size(graph))
        except Exception:
            workspace = None
        reason = filters.reason(engine, workspace)
        if reason is None:
            kept.append(engine)
        else:
            refusals.append((engine.name, reason))
    return kept


def binder_for(
    graph: Graph, array_kind: str, keys: Mapping[int, TensorAttributes] | None = None
) -> VariantPackBinder:
    """The variant-pack binder of ``graph``'s non-virtual, non-constant tensors; with ``keys``
    (uid -> tensor) the pack is keyed by those tensors instead of the graph's own (a graph at
    override shapes is bound with the caller's tensors)."""
    produced = {id(t) for node in graph.nodes for t in node.outputs()}
    specs = []
    for t in graph.graph_tensors():
        if t.is_virtual or (t.value is not None and not t.is_pass_by_value):
            continue
        spec = TensorSpec.of(t, is_output=id(t) in produced)
        if keys is not None:
            spec.tensor = keys.get(spec.uid, t)
        specs.append(spec)
    return VariantPackBinder(specs, array_kind=array_kind)


def build_one_plan(graph: Graph, engine: Engine, knobs: Mapping[str, KnobValue]) -> BuiltPlan:
    """``engine``'s plan for ``graph`` with every knob value in ``knobs`` (whatever it raises
    is the engine's failure)."""
    plan = build_engine_plan(engine, graph, dict(knobs))
    workspace = int(engine.workspace_size(graph))
    binder = binder_for(graph, getattr(engine, "array_kind", "numpy"))
    return BuiltPlan(
        engine, plan, workspace, binder, dict(knobs), graph.is_override_shape_enabled()
    )
