"""Running a built plan: ``Graph.execute`` (caller-allocated outputs) and ``Graph.run`` (outputs
handed over or allocated here), each checking the variant pack against the plan first.

:class:`BuiltPlan` is one prepared engine; :mod:`hipdnn_graph.graph.lifecycle` builds them and
:mod:`hipdnn_graph.graph.prepared` calls them without the check.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..backend.buffers import as_torch, device_visible
from ..backend.contract import Engine, ExecutionPlan
from ..backend.variant_pack import TensorSpec, VariantPackBinder, as_numpy, is_torch_tensor
from ..errors import HipdnnError
from ..types import ErrorCode

if TYPE_CHECKING:
    from ..tensor import TensorAttributes

__all__ = [
    "NO_OUTPUT_MESSAGE",
    "NO_PLAN_MESSAGE",
    "BuiltPlan",
    "execute",
    "out_of_bounds",
    "run",
    "run_plan",
    "warm_up",
]

_LOG = logging.getLogger(__name__)

NO_PLAN_MESSAGE = (
    "Graph has no compiled execution plan. Call build() or from_compiled_plan_binary() first."
)
NO_OUTPUT_MESSAGE = (
    "run() has no output to return: every node output of the graph is virtual. Call "
    "set_output(True) on the tensors you want back (for example dq.set_output(True)), then "
    "build() again"
)


def out_of_bounds(index: int, count: int) -> str:
    """The message for a plan index outside ``[0, count)`` (hipDNN says "out of bounds")."""
    return f"Plan index {index} is out of bounds (the graph has {count} execution plans)"


@dataclass
class BuiltPlan:
    """One prepared engine: the plan, its workspace size, its variant-pack binder and the knob
    values it was built with (every knob the engine declares).

    ``override_shapes`` is the graph's override flag when the plan was built (a plan built
    without it never runs override shapes, as in hipDNN); ``variants`` holds the plans of the
    override shapes seen so far, by shape signature (:mod:`hipdnn_graph.graph.overrides`).
    """

    engine: Engine
    plan: ExecutionPlan
    workspace_size: int
    binder: VariantPackBinder
    knobs: Mapping[str, Any] = field(default_factory=dict)
    override_shapes: bool = False
    variants: OrderedDict[Any, Any] = field(default_factory=OrderedDict, repr=False)


def run(built: BuiltPlan, inputs: Mapping[Any, Any], workspace: Any) -> dict[TensorAttributes, Any]:
    """Execute with engine-allocated outputs; returns ``{output tensor: buffer}``.

    Outputs given in ``inputs`` are written in place as in :func:`execute`; the others are
    handed over by plans that can return their own results (``allocates_outputs``, no copy)
    and allocated here otherwise. Results come back as NumPy arrays unless some input buffer is
    a torch tensor, whichever engine ran.

    Raises:
        HipdnnError: ``INVALID_VALUE`` (:data:`NO_OUTPUT_MESSAGE`) when the graph has no output
            to return: every node output is virtual (``set_output(True)`` was forgotten).
    """
    binder = built.binder
    if not binder.outputs:
        raise HipdnnError(ErrorCode.INVALID_VALUE, NO_OUTPUT_MESSAGE)
    bound = binder.bind(inputs, workspace, built.workspace_size, allow_missing_outputs=True)
    given = set(bound)
    if not getattr(built.plan, "allocates_outputs", False):
        for spec in binder.outputs:
            if spec.uid not in bound:
                bound[spec.uid] = _allocate(spec, binder.array_kind, bound)
    run_plan(built, bound, workspace)
    results = {cast("TensorAttributes", spec.tensor): bound[spec.uid] for spec in binder.outputs}
    if binder.array_kind == "torch" and not any(map(is_torch_tensor, inputs.values())):
        # a NumPy caller gets NumPy results whatever engine ran (zero-copy views of the CPU
        # tensors; outputs the caller passed in come back as the caller's own arrays)
        by_uid = {_key_uid(key): value for key, value in inputs.items()}
        for spec in binder.outputs:
            tensor = cast("TensorAttributes", spec.tensor)
            if spec.uid in given and isinstance(by_uid.get(spec.uid), np.ndarray):
                results[tensor] = by_uid[spec.uid]
            else:
                results[tensor] = as_numpy(results[tensor].detach().cpu(), spec.label)
    elif binder.array_kind != "torch":
        first = next((v for v in inputs.values() if is_torch_tensor(v)), None)
        if first is not None:  # a torch caller gets torch results whatever engine ran
            by_uid = {_key_uid(key): value for key, value in inputs.items()}
            for spec in binder.outputs:
                tensor = cast("TensorAttributes", spec.tensor)
                if spec.uid in given and is_torch_tensor(by_uid.get(spec.uid)):
                    results[tensor] = by_uid[spec.uid]  # the caller's own, written in place
                else:
                    results[tensor] = as_torch(results[tensor], spec.label).to(first.device)
    return results


def _key_uid(key: Any) -> Any:
    from ..tensor import TensorAttributes

    return key.uid if isinstance(key, TensorAttributes) else key


def _allocate(spec: TensorSpec, array_kind: str, bound: Mapping[int, Any]) -> Any:
    """An uninitialised buffer with the spec's shape, strides and type.

    A packed (ragged) output gets a packed buffer of the tokens its offsets reach, returned
    as a ``[T, H, D]`` view (:meth:`~hipdnn_graph.backend.ragged.RaggedLayout.token_view`).

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the memory cannot be had.
    """
    if spec.ragged is not None:
        layout = spec.ragged
        bounds = layout.token_bounds(bound[layout.offsets_uid])
        flat = TensorSpec(
            uid=spec.uid, name=spec.name, shape=(layout.elements_needed(bounds),), strides=(1,),
            data_type=spec.data_type, is_output=True,
        )  # fmt: skip
        return layout.token_view(_allocate(flat, array_kind, bound), int(bounds[-1]))
    if array_kind == "torch" and all(s >= 0 for s in spec.strides):
        import torch

        device = next((b.device for b in bound.values() if is_torch_tensor(b)), "cpu")
        try:
            return torch.empty_strided(
                spec.shape, spec.strides, dtype=spec.torch_dtype(), device=device
            )
        except (RuntimeError, MemoryError, OverflowError, ValueError) as exc:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Cannot allocate output {spec.label} of dims {list(spec.shape)} and strides "
                f"{list(spec.strides)} on {device}: {type(exc).__name__}: {exc}",
            ) from None
    from ..backend.dtypes import numpy_empty_strided

    return numpy_empty_strided(spec.shape, spec.strides, spec.data_type)


def run_plan(
    built: BuiltPlan, bound: dict[int, Any], workspace: Any, addresses: Hashable | None = None
) -> None:
    """Run the plan on a bound pack; with the pack's ``addresses`` (:meth:`VariantPackBinder.
    bind_keyed`) through the plan's optional ``execute_at`` (see :class:`ExecutionPlan`).

    Raises:
        HipdnnError: ``GRAPH_EXECUTION_FAILED`` wrapping what the engine raised.
    """
    try:
        execute_at = getattr(built.plan, "execute_at", None) if addresses is not None else None
        if execute_at is not None:
            execute_at(bound, workspace, addresses)
        else:
            built.plan.execute(bound, workspace)
    except HipdnnError:
        raise
    except Exception as exc:
        raise HipdnnError(
            ErrorCode.GRAPH_EXECUTION_FAILED,
            f"{built.engine.name} failed during execute: {type(exc).__name__}: {exc}",
        ) from exc


def execute(built: BuiltPlan, variant_pack: Mapping[Any, Any], workspace: Any) -> None:
    """Check the variant pack against the plan, then run it."""
    bound, addresses = built.binder.bind_keyed(variant_pack, workspace, built.workspace_size)
    run_plan(built, bound, workspace, addresses)


def warm_up(built: BuiltPlan) -> None:
    """Run a plan on torch tensors once on scratch device buffers (zeros; integer tensors and
    pass-by-value scalars one), so that its kernels are loaded before the caller's first
    execute: torch and cuDNN load a CUDA kernel, or build cuDNN's plan, at its first launch,
    as deserializing a cuDNN execution plan does up front. Nothing happens for host engines or
    without a device; a failure is logged (DEBUG) and left for the caller's first execute to
    report.

    Example:
        >>> import hipdnn_graph as hg
        >>> f32 = hg.DataType.FLOAT
        >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
        >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
        >>> o, _ = g.sdpa(q, q, q, name="a")
        >>> _ = o.set_output(True)
        >>> _ = g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
        >>> _ = g.build()
        >>> warm_up(g._state.active)  # a host engine: nothing to load
    """
    binder = built.binder
    if binder.array_kind != "torch" or not device_visible():
        return
    import torch

    try:
        pack = {spec.uid: _scratch(spec, torch) for spec in binder.specs}
        built.plan.execute(pack, None)
        torch.cuda.synchronize()
    except Exception as exc:  # the caller's own first execute reports what is wrong
        _LOG.debug("warming %s's plan failed: %s: %s", built.engine.name, type(exc).__name__, exc)


def _scratch(spec: TensorSpec, torch: Any) -> Any:
    """A device buffer laid out as ``spec`` says (zeros; ones for integers; 1 by value)."""
    if spec.pass_by_value:
        return 1
    dtype = spec.torch_dtype()
    elements = max(spec.span_bytes // max(dtype.itemsize, 1), 1)
    buffer = torch.zeros(elements, dtype=dtype, device="cuda")
    if not dtype.is_floating_point:
        buffer.fill_(1)
    return buffer.as_strided(spec.shape, spec.strides)
