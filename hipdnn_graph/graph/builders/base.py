"""What the family builder mixins share: the one recipe of a builder method
(:meth:`BuilderHost._add_family`, led by a family's :class:`FamilyRecipe` and its
:class:`~hipdnn_graph.descriptors.node_spec.NodeSpec`), how they name what a caller left unnamed
(as hipDNN's ``Graph`` does), how they take the attributes a caller gives
(:func:`node_attributes`) and :class:`BuilderHost`, the ``Graph`` members they call.

Example:
    >>> import hipdnn_graph as hg
    >>> x = hg.TensorAttributes()
    >>> name_unnamed("mm", [(x, "A"), (None, "B")])
    >>> x.get_name()
    'mm::A'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ...errors import HipdnnError
from ...tensor import TensorAttributes
from ...types import DataType, ErrorCode

if TYPE_CHECKING:
    from ...attributes.graph_attributes import GraphAttributes
    from ...descriptors.node_spec import NodeSpec
    from ...nodes.base import Node

__all__ = ["BuilderHost", "FamilyRecipe", "name_unnamed", "node_attributes"]

#: what a builder method returns (its outputs: a tensor or a tuple)
R = TypeVar("R")


@dataclass(frozen=True)
class FamilyRecipe(Generic[R]):
    """How a ``Graph`` builder method adds a node of one family, beyond what its ``NodeSpec``
    says (the node and attributes classes, each slot's name and direction).

    Attributes:
        spec: The family's :class:`~hipdnn_graph.descriptors.node_spec.NodeSpec`.
        op: The method's name, as its messages spell it.
        inputs: The input slots the method takes positionally, in its signature's order (a
            method given fewer tensors fills the first ones).
        spell: How the method's message spells those slots (``str.lower``: ``x``; ``str``:
            ``X``). A pass-by-value slot reads ``<slot> (a tensor or a number)``.
        named: The slots whose unnamed tensors are renamed ``<node>::<SLOT>`` (in this order),
            as hipDNN's ``Graph`` does for this family; the others keep their names. A
            positional slot left out by the caller is skipped.
        checked: The positional inputs' types are checked first (else a slot's setter refuses
            what it cannot hold, after the attributes are taken).
        none_inputs: Each positional input may be ``None`` (left unset; validation names it),
            refused one by one otherwise.
        optional: Positional inputs that may be ``None`` (cleared) where the others must be
            tensors; the message names them after the attributes.
        prepare: Called with the attributes once taken (before the outputs are made), for a
            method that fixes a member.
        made_when: ``{output slot: test}``: an output made only when ``test(attributes)``
            holds (``None`` is returned in its place otherwise); the others are always made.
        clear_absent: An output not made is cleared from the attributes (else kept as given).
        returns: The outputs the method returns, by slot (all of them when empty).
        spelled: ``{output slot: name}`` where a new output is named ``<node>::<name>``.
        output_types: ``{output slot: data type}`` of new outputs that have a fixed type.
        apply: ``apply(attributes, keywords, op)`` sets the keywords, for a family with
            keyword spellings of its own (else each keyword is a ``set_<keyword>`` setter).

    Example:
        >>> from hipdnn_graph.nodes.matmul import MATMUL_SPEC
        >>> FamilyRecipe(MATMUL_SPEC, "matmul", ("A", "B"), spell=str).takes
        'tensors A and B'
    """

    spec: NodeSpec
    op: str
    inputs: tuple[str, ...]
    spell: Callable[[str], str] = str.lower
    named: tuple[str, ...] = ()
    checked: bool = True
    none_inputs: bool = False
    made_when: Mapping[str, Callable[[Any], bool]] = field(default_factory=dict)
    clear_absent: bool = False
    optional: tuple[str, ...] = ()
    prepare: Callable[[Any], Any] | None = None
    returns: tuple[str, ...] = ()
    spelled: Mapping[str, str] = field(default_factory=dict)
    output_types: Mapping[str, DataType] = field(default_factory=dict)
    apply: Callable[[Any, Mapping[str, Any], str], None] | None = None

    @property
    def takes(self) -> str:
        """The required inputs as the method's message names them: ``tensors x, scale and
        bias`` (``tensor x`` for one)."""
        by_value = self.spec.pass_by_value_slots
        words = [
            f"{self.spell(s)} (a tensor or a number)" if s in by_value else self.spell(s)
            for s in self.inputs
            if s not in self.optional
        ]
        if len(words) == 1:
            return f"tensor {words[0]}"
        return f"tensors {', '.join(words[:-1])} and {words[-1]}"

    @property
    def refusal(self) -> str:
        """The method's message for inputs of the wrong type.

        Example:
            >>> from hipdnn_graph.nodes.resample_bwd import RESAMPLE_BWD_SPEC
            >>> print(FamilyRecipe(RESAMPLE_BWD_SPEC, "resample_bwd", ("DY", "INDEX"),
            ...                    optional=("INDEX",)).refusal)
            resample_bwd() takes tensor dy, then ResampleBwdAttributes, then an optional tensor index
        """  # noqa: E501
        then = "".join(f", then an optional tensor {self.spell(s)}" for s in self.optional)
        return f"{self.op}() takes {self.takes}, then {self.spec.attributes_cls.__name__}{then}"


class BuilderHost:
    """The builder methods' common part, :meth:`_add_family`, and the ``Graph`` members it
    calls (declared for type checkers only; ``Graph`` defines them)."""

    if TYPE_CHECKING:
        attributes: GraphAttributes
        _nodes: list[Node[Any]]

        def _output_tensor(self, name: str) -> TensorAttributes: ...

        def _add_node(self, node: Node[Any]) -> None: ...

    def add_family(
        self,
        recipe: FamilyRecipe[R],
        tensors: Sequence[Any],
        attributes: Any = None,
        **keywords: Any,
    ) -> R:
        """Add a node of the family ``recipe`` describes: the one call a family's builder makes
        (``Graph``'s own methods, and those of a family declared outside the package, such as
        docs/adding-a-family.md's ``clamp``).

        Args:
            recipe: The family's :class:`FamilyRecipe` (its ``NodeSpec`` and what differs).
            tensors: The positional inputs, in ``recipe.inputs``'s order.
            attributes: The family's attributes (copied; new ones when ``None``).
            **keywords: Members and slots to set (``name=``, ``lower=``, ...).

        Returns:
            The new outputs: the tensor when the family has one, else a tuple.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input of the wrong type, attributes of
                another class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> from hipdnn_graph.nodes.matmul import MATMUL_SPEC
            >>> mm = FamilyRecipe(MATMUL_SPEC, "matmul", ("A", "B"), spell=str, named=("A", "B"))
            >>> g = hg.Graph()
            >>> c = g.add_family(mm, [g.tensor(dim=[2, 3]), g.tensor(dim=[3, 4])], name="mm")
            >>> c.get_name(), [t.get_name() for t in g.nodes[0].inputs()]
            ('mm::C', ['mm::A', 'mm::B'])
        """
        if isinstance(tensors, TensorAttributes) or not isinstance(tensors, Sequence):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{recipe.op}() takes its tensors as a list, got {type(tensors).__name__}",
            )
        return self._add_family(recipe, tuple(tensors), attributes, keywords)

    def _add_family(
        self,
        recipe: FamilyRecipe[R],
        tensors: tuple[Any, ...],
        given: Any,
        keywords: Mapping[str, Any],
        given_outputs: Mapping[str, TensorAttributes] | None = None,
    ) -> R:
        """Add a node of ``recipe``'s family, as each of hipDNN's ``Graph`` node methods does:
        check the positional ``tensors``, take the attributes (:meth:`_family_attributes`),
        set the inputs, rename the unnamed ones the family renames, make the virtual outputs
        ``<node>::<SLOT>``, set them and add the node. Returns the outputs in the spec's order
        (those of ``recipe.returns`` where it names them): the tensor when there is one, else a
        tuple (``None`` for an output not made). An output in ``given_outputs`` (by slot) is the
        caller's tensor instead of a new one.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input of the wrong type, attributes of
                another class or an unknown keyword (in that order, before anything is made).
        """
        spec = recipe.spec
        node = cast("type[Node[Any]]", spec.make_node)
        slots = tuple(zip(tensors, recipe.inputs, strict=False))
        _check_inputs(recipe, slots)
        attrs = self._family_attributes(given, node, keywords, recipe.op, recipe.apply)
        if recipe.prepare is not None:
            recipe.prepare(attrs)
        for tensor, slot in slots:
            attrs._set_input(attrs.InputNames[slot], tensor)
        given_outputs = given_outputs or {}
        placed = {slot: tensor for tensor, slot in slots} | dict(given_outputs)
        name_unnamed(attrs.name, ((_named(recipe, attrs, placed, s), s) for s in recipe.named))
        outputs = [
            given_outputs[s.name]
            if s.name in given_outputs
            else self._new_output(recipe, attrs.name, s.name)
            if recipe.made_when.get(s.name, _always)(attrs)
            else None
            for s in spec.outputs
        ]
        for tensor, out in zip(outputs, spec.outputs, strict=True):
            if tensor is not None or recipe.clear_absent:
                attrs._set_output(out.member, tensor)
        self._add_node(node(attrs, self.attributes))
        if recipe.returns:
            outputs = [
                t for t, s in zip(outputs, spec.outputs, strict=True) if s.name in recipe.returns
            ]
        return cast(R, outputs[0] if len(outputs) == 1 else tuple(outputs))

    def _new_output(self, recipe: FamilyRecipe[Any], node: str, slot: str) -> TensorAttributes:
        """A new virtual output ``<node>::<SLOT>`` (as ``recipe`` spells and types it)."""
        tensor = self._output_tensor(f"{node}::{recipe.spelled.get(slot, slot)}")
        if slot in recipe.output_types:
            tensor.data_type = recipe.output_types[slot]
        return tensor

    def _family_attributes(
        self,
        given: Any,
        node: type[Node[Any]],
        keywords: Mapping[str, Any],
        op: str,
        apply: Callable[[Any, Mapping[str, Any], str], None] | None = None,
    ) -> Any:
        """A copy of ``given`` (or new attributes of ``node``'s class) with ``keywords`` applied
        (by ``apply`` where given, else each through the attributes' ``set_<keyword>``:
        members, and input slots such as ``epsilon=``) and a name (``<node prefix>_<index>``
        when unnamed).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for attributes of another class or an unknown
                keyword.
        """
        attributes = node_attributes(given, node, op)
        if apply is not None:
            apply(attributes, keywords, op)
        else:
            _set_keywords(attributes, keywords, op)
        if not attributes.name:
            attributes.name = f"{node.name_prefix}_{len(self._nodes)}"
        return attributes


def _set_keywords(attributes: Any, keywords: Mapping[str, Any], op: str) -> None:
    """Set each keyword through ``attributes.set_<keyword>`` (a member or an input slot).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an unknown keyword.
    """
    cls = type(attributes)
    for key, value in keywords.items():
        setter = getattr(attributes, f"set_{key}", None)
        field = key in cls.model_fields or key.upper() in cls.InputNames.__members__
        if not field or setter is None:
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"{op}() got an unknown keyword {key!r}")
        setter(value)


def _named(
    recipe: FamilyRecipe[Any], attrs: Any, placed: Mapping[str, Any], slot: str
) -> TensorAttributes | None:
    """The tensor of a slot ``recipe`` renames: the caller's (positional, or a given output),
    else the attributes' input where the slot is not positional."""
    if slot in placed:
        return cast("TensorAttributes | None", placed[slot])
    if slot in recipe.inputs or recipe.spec.slot(slot).output:
        return None
    return cast("TensorAttributes | None", attrs.inputs.get(attrs.InputNames[slot]))


def _always(_attributes: Any) -> bool:
    return True


def _check_inputs(recipe: FamilyRecipe[Any], slots: tuple[tuple[Any, str], ...]) -> None:
    """Refuse a positional input of the wrong type, with the family's message.

    Raises:
        HipdnnError: ``INVALID_VALUE``.
    """
    by_value = recipe.spec.pass_by_value_slots
    for tensor, slot in slots if recipe.checked else ():
        if recipe.none_inputs:
            if tensor is not None and not isinstance(tensor, TensorAttributes):
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"{recipe.op}() takes a tensor or None for {slot}, got {type(tensor).__name__}",
                )
            continue
        if tensor is None and slot in recipe.optional:
            continue
        if tensor is None if slot in by_value else not isinstance(tensor, TensorAttributes):
            raise HipdnnError(ErrorCode.INVALID_VALUE, recipe.refusal)


def name_unnamed(node: str, tensors: Iterable[tuple[TensorAttributes | None, str]]) -> None:
    """Name each input tensor that has no name ``<node>::<slot>``, as hipDNN's ``Graph`` does
    when it adds a node (absent optional inputs, ``None``, are skipped)."""
    for tensor, slot in tensors:
        if tensor is not None and not tensor.name:
            tensor.name = f"{node}::{slot}"


def node_attributes(given: Any, node: type[Node[Any]], op: str) -> Any:
    """The attributes a builder method fills for ``node``: new ones of ``node``'s class when
    ``given`` is ``None``, else a copy of ``given`` (the caller's object stays as it was).

    Raises:
        HipdnnError: ``INVALID_VALUE`` when ``given`` is of another class.
    """
    cls = node.attributes_class()
    if given is None:
        return cls()
    if isinstance(given, cls):
        return given.copy_for_node()
    raise HipdnnError(
        ErrorCode.INVALID_VALUE,
        f"{op}() expects {cls.__name__} attributes, got {type(given).__name__}",
    )
