"""Node families that are not hipDNN's: declared in a plugin's own files, carried on hipDNN's
wire as hipDNN custom ops.

hipDNN's 23 families are closed: each has a :class:`~hipdnn_graph.NodeType`, a table in the
FlatBuffers schema and a JSON shape, declared by its module under ``hipdnn_graph/nodes/``. A
family of a plugin (docs/adding-a-family.md walks through one, ``examples/clamp_family/``) has
none of these, and must not invent any: hipDNN's bytes and JSON stay hipDNN's. It therefore
travels the way hipDNN itself carries an operation it does not know, as a **custom op**
(:class:`~hipdnn_graph.CustomOpNode`): ``custom_op_id`` is the family's :attr:`family_id`, the
inputs and outputs are its set slots in slot order, and the payload (``data``) is compact JSON
naming those slots and holding the family's own members::

    {"inputs":["X"],"members":{"lower":-1.0,"upper":1.0},"outputs":["Y"]}

So a graph holding such a node serializes, lowers to descriptors and converts to hipDNN's JSON
like any other, and hipDNN (or this project without the plugin) reads a custom op it refuses to
run by name. Where the family is registered (:func:`register_custom_family`, called by its node
module), reading the graph back gives the family's node again (:func:`lift_custom_op`).

A family declares three things here: its node class (a :class:`CustomFamilyNode` with its
``family_id``, rules and inference), its ``NodeSpec`` (:func:`custom_family_spec`, derived from
the attributes' slot enums and never registered with the wire codecs) and its registration.

Example:
    >>> import hipdnn_graph as hg
    >>> from hipdnn_graph.attributes import NodeAttributes
    >>> from enum import IntEnum
    >>> class NegAttributes(NodeAttributes):
    ...     class InputNames(IntEnum):
    ...         X = 0
    ...     class OutputNames(IntEnum):
    ...         Y = 0
    >>> class NegNode(CustomFamilyNode[NegAttributes]):
    ...     family_id = "doc.neg"
    ...     name_prefix = "Neg"
    >>> NegNode.spec = custom_family_spec("NegNode", NegAttributes, NegNode)
    >>> _ = register_custom_family(NegNode)
    >>> x, y = hg.TensorAttributes(name="x", uid=1), hg.TensorAttributes(name="y", uid=2)
    >>> a = NegAttributes(name="neg")._set_input(NegAttributes.InputNames.X, x)
    >>> spec, wire = NegNode(a._set_output(NegAttributes.OutputNames.Y, y)).wire_form()
    >>> spec.label, wire.get_custom_op_id(), bytes(wire.get_data())
    ('CustomOpNode', 'doc.neg', b'{"inputs":["X"],"members":{},"outputs":["Y"]}')
    >>> type(lift_custom_op(hg.CustomOpNode(wire))).__name__
    'NegNode'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, MutableMapping
from typing import Any, ClassVar, Self, TypeVar

from ..attributes.base import NodeAttributes
from ..attributes.custom_op import CustomOpAttributes
from ..attributes.graph_attributes import GraphAttributes
from ..descriptors.backend_descriptor import BackendDescriptor
from ..descriptors.node_spec import NodeSpec, SlotSpec, register_off_wire_spec
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode, NodeType
from .base import Node
from .custom_op import CUSTOM_OP_SPEC, CustomOpAttributeName, CustomOpNode

__all__ = [
    "CustomFamilyNode",
    "custom_families",
    "custom_family_spec",
    "lift_custom_op",
    "register_custom_family",
]

A = TypeVar("A", bound=NodeAttributes)

#: the members every node's attributes have (the custom op carries them itself)
_BASE_MEMBERS = frozenset(NodeAttributes.model_fields)

_FAMILIES: dict[str, type[CustomFamilyNode[Any]]] = {}


class CustomFamilyNode(Node[A]):
    """Base of the node of a family that is not hipDNN's (see the module doc).

    A subclass sets :attr:`family_id` (``"<plugin>.<operation>"``), ``name_prefix`` and
    ``spec`` (:func:`custom_family_spec`), and states its rules in ``pre_validate_node``,
    ``infer_properties_node`` and ``post_validate_node`` as hipDNN's node headers do. To hipDNN
    it is a custom op, so :meth:`get_node_type` is ``CUSTOM_OP``; engines find the family's
    record by :attr:`family_id`.
    """

    node_type: ClassVar[NodeType] = NodeType.CUSTOM_OP

    def wire_form(self) -> tuple[NodeSpec, NodeAttributes]:
        """The node as hipDNN's wire carries it: a custom op of the family's id whose payload
        holds the family's members and slot names (see the module doc)."""
        a = self.attributes
        inputs = [(slot.name, t) for slot, t in sorted(a.inputs.items())]
        outputs = [(slot.name, t) for slot, t in sorted(a.outputs.items())]
        members = a.model_dump(mode="json", exclude=set(_BASE_MEMBERS))
        payload = {
            "inputs": [name for name, _ in inputs],
            "members": members,
            "outputs": [name for name, _ in outputs],
        }
        data = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        wire = CustomOpAttributes(
            name=a.name, compute_data_type=a.compute_data_type, custom_op_id=self.family_id
        )
        wire.set_inputs([t for _, t in inputs]).set_outputs([t for _, t in outputs])
        return CUSTOM_OP_SPEC, wire.set_data(data)

    def unpack_from_descriptor(
        self, op_desc: BackendDescriptor, tensor_map: MutableMapping[int, TensorAttributes]
    ) -> Self:
        """Replace this node's attributes with those of the custom op packed in ``op_desc``.

        Raises:
            HipdnnError: what :meth:`from_custom_op` raises.
        """
        op = CustomOpNode(CustomOpAttributes()).unpack_from_descriptor(op_desc, tensor_map)
        self.attributes = self.from_custom_op(op.attributes).attributes
        return self

    @classmethod
    def from_custom_op(
        cls, op: CustomOpAttributes, graph_attributes: GraphAttributes | None = None
    ) -> Self:
        """The family's node a custom op of its id stands for (the inverse of
        :meth:`wire_form`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` naming the family for a payload that is not the
                family's: not JSON, slot names the family lacks, as many names as tensors, or
                members its attributes refuse.
        """
        where = f"custom op {cls.family_id!r} ({op.name or 'unnamed'})"
        if op.custom_op_id != cls.family_id:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{where}: the custom op's id is {op.custom_op_id!r}, not the family's",
            )
        try:
            payload = json.loads(bytes(op.data))
            names_in, names_out = list(payload["inputs"]), list(payload["outputs"])
            members = dict(payload["members"])
        except (ValueError, KeyError, TypeError) as err:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"{where}: its data is not the family's payload ({err})"
            ) from None
        cls_a = cls.attributes_class()
        bad = sorted(set(members) & _BASE_MEMBERS) + sorted(set(members) - set(cls_a.model_fields))
        if bad:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"{where}: {cls_a.__name__} has no member {bad[0]!r}"
            )
        try:
            attributes = cls_a(name=op.name, compute_data_type=op.compute_data_type, **members)
        except HipdnnError as err:
            raise HipdnnError(err.code, f"{where}: {err.message}") from None
        except ValueError as err:  # pydantic's own refusal of a member's type
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"{where}: {err}") from None
        for names, tensors, enum, put in (
            (names_in, op.get_inputs(), cls_a.InputNames, attributes._set_input),
            (names_out, op.get_outputs(), cls_a.OutputNames, attributes._set_output),
        ):
            if len(names) != len(tensors) or not all(n in enum.__members__ for n in names):
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"{where}: slots {names} do not name its {len(tensors)} tensors among "
                    f"{list(enum.__members__)}",
                )
            for name, tensor in zip(names, tensors, strict=True):
                put(enum[name], tensor)
        return cls(attributes, graph_attributes)


