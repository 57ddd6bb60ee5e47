"""What a backend plugin implements: a :class:`Backend` with :class:`Engine` objects whose plans
execute graphs.

A plugin author writes three small things (see ``docs/plugins.md`` and
``examples/custom_backend/``):

1. an :class:`Engine`: a ``name``, ``check(graph) -> Support``, ``workspace_size(graph)`` and
   ``build_plan(graph) -> ExecutionPlan`` (optionally ``knobs``, ``behavior_notes`` and
   ``api_version``: see :class:`Engine`);
2. an :class:`ExecutionPlan`: ``execute(variant_pack, workspace)`` that does the work;
3. a :class:`Backend` bundling the engines, returned by a factory registered in the entry-point
   group ``hipdnn_graph.backends``.

Everything here is a :class:`typing.Protocol`, so plugins need not inherit from anything; the
dataclasses are the values that cross the boundary.

Example:
    >>> from hipdnn_graph.backend import engine_id
    >>> hex(engine_id("NUMPY_REFERENCE_ENGINE"))  # 64-bit FNV-1a of the name, as in hipDNN
    '0xe722795ad5156f59'
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from ..types import NodeType
from .api_version import api_version_refusal, graph_required_api_version
from .knobs import KnobValue, knob_defaults

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "AutogradForm",
    "Backend",
    "Engine",
    "ExecutionPlan",
    "Launcher",
    "Support",
    "build_engine_plan",
    "checked_support",
    "engine_id",
    "engine_node_types",
    "node_type_refusal",
    "override_shapes_refusal",
    "ragged_refusal",
]

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def engine_id(name: str) -> int:
    """The engine id hipDNN derives from a name: 64-bit FNV-1a over its UTF-8 bytes."""
    h = _FNV_OFFSET
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return h


@dataclass(frozen=True)
class Support:
    """An engine's answer to "can you run this graph?".

    Attributes:
        ok: True when the engine can run the graph exactly.
        reason: why not (names the feature), empty when ``ok``.
    """

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Support:
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> Support:
        return cls(False, reason)

    def __bool__(self) -> bool:
        return self.ok


@runtime_checkable
class ExecutionPlan(Protocol):
    """A prepared engine for one graph; built once, executed many times.

    ``variant_pack`` maps each non-virtual tensor's uid to its buffer (a NumPy array, a torch
    tensor, or the converted form the engine asked for through ``array_kind``), already checked
    against the graph by the frontend: shapes, strides and types match, outputs are writable and
    do not alias inputs. Runtime pass-by-value scalars arrive as Python numbers. The plan must
    write every output and must never write to an input.

    Optional attributes: ``allocates_outputs`` (True: outputs missing from the pack are the
    kernels' own result buffers, added to it by ``execute``); ``launcher()``, returning a
    :class:`Launcher` or ``None``, for callers that cache built graphs (the torch op); and
    ``execute_at(variant_pack, workspace, addresses)``, called instead of ``execute`` when the
    frontend knows the pack's ``addresses``: a hashable that is equal for two packs exactly
    when they hold the same buffers at the same uids and the same scalar values (a plan that
    replays recorded work per set of buffers can key it by that, without reading them again).
    """

    engine_name: str
    workspace_size: int

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None: ...


class AutogradForm(NamedTuple):
    """A launcher whose kernel is one torch op with an autograd formula of its own.

    A forward graph's launcher and a backward graph's launcher give equal ``pair`` values when
    the backward's kernel is exactly what torch's autograd runs for the forward's op (the same
    backward op on the same arguments). A caller that has both may then run the forward op with
    ``call`` on tensors that require grad, let torch record it, and leave the backward to
    torch's autograd: no Python runs in the backward. The torch op does so for aten's cuDNN
    attention (:mod:`hipdnn_graph.torch`). A forward with philox dropout draws its seed and
    offset from the device's generator, as torch's fused ops do: its form serves only a caller
    whose graph's Seed and Offset are that generator's current state (the torch op's are).

    Example:
        >>> AutogradForm(("cudnn", True, 0.125, 0.0), None).call is None  # a backward's form
        True
    """

    #: equal for a forward launcher and the backward launcher that is its autograd formula
    pair: Hashable
    #: the forward's op on its tensor inputs (tensors that may require grad) returning its
    #: first output, recorded by torch's autograd; None for a backward's form
    call: Callable[..., Any] | None


class Launcher(NamedTuple):
    """A plan's kernels with everything fixed at build time bound: ``call(*buffers)`` takes the
    buffers of ``inputs`` (uids, in that order) and returns new buffers for ``outputs`` (uids,
    in that order), each with its tensor's declared dtype and strides.

    Nothing is checked on a call: the caller guarantees what the variant-pack check would,
    every time (tensors of the declared shapes, strides and dtypes, dense, on the device of the
    first call, none requiring grad; runtime pass-by-value scalars as Python numbers) and that
    no output buffer exists yet. An engine exception propagates as it is (the caller turns it
    into ``GRAPH_EXECUTION_FAILED``). See :mod:`hipdnn_graph.graph.prepared`.
    """

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    call: Callable[..., Sequence[Any]]
    #: the kernel as a differentiable torch call, once known (see :class:`AutogradForm`):
    #: ``autograd()`` answers after the first ``call`` on a device, None where there is none
    autograd: Callable[[], AutogradForm | None] | None = None


@runtime_checkable
class Engine(Protocol):
    """One way of running graphs.

    Attributes:
        name: unique, upper-case by convention (``"NUMPY_REFERENCE_ENGINE"``); its
            :func:`engine_id` is the engine's id.
        priority: rank among applicable engines, lower first (the measured-fastest engine has
            the lowest number).
        array_kind: ``"numpy"`` or ``"torch"``: the buffer type the plan wants in its variant
            pack (the frontend converts zero-copy where it can).

    Optional declarations (an engine without them keeps working as before):

    - ``node_types``: the node families (:class:`NodeType`) it runs. A graph holding a node of
      another family is refused before ``check()`` is called, with a reason naming that family
      (:func:`node_type_refusal`). Engines without it see every graph in ``check()``.
    - ``knobs``: a sequence of :class:`~hipdnn_graph.backend.knobs.Knob` records (default:
      none). An engine that declares knobs is called as ``build_plan(graph, knobs=values)``,
      ``values`` holding every declared knob id with its default or the caller's checked
      setting; an engine without knobs is called as ``build_plan(graph)``.
    - ``behavior_notes``: :class:`~hipdnn_graph.backend.knobs.BehaviorNote` values (default:
      none), reported by ``get_behavior_notes_for_engine``.
    - ``api_version``: the engine plugin API version it implements, ``"1.2.0"`` or a triple
      (default: ``"1.2.0"``, what this contract delivered before versions existed); a graph
      requiring a newer one skips the engine with a reason
      (:mod:`hipdnn_graph.backend.api_version`).
    - ``supports_override_shapes = True``: the engine serves graphs that call
      ``set_override_shape_enabled(True)``: the frontend then asks it again (``check`` and
      ``build_plan``) for a copy of the graph at each new override shape and keeps that plan
      per shape, so its ``build_plan`` should be cheap (no compile per shape). Engines without
      it refuse such graphs (:func:`override_shapes_refusal`; ``override_shapes_reason``, a
      string, may say why).
    - ``supports_ragged = True``: the engine reads packed (ragged) tensors, those with
      ``set_ragged_offset`` (:func:`ragged_refusal`); engines without it refuse such graphs, so
      that none runs a packed buffer as if it were padded (``ragged_reason``, a string, may say
      why). Such a tensor's buffer reaches
      ``execute`` as the caller gave it, a packed token buffer the binder checked against its
      offsets (:mod:`.ragged`; SDPA's gather and scatter: :mod:`.packed_sdpa`).
    - ``serialize_plan(plan) -> bytes`` and ``deserialize_plan(graph, payload, knobs) ->
      ExecutionPlan``: compiled plans (:mod:`hipdnn_graph.graph.compiled_plans`). The first
      gives the engine's own bytes for a plan it built (a compile-cache key, a serialized
      library plan); the second makes the plan again from those bytes, the graph and every knob
      value, without the search or compilation they stand for. Engines without them are
      re-planned from their id and knob values with ``build_plan`` (no ranking, no tuning).
    """

    name: str
    priority: int
    array_kind: str

    def check(self, graph: Graph) -> Support: ...

    def workspace_size(self, graph: Graph) -> int: ...

    def build_plan(self, graph: Graph) -> ExecutionPlan: ...


@runtime_checkable
class Backend(Protocol):
    """A plugin: a name and its engines."""

    name: str

    def engines(self) -> Sequence[Engine]: ...


@dataclass
class BackendInfo:
    """What :func:`hipdnn_graph.list_backends` reports for one plugin."""

    name: str
    engines: list[str] = field(default_factory=list)
    source: str = ""
    error: str | None = None

    @property
    def loaded(self) -> bool:
        return self.error is None


def engine_node_types(engine: Any) -> frozenset[NodeType] | None:
    """The node families an engine declares it runs (``node_types``), or ``None`` when it
    declares none."""
    declared = getattr(engine, "node_types", None)
    return None if declared is None else frozenset(NodeType(t) for t in declared)


def node_type_refusal(engine: Any, graph: Graph) -> str | None:
    """Why ``engine`` cannot run ``graph`` by its declared families, or ``None``.

    Example:
        >>> import hipdnn_graph as hg
        >>> class OnlyAttention:
        ...     node_types = frozenset({hg.NodeType.SDPA_FWD})
        >>> g = hg.Graph()
        >>> _ = g.pointwise(g.tensor(name="x", dim=[4]), mode=hg.PointwiseMode.EXP, name="e")
        >>> node_type_refusal(OnlyAttention(), g)
        "does not run POINTWISE nodes (node 'e'); it runs SDPA_FWD"
    """
    declared = engine_node_types(engine)
    if declared is None:
        return None
    for node in graph.nodes:
        kind = node.get_node_type()
        if kind not in declared:
            runs = ", ".join(t.name for t in sorted(declared)) or "no node type"
            return f"does not run {kind.name} nodes (node '{node.name}'); it runs {runs}"
    return None


def override_shapes_refusal(engine: Any, graph: Graph) -> str | None:
    """Why ``engine`` cannot run ``graph`` because the graph takes override shapes, or ``None``
    (the graph does not, or the engine declares ``supports_override_shapes``).

    Example:
        >>> import hipdnn_graph as hg
        >>> class OneShape:
        ...     override_shapes_reason = "it compiles a kernel for each shape"
        >>> override_shapes_refusal(OneShape(), hg.Graph().set_override_shape_enabled(True))
        'does not support override shapes (the graph called set_override_shape_enabled(True)): \
it compiles a kernel for each shape'
    """
    enabled = getattr(graph, "is_override_shape_enabled", None)
    if enabled is None or not enabled() or getattr(engine, "supports_override_shapes", False):
        return None
    why = getattr(engine, "override_shapes_reason", None) or "its plans serve one shape each"
    return (
        "does not support override shapes (the graph called set_override_shape_enabled(True)): "
        f"{why}"
    )


def ragged_refusal(engine: Any, graph: Graph) -> str | None:
    """Why ``engine`` cannot run ``graph`` because a tensor of it is packed (ragged), or ``None``
    (no tensor is, or the engine declares ``supports_ragged``).

    Example:
        >>> import hipdnn_graph as hg
        >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT)
        >>> off = g.tensor(name="off", dim=[2, 1, 1, 1], data_type=hg.DataType.INT32)
        >>> x = g.tensor(name="x", dim=[1, 4]).set_ragged_offset(off)
        >>> _ = g.pointwise(x, mode=hg.PointwiseMode.EXP)
        >>> ragged_refusal(object(), g)
        'does not support packed (ragged) tensors: x has ragged offsets off'
    """
    if getattr(engine, "supports_ragged", False):
        return None
    why = getattr(engine, "ragged_reason", None)
    for tensor in graph.graph_tensors():
        offsets = tensor.ragged_offset
        if offsets is not None or tensor.ragged_offset_multiplier != 1:
            what = "ragged offsets " + (offsets.name if offsets is not None else "(none)")
            reason = f"does not support packed (ragged) tensors: {tensor.name} has {what}"
            return f"{reason} ({why})" if why else reason
    return None


def checked_support(engine: Engine, graph: Graph) -> tuple[bool, str]:
    """``engine.check(graph)`` as ``(accepted, reason)``, after the engine plugin API version
    the graph requires (:func:`~hipdnn_graph.backend.api_version.api_version_refusal`), the
    families the engine declares (:func:`node_type_refusal`) and its override-shape support
    (:func:`override_shapes_refusal`); a check that raises is a refusal whose reason names the
    exception (a broken engine must not break selection or listings)."""
    refused = api_version_refusal(engine, graph_required_api_version(graph))
    if refused is not None:
        return False, refused
    try:
        refused = node_type_refusal(engine, graph)
    except Exception as exc:  # a broken node_types declaration
        return False, f"node_types raised {type(exc).__name__}: {exc}"
    if refused is not None:
        return False, refused
    refused = override_shapes_refusal(engine, graph) or ragged_refusal(engine, graph)
    if refused is not None:
        return False, refused
    try:
        support = engine.check(graph)
    except Exception as exc:
        return False, f"check() raised {type(exc).__name__}: {exc}"
    return bool(support.ok), str(support.reason or "")


def build_engine_plan(
    engine: Engine, graph: Graph, knobs: Mapping[str, KnobValue] | None = None
) -> ExecutionPlan:
    """``engine.build_plan(graph, knobs=...)`` for an engine that declares knobs (every declared
    knob's value: ``knobs`` over the defaults, checked by the caller), ``engine.build_plan(graph)``
    for one that declares none."""
    values = knob_defaults(engine)
    if not values:
        return engine.build_plan(graph)
    values.update(knobs or {})
    build: Any = engine.build_plan
    return build(graph, knobs=values)  # type: ignore[no-any-return]
