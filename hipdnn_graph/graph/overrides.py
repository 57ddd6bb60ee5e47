"""Override shapes: one built graph executed at other shapes (hipDNN's RFC 0008, Phase 1).

A graph that calls ``set_override_shape_enabled(True)`` before its plans are built may be
executed with per-tensor override shapes and strides (cudnn-frontend's and hipDNN's
``execute(..., override_uids, override_shapes, override_strides)``). The declared dims are the
*maximum* shape: an override keeps each tensor's rank and stride order and may shrink any dim.
The arguments are checked here with hipDNN's rules and messages (:func:`check_overrides`);
then the graph's own rules run again at the new shapes, on a copy of the graph whose overridden
tensors take the new dims and whose virtual tensors are inferred anew (:func:`graph_at_shapes`),
and the engine that runs the graph builds a plan for that copy. Both are kept per shape
signature (the exact override arguments), so a shape seen before costs one dictionary lookup;
a plan keeps the :data:`MAX_SHAPE_VARIANTS` most recently used shapes.

Engines opt in with ``supports_override_shapes = True`` (see
:func:`hipdnn_graph.backend.contract.override_shapes_refusal`); the others refuse an
override-shape graph when plans are ranked, with a reason naming override shapes.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT).set_override_shape_enabled(True)
    >>> x = g.tensor(name="X", dim=[4, 8], uid=1)
    >>> y = g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    >>> _ = y.set_output(True).set_uid(2)
    >>> _ = g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    >>> xs, ys = np.full((2, 8), -1.0, np.float32), np.zeros((2, 8), np.float32)
    >>> g.execute({1: xs, 2: ys}, override_uids=[1, 2], override_shapes=[[2, 8], [2, 8]],
    ...           override_strides=[[8, 1], [8, 1]])
    >>> float(ys.max())
    0.0
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..backend.contract import build_engine_plan, checked_support
from ..errors import HipdnnError, NotSupportedError
from ..tensor import TensorAttributes
from ..types import ErrorCode

if TYPE_CHECKING:
    from . import Graph
    from .execution import BuiltPlan

__all__ = [
    "FLAG_MISSING_MESSAGE",
    "MAX_SHAPE_VARIANTS",
    "PLAN_WITHOUT_FLAG_MESSAGE",
    "OverrideEntry",
    "check_arguments",
    "check_overrides",
    "check_pack",
    "graph_at_shapes",
    "normalize_overrides",
    "plan_at_shapes",
    "stride_order",
]

#: shape variants a built plan keeps (least recently used dropped first)
MAX_SHAPE_VARIANTS = 64

FLAG_MISSING_MESSAGE = (
    "Graph::execute override overload called on a graph that did not call "
    "set_override_shape_enabled(true). The override flag must be set at build time before "
    "per-execute overrides are supplied."
)
PLAN_WITHOUT_FLAG_MESSAGE = (
    "The execution plan was built before set_override_shape_enabled(true): a plan built "
    "without the override flag cannot execute override shapes; build the plans again"
)

_RULE = " (RFC 0008 §4.2.1 rule {})."


class OverrideEntry(NamedTuple):
    """One tensor's override: its shape and its element strides (hipDNN's ``OverrideEntry``).

    Example:
        >>> OverrideEntry([1, 2, 128, 64], [16384, 8192, 64, 1]).shape
        [1, 2, 128, 64]
    """

    shape: Sequence[int]
    stride: Sequence[int]


#: ``(uids, shapes, strides)`` as tuples: the shape signature a variant is cached under
Signature = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def _int(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _fail(f"{what} must be an integer, got {value!r}")


def _ints(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise _fail(f"{what} must be a list of integers, got {values!r}")
    return tuple(_int(v, what) for v in values)


def _uid(key: Any) -> int:
    if isinstance(key, TensorAttributes):
        if key.uid is None:
            raise _fail(f"Override tensor '{key.name}' has no uid")
        return key.uid
    return _int(key, "An override uid")


def normalize_overrides(
    override_uids: Any, override_shapes: Any, override_strides: Any, overrides: Any
) -> Signature:
    """The override arguments as tuples of integers: the parallel-array form (uids may be
    tensors) or hipDNN's map form ``{uid or tensor: OverrideEntry(shape, stride)}``, which is
    lowered to the parallel arrays before any rule runs (as hipDNN does).

    Example:
        >>> normalize_overrides(None, None, None, {3: OverrideEntry([2, 4], [4, 1])})
        ((3,), ((2, 4),), ((4, 1),))

    Raises:
        HipdnnError: ``INVALID_VALUE`` for both forms at once, or values that are not lists of
            integers.
    """
    if overrides is not None:
        if (override_uids, override_shapes, override_strides) != (None, None, None):
            raise _fail(
                "Give overrides either as override_uids/override_shapes/override_strides or as "
                "overrides={uid: OverrideEntry(shape, stride)}, not both"
            )
        if not isinstance(overrides, Mapping):
            raise _fail(f"overrides must be a mapping of uids to OverrideEntry, got {overrides!r}")
        entries = [(key, OverrideEntry(*entry)) for key, entry in overrides.items()]
        override_uids = [key for key, _ in entries]
        override_shapes = [entry.shape for _, entry in entries]
        override_strides = [entry.stride for _, entry in entries]
    lists = []
    for name, value in (("override_uids", override_uids), ("override_shapes", override_shapes),
                        ("override_strides", override_strides)):  # fmt: skip
        if value is None:
            value = []
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
            raise _fail(f"{name} must be a list, got {value!r}")
        lists.append(list(value))
    uids = tuple(_uid(u) for u in lists[0])
    shapes = tuple(_ints(s, "An override shape") for s in lists[1])
    strides = tuple(_ints(s, "An override stride") for s in lists[2])
    return uids, shapes, strides


def stride_order(strides: Sequence[int]) -> tuple[int, ...]:
    """The axes from the largest stride to the smallest (ties keep axis order): the layout an
    override must keep.

    Example:
        >>> stride_order([1024, 64, 4096, 1])  # [B, S, H, D] memory order of a [B, H, S, D]
        (2, 0, 1, 3)
    """
    return tuple(sorted(range(len(strides)), key=lambda axis: -strides[axis]))


def check_overrides(tensors_by_uid: Mapping[int, TensorAttributes], signature: Signature) -> None:
    """hipDNN's override rules (RFC 0008 §4.2.1), in its order and with its messages.

    1. the three lists have one length; 2. no uid twice; 3. every uid is a graph tensor;
    4. each shape and stride has the tensor's rank; 5. shape values and 6. strides are
    positive; 7. no dim exceeds the declared one (the declared dims are the maximum shape);
    8. the strides keep the declared stride order.

    Example:
        >>> t = TensorAttributes(name="X", dim=[4, 8], stride=[8, 1], uid=1)
        >>> try:
        ...     check_overrides({1: t}, ((1,), ((5, 8),), ((8, 1),)))
        ... except HipdnnError as err:
        ...     print(err.code.name, err.message[:52])
        INVALID_VALUE Override shape for UID 1 axis 0 exceeds declared max

    Raises:
        HipdnnError: ``INVALID_VALUE`` on the first broken rule.
    """
    uids, shapes, strides = signature
    if not len(uids) == len(shapes) == len(strides):
        raise _fail(
            f"Override arrays have inconsistent sizes: override_uids.size()={len(uids)}, "
            f"override_shapes.size()={len(shapes)}, override_strides.size()={len(strides)}"
            + _RULE.format(1)
        )
    seen: set[int] = set()
    for uid in uids:
        if uid in seen:
            raise _fail(f"Duplicate UID {uid} in override_uids" + _RULE.format(2))
        seen.add(uid)
    for uid, shape, stride in zip(uids, shapes, strides, strict=True):
        tensor = tensors_by_uid.get(uid)
        if tensor is None:
            raise _fail(f"Override UID {uid} does not identify any graph tensor" + _RULE.format(3))
        dims, declared_strides = tensor.dim, tensor.stride
        if len(shape) != len(dims) or len(stride) != len(dims):
            raise _fail(
                f"Override rank mismatch for UID {uid}: declared rank={len(dims)}, override "
                f"shape rank={len(shape)}, override stride rank={len(stride)}" + _RULE.format(4)
            )
        for axis, (extent, step) in enumerate(zip(shape, stride, strict=True)):
            if extent <= 0:
                raise _fail(
                    f"Override shape value for UID {uid} axis {axis} must be positive: {extent}"
                    + _RULE.format(5)
                )
            if step <= 0:
                raise _fail(
                    f"Override stride value for UID {uid} axis {axis} must be positive: {step}"
                    + _RULE.format(6)
                )
        for axis, (extent, declared) in enumerate(zip(shape, dims, strict=True)):
            if declared >= 0 and extent > declared:
                raise _fail(
                    f"Override shape for UID {uid} axis {axis} exceeds declared max: "
                    f"override={extent}, declared={declared}" + _RULE.format(7)
                )
        if declared_strides and stride_order(declared_strides) != stride_order(stride):
            raise _fail(
                f"Override stride permutation for UID {uid} does not match declared stride "
                "order" + _RULE.format(8)
            )


def graph_at_shapes(
    graph: Graph, shapes: Mapping[int, tuple[Sequence[int], Sequence[int]]]
) -> Graph:
    """A validated copy of ``graph`` whose tensors ``shapes`` names (by uid) take those dims and
    strides; its virtual tensors are inferred anew and every other tensor keeps its declared
    shape, so that the graph's rules decide whether the shapes fit together.

    Raises:
        HipdnnError: the first rule of the graph that the new shapes break.
    """
    from . import Graph

    tensors = graph.wire_tensors()
    nodes = graph.nodes
    memo: dict[int, Any] = {}
    tensor_copies: list[TensorAttributes] = copy.deepcopy(tensors, memo)
    attribute_copies = copy.deepcopy([node.attributes for node in nodes], memo)
    attributes = graph.attributes.model_copy()
    copies = [n.spec.make_node(a, attributes) for n, a in zip(nodes, attribute_copies, strict=True)]
    for tensor in tensor_copies:
        if tensor.uid is not None and tensor.uid in shapes:
            dims, strides = shapes[tensor.uid]
            tensor.dim, tensor.stride = list(dims), list(strides)
        elif tensor.is_virtual:
            tensor.dim, tensor.stride = [], []
    shaped = Graph.from_parts(
        attributes,
        tensor_copies,
        copies,
        preferred_engine_id=graph.get_preferred_engine_id_ext(),
        wire_metadata=graph.wire_metadata,
    )
    shaped.validate()
    return shaped


@dataclass
class _Variant:
    """One shape signature's plan and the (uid, tensor) pairs the pack must hold."""

    built: BuiltPlan
    required: tuple[tuple[int, TensorAttributes | None], ...]


