"""The node methods of hipDNN's bound ``Graph`` for the non-attention families, a mixin of
:class:`~hipdnn_graph.frontend.Graph` (whose other members are in ``_graph.py``; the
normalization methods are in ``_norm_methods.py``).

Each method checks that its attributes are of the family's class, adds the node through the
core graph and returns its outputs as the binding does, all three through
:class:`~hipdnn_graph.frontend._family_call.FamilyCall`.

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> g = hipdnn.Graph().set_io_data_type(hipdnn.DataType.FLOAT)
    >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
    >>> y = g.pointwise(x, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.RELU_FWD))
    >>> y.get_name()
    'Pointwise_0::OUT_0'
"""

from __future__ import annotations

from typing import Any

from ..attributes.block_scale_dequantize import BlockScaleDequantizeAttributes
from ..attributes.block_scale_quantize import BlockScaleQuantizeAttributes
from ..attributes.convolution import ConvDgradAttributes, ConvFpropAttributes, ConvWgradAttributes
from ..attributes.custom_op import CustomOpAttributes
from ..attributes.matmul import MatmulAttributes
from ..attributes.moe_grouped_matmul import MoeGroupedMatmulAttributes
from ..attributes.pointwise import PointwiseAttributes
from ..attributes.reduction import ReductionAttributes
from ..attributes.resample import ResampleBwdAttributes, ResampleFwdAttributes
from ..tensor import TensorAttributes
from ._errors import FrontendTypeError
from ._norm_methods import NormMethods

__all__ = ["FamilyMethods"]


