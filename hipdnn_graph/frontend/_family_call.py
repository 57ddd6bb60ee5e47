"""How a node method of hipDNN's bound ``Graph`` calls the core graph:
:class:`FamilyCall`, the base of the frontend's node-method mixins.

Each node method checks that its attributes are of the family's class (a ``TypeError``
otherwise, as nanobind raises), adds the node through the core graph method of the same name and
returns its outputs as the binding does (a tensor, a tuple or a list); ``FamilyCall._family``
does all three, so each method states only its signature, its attributes class and the core call.

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> g = hipdnn.Graph()
    >>> x = hipdnn.Tensor.create([2, 32], hipdnn.DataType.FLOAT)
    >>> try:
    ...     g.matmul(x, x, hipdnn.PointwiseAttributes())
    ... except TypeError as err:
    ...     print(err)
    matmul() expects MatmulAttributes, got PointwiseAttributes
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from ._errors import FrontendTypeError
from ._tensor import adopt

if TYPE_CHECKING:
    from ..graph import Graph as CoreGraph

__all__ = ["FamilyCall"]

P = ParamSpec("P")
T = TypeVar("T")


class FamilyCall:
    """The base of the node-method mixins of :class:`~hipdnn_graph.frontend.Graph`."""

    if TYPE_CHECKING:
        core_graph: CoreGraph

        def _node(self, add: Callable[[], Any]) -> Any: ...

    def _family(
        self, kind: type[Any] | None, add: Callable[P, T], *args: P.args, **keywords: P.kwargs
    ) -> T:
        """Add a node through the core graph's method ``add`` (called with ``args`` and
        ``keywords``) and return its outputs re-typed as :class:`~hipdnn_graph.frontend.Tensor`,
        in the core's container (a tensor, a tuple or a fresh list; absent optional outputs stay
        ``None``).

        The attributes are the last positional argument and must be a ``kind`` (``None``: the
        caller checked them already).

        Raises:
            TypeError: for attributes of another class, or any argument the core refuses (as
                nanobind does).
        """
        if kind is not None and not isinstance(args[-1], kind):
            raise FrontendTypeError(
                f"{add.__name__}() expects {kind.__name__}, got {type(args[-1]).__name__}"
            )
        outputs = self._node(lambda: add(*args, **keywords))
        if isinstance(outputs, tuple | list):
            return cast(T, type(outputs)(adopt(t) for t in outputs))
        return cast(T, adopt(outputs))