def check_arguments(graph: Graph, signature: Signature) -> dict[int, TensorAttributes]:
    """hipDNN's frontend checks of an override execute before any buffer is read: the graph's
    flag, then :func:`check_overrides`; returns the graph's tensors by uid.

    Raises:
        HipdnnError: ``INVALID_VALUE`` (:data:`FLAG_MISSING_MESSAGE`, or a broken rule).
    """
    if not graph.is_override_shape_enabled():
        raise _fail(FLAG_MISSING_MESSAGE)
    by_uid = {t.uid: t for t in graph.wire_tensors() if t.uid is not None}
    check_overrides(by_uid, signature)
    return by_uid


def plan_at_shapes(
    graph: Graph, built: BuiltPlan, variant_pack: Mapping[Any, Any], signature: Signature
) -> BuiltPlan:
    """The plan that runs ``graph`` at the override ``signature`` (built, or reused when the
    signature was seen), after hipDNN's checks: the graph's flag, the rules of
    :func:`check_overrides`, every override uid in the pack, a plan built with the flag.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the checks above (hipDNN's messages) and the rules
            of the graph at the new shapes; ``GRAPH_NOT_SUPPORTED`` when the engine refuses the
            new shapes; ``GRAPH_EXECUTION_PLAN_CREATION_FAILED`` when its plan fails to build.
    """
    variants = built.variants
    variant = variants.get(signature) if graph.is_override_shape_enabled() else None
    if variant is None:
        by_uid = check_arguments(graph, signature)
        required = tuple((uid, by_uid.get(uid)) for uid in signature[0])
        check_pack(required, variant_pack)
        if not built.override_shapes:
            raise _fail(PLAN_WITHOUT_FLAG_MESSAGE)
        variant = _Variant(_build_variant(graph, built, by_uid, signature), required)
        variants[signature] = variant
        if len(variants) > MAX_SHAPE_VARIANTS:
            variants.popitem(last=False)
    else:
        variants.move_to_end(signature)
        check_pack(variant.required, variant_pack)
    return variant.built


