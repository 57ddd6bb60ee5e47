"""One declaration per node family: where each slot and scalar lives on every wire.

A :class:`NodeSpec` is the single place that says, for one kind of node, which descriptor
attribute carries each tensor slot and each scalar, which field of hipDNN's FlatBuffers table
holds it (its slot number and type), and which JSON key and JSON group it has. The packing tables,
the descriptor schemas, the FlatBuffers layout, the JSON shape and its JSON Schema are all derived
from the specs; the node modules (``hipdnn_graph/nodes/``) declare them beside each node. This
module knows no node type: it only defines the vocabulary.

Field kinds (:class:`Kind`) follow hipDNN's schema types:

=========  =====================================  ========================
kind       FlatBuffers type                       JSON
=========  =====================================  ========================
``UID``    ``long`` (default 0)                   integer
``UID_OPT``  ``long = null``                      integer or ``null``
``BOOL``   ``bool`` (default false)               ``true``/``false``
``BOOL_OPT``  ``bool = null``                     bool or ``null``
``F32_OPT``   ``float = null`` (binary32)         number or ``null``
``I64``    ``long`` (default 0)                   integer
``I64_OPT``   ``long = null``                     integer or ``null``
``I32_OPT``   ``int = null``                      integer or ``null``
``I32``    ``int`` (default 0)                    integer
``ENUM``   an enum of the schema (int8)           the :class:`WireEnum`'s spelling
``DTYPE``  ``DataType`` (int8)                    lower-case name
``STRING`` ``string``                             string
``I64_VEC``  ``[long]``                           array of integers
``I32_VEC``  ``[int]``                            array of integers
``U8_VEC``   ``[ubyte]`` (an opaque byte payload)   array of integers 0-255
=========  =====================================  ========================

A family whose tensors are positional lists (hipDNN's custom op) declares each list as a
:class:`TensorListSpec`: a ``[long]`` field of tensor uids, keyed in the attributes' slot maps by
the positions its ``key`` makes.

Example:
    >>> import hipdnn_graph  # the node modules register their specs
    >>> specs = node_specs()
    >>> all(s.wire.endswith("_tensor_uid") for spec in specs.values() for s in spec.slots)
    True
    >>> all(spec_for_attributes(spec.attributes_cls()) is spec for spec in specs.values())
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

from ..errors import HipdnnError
from ..types import DataType, ErrorCode
from .enums import AttributeType, DescriptorType

__all__ = [
    "INT32_KINDS",
    "JSON_ON_NODE",
    "JSON_SCALARS_ON_NODE",
    "LIST_KINDS",
    "VECTOR_KINDS",
    "WIRE_KINDS",
    "Kind",
    "NodeSpec",
    "ScalarSpec",
    "SlotSpec",
    "TensorListSpec",
    "UnmodelledSpec",
    "WireEnum",
    "node_specs",
    "register_node_spec",
    "register_off_wire_spec",
    "spec_for_attributes",
    "spec_for_attributes_class",
    "supported_kinds",
]


class Kind(Enum):
    """The FlatBuffers/JSON type of one field of a node's table (see the module table)."""

    UID = "uid"
    UID_OPT = "uid?"
    BOOL = "bool"
    BOOL_OPT = "bool?"
    F32_OPT = "float?"
    I64 = "long"
    I64_OPT = "long?"
    I32_OPT = "int?"
    I32 = "int"
    ENUM = "enum"
    DTYPE = "data_type"
    STRING = "string"
    I64_VEC = "[long]"
    I32_VEC = "[int]"
    U8_VEC = "[ubyte]"


