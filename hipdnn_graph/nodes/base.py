"""The node lifecycle shared by every node: pre-validate → infer → post-validate."""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import Any, ClassVar, Generic, Self, TypeVar, get_args

from ..attributes.base import NodeAttributes
from ..attributes.graph_attributes import GraphAttributes
from ..changes import touch
from ..descriptors.backend_descriptor import BackendDescriptor
from ..descriptors.node_spec import NodeSpec, register_node_spec
from ..descriptors.packing import pack_node, unpack_node
from ..descriptors.wire_rules import FLOAT32_MAX
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode, NodeType
from .input_memo import InputRuleMemo

__all__ = ["Node", "declare_spec"]

A = TypeVar("A", bound=NodeAttributes)


class Node(Generic[A]):
    """Base of all nodes (hipDNN's ``BaseNode``).

    A node owns its attributes object and reads the graph's attributes for defaults. Its three
    lifecycle steps raise :class:`~hipdnn_graph.HipdnnError` on the first broken rule.
    """

    node_type: ClassVar[NodeType] = NodeType.UNKNOWN
    #: prefix of the default name ``<prefix>_<index>`` given to unnamed nodes: the class name
    #: without ``Node`` unless the class sets another (hipDNN's names for its node kinds)
    name_prefix: ClassVar[str] = "Node"
    #: where the node's slots and scalars live on every wire (set by each node module)
    spec: ClassVar[NodeSpec]
    #: the slot of the ``[N, C, spatial...]`` tensor an engine may copy with its spatial dims
    #: grown by ``pre_padding`` and ``post_padding`` (convolutions, pooling); ``""`` for none
    padded_slot: ClassVar[str] = ""
    #: whether any input slot may hold a compile-time constant (pointwise operands, custom ops);
    #: otherwise only the spec's pass-by-value slots take one
    constants_anywhere: ClassVar[bool] = False
    #: the ``custom_op_id`` of a family that is not hipDNN's (a
    #: :class:`~hipdnn_graph.nodes.custom_family.CustomFamilyNode`, carried as a custom op), by
    #: which engines find its record; ``""`` for hipDNN's families
    family_id: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name_prefix" not in cls.__dict__:
            cls.name_prefix = cls.__name__.removesuffix("Node")

    @classmethod
    def attributes_class(cls) -> type[Any]:
        """The attributes class this node takes (its spec's; checked by the constructor)."""
        spec = cls.__dict__.get("spec") or getattr(cls, "spec", None)
        return spec.attributes_cls if spec is not None else NodeAttributes

    def __init__(self, attributes: A, graph_attributes: GraphAttributes | None = None) -> None:
        """Wrap ``attributes`` (shared, not copied) in a node.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when ``attributes`` is not of the node's attributes
                class, or ``graph_attributes`` not a :class:`GraphAttributes`.
        """
        label = type(self).__name__
        expected = self.attributes_class()
        if not isinstance(attributes, expected):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{label} expects {expected.__name__}, got {type(attributes).__name__}",
            )
        if graph_attributes is not None and not isinstance(graph_attributes, GraphAttributes):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{label} expects GraphAttributes, got {type(graph_attributes).__name__}",
            )
        self.attributes: A = attributes
        self.graph_attributes = (
            graph_attributes if graph_attributes is not None else GraphAttributes()
        )

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "attributes":
            touch(value)  # new attributes: a graph holding this node must validate again

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def name(self) -> str:
        """The node's name (from its attributes)."""
        return self.attributes.name

    def get_node_type(self) -> NodeType:
        """hipDNN's :class:`NodeType` of this node."""
        return self.node_type

    def inputs(self) -> list[TensorAttributes]:
        """Input tensors in slot order."""
        return self.attributes.input_tensors()

    def outputs(self) -> list[TensorAttributes]:
        """Output tensors in slot order."""
        return self.attributes.output_tensors()

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """Check the node's rules before inference (hipDNN's order; first failure raises).

        ``memo`` (given by ``Graph.validate()``) lets a node skip the rules that read only
        input tensors another node already passed (see :mod:`~hipdnn_graph.nodes.input_memo`).
        """

    def infer_properties_node(self) -> None:
        """Fill data types from the graph and infer output shapes."""
        self.attributes.fill_from_context(self.graph_attributes)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """Check the compute type, then validate every output tensor (hipDNN's steps); then
        check that every member the wire stores as binary32 (the spec's
        ``float32_members``) is finite there, and that each output is a tensor of its own: not
        in two output slots, and not an input of the node too (one of the results, or an input,
        would be overwritten).
        ``memo`` is as in :meth:`pre_validate_node`.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` when no compute type is set, the first output
                tensor's validation error, or ``INVALID_VALUE`` for a NaN, infinite or
                float32-overflowing member or a shared output.
        """
        fields = self.attributes.__dict__  # read once: this runs for every node
        if not fields["compute_data_type"]:  # NOT_SET is 0
            raise HipdnnError(
                ErrorCode.ATTRIBUTE_NOT_SET,
                f"Node {self.name} does not have a compute_data_type set",
            )
        outputs, inputs = fields["outputs"], fields["inputs"]
        try:  # in the slot map's own order, without a sorted copy (checking changes nothing)
            for tensor in outputs.values():
                tensor.check()
        except HipdnnError:
            for tensor in self.outputs():  # again in slot order: the first failing slot reports
                tensor.check()
            raise
        spec: NodeSpec | None = getattr(type(self), "spec", None)
        if spec is not None:
            for member in spec.float32_members:
                value = fields[member]
                if value is not None and not abs(value) <= FLOAT32_MAX:  # NaN fails it too
                    raise HipdnnError(
                        ErrorCode.INVALID_VALUE,
                        f"{spec.label}: {member} must be a finite number that fits in float32, "
                        f"got {value}",
                    )
            if not self.constants_anywhere:
                self._check_constant_inputs(spec, inputs)
        own = set(map(id, outputs.values()))
        if len(own) == len(outputs) and own.isdisjoint(map(id, inputs.values())):
            return  # the common case, checked without building messages
        slots: dict[int, str] = {}
        for slot, tensor in sorted(outputs.items()):
            other = slots.setdefault(id(tensor), slot.name)
            if other != slot.name:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Node {self.name}: outputs {other} and {slot.name} are the same tensor "
                    f"{tensor.name}; each output needs a tensor of its own",
                )
        for slot, tensor in sorted(inputs.items()):
            if id(tensor) in slots:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Node {self.name}: tensor {tensor.name} is both input {slot.name} and "
                    f"output {slots[id(tensor)]}; an output needs a tensor of its own",
                )

    def _check_constant_inputs(self, spec: NodeSpec, inputs: dict[Any, TensorAttributes]) -> None:
        """A scalar feeds only a scalar slot: a compile-time constant (a tensor with a value)
        or a runtime scalar (a pass-by-value tensor of one element, bound as a Python number:
        :func:`hipdnn_graph.backend.is_runtime_scalar`). The engines read every other slot as
        an array (a scalar there failed inside them with ``KeyError``, ``AttributeError`` or
        ``ValueError``); a pass-by-value tensor of more elements is a host array and may."""
        for slot, tensor in inputs.items():
            fields = tensor.__dict__
            constant = fields["value"] is not None
            if slot.name in spec.pass_by_value_slots or not (
                constant or (fields["is_pass_by_value"] and tensor.get_volume() == 1)
            ):
                continue
            scalars = ", ".join(sorted(spec.pass_by_value_slots)) or "none"
            what = "holds a constant value" if constant else "is a pass-by-value scalar"
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{spec.label}: {slot.name} tensor {tensor.name} {what}, but {slot.name} reads "
                f"a tensor in memory (the slots that take scalars: {scalars})",
            )

    def padded_elements(self) -> int:
        """How many elements a padded copy of :attr:`padded_slot`'s tensor holds (0 without
        one): an engine may allocate it beside the graph's tensors, so the allocation bound of
        :mod:`hipdnn_graph.backend.allocation` counts it.

        Example:
            >>> import hipdnn_graph as hg
            >>> a = (hg.ResampleFwdAttributes().set_x(hg.TensorAttributes(dim=[1, 2, 4, 4]))
            ...      .set_y(hg.TensorAttributes()).set_pre_padding([1, 0])
            ...      .set_post_padding([1, 10]).set_stride([1, 1]).set_window([2, 2]))
            >>> hg.ResampleFwdNode(a, hg.GraphAttributes()).padded_elements()  # 1*2*6*14
            168
        """
        if not self.padded_slot:
            return 0
        tensor = self.attributes.tensors_by_slot().get(self.padded_slot)
        if tensor is None or len(tensor.dim) < 3:
            return 0
        a: Any = self.attributes
        total = tensor.dim[0] * tensor.dim[1]
        for i, size in enumerate(tensor.dim[2:]):
            pre = a.pre_padding[i] if i < len(a.pre_padding) else 0
            post = a.post_padding[i] if i < len(a.post_padding) else 0
            total *= max(size + max(pre, 0) + max(post, 0), 0)
        return total

    def validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """Run the whole lifecycle: pre-validate, infer, post-validate (``memo``: the rules
        passed so far in this ``Graph.validate()``, as in :meth:`pre_validate_node`)."""
        self.pre_validate_node(memo)
        self.infer_properties_node()
        self.post_validate_node(memo)

    # ----- descriptors (spec §7) -----
    def create_operation(
        self,
        tensor_descs: MutableMapping[int, BackendDescriptor],
        operations: MutableSequence[BackendDescriptor],
    ) -> BackendDescriptor:
        """Pack this node into a finalized operation descriptor appended to ``operations``.

        Tensor descriptors are created once per uid in ``tensor_descs`` and shared by uid.
        """
        spec, attributes = self.wire_form()
        return pack_node(attributes, spec, tensor_descs, operations)

    def wire_form(self) -> tuple[NodeSpec, NodeAttributes]:
        """The spec and attributes hipDNN's wire carries for this node: its own (a family that
        is not hipDNN's travels as a custom op instead)."""
        return self.spec, self.attributes

    def unpack_from_descriptor(
        self, op_desc: BackendDescriptor, tensor_map: MutableMapping[int, TensorAttributes]
    ) -> Self:
        """Replace this node's attributes with those packed in ``op_desc``.

        Tensors are looked up in (or added to) ``tensor_map`` by uid, so nodes that share a
        tensor share the rebuilt handle.
        """
        attributes = self.spec.attributes_cls()
        unpack_node(op_desc, self.spec, attributes, tensor_map)
        self.attributes = attributes
        return self