def check_pack(
    required: Iterable[tuple[int, TensorAttributes | None]], variant_pack: Mapping[Any, Any]
) -> None:
    """hipDNN's last frontend check: every override uid (with its tensor, a key too) is in the
    variant pack.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first uid missing.
    """
    for uid, tensor in required:
        if uid not in variant_pack and (tensor is None or tensor not in variant_pack):
            raise _fail(f"Override UID {uid} is not present in the variant pack.")


def _build_variant(
    graph: Graph,
    built: BuiltPlan,
    by_uid: Mapping[int, TensorAttributes],
    signature: Signature,
) -> BuiltPlan:
    from .engine_plans import binder_for
    from .execution import BuiltPlan

    uids, shapes, strides = signature
    if all(
        list(shape) == by_uid[uid].dim and list(stride) == by_uid[uid].stride
        for uid, shape, stride in zip(uids, shapes, strides, strict=True)
    ):
        return built  # the declared shapes: the plan itself
    shaped = graph_at_shapes(graph, dict(zip(uids, zip(shapes, strides, strict=True), strict=True)))
    engine = built.engine
    ok, reason = checked_support(engine, shaped)
    name = graph.get_name() or "<unnamed>"
    described = ", ".join(f"{uid}: {list(shape)}" for uid, shape in zip(uids, shapes, strict=True))
    if not ok:
        raise NotSupportedError(
            f"{engine.name} cannot run graph '{name}' at the override shapes ({described}): "
            f"{reason}"
        )
    try:
        plan = build_engine_plan(engine, shaped, built.knobs)  # the plan's own knob values
        workspace = int(engine.workspace_size(shaped))
    except HipdnnError:
        raise
    except Exception as exc:
        raise HipdnnError(
            ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED,
            f"{engine.name} failed to build a plan for graph '{name}' at the override shapes "
            f"({described}): {type(exc).__name__}: {exc}",
        ) from exc
    binder = binder_for(shaped, getattr(engine, "array_kind", "numpy"), keys=by_uid)
    return BuiltPlan(engine, plan, workspace, binder, built.knobs, override_shapes=True)