#: (struct code, byte width, optional, default) of each kind in a FlatBuffers table.
WIRE_KINDS: dict[Kind, tuple[str, int, bool, Any]] = {
    Kind.UID: ("q", 8, False, 0),
    Kind.UID_OPT: ("q", 8, True, None),
    Kind.BOOL: ("?", 1, False, False),
    Kind.BOOL_OPT: ("?", 1, True, None),
    Kind.F32_OPT: ("f", 4, True, None),
    Kind.I64: ("q", 8, False, 0),
    Kind.I64_OPT: ("q", 8, True, None),
    Kind.I32_OPT: ("i", 4, True, None),
    Kind.I32: ("i", 4, False, 0),
    Kind.ENUM: ("b", 1, False, 0),
    Kind.DTYPE: ("b", 1, False, DataType.NOT_SET),
    Kind.STRING: ("S", 4, False, ""),
    Kind.I64_VEC: ("O", 4, False, ()),
    Kind.I32_VEC: ("O", 4, False, ()),
    Kind.U8_VEC: ("O", 4, False, b""),
}

#: the vector kinds (a FlatBuffers vector, written only when not empty): (struct code, byte
#: width) of one element. A ``U8_VEC`` reads as ``bytes``, the others as a list of integers.
VECTOR_KINDS: dict[Kind, tuple[str, int]] = {
    Kind.I64_VEC: ("q", 8),
    Kind.I32_VEC: ("i", 4),
    Kind.U8_VEC: ("B", 1),
}

#: the vector kinds that hold a list of integers (a list-valued descriptor attribute, a JSON
#: array, at most ``MAX_RANK`` entries); a ``U8_VEC`` is an opaque byte payload instead.
LIST_KINDS = frozenset({Kind.I64_VEC, Kind.I32_VEC})

#: the integer range of each kind that stores 32-bit integers (a scalar, or each element).
INT32_KINDS = frozenset({Kind.I32, Kind.I32_OPT, Kind.I32_VEC})


#: ``NodeSpec.scalar_group`` of a family whose JSON writes its uids and members on the node object
#: itself, with no ``inputs``/``outputs`` objects.
JSON_ON_NODE = "."
#: ``NodeSpec.scalar_group`` of a family whose JSON keeps the uids in ``inputs``/``outputs`` and
#: writes its other fields on the node object itself.
JSON_SCALARS_ON_NODE = ":"
#: ``ScalarSpec.json_presence`` values: the key is always written and required on read; always
#: written, the default when absent on read; written only when not the default (absent reads as
#: the default).
JSON_PRESENCE = ("always", "read_optional", "when_set")


@dataclass(frozen=True)
class WireEnum:
    """An int8 enum of hipDNN's schema, as a family declares it for a ``Kind.ENUM`` field.

    Attributes:
        name: The schema's enum name (used in messages).
        cls: The project's enum the field reads into (same numbers as the schema).
        json: hipDNN's JSON spelling of each value (its ``NLOHMANN_JSON_SERIALIZE_ENUM``), or
            the number itself where hipDNN's JSON writes the enum as an integer.
        aliases: Other spellings of a value that hipDNN's own files use (another version of its
            JSON helpers, its benchmark graphs): read, never written.

    Example:
        >>> from enum import IntEnum
        >>> Side = IntEnum("Side", [("LEFT", 0), ("RIGHT", 1)])
        >>> e = WireEnum("Side", Side, {0: "LEFT", 1: "RIGHT"}, aliases={"left": 0})
        >>> e.member(1).name, e.value_of("LEFT"), e.value_of("left"), e.member(7)
        ('RIGHT', 0, 0, None)
    """

    name: str
    cls: type[IntEnum]
    json: Mapping[int, str | int]
    aliases: Mapping[str, int] = field(default_factory=dict)

    def member(self, number: int) -> IntEnum | None:
        """The enum member of a wire number, or ``None`` when the schema has no such value."""
        return self.cls(number) if number in self.json else None

    @property
    def numeric(self) -> bool:
        """Whether hipDNN's JSON writes this enum as an integer."""
        return all(isinstance(v, int) for v in self.json.values())

    def wire_number(self, value: Any, where: str) -> int:
        """The schema's number of ``value`` (a member of :attr:`cls`), for a writer.

        Raises:
            HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for a member the schema enum has no
                number for (hipDNN's wire cannot carry it), named with ``where``.
        """
        number = int(value)
        if number not in self.json:
            name = getattr(value, "name", number)
            raise HipdnnError(
                ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
                f"{where}: {self.name} {name} has no number in hipDNN's schema",
            )
        return number

    def value_of(self, text: str | int) -> int | None:
        """The number hipDNN's JSON spelling (or an alias) ``text`` stands for, or ``None``."""
        for number, spelled in self.json.items():
            if spelled == text:
                return number
        return self.aliases.get(text) if isinstance(text, str) else None