def custom_family_spec(
    label: str,
    attributes_cls: type[NodeAttributes],
    make_node: type[CustomFamilyNode[Any]],
    *,
    optional: Iterable[str] = (),
    pass_by_value: Iterable[str] = (),
) -> NodeSpec:
    """The ``NodeSpec`` of a family that is not hipDNN's, derived from its attributes' slot
    enums (inputs, then outputs, in their order).

    The spec says what the builder and the rules read (slots, direction, which are required or
    pass-by-value, the classes); its wire fields are the custom op's, which carries the family
    (its slots are positions in the custom op's lists, numbered in order). It is never
    registered with the wire codecs: hipDNN's schema, JSON and JSON Schema stay its 23 families.

    Args:
        label: The node's class name, as its messages spell it.
        attributes_cls: The family's attributes (``InputNames``/``OutputNames`` enums).
        make_node: The family's node class.
        optional: Slots a node may leave unset (the others are required).
        pass_by_value: Input slots engines read as host scalars.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an ``optional`` or ``pass_by_value`` name that is
            not a slot of the family.

    Example:
        >>> from hipdnn_graph.attributes import NodeAttributes
        >>> from enum import IntEnum
        >>> class Two(NodeAttributes):
        ...     class InputNames(IntEnum):
        ...         A = 0
        ...         B = 1
        ...     class OutputNames(IntEnum):
        ...         C = 0
        >>> spec = custom_family_spec("TwoNode", Two, CustomFamilyNode, optional=["B"])
        >>> [(s.name, s.output, s.required) for s in spec.slots]
        [('A', False, True), ('B', False, False), ('C', True, True)]
    """
    ins, outs = list(attributes_cls.InputNames), list(attributes_cls.OutputNames)
    optional, pass_by_value = frozenset(optional), frozenset(pass_by_value)
    names = {m.name for m in ins + outs}
    for extra in sorted((optional | pass_by_value) - names):
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{label} has no slot {extra!r}")
    lists = (
        CustomOpAttributeName.OPERATION_CUSTOM_OP_INPUTS_EXT,
        CustomOpAttributeName.OPERATION_CUSTOM_OP_OUTPUTS_EXT,
    )
    slots = tuple(
        SlotSpec.named(
            member,
            i >= len(ins),
            member.name not in optional,
            i,
            lists[i >= len(ins)],
            pass_by_value=member.name in pass_by_value,
        )
        for i, member in enumerate(ins + outs)  # an IntEnum compares by number: go by position
    )
    custom = CUSTOM_OP_SPEC
    return NodeSpec(
        table=custom.table,
        union_tag=custom.union_tag,
        label=label,
        descriptor_type=custom.descriptor_type,
        descriptor_class=custom.descriptor_class,
        compute_type=custom.compute_type,
        scalar_group="",
        slots=slots,
        scalars=(),
        unmodelled=(),
        field_count=len(slots),
        attributes_cls=attributes_cls,
        make_node=make_node,
    )


