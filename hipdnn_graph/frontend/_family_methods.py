"""The node methods of hipDNN's bound ``Graph`` for the non-attention families, a mixin of
:class:`~hipdnn_graph.frontend.Graph` (whose other members are in ``_graph.py``).

Each method checks that its attributes are of the family's class (a ``TypeError`` otherwise, as
nanobind raises), adds the node through the core graph and returns its outputs as the binding
does (a tensor, a tuple or a list).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> g = hipdnn.Graph().set_io_data_type(hipdnn.DataType.FLOAT)
    >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
    >>> y = g.pointwise(x, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.RELU_FWD))
    >>> y.get_name()
    'Pointwise_0::OUT_0'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..attributes.batchnorm import BatchnormAttributes
from ..attributes.batchnorm_backward import BatchnormBackwardAttributes
from ..attributes.batchnorm_inference import BatchnormInferenceAttributes
from ..attributes.batchnorm_inference_variance import BatchnormInferenceAttributesVarianceExt
from ..attributes.block_scale_dequantize import BlockScaleDequantizeAttributes
from ..attributes.block_scale_quantize import BlockScaleQuantizeAttributes
from ..attributes.convolution import ConvDgradAttributes, ConvFpropAttributes, ConvWgradAttributes
from ..attributes.custom_op import CustomOpAttributes
from ..attributes.layernorm import LayernormAttributes
from ..attributes.layernorm_backward import LayernormBackwardAttributes
from ..attributes.matmul import MatmulAttributes
from ..attributes.moe_grouped_matmul import MoeGroupedMatmulAttributes
from ..attributes.pointwise import PointwiseAttributes
from ..attributes.reduction import ReductionAttributes
from ..attributes.resample import ResampleBwdAttributes, ResampleFwdAttributes
from ..attributes.rmsnorm import RMSNormAttributes
from ..attributes.rmsnorm_backward import RMSNormBackwardAttributes
from ..tensor import TensorAttributes
from ._errors import FrontendTypeError
from ._tensor import adopt

if TYPE_CHECKING:
    from ..graph import Graph as CoreGraph

__all__ = ["FamilyMethods"]


class FamilyMethods:
    """The non-attention node methods (mixed into :class:`~hipdnn_graph.frontend.Graph`)."""

    if TYPE_CHECKING:
        core_graph: CoreGraph

        def _node(self, add: Callable[[], Any]) -> Any: ...

    def pointwise(self, *args: Any) -> TensorAttributes:
        """Add a pointwise node: ``pointwise(in0, attrs)``, ``pointwise(in0, in1, attrs)`` or
        ``pointwise(in0, in1, in2, attrs)``; returns its output tensor (``<node>::OUT_0``).

        Raises:
            TypeError: for arguments of other types or counts (as nanobind does).
        """
        if len(args) < 2 or not isinstance(args[-1], PointwiseAttributes):
            raise FrontendTypeError(
                "pointwise() takes one, two or three tensors, then PointwiseAttributes"
            )
        out = self._node(lambda: self.core_graph.pointwise(*args))
        return adopt(out)  # type: ignore[return-value]

    def matmul(self, a: Any, b: Any, attributes: Any) -> TensorAttributes:
        """Add a matmul node ``C = A @ B``; returns ``C`` (``<node>::C``).

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, MatmulAttributes):
            raise FrontendTypeError(
                f"matmul() expects MatmulAttributes, got {type(attributes).__name__}"
            )
        c = self._node(lambda: self.core_graph.matmul(a, b, attributes))
        return adopt(c)  # type: ignore[return-value]

    def conv_fprop(self, x: Any, w: Any, attributes: Any) -> TensorAttributes:
        """Add a forward convolution; returns ``Y`` (``<node>::Y``, dims and strides inferred).

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, ConvFpropAttributes):
            raise FrontendTypeError(
                f"conv_fprop() expects ConvFpropAttributes, got {type(attributes).__name__}"
            )
        y = self._node(lambda: self.core_graph.conv_fprop(x, w, attributes))
        return adopt(y)  # type: ignore[return-value]

    def conv_dgrad(self, dy: Any, w: Any, attributes: Any) -> TensorAttributes:
        """Add a data-gradient convolution; returns ``DX`` (``<node>::DX``).

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, ConvDgradAttributes):
            raise FrontendTypeError(
                f"conv_dgrad() expects ConvDgradAttributes, got {type(attributes).__name__}"
            )
        dx = self._node(lambda: self.core_graph.conv_dgrad(dy, w, attributes))
        return adopt(dx)  # type: ignore[return-value]

    def conv_wgrad(self, dy: Any, x: Any, attributes: Any) -> TensorAttributes:
        """Add a weight-gradient convolution (``dy`` first, as hipDNN binds it); returns ``DW``
        (``<node>::DW``).

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, ConvWgradAttributes):
            raise FrontendTypeError(
                f"conv_wgrad() expects ConvWgradAttributes, got {type(attributes).__name__}"
            )
        dw = self._node(lambda: self.core_graph.conv_wgrad(dy, x, attributes))
        return adopt(dw)  # type: ignore[return-value]

    def reduction(self, x: Any, *args: Any) -> TensorAttributes:
        """Add a reduction node: ``reduction(x, attrs)`` returns a new ``<node>::Y`` whose dims
        the caller sets; ``reduction(x, y, attrs)`` returns ``y``.

        Raises:
            TypeError: for arguments of other types or counts (as nanobind does).
        """
        if not 1 <= len(args) <= 2 or not isinstance(args[-1], ReductionAttributes):
            raise FrontendTypeError(
                "reduction() takes tensor x [and tensor y], then ReductionAttributes"
            )
        y = self._node(lambda: self.core_graph.reduction(x, *args))
        return adopt(y)  # type: ignore[return-value]

    def rmsnorm(self, x: Any, scale: Any, attributes: Any) -> tuple[Any, Any]:
        """Add an RMSNorm forward node; returns ``(y, inv_rms)``, ``inv_rms`` ``None`` unless the
        phase is ``TRAINING``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, RMSNormAttributes):
            raise FrontendTypeError(
                f"rmsnorm() expects RMSNormAttributes, got {type(attributes).__name__}"
            )
        y, inv_rms = self._node(lambda: self.core_graph.rmsnorm(x, scale, attributes))
        return adopt(y), None if inv_rms is None else adopt(inv_rms)

    def layernorm(self, x: Any, scale: Any, bias: Any, attributes: Any) -> tuple[Any, Any, Any]:
        """Add a layer-norm forward node; returns ``(y, mean, inv_variance)``, the last two
        ``None`` in the ``INFERENCE`` phase.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, LayernormAttributes):
            raise FrontendTypeError(
                f"layernorm() expects LayernormAttributes, got {type(attributes).__name__}"
            )
        outputs = self._node(lambda: self.core_graph.layernorm(x, scale, bias, attributes))
        return tuple(None if t is None else adopt(t) for t in outputs)  # type: ignore[return-value]

    def batchnorm(
        self, x: Any, scale: Any, bias: Any, attributes: Any
    ) -> tuple[Any, Any, Any, Any, Any]:
        """Add a batch-norm training forward node; returns ``(y, mean, inv_variance,
        next_running_mean, next_running_variance)``, the last two ``None`` without previous
        running statistics and momentum.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, BatchnormAttributes):
            raise FrontendTypeError(
                f"batchnorm() expects BatchnormAttributes, got {type(attributes).__name__}"
            )
        outputs = self._node(lambda: self.core_graph.batchnorm(x, scale, bias, attributes))
        return tuple(None if t is None else adopt(t) for t in outputs)  # type: ignore[return-value]

    def batchnorm_inference(
        self, x: Any, mean: Any, inv_variance: Any, scale: Any, bias: Any, attributes: Any
    ) -> Any:
        """Add a batch-norm inference node; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, BatchnormInferenceAttributes):
            raise FrontendTypeError(
                "batchnorm_inference() expects BatchnormInferenceAttributes, got "
                f"{type(attributes).__name__}"
            )
        return adopt(
            self._node(
                lambda: self.core_graph.batchnorm_inference(
                    x, mean, inv_variance, scale, bias, attributes
                )
            )
        )

    def batchnorm_inference_variance_ext(
        self,
        x: Any,
        mean: Any,
        variance: Any,
        scale: Any,
        bias: Any,
        epsilon: Any,
        attributes: Any,
    ) -> Any:
        """Add a batch-norm inference node from the variance and epsilon; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, BatchnormInferenceAttributesVarianceExt):
            raise FrontendTypeError(
                "batchnorm_inference_variance_ext() expects "
                f"BatchnormInferenceAttributesVarianceExt, got {type(attributes).__name__}"
            )
        return adopt(
            self._node(
                lambda: self.core_graph.batchnorm_inference_variance_ext(
                    x, mean, variance, scale, bias, epsilon, attributes
                )
            )
        )

    def batchnorm_backward(
        self, dy: Any, x: Any, scale: Any, attributes: Any
    ) -> tuple[Any, Any, Any]:
        """Add a batch-norm backward node; returns ``(dx, dscale, dbias)``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, BatchnormBackwardAttributes):
            raise FrontendTypeError(
                "batchnorm_backward() expects BatchnormBackwardAttributes, got "
                f"{type(attributes).__name__}"
            )
        outputs = self._node(lambda: self.core_graph.batchnorm_backward(dy, x, scale, attributes))
        return tuple(adopt(t) for t in outputs)  # type: ignore[return-value]

    def block_scale_quantize(self, x: Any, attributes: Any) -> tuple[Any, Any]:
        """Add a block-scale quantize node; returns ``(y, scale)``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, BlockScaleQuantizeAttributes):
            raise FrontendTypeError(
                "block_scale_quantize() expects BlockScaleQuantizeAttributes, got "
                f"{type(attributes).__name__}"
            )
        y, scale = self._node(lambda: self.core_graph.block_scale_quantize(x, attributes))
        return adopt(y), adopt(scale)

    def block_scale_dequantize(self, x: Any, scale: Any, attributes: Any) -> Any:
        """Add a block-scale dequantize node; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, BlockScaleDequantizeAttributes):
            raise FrontendTypeError(
                "block_scale_dequantize() expects BlockScaleDequantizeAttributes, got "
                f"{type(attributes).__name__}"
            )
        return adopt(
            self._node(lambda: self.core_graph.block_scale_dequantize(x, scale, attributes))
        )

    def layernorm_backward(
        self, dy: Any, x: Any, scale: Any, attributes: Any
    ) -> tuple[Any, Any, Any]:
        """Add a layer-norm backward node; returns ``(dx, dscale, dbias)``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, LayernormBackwardAttributes):
            raise FrontendTypeError(
                "layernorm_backward() expects LayernormBackwardAttributes, got "
                f"{type(attributes).__name__}"
            )
        outputs = self._node(lambda: self.core_graph.layernorm_backward(dy, x, scale, attributes))
        return tuple(adopt(t) for t in outputs)  # type: ignore[return-value]

    def rmsnorm_backward(
        self, dy: Any, x: Any, scale: Any, inv_rms: Any, attributes: Any
    ) -> tuple[Any, Any, Any]:
        """Add an RMSNorm backward node; returns ``(dx, dscale, dbias)``, ``dbias`` ``None``
        unless the attributes' ``compute_dbias`` is set.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, RMSNormBackwardAttributes):
            raise FrontendTypeError(
                "rmsnorm_backward() expects RMSNormBackwardAttributes, got "
                f"{type(attributes).__name__}"
            )
        outputs = self._node(
            lambda: self.core_graph.rmsnorm_backward(dy, x, scale, inv_rms, attributes)
        )
        return tuple(None if t is None else adopt(t) for t in outputs)  # type: ignore[return-value]

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
        """
        if not isinstance(attributes, MoeGroupedMatmulAttributes):
            raise FrontendTypeError(
                "moe_grouped_matmul() expects MoeGroupedMatmulAttributes, got "
                f"{type(attributes).__name__}"
            )
        out = self._node(
            lambda: self.core_graph.moe_grouped_matmul(
                token, weight, first_token_offset, token_index, token_ks, attributes
            )
        )
        return adopt(out)  # type: ignore[return-value]

    def custom_op(self, inputs: Any, n_outputs: Any, attributes: Any) -> list[TensorAttributes]:
        """Add a custom (plugin-defined) op node; returns a list of its ``n_outputs`` new
        outputs (``<node>::OUT_<i>``), whose dims and strides the caller sets.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, CustomOpAttributes):
            raise FrontendTypeError(
                f"custom_op() expects CustomOpAttributes, got {type(attributes).__name__}"
            )
        outputs = self._node(lambda: self.core_graph.custom_op(inputs, n_outputs, attributes))
        return [adopt(t) for t in outputs]  # type: ignore[misc]

    def resample(self, x: Any, attributes: Any) -> tuple[Any, Any]:
        """Add a resample forward (pooling) node; returns ``(y, index)``, ``index`` ``None``
        unless ``MAXPOOL`` with ``generate_index``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, ResampleFwdAttributes):
            raise FrontendTypeError(
                f"resample() expects ResampleFwdAttributes, got {type(attributes).__name__}"
            )
        y, index = self._node(lambda: self.core_graph.resample(x, attributes))
        return adopt(y), None if index is None else adopt(index)

    def resample_fwd(self, x: Any, attributes: Any) -> TensorAttributes:
        """Add a resample forward node without an INDEX; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, ResampleFwdAttributes):
            raise FrontendTypeError(
                f"resample_fwd() expects ResampleFwdAttributes, got {type(attributes).__name__}"
            )
        y = self._node(lambda: self.core_graph.resample_fwd(x, attributes))
        return adopt(y)  # type: ignore[return-value]

    def resample_bwd(self, dy: Any, attributes: Any, index: Any = None) -> TensorAttributes:
        """Add a resample backward node (``index``: the forward's INDEX, for ``MAXPOOL``);
        returns ``dx``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).
        """
        if not isinstance(attributes, ResampleBwdAttributes):
            raise FrontendTypeError(
                f"resample_bwd() expects ResampleBwdAttributes, got {type(attributes).__name__}"
            )
        dx = self._node(lambda: self.core_graph.resample_bwd(dy, attributes, index))
        return adopt(dx)  # type: ignore[return-value]