@dataclass(frozen=True)
class SlotSpec:
    """A tensor slot of a node.

    Attributes:
        member: The slot's member of the attributes' ``InputNames``/``OutputNames`` enum.
        output: Whether the node writes the tensor.
        required: Whether the node cannot be packed without it.
        fb_slot: Field number in hipDNN's attribute table.
        attribute: Backend descriptor attribute that carries it (an :class:`AttributeName`, or
            a member of the family's own attribute enum).
        wire: Field name in hipDNN's schema and key in its JSON (``<x>_tensor_uid``).
        pass_by_value: A scalar slot that engines read as a host value (scale, seed, ...).
    """

    member: IntEnum
    output: bool
    required: bool
    fb_slot: int
    attribute: IntEnum
    wire: str
    pass_by_value: bool = False

    @classmethod
    def named(
        cls,
        member: IntEnum,
        output: bool,
        required: bool,
        fb_slot: int,
        attribute: IntEnum,
        *,
        pass_by_value: bool = False,
    ) -> SlotSpec:
        """A slot whose wire name is its member's, ``<member>_tensor_uid`` (hipDNN's usual
        spelling; a slot spelled otherwise states its ``wire``).

        Example:
            >>> from enum import IntEnum
            >>> Slot = IntEnum("Slot", ["IN_0"])
            >>> Attribute = IntEnum("Attribute", [("OPERATION_IN_0_DESC", 7)])
            >>> SlotSpec.named(Slot.IN_0, False, True, 0, Attribute.OPERATION_IN_0_DESC).wire
            'in_0_tensor_uid'
        """
        wire = f"{member.name.lower()}_tensor_uid"
        return cls(member, output, required, fb_slot, attribute, wire, pass_by_value)

    @property
    def name(self) -> str:
        """The slot's name (its member's name in the attributes' slot enum)."""
        return self.member.name

    @property
    def kind(self) -> Kind:
        return Kind.UID if self.required else Kind.UID_OPT


@dataclass(frozen=True)
class TensorListSpec:
    """A positional list of tensors of a node (inputs or outputs), one ``[long]`` field of uids.

    Attributes:
        output: Whether the node writes the tensors.
        fb_slot: Field number in hipDNN's attribute table.
        attribute: Backend descriptor attribute that carries them (an array of tensors).
        wire: Field name in hipDNN's schema and key in its JSON.
        key: ``key(i)``: the key of position ``i`` in the attributes' ``inputs``/``outputs``.
    """

    output: bool
    fb_slot: int
    attribute: IntEnum
    wire: str
    key: Callable[[int], Any]


