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

from collections.abc import Iterable
from typing import Any, Unpack

from ..attributes.graph_attributes import GraphAttributes
from ..backend.contract import engine_id
from ..descriptors.wire_model import WireMetadata
from ..errors import HipdnnError
from ..nodes.base import Node
from ..serialization import GraphSerialization
from ..tensor import DataTypeLike, TensorAttributes, generate_strides
from ..types import DataType, ErrorCode
from . import lifecycle
from . import rules as rules
from .autotune import GraphAutotune
from .builders.families import FamilyBuilders
from .builders.keyword_types import TensorKeywords
from .builders.resample import ResampleBuilders
from .builders.sdpa import SdpaBuilders
from .compiled_plans import CompiledPlans
from .engine_configs import EngineConfigs
from .lifecycle import GraphLifecycle
from .selection import EngineSelection
from .structure import GraphStructure
from .validation import GraphValidation

__all__ = ["Graph"]

AnyNode = Node[Any]


class Graph(
    SdpaBuilders,
    FamilyBuilders,
    ResampleBuilders,
    GraphStructure,
    GraphValidation,
    GraphLifecycle,
    EngineConfigs,
    EngineSelection,
    GraphAutotune,
    CompiledPlans,
    GraphSerialization,
):
    """A hipDNN-style operation graph.

    This module holds its construction, its attributes and its tensors; its other methods come
    from one mixin each: attention builders (:mod:`~hipdnn_graph.graph.builders.sdpa`), the other
    families' builders (:mod:`~hipdnn_graph.graph.builders.families`,
    :mod:`~hipdnn_graph.graph.builders.resample`), structure (:mod:`~hipdnn_graph.graph.structure`),
    validation (:mod:`~hipdnn_graph.graph.validation`), plans and execution
    (:mod:`~hipdnn_graph.graph.lifecycle`) and serialization (:mod:`~hipdnn_graph.serialization`).

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
        self._decoded = False

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
            graph._decoded = True
        return graph

    @property
    def is_decoded(self) -> bool:
        """True for a graph decoded from hipDNN's bytes or JSON (:meth:`from_parts` with wire
        metadata): it writes back the wire metadata it read, the engine-API floor included, where
        a graph built here has the floor its features need stamped (:mod:`hipdnn_graph.wire`)."""
        return self._decoded

    def __repr__(self) -> str:
        return (
            f"Graph(name={self.attributes.name!r}, nodes={[n.name for n in self._nodes]}, "
            f"tensors={len(self._tensors)})"
        )

    # ----- graph attributes -----
    def set_name(self, name: str) -> Graph:
        """Rename the graph (its plans are dropped; returns the graph)."""
        self.attributes.set_name(name)
        return self._changed()

    def set_io_data_type(self, data_type: DataTypeLike) -> Graph:
        """The type given to non-virtual tensors that have none (returns the graph)."""
        self.attributes.set_io_data_type(data_type)
        return self._changed()

    def set_intermediate_data_type(self, data_type: DataTypeLike) -> Graph:
        """The type given to virtual tensors that have none (returns the graph)."""
        self.attributes.set_intermediate_data_type(data_type)
        return self._changed()

    def set_compute_data_type(self, data_type: DataTypeLike) -> Graph:
        """The compute type given to nodes that have none (returns the graph)."""
        self.attributes.set_compute_data_type(data_type)
        return self._changed()

    def get_name(self) -> str:
        """The graph's name."""
        return self.attributes.name

    def get_io_data_type(self) -> DataType:
        """The type non-virtual tensors without one get at validation."""
        return self.attributes.io_data_type

    def get_intermediate_data_type(self) -> DataType:
        """The type virtual tensors without one get at validation."""
        return self.attributes.intermediate_data_type

    def get_compute_data_type(self) -> DataType:
        """The compute type nodes without one get at validation."""
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
        When the preferred engine is passed over (it refuses the graph, no engine has the id,
        or its plan fails to build), the ``hipdnn_graph.engines`` logger says so at INFO.

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

    def set_override_shape_enabled(self, enabled: bool = True) -> Graph:
        """Let ``execute`` take override shapes (hipDNN's and cudnn-frontend's flag; returns the
        graph).

        Set it before the plans are built: the declared dims become the maximum shape, only
        engines that declare ``supports_override_shapes`` are ranked (the others refuse, naming
        override shapes), and ``execute(..., override_uids=, override_shapes=,
        override_strides=)`` then runs smaller shapes with the same graph
        (:mod:`hipdnn_graph.graph.overrides`). Plans built already keep the flag they were built
        with, as in hipDNN; plans not yet built are ranked again. The flag travels in hipDNN's
        bytes and JSON (``is_override_shape_enabled``).

        Example:
            >>> import hipdnn_graph as hg
            >>> hg.Graph().set_override_shape_enabled(True).is_override_shape_enabled()
            True

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a bool.
        """
        if not isinstance(enabled, bool):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"set_override_shape_enabled() expects a bool, got {enabled!r}",
            )
        self.wire_metadata.is_override_shape_enabled = enabled
        if not self._state.plans:
            self._state = lifecycle.PlanState()
        return self

    def is_override_shape_enabled(self) -> bool:
        """Whether ``execute`` may take override shapes (see :meth:`set_override_shape_enabled`)."""
        return self.wire_metadata.is_override_shape_enabled

    # ----- tensors -----
    def tensor(
        self, attributes: TensorAttributes | None = None, /, **fields: Unpack[TensorKeywords]
    ) -> TensorAttributes:
        """Declare a tensor, from an attributes object or from keywords.

        Strides default to packed row-major when dims are given without strides. The keywords
        are typed (:class:`~hipdnn_graph.graph.builders.keyword_types.TensorKeywords`), so a
        type checker flags a misspelled one.

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
        from ..backend.array_info import describe_array

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
        self.graph_tensors()  # tracks an offsets tensor set after its ragged tensor joined
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

    def add_node(self, node: AnyNode) -> AnyNode:
        """Add an already built node (for example one lifted from a descriptor)."""
        if not isinstance(node, Node):
            raise HipdnnError(ErrorCode.INVALID_VALUE, "Graph.add_node() expects a Node")
        node.graph_attributes = self.attributes
        self._add_node(node)
        return node