def register_custom_family(node_cls: type[CustomFamilyNode[Any]]) -> type[CustomFamilyNode[Any]]:
    """Make a family that is not hipDNN's known by its ``family_id``: a custom op of that id
    read from bytes, JSON or descriptors becomes the family's node, engines may register
    records for it, and its pass-by-value slots take numbers (as hipDNN's families' do).
    Registering the same class again does nothing.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a class without a ``family_id`` of the form
            ``"<plugin>.<operation>"`` or a ``spec`` of its own, or an id another class holds.
    """
    family_id = getattr(node_cls, "family_id", "")
    where = node_cls.__name__
    if not isinstance(family_id, str) or "." not in family_id.strip("."):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{where}: family_id must be '<plugin>.<operation>', got {family_id!r}",
        )
    spec = node_cls.__dict__.get("spec")
    if not isinstance(spec, NodeSpec) or spec.make_node is not node_cls:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{where}: set {where}.spec = custom_family_spec(..., make_node={where}) first",
        )
    held = _FAMILIES.setdefault(family_id, node_cls)
    if held is not node_cls:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"custom family {family_id!r} is already registered by "
            f"{held.__module__}.{held.__qualname__}",
        )
    register_off_wire_spec(spec)  # its pass-by-value slots take numbers, as hipDNN's do
    return node_cls


def custom_families() -> dict[str, type[CustomFamilyNode[Any]]]:
    """The registered families that are not hipDNN's, by ``family_id`` (a copy)."""
    return dict(_FAMILIES)


def lift_custom_op(node: Node[Any]) -> Node[Any]:
    """``node`` itself, or, for a custom op whose id a registered family holds, that family's
    node (what the wire readers call on every node they make).

    Raises:
        HipdnnError: what :meth:`CustomFamilyNode.from_custom_op` raises for a bad payload.
    """
    if not isinstance(node, CustomOpNode):
        return node
    family = _FAMILIES.get(node.attributes.custom_op_id)
    if family is None:
        return node
    return family.from_custom_op(node.attributes, node.graph_attributes)