@dataclass(frozen=True)
class ScalarSpec:
    """A plain member of a node's attributes (flag, optional scalar, enum).

    Attributes:
        name: The attribute model's field.
        kind: Its wire type.
        fb_slot: Field number in hipDNN's attribute table.
        attribute: Descriptor attribute and type, or ``None`` where descriptors do not carry it.
        always: The descriptor always carries it (flags, alignment) rather than only when set.
        wire: hipDNN's field name and JSON key, when it differs from ``name``.
        enum: The schema enum of a ``Kind.ENUM`` field.
        json_presence: When hipDNN's JSON holds the key (one of :data:`JSON_PRESENCE`).
        none_is_default: The model holds ``None`` for a member hipDNN's frontend keeps as a
            ``std::optional`` while its schema stores a plain field: ``None`` is written as
            the field's default, and the default reads back as ``None``.
    """

    name: str
    kind: Kind
    fb_slot: int
    attribute: tuple[IntEnum, AttributeType] | None = None
    always: bool = False
    wire: str = ""
    enum: WireEnum | None = None
    json_presence: str = "always"
    none_is_default: bool = False

    def __post_init__(self) -> None:
        assert (self.kind is Kind.ENUM) == (self.enum is not None), self.name
        assert self.json_presence in JSON_PRESENCE, self.json_presence
        assert not (self.none_is_default and WIRE_KINDS[self.kind][2]), self.name

    def wire_value(self, value: Any) -> Any:
        """The value the wire holds for the model's ``value`` (see ``none_is_default``)."""
        return self.default if value is None and self.none_is_default else value

    def model_value(self, value: Any) -> Any:
        """The model's value for what the wire holds (see ``none_is_default``)."""
        return None if self.none_is_default and value == self.default else value

    @property
    def key(self) -> str:
        """hipDNN's field name (and JSON key)."""
        return self.wire or self.name

    @property
    def default(self) -> Any:
        default = WIRE_KINDS[self.kind][3]
        return self.enum.cls(default) if self.enum is not None else default


@dataclass(frozen=True)
class UnmodelledSpec:
    """A field of hipDNN's table that this project does not model: read and written as its
    default; any other value is refused by name, never dropped.

    Attributes:
        wire: Field name (and JSON key).
        kind: Its wire type.
        fb_slot: Field number in hipDNN's table.
        group: Its JSON group: ``"inputs"``, ``"outputs"`` or ``"scalars"`` (the node's scalar
            object), or ``"extra"`` for fields hipDNN's JSON writes only when set.
        attribute: The descriptor attribute and type hipDNN's backend accepts for it, if any.
        enum: The schema enum of a ``Kind.ENUM`` field.
    """

    wire: str
    kind: Kind
    fb_slot: int
    group: str
    attribute: tuple[IntEnum, AttributeType] | None = None
    enum: WireEnum | None = None

    @property
    def default(self) -> Any:
        return WIRE_KINDS[self.kind][3]


