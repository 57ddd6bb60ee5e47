"""The example family ``clamp``'s node: its rules, its inference, its ``NodeSpec``, its
registration and its builder (docs/adding-a-family.md, second file).

A family that is not hipDNN's subclasses
:class:`~hipdnn_graph.nodes.custom_family.CustomFamilyNode`: hipDNN's wire carries it as a
custom op whose ``custom_op_id`` is :attr:`ClampNode.family_id`, so hipDNN's bytes and JSON stay
hipDNN's. Its rules follow hipDNN's node headers: in order, the first broken one raises, with
hipDNN's wording for a missing tensor.

Example:
    >>> import hipdnn_graph as hg
    >>> from clamp_family.node import clamp
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> y = clamp(g, g.tensor(name="x", dim=[2, 3]), lower=0.0, upper=6.0)
    >>> g.validate()
    >>> y.get_name(), y.get_dim(), g.nodes[0].get_node_type().name
    ('Clamp_0::Y', [2, 3], 'CUSTOM_OP')
"""

from __future__ import annotations

from typing import Any, ClassVar

from clamp_family.attributes import ClampAttributes

import hipdnn_graph as hg
from hipdnn_graph.graph.builders.base import FamilyRecipe
from hipdnn_graph.nodes.custom_family import (
    CustomFamilyNode,
    custom_family_spec,
    register_custom_family,
)
from hipdnn_graph.nodes.input_memo import InputRuleMemo

__all__ = ["CLAMP_RECIPE", "CLAMP_SPEC", "ClampNode", "clamp"]


class ClampNode(CustomFamilyNode[ClampAttributes]):
    """``Y = min(max(X, lower), upper)``, element by element (a bound left ``None`` is no
    bound).

    Example:
        >>> import hipdnn_graph as hg
        >>> a = ClampAttributes().set_x(hg.TensorAttributes(dim=[4])).set_y(hg.TensorAttributes())
        >>> try:
        ...     ClampNode(a.set_lower(2).set_upper(1)).pre_validate_node()
        ... except hg.HipdnnError as err:
        ...     print(err.code.name, err.message)
        INVALID_VALUE ClampNode: lower bound 2.0 is greater than upper bound 1.0
    """

    family_id: ClassVar[str] = "example.clamp"
    name_prefix: ClassVar[str] = "Clamp"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The rules, in order: X set, Y set, a bound set, ``lower <= upper``.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or no bound,
                ``INVALID_VALUE`` for crossed bounds.
        """
        a = self.attributes
        if a.get_x() is None:
            raise hg.HipdnnError(
                hg.ErrorCode.ATTRIBUTE_NOT_SET, "ClampNode missing input X for pre-validation"
            )
        if a.get_y() is None:
            raise hg.HipdnnError(
                hg.ErrorCode.ATTRIBUTE_NOT_SET, "ClampNode missing output Y for pre-validation"
            )
        if a.lower is None and a.upper is None:
            raise hg.HipdnnError(
                hg.ErrorCode.ATTRIBUTE_NOT_SET, "ClampNode needs a lower or an upper bound"
            )
        if a.lower is not None and a.upper is not None and a.lower > a.upper:
            raise hg.HipdnnError(
                hg.ErrorCode.INVALID_VALUE,
                f"ClampNode: lower bound {a.lower} is greater than upper bound {a.upper}",
            )

    def infer_properties_node(self) -> None:
        """Data types from the graph; Y's dims from X's when unset, strides packed when unset.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when Y's dims are set and differ from X's.
        """
        a = self.attributes
        a.fill_from_context(self.graph_attributes)
        x, y = a.get_x(), a.get_y()
        assert x is not None and y is not None  # pre_validate_node checked them
        if not y.dim:
            y.set_dim(list(x.dim))
        elif list(y.dim) != list(x.dim):
            raise hg.HipdnnError(
                hg.ErrorCode.INVALID_VALUE,
                f"ClampNode: Y dims {list(y.dim)} differ from X dims {list(x.dim)}",
            )
        if not y.stride:
            y.set_stride(hg.generate_strides(y.dim))


#: the family's one declaration of its slots (from ClampAttributes' enums), never on hipDNN's
#: wire: a clamp node travels there as a custom op
CLAMP_SPEC = custom_family_spec("ClampNode", ClampAttributes, ClampNode)
ClampNode.spec = CLAMP_SPEC
register_custom_family(ClampNode)

#: how ``clamp()`` adds a node: X positional (named ``<node>::X`` when unnamed)
CLAMP_RECIPE: FamilyRecipe[hg.TensorAttributes] = FamilyRecipe(
    CLAMP_SPEC, "clamp", ("X",), spell=str, named=("X",)
)


def clamp(
    graph: hg.Graph, x: hg.TensorAttributes, attributes: ClampAttributes | None = None, **kw: Any
) -> hg.TensorAttributes:
    """Add a clamp node to ``graph``; returns the virtual ``<node>::Y``.

    Keywords set members (``lower=``, ``upper=``, ``name=``, ``compute_data_type=``).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an ``x`` that is not a tensor, attributes of another
            class, an unknown keyword or a bound that is not a finite number.
    """
    return graph.add_family(CLAMP_RECIPE, [x], attributes, **kw)
