"""A built graph's active plan, called without the variant-pack check, for callers that cache.

``Graph.execute`` and ``Graph.run`` check every buffer against the plan on every call (shape,
strides, dtype, writability, aliasing). A caller that keeps built graphs in a cache keyed by
every fact that check reads (the torch op keys its graphs by the shapes, strides, dtypes and
device of its tensors, and passes no output buffers, so nothing can alias or be read-only) has
done the check once, when the graph was built and first run; :class:`PreparedRun` then calls
the plan directly. Only plans of torch engines that allocate their own outputs qualify
(:func:`prepared_run` returns ``None`` for the others, which go through ``Graph.run``).

Example:
    >>> import torch, hipdnn_graph as hg
    >>> from hipdnn_graph.prepared import prepared_run
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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backend.variant_pack import TensorSpec, _scalar
from .lifecycle import BuiltPlan, _run_plan, active_plan

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["PreparedRun", "prepared_run"]


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
                buffers[spec.uid] = _scalar(value, spec)
        for uid in self._tensors:
            value = buffers[uid]
            if value.requires_grad:
                buffers[uid] = value.detach()
        _run_plan(self.built, buffers, None)
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