class FamilyMethods(NormMethods):
    """The non-attention node methods (mixed into :class:`~hipdnn_graph.frontend.Graph`)."""

    def pointwise(self, *args: Any) -> TensorAttributes:
        """Add a pointwise node: ``pointwise(in0, attrs)``, ``pointwise(in0, in1, attrs)`` or
        ``pointwise(in0, in1, in2, attrs)``; returns its output tensor (``<node>::OUT_0``).

        Raises:
            TypeError: for arguments of other types or counts (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> a, b = (hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT) for _ in range(2))
            >>> add = hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.ADD)
            >>> hipdnn.Graph().pointwise(a, b, add).get_name()
            'Pointwise_0::OUT_0'
        """
        if len(args) < 2 or not isinstance(args[-1], PointwiseAttributes):
            raise FrontendTypeError(
                "pointwise() takes one, two or three tensors, then PointwiseAttributes"
            )
        return self._family(None, self.core_graph.pointwise, *args)

    def matmul(self, a: Any, b: Any, attributes: Any) -> TensorAttributes:
        """Add a matmul node ``C = A @ B``; returns ``C`` (``<node>::C``).

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> a = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
            >>> b = hipdnn.Tensor.create([8, 2], hipdnn.DataType.FLOAT)
            >>> hipdnn.Graph().matmul(a, b, hipdnn.MatmulAttributes()).get_name()
            'Matmul_0::C'
        """
        return self._family(MatmulAttributes, self.core_graph.matmul, a, b, attributes)

    def conv_fprop(self, x: Any, w: Any, attributes: Any) -> TensorAttributes:
        """Add a forward convolution; returns ``Y`` (``<node>::Y``, dims and strides inferred).

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([1, 2, 5, 5], hipdnn.DataType.FLOAT)
            >>> w = hipdnn.Tensor.create([4, 2, 3, 3], hipdnn.DataType.FLOAT)
            >>> hipdnn.Graph().conv_fprop(x, w, hipdnn.ConvFpropAttributes()).get_name()
            'ConvolutionFprop_0::Y'
        """
        return self._family(ConvFpropAttributes, self.core_graph.conv_fprop, x, w, attributes)

    def conv_dgrad(self, dy: Any, w: Any, attributes: Any) -> TensorAttributes:
        """Add a data-gradient convolution; returns ``DX`` (``<node>::DX``).

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> dy = hipdnn.Tensor.create([1, 4, 5, 5], hipdnn.DataType.FLOAT)
            >>> w = hipdnn.Tensor.create([4, 2, 3, 3], hipdnn.DataType.FLOAT)
            >>> hipdnn.Graph().conv_dgrad(dy, w, hipdnn.ConvDgradAttributes()).get_name()
            'ConvolutionDgrad_0::DX'
        """
        return self._family(ConvDgradAttributes, self.core_graph.conv_dgrad, dy, w, attributes)

    def conv_wgrad(self, dy: Any, x: Any, attributes: Any) -> TensorAttributes:
        """Add a weight-gradient convolution (``dy`` first, as hipDNN binds it); returns ``DW``
        (``<node>::DW``).

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> dy = hipdnn.Tensor.create([1, 4, 5, 5], hipdnn.DataType.FLOAT)
            >>> x = hipdnn.Tensor.create([1, 2, 5, 5], hipdnn.DataType.FLOAT)
            >>> hipdnn.Graph().conv_wgrad(dy, x, hipdnn.ConvWgradAttributes()).get_name()
            'ConvolutionWgrad_0::DW'
        """
        return self._family(ConvWgradAttributes, self.core_graph.conv_wgrad, dy, x, attributes)

    def reduction(self, x: Any, *args: Any) -> TensorAttributes:
        """Add a reduction node: ``reduction(x, attrs)`` returns a new ``<node>::Y`` whose dims
        the caller sets; ``reduction(x, y, attrs)`` returns ``y``.

        Raises:
            TypeError: for arguments of other types or counts (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
            >>> add = hipdnn.ReductionAttributes().set_mode(hipdnn.ReductionMode.ADD)
            >>> y = hipdnn.Graph().reduction(x, add)
            >>> y.get_name(), y.set_dim([4, 1]).get_dim()
            ('Reduction_0::Y', [4, 1])
        """
        if not 1 <= len(args) <= 2 or not isinstance(args[-1], ReductionAttributes):
            raise FrontendTypeError(
                "reduction() takes tensor x [and tensor y], then ReductionAttributes"
            )
        return self._family(None, self.core_graph.reduction, x, *args)

    def block_scale_quantize(self, x: Any, attributes: Any) -> tuple[Any, Any]:
        """Add a block-scale quantize node; returns ``(y, scale)``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([2, 32], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.BlockScaleQuantizeAttributes()
            >>> [t.get_name() for t in hipdnn.Graph().block_scale_quantize(x, attrs)]
            ['BlockScaleQuantize_0::Y', 'BlockScaleQuantize_0::SCALE']
        """
        return self._family(
            BlockScaleQuantizeAttributes, self.core_graph.block_scale_quantize, x, attributes
        )

    def block_scale_dequantize(self, x: Any, scale: Any, attributes: Any) -> Any:
        """Add a block-scale dequantize node; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([2, 32], hipdnn.DataType.FLOAT)
            >>> scale = hipdnn.Tensor.create([2, 1], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.BlockScaleDequantizeAttributes()
            >>> hipdnn.Graph().block_scale_dequantize(x, scale, attrs).get_name()
            'BlockScaleDequantize_0::Y'
        """
        return self._family(
            BlockScaleDequantizeAttributes,
            self.core_graph.block_scale_dequantize,
            x,
            scale,
            attributes,
        )

    def moe_grouped_matmul(
        self,
        token: Any,
        weight: Any,
        first_token_offset: Any,
        token_index: Any,
        token_ks: Any,
        attributes: Any,
    ) -> TensorAttributes:
        """Add a MoE grouped matmul node; returns ``OUTPUT`` (``<node>::OUTPUT``, dims and
        strides inferred). ``token_index``/``token_ks`` may be ``None`` where the mode has none.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> token = hipdnn.Tensor.create([6, 8], hipdnn.DataType.FLOAT)
            >>> weight = hipdnn.Tensor.create([2, 8, 4], hipdnn.DataType.FLOAT)
            >>> offsets = hipdnn.Tensor.create([3], hipdnn.DataType.INT32)
            >>> attrs = hipdnn.MoeGroupedMatmulAttributes()
            >>> g = hipdnn.Graph()
            >>> g.moe_grouped_matmul(token, weight, offsets, None, None, attrs).get_name()
            'MoeGroupedMatmul_0::OUTPUT'
        """
        return self._family(
            MoeGroupedMatmulAttributes,
            self.core_graph.moe_grouped_matmul,
            token,
            weight,
            first_token_offset,
            token_index,
            token_ks,
            attributes,
        )

    def custom_op(
        self, inputs: Any, n_outputs: Any, attributes: Any
    ) -> tuple[TensorAttributes, ...]:
        """Add a custom (plugin-defined) op node; returns a tuple of its ``n_outputs`` new
        outputs (``<node>::OUT_<i>``), whose dims and strides the caller sets (a tuple, as
        hipDNN's binding returns; the core's ``Graph.custom_op`` returns a list).

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.CustomOpAttributes().set_custom_op_id("example.identity")
            >>> [t.get_name() for t in hipdnn.Graph().custom_op([x], 2, attrs)]
            ['CustomOp_0::OUT_0', 'CustomOp_0::OUT_1']
        """
        return tuple(
            self._family(
                CustomOpAttributes, self.core_graph.custom_op, inputs, n_outputs, attributes
            )
        )

    def resample(self, x: Any, attributes: Any) -> tuple[Any, Any]:
        """Add a resample forward (pooling) node; returns ``(y, index)``, ``index`` ``None``
        unless ``MAXPOOL`` with ``generate_index``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([1, 2, 4, 4], hipdnn.DataType.FLOAT)
            >>> y, index = hipdnn.Graph().resample(x, hipdnn.ResampleFwdAttributes())
            >>> y.get_name(), index
            ('ResampleFwd_0::Y', None)
        """
        return self._family(ResampleFwdAttributes, self.core_graph.resample, x, attributes)

    def resample_fwd(self, x: Any, attributes: Any) -> TensorAttributes:
        """Add a resample forward node without an INDEX; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([1, 2, 4, 4], hipdnn.DataType.FLOAT)
            >>> hipdnn.Graph().resample_fwd(x, hipdnn.ResampleFwdAttributes()).get_name()
            'ResampleFwd_0::Y'
        """
        return self._family(ResampleFwdAttributes, self.core_graph.resample_fwd, x, attributes)

    def resample_bwd(self, dy: Any, attributes: Any, index: Any = None) -> TensorAttributes:
        """Add a resample backward node (``index``: the forward's INDEX, for ``MAXPOOL``);
        returns ``dx``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> dy = hipdnn.Tensor.create([1, 2, 2, 2], hipdnn.DataType.FLOAT)
            >>> hipdnn.Graph().resample_bwd(dy, hipdnn.ResampleBwdAttributes()).get_name()
            'ResampleBwd_0::DX'
        """
        return self._family(
            ResampleBwdAttributes, self.core_graph.resample_bwd, dy, attributes, index=index
        )
