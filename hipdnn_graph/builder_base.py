"""What the family builder mixins share: how they name what a caller left unnamed (as hipDNN's
``Graph`` does), how they take the attributes a caller gives (:func:`node_attributes`) and
:class:`BuilderHost`, the ``Graph`` members they call.

Example:
    >>> import hipdnn_graph as hg
    >>> x = hg.TensorAttributes()
    >>> name_unnamed("mm", [(x, "A"), (None, "B")])
    >>> x.get_name()
    'mm::A'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .errors import HipdnnError
from .tensor import TensorAttributes
from .types import ErrorCode

if TYPE_CHECKING:
    from .attributes.graph_attributes import GraphAttributes
    from .nodes.base import Node

__all__ = ["BuilderHost", "name_unnamed", "node_attributes"]


class BuilderHost:
    """The ``Graph`` members a builder mixin calls (declared for type checkers only; ``Graph``
    and :class:`~hipdnn_graph.family_builders.FamilyBuilders` define them)."""

    if TYPE_CHECKING:
        attributes: GraphAttributes

        def _output_tensor(self, name: str) -> TensorAttributes: ...

        def _add_node(self, node: Node[Any]) -> None: ...

        def _family_attributes(
            self, given: Any, node: type[Node[Any]], keywords: dict[str, Any], op: str
        ) -> Any: ...


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