@dataclass(frozen=True)
class NodeSpec:
    """Everything the wire needs to know about one node family.

    Attributes:
        table: hipDNN's attribute table and NodeAttributes member name.
        union_tag: Its number in hipDNN's ``NodeAttributes`` union.
        label: The node's class name, as hipDNN's messages spell it.
        descriptor_type: Backend descriptor type of the operation.
        descriptor_class: hipDNN's backend class of that descriptor (named in its messages).
        compute_type: Descriptor attribute of the node's compute type.
        scalar_group: JSON key of the scalar object (``"attributes"`` or ``"parameters"``),
            ``"inputs"`` where hipDNN's JSON writes the scalars among the input uids, ``""``
            where the family has no scalar object, :data:`JSON_ON_NODE` where the uids and
            the scalars are keys of the node object itself, or :data:`JSON_SCALARS_ON_NODE`
            where only the scalars are.
        omit_absent_uids: hipDNN's JSON leaves an absent optional tensor's key out (instead of
            writing ``null``); an absent key reads as no tensor.
        legacy_scalar_groups: Other keys older hipDNN wrote for it (read, never written).
        nested_json_group: For a family whose JSON puts its fields on the node object
            (:data:`JSON_ON_NODE`, :data:`JSON_SCALARS_ON_NODE`): the scalar object of the nested
            layout hipDNN's benchmark graph files use for it (uids in ``inputs``/``outputs``,
            the other fields under this key). Read, never written.
        slots: Tensor slots in the attributes' enum order (inputs, then outputs).
        tensor_lists: Positional tensor lists (inputs, then outputs), for families without
            named slots.
        scalars: Plain members.
        unmodelled: hipDNN fields kept at their defaults.
        field_count: Number of fields of hipDNN's table (a field past it is refused).
        attributes_cls: The node's attributes class.
        make_node: ``make_node(attributes, graph_attributes)`` builds the node.
    """

    table: str
    union_tag: int
    label: str
    descriptor_type: DescriptorType
    descriptor_class: str
    compute_type: IntEnum
    scalar_group: str
    slots: tuple[SlotSpec, ...]
    scalars: tuple[ScalarSpec, ...]
    unmodelled: tuple[UnmodelledSpec, ...]
    field_count: int
    attributes_cls: type[Any]
    make_node: Callable[[Any, Any], Any]
    legacy_scalar_groups: tuple[str, ...] = ()
    nested_json_group: str = ""
    omit_absent_uids: bool = False
    tensor_lists: tuple[TensorListSpec, ...] = ()
    _by_name: dict[str, SlotSpec] = field(default_factory=dict, compare=False, repr=False)
    #: the members the wire stores as binary32 (``Kind.F32_OPT``), derived from ``scalars``
    float32_members: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({s.name: s for s in self.slots})
        floats = tuple(s.name for s in self.scalars if s.kind is Kind.F32_OPT)
        object.__setattr__(self, "float32_members", floats)
        used = [s.fb_slot for s in self.slots] + [s.fb_slot for s in self.scalars]
        used += [u.fb_slot for u in self.unmodelled] + [t.fb_slot for t in self.tensor_lists]
        assert sorted(used) == list(range(self.field_count)), f"{self.table}: slots {used}"

    def slot(self, name: str) -> SlotSpec:
        """The slot called ``name`` (``KeyError`` if the node has none)."""
        return self._by_name[name]

    @property
    def inputs(self) -> tuple[SlotSpec, ...]:
        return tuple(s for s in self.slots if not s.output)

    @property
    def outputs(self) -> tuple[SlotSpec, ...]:
        return tuple(s for s in self.slots if s.output)

    @property
    def pass_by_value_slots(self) -> frozenset[str]:
        """Names of the scalar slots engines read as host values."""
        return frozenset(s.name for s in self.slots if s.pass_by_value)

    @property
    def json_scalar_holder(self) -> str:
        """Where the family's scalars go in its JSON node: ``"scalars"`` (an object of their
        own, or the node object itself) or ``"inputs"`` (among the input uids)."""
        return "inputs" if self.scalar_group in ("", "inputs", JSON_ON_NODE) else "scalars"


_SPECS: dict[int, NodeSpec] = {}
_BY_ATTRIBUTES: dict[type[Any], NodeSpec] = {}


def register_node_spec(spec: NodeSpec) -> NodeSpec:
    """Make a node family known to the wire codecs (called by each node module on import)."""
    _SPECS[spec.union_tag] = spec
    _BY_ATTRIBUTES[spec.attributes_cls] = spec
    return spec


def register_off_wire_spec(spec: NodeSpec) -> NodeSpec:
    """Make the spec of a family that is not on hipDNN's wire findable by its attributes class
    (:func:`spec_for_attributes_class`: which slots take a number), without making it known to
    the wire codecs (:func:`node_specs` stays hipDNN's families)."""
    _BY_ATTRIBUTES[spec.attributes_cls] = spec
    return spec


def node_specs() -> dict[int, NodeSpec]:
    """The registered node families by union tag (a copy)."""
    return dict(_SPECS)


def supported_kinds() -> str:
    """The registered node kinds for messages: ``"<Table> (<tag>), ... and <Table> (<tag>)"``,
    by tag."""
    names = [f"{s.table} ({s.union_tag})" for _, s in sorted(_SPECS.items())]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 2 else names)


def spec_for_attributes(attributes: Any) -> NodeSpec:
    """The spec of an attributes object (its class or nearest registered base)."""
    return spec_for_attributes_class(type(attributes))


def spec_for_attributes_class(cls: type[Any]) -> NodeSpec:
    """The spec of an attributes class (or of its nearest registered base).

    Raises:
        KeyError: for a class of no registered family.
    """
    spec = _BY_ATTRIBUTES.get(cls)
    if spec is None:
        for base in cls.__mro__:
            spec = _BY_ATTRIBUTES.get(base)
            if spec is not None:
                break
        else:
            raise KeyError(cls.__name__)
    return spec
