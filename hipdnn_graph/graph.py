"""The ``Graph`` builder: declare tensors and nodes, then validate like hipDNN.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="attn", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT,
    ...              compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 16, 64])
    >>> k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    >>> o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
    >>> do = g.tensor_like(q, "dO")
    >>> dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
    >>> for t in (dq, dk, dv):
    ...     _ = t.set_output(True)
    >>> g.validate()
    >>> [n.name for n in g.nodes], dq.get_dim(), o.get_name()
    (['fwd', 'bwd'], [1, 2, 16, 64], 'fwd::O')
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from . import graph_rules as rules
from . import lifecycle
from .attributes.graph_attributes import GraphAttributes
from .attributes.sdpa import SdpaAttributes
from .attributes.sdpa_backward import SdpaBackwardAttributes
from .backend.contract import engine_id
from .changes import CLOCK, changed_since
from .descriptors.wire_model import WireMetadata
from .errors import HipdnnError
from .family_builders import FamilyBuilders, name_unnamed
from .keyword_types import SdpaBackwardKeywords, SdpaKeywords, TensorKeywords
from .lifecycle import GraphLifecycle
from .nodes.base import Node
from .nodes.input_memo import InputRuleMemo
from .nodes.sdpa_bwd import SdpaBwdNode
from .nodes.sdpa_fwd import SdpaFwdNode
from .resample_builders import ResampleBuilders
from .sdpa_keywords import BACKWARD_KEYWORDS, FORWARD_KEYWORDS, apply_keywords
from .serialization import GraphSerialization
from .tensor import DataTypeLike, TensorAttributes, generate_strides
from .types import DataType, ErrorCode

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Graph"]

AnyNode = Node[Any]


class Graph(FamilyBuilders, ResampleBuilders, GraphLifecycle, GraphSerialization):
    """A hipDNN-style operation graph.

    Args:
        name: the graph's name.
        io_data_type: data type given to non-virtual tensors that have none.
        intermediate_data_type: data type given to virtual tensors that have none.
        compute_data_type: compute type given to nodes that have none.
        attributes: a :class:`GraphAttributes` to start from (copied) instead of the keywords.
    """

    def __init__(
        self,
        name: str = "",
        io_data_type: DataTypeLike = DataType.NOT_SET,
        intermediate_data_type: DataTypeLike = DataType.NOT_SET,
        compute_data_type: DataTypeLike = DataType.NOT_SET,
        *,
        attributes: GraphAttributes | None = None,
    ) -> None:
        if attributes is not None:
            if not isinstance(attributes, GraphAttributes):
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Graph(attributes=) expects GraphAttributes, not {type(attributes).__name__}",
                )
            self.attributes = attributes.model_copy()
        else:
            if not isinstance(name, str):
                raise HipdnnError(ErrorCode.INVALID_VALUE, "Graph name must be a string")
            self.attributes = GraphAttributes(name=name)
            self.attributes.set_io_data_type(io_data_type)
            self.attributes.set_intermediate_data_type(intermediate_data_type)
            self.attributes.set_compute_data_type(compute_data_type)
        self._nodes: list[AnyNode] = []
        self._order: list[int] | None = None
        # every tensor the graph has seen, in declaration order (id -> handle)
        self._tensors: dict[int, TensorAttributes] = {}
        # tensors a decoded graph listed (ids): serialized even when no node uses them
        self._listed: set[int] = set()
        self._validated = False
        # the change clock's time when validate() last succeeded (see is_validated)
        self._validated_at = 0
        self._preferred_engine_id: int | None = None
        self._state = lifecycle.PlanState()  # lowering and plans (see lifecycle.py)
        #: hipDNN's graph fields the frontend does not use (id, engine-API floor, override flag),
        #: kept through serialization round trips
        self.wire_metadata = WireMetadata()

    @classmethod
    def from_parts(
        cls,
        attributes: GraphAttributes,
        tensors: Iterable[TensorAttributes],
        nodes: Iterable[AnyNode],
        *,
        preferred_engine_id: int | None = None,
        wire_metadata: WireMetadata | None = None,
    ) -> Graph:
        """A graph made of parts that are already built: what a decoder or a descriptor lift has.

        Tensors keep the given order (then any further tensor the nodes hold, in node order);
        nodes keep theirs. Every given tensor stays part of the graph's serialized form
        (:meth:`wire_tensors`) even when no node uses it, so that a decoded graph writes back
        what it read. Nothing is validated.

        Args:
            attributes: The graph attributes (copied).
            tensors: The graph's tensors, in the order to keep.
            nodes: The nodes, each holding tensors of ``tensors``.
            preferred_engine_id: The preferred engine's 64-bit id, if any.
            wire_metadata: hipDNN's id, engine-API floor and override flag, if any.

        Example:
            >>> import hipdnn_graph as hg
            >>> q = hg.TensorAttributes(name="Q", dim=[1, 1, 4, 8])
            >>> a = hg.SdpaAttributes().set_name("f").set_q(q).set_k(q).set_v(q)
            >>> a = a.set_o(hg.TensorAttributes(name="O"))
            >>> g = hg.Graph.from_parts(hg.GraphAttributes(name="g"), [q], [hg.SdpaFwdNode(a)])
            >>> [t.name for t in g.tensors], g.nodes[0].name
            (['Q', 'O'], 'f')
        """
        graph = cls(attributes=attributes)
        for tensor in tensors:
            graph._track(tensor)
            graph._listed.add(id(tensor))
        for node in nodes:
            graph.add_node(node)
        if preferred_engine_id is not None:
            graph.set_preferred_engine_id_ext(preferred_engine_id)
        if wire_metadata is not None:
            graph.wire_metadata = wire_metadata
        return graph

    def __repr__(self) -> str:
        return (
            f"Graph(name={self.attributes.name!r}, nodes={[n.name for n in self._nodes]}, "
            f"tensors={len(self._tensors)})"
        )

    # ----- graph attributes -----
    def set_name(self, name: str) -> Graph:
        self.attributes.set_name(name)
        return self._changed()

    def set_io_data_type(self, data_type: DataTypeLike) -> Graph:
        self.attributes.set_io_data_type(data_type)
        return self._changed()

    def set_intermediate_data_type(self, data_type: DataTypeLike) -> Graph:
        self.attributes.set_intermediate_data_type(data_type)
        return self._changed()

    def set_compute_data_type(self, data_type: DataTypeLike) -> Graph:
        self.attributes.set_compute_data_type(data_type)
        return self._changed()

    def get_name(self) -> str:
        return self.attributes.name

    def get_io_data_type(self) -> DataType:
        return self.attributes.io_data_type

    def get_intermediate_data_type(self) -> DataType:
        return self.attributes.intermediate_data_type

    def get_compute_data_type(self) -> DataType:
        return self.attributes.compute_data_type

    def _changed(self) -> Graph:
        self._validated = False
        if self._state.lowered or self._state.candidates is not None:
            self._state = lifecycle.PlanState()
        return self

    def set_preferred_engine_id_ext(self, engine: int | str | None) -> Graph:
        """Rank this engine first whenever it applies (an engine id, or an engine name).

        A name is checked here, against the engines registered in this process, so that a
        misspelled name fails at once instead of silently ranking another engine first. An id
        is not checked (as in hipDNN, an id no engine has is ignored when plans are ranked):
        pass ``hg.backend.engine_id(name)`` to prefer an engine that may not be installed.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph().set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
            >>> g.get_preferred_engine_id_ext() == hg.backend.engine_id("NUMPY_REFERENCE_ENGINE")
            True

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a name no registered engine has (the message
                lists the registered engines), or a value that is neither a name nor a
                64-bit id.
        """
        if isinstance(engine, str):
            rules.check_engine_name(engine)
            self._preferred_engine_id = engine_id(engine)
        elif engine is None:
            self._preferred_engine_id = None
        elif isinstance(engine, int) and not isinstance(engine, bool) and 0 <= engine < 2**64:
            self._preferred_engine_id = engine
        else:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Preferred engine must be an engine name or a 64-bit id, got {engine!r}",
            )
        self._state = lifecycle.PlanState()
        return self

    def get_preferred_engine_id_ext(self) -> int | None:
        """The preferred engine id, or ``None``."""
        return self._preferred_engine_id

    # ----- tensors -----
    def tensor(
        self, attributes: TensorAttributes | None = None, /, **fields: Unpack[TensorKeywords]
    ) -> TensorAttributes:
        """Declare a tensor, from an attributes object or from keywords.

        Strides default to packed row-major when dims are given without strides. The keywords
        are typed (:class:`~hipdnn_graph.keyword_types.TensorKeywords`), so a type checker flags
        a misspelled one.

        Example:
            >>> import hipdnn_graph as hg
            >>> hg.Graph().tensor(name="Q", dim=[2, 4, 8, 16]).get_stride()
            [512, 128, 16, 1]

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or a badly typed value.
        """
        if attributes is None:
            tensor = TensorAttributes(**fields)
        elif not isinstance(attributes, TensorAttributes):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Graph.tensor() expects a TensorAttributes, got {type(attributes).__name__}",
            )
        elif fields:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "Graph.tensor() takes either an attributes object or keywords, not both",
            )
        else:
            tensor = attributes
        if tensor.dim and not tensor.stride:
            tensor.stride = generate_strides(tensor.dim)
        self._track(tensor)
        self._changed()
        return tensor

    def tensor_like(self, tensor: TensorAttributes | Any, name: str = "") -> TensorAttributes:
        """Declare a new non-virtual tensor shaped like ``tensor``.

        ``tensor`` is a :class:`TensorAttributes` (its type, dims, strides and alignment; the
        uid is not copied, so the new tensor gets its own), or, as in cudnn-frontend, an array:
        a NumPy array, a torch tensor (any device, ``meta`` too) or any DLPack producer, whose
        dims, element strides and data type are declared. A one-element array in ``cpu``
        memory declares a runtime pass-by-value scalar (its value is passed at execute time);
        any other array declares an ordinary tensor (see
        :func:`hipdnn_graph.backend.dlpack.runtime_scalar`).

        Example:
            >>> import numpy as np, hipdnn_graph as hg
            >>> g = hg.Graph()
            >>> q = g.tensor_like(np.zeros((1, 2, 8, 16), np.float16), "Q")
            >>> q.get_dim(), q.get_stride(), q.get_data_type().name, q.get_is_pass_by_value()
            ([1, 2, 8, 16], [256, 128, 16, 1], 'HALF', False)
            >>> g.tensor_like(np.float32(0.125).reshape(1), "scale").get_is_pass_by_value()
            True

        Raises:
            HipdnnError: ``INVALID_VALUE`` for anything else, or an array whose dtype hipDNN
                lacks (see :func:`hipdnn_graph.backend.array_info.describe_array`).
        """
        if isinstance(tensor, TensorAttributes):
            return self.tensor(
                TensorAttributes(
                    name=name,
                    data_type=tensor.data_type,
                    dim=list(tensor.dim),
                    stride=list(tensor.stride),
                    alignment=tensor.alignment,
                )
            )
        from .backend.array_info import describe_array

        info = describe_array(tensor, "Graph.tensor_like()")
        return self.tensor(
            TensorAttributes(
                name=name,
                data_type=info.data_type,
                dim=info.dims,
                stride=info.strides,
                is_pass_by_value=info.is_runtime_scalar,
            )
        )

    def _track(self, tensor: TensorAttributes) -> None:
        self._tensors.setdefault(id(tensor), tensor)

    @property
    def tensors(self) -> list[TensorAttributes]:
        """Every tensor declared in or created by the graph, in declaration order."""
        return list(self._tensors.values())

    # ----- nodes -----
    def _output_tensor(self, name: str) -> TensorAttributes:
        tensor = TensorAttributes(name=name, is_virtual=True)
        self._track(tensor)
        return tensor

    def _add_node(self, node: AnyNode) -> None:
        for tensor in node.inputs():
            self._track(tensor)
        for tensor in node.outputs():
            self._track(tensor)
        self._nodes.append(node)
        self._order = None
        self._changed()

    def _node_attributes(
        self, given: Any, cls: type[Any], keywords: Mapping[str, Any], op: str, table: Any
    ) -> Any:
        if given is None:
            attributes = cls()
        elif isinstance(given, cls):
            attributes = given.copy_for_node()  # the caller's object stays as it was
        else:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{op}() expects {cls.__name__} attributes, got {type(given).__name__}",
            )
        apply_keywords(attributes, keywords, table, op)
        if not attributes.name:
            attributes.name = f"{_PREFIX[cls]}_{len(self._nodes)}"
        return attributes

    def sdpa(
        self,
        q: TensorAttributes,
        k: TensorAttributes,
        v: TensorAttributes,
        attributes: SdpaAttributes | None = None,
        **keywords: Unpack[SdpaKeywords],
    ) -> tuple[TensorAttributes, TensorAttributes | None]:
        """Add an SDPA forward node; returns virtual ``(O, Stats)``.

        Stats is ``None`` when ``generate_stats`` is False (inference). Keywords use
        cudnn-frontend's spellings (``name``, ``attn_scale``, ``bias``, ``use_causal_mask``,
        ``use_causal_mask_bottom_right``, ``use_padding_mask``, ``seq_len_q``, ``seq_len_kv``,
        ``diagonal_alignment``, ``diagonal_band_left_bound``, ``diagonal_band_right_bound``,
        ``dropout=(p, seed, offset)`` or ``(mask, scale)``, ``generate_stats``, ``is_inference``),
        typed by :class:`~hipdnn_graph.keyword_types.SdpaKeywords` so that a type checker flags
        a misspelled keyword such as ``use_casual_mask``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or wrong argument type.
        """
        a: SdpaAttributes = self._node_attributes(
            attributes, SdpaAttributes, keywords, "sdpa", FORWARD_KEYWORDS
        )
        a.set_q(q).set_k(k).set_v(v)
        o = self._output_tensor(f"{a.name}::O")
        a.set_o(o)
        stats = None
        if a.generate_stats is not False:
            stats = self._output_tensor(f"{a.name}::Stats")
            a.set_stats(stats)
        self._add_node(SdpaFwdNode(a, self.attributes))
        return o, stats

    def sdpa_backward(
        self,
        q: TensorAttributes,
        k: TensorAttributes,
        v: TensorAttributes,
        o: TensorAttributes,
        dO: TensorAttributes,
        stats: TensorAttributes,
        attributes: SdpaBackwardAttributes | None = None,
        **keywords: Unpack[SdpaBackwardKeywords],
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes]:
        """Add an SDPA backward node; returns virtual ``(dQ, dK, dV)`` named ``<node>::dQ`` ….

        Unnamed Q, K, V and dO inputs are renamed ``<node>::Q`` … ``<node>::dO`` (O and Stats
        keep their names). dBias is only produced when a ``dBias`` tensor is given. Keywords as in
        :meth:`sdpa`, plus ``dBias``; ``dropout`` is ``(p, seed, offset)`` or
        ``(mask, scale, scale_inv)`` (typed by
        :class:`~hipdnn_graph.keyword_types.SdpaBackwardKeywords`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or wrong argument type.
        """
        a: SdpaBackwardAttributes = self._node_attributes(
            attributes, SdpaBackwardAttributes, keywords, "sdpa_backward", BACKWARD_KEYWORDS
        )
        a.set_q(q).set_k(k).set_v(v).set_o(o).set_do(dO).set_stats(stats)
        name_unnamed(a.name, ((q, "Q"), (k, "K"), (v, "V"), (dO, "dO")))
        dq = self._output_tensor(f"{a.name}::dQ")
        dk = self._output_tensor(f"{a.name}::dK")
        dv = self._output_tensor(f"{a.name}::dV")
        a.set_dq(dq).set_dk(dk).set_dv(dv)
        self._add_node(SdpaBwdNode(a, self.attributes))
        return dq, dk, dv

    def add_node(self, node: AnyNode) -> AnyNode:
        """Add an already built node (for example one lifted from a descriptor)."""
        if not isinstance(node, Node):
            raise HipdnnError(ErrorCode.INVALID_VALUE, "Graph.add_node() expects a Node")
        node.graph_attributes = self.attributes
        self._add_node(node)
        return node

    # ----- structure -----
    @property
    def nodes(self) -> list[AnyNode]:
        """The nodes, topologically sorted once validated (insertion order before)."""
        if self._order is None:
            return list(self._nodes)
        return [self._nodes[i] for i in self._order]

    def __iter__(self) -> Iterator[AnyNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def _sort(
        self, ins: Sequence[Iterable[TensorAttributes]], producers: dict[int, int]
    ) -> list[int]:
        from .ordering import producer_edges, stable_topological_order

        return stable_topological_order(len(self._nodes), producer_edges(ins, producers))

    def to_networkx(self) -> nx.DiGraph:
        """The node dependency graph: one networkx node per graph node (by name), one edge per
        producer→consumer pair with the tensors' names in the edge's ``tensors`` attribute."""
        from .ordering import to_networkx

        producer: dict[int, int] = {}
        for index, node in enumerate(self._nodes):
            for t in node.outputs():
                producer.setdefault(id(t), index)
        labelled = [
            (producer[id(t)], index, t.name)
            for index, node in enumerate(self._nodes)
            for t in node.inputs()
            if id(t) in producer
        ]
        return to_networkx([n.name for n in self._nodes], labelled, self._nodes)

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text (see :func:`hipdnn_graph.visualize.to_dot`)."""
        from .visualize import to_dot

        return to_dot(self)

    def to_mermaid(self) -> str:
        """The graph as a Mermaid flowchart (see :func:`hipdnn_graph.visualize.to_mermaid`)."""
        from .visualize import to_mermaid

        return to_mermaid(self)

    def graph_inputs(self) -> list[TensorAttributes]:
        """Tensors read by some node and produced by none, in node then slot order."""
        from .ordering import last_producers

        order = self._order if self._order is not None else range(len(self._nodes))
        produced = last_producers([n.attributes.outputs.values() for n in self._nodes])
        return rules.graph_inputs(order, [n.attributes.inputs for n in self._nodes], produced)

    def graph_tensors(self) -> list[TensorAttributes]:
        """Every tensor some node reads or writes, in declaration order."""
        used: set[int] = set()
        for node in self._nodes:  # slot order does not matter here: read the slot dicts
            used.update(map(id, node.attributes.inputs.values()))
            used.update(map(id, node.attributes.outputs.values()))
        return [t for key, t in self._tensors.items() if key in used]

    def wire_tensors(self) -> list[TensorAttributes]:
        """The tensors the graph's serialized form lists, in declaration order: every tensor some
        node reads or writes, and every tensor a decoded graph listed although no node uses it
        (hipDNN's wire may list such tensors; they are written back as read).

        Example:
            >>> import hipdnn_graph as hg
            >>> spare = hg.TensorAttributes(name="spare", uid=7)
            >>> g = hg.Graph.from_parts(hg.GraphAttributes(), [spare], [])
            >>> [t.name for t in g.wire_tensors()], g.graph_tensors()
            (['spare'], [])
        """
        used = self._listed.copy()
        for node in self._nodes:
            used.update(map(id, node.attributes.inputs.values()))
            used.update(map(id, node.attributes.outputs.values()))
        return [t for key, t in self._tensors.items() if key in used]

    # ----- validation -----
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
        self._order = self._sort(ins, producers)
        inputs = rules.graph_inputs(self._order, in_slots, producers)
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


_PREFIX: dict[type[Any], str] = {
    SdpaAttributes: SdpaFwdNode.name_prefix,
    SdpaBackwardAttributes: SdpaBwdNode.name_prefix,
}
