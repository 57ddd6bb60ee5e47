"""A built graph's active plan, called without the variant-pack check, for callers that cache.

Two forms, fastest first:

* :class:`PreparedLaunch` (:func:`prepared_launch`): the plan's launcher
  (:class:`~hipdnn_graph.backend.Launcher`), its kernel with everything fixed at build time
  bound, called on positional buffers; it returns the outputs. Plans that offer one: the torch
  engines' one-node plans (every graph of the torch op) except the flex backward (see the torch
  backend's ``_launch``).
* :class:`PreparedRun` (:func:`prepared_run`): the plan's ``execute`` on a ``{uid: buffer}``
  dict, for torch plans that allocate their outputs.

``Graph.execute`` and ``Graph.run`` check every buffer against the plan on every call (shape,
strides, dtype, writability, aliasing). A caller that keeps built graphs in a cache keyed by
every fact that check reads (the torch op keys its graphs by the shapes, strides, dtypes and
device of its tensors, and passes no output buffers, so nothing can alias or be read-only) has
done the check once, when the graph was built and first run; :class:`PreparedRun` then calls
the plan directly. Only plans of torch engines that allocate their own outputs qualify
(:func:`prepared_run` returns ``None`` for the others, which go through ``Graph.run``).

Example:
    >>> import torch, hipdnn_graph as hg
    >>> from hipdnn_graph.graph.prepared import prepared_launch, prepared_run
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    >>> _ = o.set_output(True)
    >>> _ = g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    >>> run = prepared_run(g)
    >>> x = torch.ones(1, 1, 4, 8)
    >>> run({t.get_uid(): x for t in g.graph_inputs()})[o.get_uid()].shape
    torch.Size([1, 1, 4, 8])
    >>> launch = prepared_launch(g)
    >>> launch.outputs == (o.get_uid(),), [t.shape for t in launch([x, x, x])]
    (True, [torch.Size([1, 1, 4, 8])])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..backend.tensor_spec import TensorSpec, scalar_value
from ..errors import HipdnnError
from ..types import ErrorCode
from .execution import BuiltPlan, run_plan
from .lifecycle import active_plan

if TYPE_CHECKING:
    from ..backend.contract import Launcher
    from . import Graph

__all__ = ["PreparedLaunch", "PreparedRun", "prepared_launch", "prepared_run"]


class PreparedRun:
    """Calls one built plan on ``{uid: buffer}``; returns that dict with the outputs added.

    The buffers must be what the plan's variant-pack check would accept (torch tensors of the
    declared shapes, strides, dtypes, dense, on one device; no output buffers): nothing is
    checked. What the check would convert is converted the same way: runtime scalars are read
    as numbers, and tensors that require grad are passed detached (engines read their inputs,
    they never train them; compiled kernels are guarded on ``requires_grad``). Engine failures
    raise as in ``execute``.

    Args:
        built: the plan, from a graph whose plans were built.
    """

    def __init__(self, built: BuiltPlan) -> None:
        self.built = built
        self.engine_name: str = built.engine.name
        self._scalars: tuple[TensorSpec, ...] = tuple(
            s for s in built.binder.specs if s.pass_by_value
        )
        self._tensors: tuple[int, ...] = tuple(
            s.uid for s in built.binder.specs if not s.pass_by_value and not s.is_output
        )

    def __call__(self, buffers: dict[int, Any]) -> dict[int, Any]:
        """Run the plan on ``buffers`` (a dict the caller hands over; outputs are added to it).

        Raises:
            HipdnnError: ``INVALID_VARIANT_PACK`` for a runtime scalar that is no single number;
                ``GRAPH_EXECUTION_FAILED`` when the engine fails.
        """
        for spec in self._scalars:
            value = buffers[spec.uid]
            if type(value) is not float and type(value) is not int:
                buffers[spec.uid] = scalar_value(value, spec)
        for uid in self._tensors:
            value = buffers[uid]
            if value.requires_grad:
                buffers[uid] = value.detach()
        run_plan(self.built, buffers, None)
        return buffers


def prepared_run(graph: Graph) -> PreparedRun | None:
    """The prepared call of ``graph``'s active plan, or ``None`` when its engine does not take
    torch tensors and allocate its own outputs (call ``graph.run`` then).

    Raises:
        HipdnnError: ``INVALID_VALUE`` before plans exist.
    """
    built = active_plan(graph._state)
    if (
        built.binder.array_kind != "torch"
        or not getattr(built.plan, "allocates_outputs", False)
        or built.workspace_size
    ):
        return None
    return PreparedRun(built)


class PreparedLaunch:
    """Calls one built plan's launcher on a list of buffers; returns the outputs.

    The buffers are those of ``inputs`` (uids), in that order, and must be what the plan's
    variant-pack check would accept (torch tensors of the declared shapes, strides and dtypes,
    dense, on the device of the first call; runtime pass-by-value scalars as Python numbers):
    nothing is checked. Tensors that require grad are passed detached, as the check would pass
    them. The outputs come back in ``outputs`` (uids) order; engine failures raise as in
    ``execute``.

    Args:
        built: the plan.
        launch: its launcher (``built.plan.launcher()``).
    """

    def __init__(self, built: BuiltPlan, launch: Launcher) -> None:
        self.built = built
        self.engine_name: str = built.engine.name
        self.inputs: tuple[int, ...] = launch.inputs
        self.outputs: tuple[int, ...] = launch.outputs
        self._call = launch.call
        #: the kernel's differentiable form, once known (:attr:`Launcher.autograd`)
        self.autograd = launch.autograd
        scalars = {s.uid for s in built.binder.specs if s.pass_by_value}
        #: positions of the tensors among the inputs (their requires_grad is read per call)
        self._tensors = tuple(i for i, uid in enumerate(launch.inputs) if uid not in scalars)

    def __call__(self, buffers: list[Any]) -> Sequence[Any]:
        """Run the launcher on ``buffers`` (a list the caller hands over: it may be changed).

        Raises:
            HipdnnError: ``GRAPH_EXECUTION_FAILED`` when the engine fails.
        """
        for i in self._tensors:
            if buffers[i].requires_grad:
                buffers[i] = buffers[i].detach()
        try:
            return self._call(*buffers)
        except HipdnnError:
            raise
        except Exception as exc:
            raise HipdnnError(
                ErrorCode.GRAPH_EXECUTION_FAILED,
                f"{self.engine_name} failed during execute: {type(exc).__name__}: {exc}",
            ) from exc


def prepared_launch(graph: Graph) -> PreparedLaunch | None:
    """The prepared launcher of ``graph``'s active plan, or ``None`` when its plan offers none
    (call :func:`prepared_run` or ``graph.run`` then).

    Raises:
        HipdnnError: ``INVALID_VALUE`` before plans exist.
    """
    built = active_plan(graph._state)
    if built.binder.array_kind != "torch" or built.workspace_size:
        return None
    make = getattr(built.plan, "launcher", None)
    launch = make() if callable(make) else None
    if launch is None:
        return None
    outputs = {s.uid for s in built.binder.outputs}
    inputs = {s.uid for s in built.binder.specs} - outputs
    if not set(launch.inputs) <= inputs or set(launch.outputs) != outputs:
        return None  # a launcher that reads other tensors or misses an output is not used
    return PreparedLaunch(built, launch)