def declare_spec(node: type[Node[Any]], *, label: str = "", **fields: Any) -> NodeSpec:
    """Declare where ``node``'s slots and members live on every wire (a :class:`NodeSpec` of
    ``fields``), register it with the wire codecs and give it to the class as ``node.spec``.
    What the class already states is not repeated: the label is the class name unless hipDNN's
    messages spell it otherwise, the attributes class is the node's ``Node[...]`` parameter,
    and the class builds the node; ``scalars`` and ``unmodelled`` default to none.

    Example:
        >>> from hipdnn_graph.nodes.matmul import MATMUL_SPEC, MatmulNode
        >>> MatmulNode.spec is MATMUL_SPEC, MATMUL_SPEC.label, MATMUL_SPEC.attributes_cls.__name__
        (True, 'MatmulNode', 'MatmulAttributes')

    Raises:
        TypeError: for a node class without its attributes class parameter, or a field
            :class:`NodeSpec` does not have (when the node module is imported).
    """
    bases = node.__orig_bases__  # type: ignore[attr-defined]
    attributes = next((args[0] for base in bases if (args := get_args(base))), None)
    if not isinstance(attributes, type):
        raise TypeError(f"{node.__name__} does not name its attributes class (Node[...])")
    fields.setdefault("scalars", ())
    fields.setdefault("unmodelled", ())
    spec = NodeSpec(
        label=label or node.__name__, attributes_cls=attributes, make_node=node, **fields
    )
    node.spec = register_node_spec(spec)
    return spec
