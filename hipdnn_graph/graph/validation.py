"""``Graph.validate()`` and ``Graph.is_validated``: hipDNN's graph checks, in hipDNN's order,
and whether anything they read changed since.

:class:`GraphValidation` is a mixin of :class:`~hipdnn_graph.Graph`.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[2, 8])
    >>> y = g.pointwise(x, hg.PointwiseAttributes().set_mode(hg.PointwiseMode.RELU_FWD))
    >>> g.is_validated
    False
    >>> g.validate(); g.is_validated, y.get_dim()
    (True, [2, 8])
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..changes import CLOCK, changed_since
from ..nodes.base import Node
from ..nodes.input_memo import InputRuleMemo
from ..tensor import TensorAttributes
from . import rules as rules

if TYPE_CHECKING:
    from ..attributes.graph_attributes import GraphAttributes

__all__ = ["GraphValidation"]

AnyNode = Node[Any]


class GraphValidation:
    """The ``Graph`` methods that validate it (mixed into ``Graph``)."""

    attributes: GraphAttributes
    _nodes: list[AnyNode]
    _order: list[int] | None
    _validated: bool
    _validated_at: int

    if TYPE_CHECKING:

        @property
        def nodes(self) -> list[AnyNode]: ...

    def validate(self) -> None:
        """Validate the graph as hipDNN does.

        1. duplicate uids; 2. topological sort (cycle / disconnected components);
        3. every graph input is filled from the graph's types and validated;
        4. every node runs pre-validate → infer → post-validate, in topological order;
        5. then this project's graph rules, after all of hipDNN's: each tensor is written by
           one node at most, and no graph input is virtual (nothing would fill it).

        Raises:
            HipdnnError: the first broken rule, with hipDNN's code and message (``INVALID_VALUE``
                with a message of ours for step 5).
        """
        self._validated = False
        with rules.collector_paused(len(self._nodes)):
            self._validate_steps()
        self._validated = True
        self._validated_at = CLOCK.now

    def _sort(
        self, ins: Sequence[Iterable[TensorAttributes]], producers: dict[int, int]
    ) -> list[int]:
        from .ordering import producer_edges, stable_topological_order

        return stable_topological_order(len(self._nodes), producer_edges(ins, producers))

    def _validate_steps(self) -> None:
        """The steps of :meth:`validate`. Its per-node lists are freed when it returns, before
        the garbage collector resumes: the collector would scan each of them once.

        The graph-level steps read the nodes' slot maps as they are: none of them depends on the
        order of a node's slots (``graph_inputs`` sorts the slots of the few nodes that read a
        tensor it has not found yet), so no sorted copy of each node's slots is made."""
        from .ordering import last_producers

        in_slots = [n.attributes.inputs for n in self._nodes]
        ins = [slots.values() for slots in in_slots]
        outs = [n.attributes.outputs.values() for n in self._nodes]
        rules.check_duplicate_uids(ins, outs)
        producers = last_producers(outs)  # who writes each tensor, for the next three steps
        offsets = rules.ragged_offsets(t for slots in (*ins, *outs) for t in slots)
        rules.check_offsets_are_inputs(offsets, producers)
        self._order = self._sort(ins, producers)
        inputs = rules.graph_inputs(self._order, in_slots, producers)
        seen = {id(t) for t in inputs}
        inputs += [t for t in offsets if id(t) not in seen]
        for tensor in inputs:
            tensor.fill_from_context(self.attributes)
            tensor.check()
        attributes = self.attributes
        # rules passed in this pass only (the next validate() checks all again); a single node
        # has nothing to share
        memo = InputRuleMemo() if len(self._nodes) > 1 else None
        for node in self.nodes:
            if node.graph_attributes is not attributes:
                node.graph_attributes = attributes
            node.validate_node(memo)
        rules.check_single_producer(self._nodes, outs, producers)
        rules.check_real_inputs(inputs)

    @property
    def is_validated(self) -> bool:
        """Whether :meth:`validate` succeeded and nothing it checked changed since.

        Any setter called on the graph, its attributes, one of its nodes' attributes or one of
        the tensors in their slots after ``validate()`` clears it (``build()`` then validates
        again). When nothing anywhere changed since, this is a single comparison.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT,
            ...              compute_data_type=hg.DataType.FLOAT)
            >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
            >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"))
            >>> g.validate(); g.is_validated
            True
            >>> _ = q.set_dim([1, 1, 4, 16]); g.is_validated
            False
        """
        if not self._validated:
            return False
        mark = self._validated_at
        if CLOCK.now != mark and changed_since(self._validated_objects(), mark):
            self._validated = False
            return False
        self._validated_at = CLOCK.now  # nothing of ours changed: next time is one comparison
        return True

    def _validated_objects(self) -> Iterator[Any]:
        """What ``validate()`` read: graph attributes, node attributes, their slots' tensors."""
        yield self.attributes
        for node in self._nodes:
            attributes = node.attributes
            yield attributes
            yield from attributes.inputs.values()
            yield from attributes.outputs.values()
            yield from rules.ragged_offsets(
                [*attributes.inputs.values(), *attributes.outputs.values()]
            )
