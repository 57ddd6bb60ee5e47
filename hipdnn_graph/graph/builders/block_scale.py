"""``Graph`` builder methods of the block-scale families (hipDNN's ``Graph::block_scale_quantize``
and ``Graph::block_scale_dequantize``), a mixin of the family builders.

Each method is one call of :meth:`~hipdnn_graph.graph.builders.base.BuilderHost._add_family`,
the recipe hipDNN's ``Graph`` node methods share.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[4, 64])
    >>> y, scale = g.block_scale_quantize(x, hg.BlockScaleQuantizeAttributes().set_block_size(32))
    >>> y.get_name(), scale.get_name()
    ('BlockScaleQuantize_0::Y', 'BlockScaleQuantize_0::SCALE')
"""

from __future__ import annotations

from typing import Any

from ...nodes.block_scale_dequantize import BLOCK_SCALE_DEQUANTIZE_SPEC
from ...nodes.block_scale_quantize import BLOCK_SCALE_QUANTIZE_SPEC
from ...tensor import TensorAttributes
from .base import BuilderHost, FamilyRecipe

__all__ = ["BlockScaleBuilders"]

_QUANTIZE: FamilyRecipe[tuple[TensorAttributes, TensorAttributes]] = FamilyRecipe(
    BLOCK_SCALE_QUANTIZE_SPEC, "block_scale_quantize", ("X",), named=("X",)
)
_DEQUANTIZE: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    BLOCK_SCALE_DEQUANTIZE_SPEC,
    "block_scale_dequantize",
    ("X", "SCALE"),
    named=("X", "SCALE"),
)


class BlockScaleBuilders(BuilderHost):
    """The builder methods of the block-scale families (mixed into ``Graph``)."""

    def block_scale_quantize(
        self, x: Any = None, attributes: Any = None, **keywords: Any
    ) -> tuple[TensorAttributes, TensorAttributes]:
        """Add a block-scale quantize node: ``block_scale_quantize(x, attrs)``; returns
        ``(y, scale)``, the virtual ``<node>::Y`` and ``<node>::SCALE``. Keywords set ``name``,
        ``block_size``, ``axis``, ``transpose`` and ``compute_data_type``; an unnamed X is
        renamed ``<node>::X``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is not a tensor, attributes of
                another class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> f32 = hg.DataType.FLOAT
            >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
            >>> y, scale = g.block_scale_quantize(g.tensor(dim=[2, 64]), block_size=32, axis=1)
            >>> g.validate(); scale.get_dim()
            [2, 2]
        """
        return self._add_family(_QUANTIZE, (x,), attributes, keywords)

    def block_scale_dequantize(
        self, x: Any = None, scale: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a block-scale dequantize node: ``block_scale_dequantize(x, scale, attrs)``;
        returns the virtual ``<node>::Y``. Keywords set ``name``, ``block_size``,
        ``is_negative_scale`` and ``compute_data_type``; unnamed inputs are renamed
        ``<node>::X`` and ``<node>::SCALE``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of
                another class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> f32 = hg.DataType.FLOAT
            >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
            >>> x, s = g.tensor(dim=[2, 64]), g.tensor(dim=[2, 2])
            >>> y = g.block_scale_dequantize(x, s, block_size=[32])
            >>> g.validate(); y.get_name(), y.get_dim(), s.get_name()
            ('BlockScaleDequantize_0::Y', [2, 64], 'BlockScaleDequantize_0::SCALE')
        """
        return self._add_family(_DEQUANTIZE, (x, scale), attributes, keywords)
