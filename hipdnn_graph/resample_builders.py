"""``Graph`` builder methods of hipDNN's resample (pooling) families: ``resample``,
``resample_fwd`` and ``resample_bwd``, named and shaped as hipDNN's ``Graph`` does.

:class:`ResampleBuilders` is a mixin of :class:`~hipdnn_graph.Graph`, next to
:class:`~hipdnn_graph.family_builders.FamilyBuilders` (whose attribute handling it uses).

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[1, 1, 4, 4], stride=[16, 16, 4, 1])
    >>> y = g.resample_fwd(x, resample_mode=hg.ResampleMode.AVGPOOL_INCLUDE_PADDING,
    ...     padding_mode=hg.PaddingMode.ZERO_PAD, pre_padding=[0, 0], post_padding=[0, 0],
    ...     stride=[2, 2], window=[2, 2])
    >>> g.validate(); y.get_name(), y.get_dim()
    ('ResampleFwd_0::Y', [1, 1, 2, 2])
"""

from __future__ import annotations

from typing import Any

from .builder_base import BuilderHost, name_unnamed
from .errors import HipdnnError
from .nodes.resample_bwd import ResampleBwdNode
from .nodes.resample_fwd import ResampleFwdNode
from .tensor import TensorAttributes
from .types import DataType, ErrorCode, ResampleMode

__all__ = ["ResampleBuilders"]


class ResampleBuilders(BuilderHost):
    """The resample builder methods (mixed into ``Graph``)."""

    def resample(
        self, x: Any = None, attributes: Any = None, **keywords: Any
    ) -> tuple[TensorAttributes, TensorAttributes | None]:
        """Add a resample forward (pooling) node: ``resample(x, attrs)``; returns the virtual
        ``(<node>::Y, <node>::Index)``, the INDEX (INT32) only for ``MAXPOOL`` with
        ``generate_index`` (else ``None``). An unnamed X is renamed ``<node>::X``; keywords set
        the attributes' ``name``, ``pre_padding``, ``post_padding``, ``stride``, ``window``,
        ``resample_mode``, ``padding_mode``, ``generate_index`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is not a tensor, attributes of
                another class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT)
            >>> x = g.tensor(name="x", dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
            >>> y, index = g.resample(x, resample_mode=hg.ResampleMode.MAXPOOL,
            ...     padding_mode=hg.PaddingMode.NEG_INF_PAD, pre_padding=[0, 0],
            ...     post_padding=[0, 0], stride=[2, 2], window=[2, 2], generate_index=True)
            >>> g.validate(); y.get_dim(), index.get_name(), index.get_data_type().name
            ([1, 3, 2, 2], 'ResampleFwd_0::Index', 'INT32')
        """
        attrs = self._resample_fwd_attributes(x, attributes, keywords, "resample")
        y = self._output_tensor(f"{attrs.name}::Y")
        index = None
        if attrs.generate_index and attrs.resample_mode == ResampleMode.MAXPOOL:
            index = self._output_tensor(f"{attrs.name}::Index")
            index.data_type = DataType.INT32
            attrs.set_index(index)
        attrs.set_x(x).set_y(y)
        self._add_node(ResampleFwdNode(attrs, self.attributes))
        return y, index

    def resample_fwd(
        self, x: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a resample forward node without an INDEX: ``resample_fwd(x, attrs)`` (the
        attributes' ``generate_index`` is set to ``False``); returns the virtual
        ``<node>::Y``. Naming and keywords as :meth:`resample`'s.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is not a tensor, attributes of
                another class or an unknown keyword.
        """
        attrs = self._resample_fwd_attributes(x, attributes, keywords, "resample_fwd")
        y = self._output_tensor(f"{attrs.name}::Y")
        attrs.set_generate_index(False).set_x(x).set_y(y)
        self._add_node(ResampleFwdNode(attrs, self.attributes))
        return y

    def resample_bwd(
        self, dy: Any = None, attributes: Any = None, index: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a resample backward node: ``resample_bwd(dy, attrs, index=None)`` (``index``:
        the forward's INDEX, needed for ``MAXPOOL``); returns the virtual ``<node>::DX`` (dims
        inferred from DY and the members, strides in DY's order). Unnamed inputs are renamed
        ``<node>::DY`` and ``<node>::INDEX``; keywords set the attributes' ``name``, the four
        members, ``resample_mode``, ``padding_mode`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        if not isinstance(dy, TensorAttributes) or not (
            index is None or isinstance(index, TensorAttributes)
        ):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "resample_bwd() takes tensor dy, then ResampleBwdAttributes, then an optional "
                "tensor index",
            )
        attrs = self._family_attributes(attributes, ResampleBwdNode, keywords, "resample_bwd")
        name_unnamed(attrs.name, ((dy, "DY"), (index, "INDEX")))
        dx = self._output_tensor(f"{attrs.name}::DX")
        attrs.set_dy(dy).set_index(index).set_dx(dx)
        self._add_node(ResampleBwdNode(attrs, self.attributes))
        return dx

    def _resample_fwd_attributes(
        self, x: Any, given: Any, keywords: dict[str, Any], op: str
    ) -> Any:
        """The checked input and named attributes of a resample forward builder."""
        if not isinstance(x, TensorAttributes):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"{op}() takes tensor x, then ResampleFwdAttributes"
            )
        attrs = self._family_attributes(given, ResampleFwdNode, keywords, op)
        name_unnamed(attrs.name, ((x, "X"),))
        return attrs
