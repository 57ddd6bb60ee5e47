"""The normalization node methods of hipDNN's bound ``Graph`` (layer norm, RMSNorm and batch
norm, forward and backward), a mixin of :class:`~hipdnn_graph.frontend.Graph` through
:class:`~hipdnn_graph.frontend._family_methods.FamilyMethods`.

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
    >>> scale = hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT)
    >>> attrs = hipdnn.RMSNormAttributes().set_forward_phase(hipdnn.NormFwdPhase.TRAINING)
    >>> [t.get_name() for t in hipdnn.Graph().rmsnorm(x, scale, attrs)]
    ['RMSNorm_0::Y', 'RMSNorm_0::INV_RMS']
"""

from __future__ import annotations

from typing import Any

from ..attributes.batchnorm import BatchnormAttributes
from ..attributes.batchnorm_backward import BatchnormBackwardAttributes
from ..attributes.batchnorm_inference import BatchnormInferenceAttributes
from ..attributes.batchnorm_inference_variance import BatchnormInferenceAttributesVarianceExt
from ..attributes.layernorm import LayernormAttributes
from ..attributes.layernorm_backward import LayernormBackwardAttributes
from ..attributes.rmsnorm import RMSNormAttributes
from ..attributes.rmsnorm_backward import RMSNormBackwardAttributes
from ._family_call import FamilyCall

__all__ = ["NormMethods"]


class NormMethods(FamilyCall):
    """The normalization node methods (mixed into :class:`~hipdnn_graph.frontend.Graph`)."""

    def rmsnorm(self, x: Any, scale: Any, attributes: Any) -> tuple[Any, Any]:
        """Add an RMSNorm forward node; returns ``(y, inv_rms)``, ``inv_rms`` ``None`` unless the
        phase is ``TRAINING``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
            >>> scale = hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.RMSNormAttributes().set_forward_phase(hipdnn.NormFwdPhase.INFERENCE)
            >>> y, inv_rms = hipdnn.Graph().rmsnorm(x, scale, attrs)
            >>> y.get_name(), inv_rms
            ('RMSNorm_0::Y', None)
        """
        return self._family(RMSNormAttributes, self.core_graph.rmsnorm, x, scale, attributes)

    def layernorm(self, x: Any, scale: Any, bias: Any, attributes: Any) -> tuple[Any, Any, Any]:
        """Add a layer-norm forward node; returns ``(y, mean, inv_variance)``, the last two
        ``None`` in the ``INFERENCE`` phase.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
            >>> scale, bias = (hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT) for _ in "sb")
            >>> attrs = hipdnn.LayernormAttributes().set_forward_phase(hipdnn.NormFwdPhase.TRAINING)
            >>> [t.get_name() for t in hipdnn.Graph().layernorm(x, scale, bias, attrs)]
            ['Layernorm_0::Y', 'Layernorm_0::MEAN', 'Layernorm_0::INV_VARIANCE']
        """
        return self._family(
            LayernormAttributes, self.core_graph.layernorm, x, scale, bias, attributes
        )

    def batchnorm(
        self, x: Any, scale: Any, bias: Any, attributes: Any
    ) -> tuple[Any, Any, Any, Any, Any]:
        """Add a batch-norm training forward node; returns ``(y, mean, inv_variance,
        next_running_mean, next_running_variance)``, the last two ``None`` without previous
        running statistics and momentum.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([2, 4, 3, 3], hipdnn.DataType.FLOAT)
            >>> c = hipdnn.Tensor.create
            >>> scale, bias = (c([1, 4, 1, 1], hipdnn.DataType.FLOAT) for _ in "sb")
            >>> outputs = hipdnn.Graph().batchnorm(x, scale, bias, hipdnn.BatchnormAttributes())
            >>> [None if t is None else t.get_name() for t in outputs]
            ['Batchnorm_0::Y', 'Batchnorm_0::MEAN', 'Batchnorm_0::INV_VARIANCE', None, None]
        """
        return self._family(
            BatchnormAttributes, self.core_graph.batchnorm, x, scale, bias, attributes
        )

    def batchnorm_inference(
        self, x: Any, mean: Any, inv_variance: Any, scale: Any, bias: Any, attributes: Any
    ) -> Any:
        """Add a batch-norm inference node; returns ``y``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([2, 4, 3, 3], hipdnn.DataType.FLOAT)
            >>> c = hipdnn.Tensor.create
            >>> m, iv, s, b = (c([1, 4, 1, 1], hipdnn.DataType.FLOAT) for _ in "mvsb")
            >>> attrs = hipdnn.BatchnormInferenceAttributes()
            >>> hipdnn.Graph().batchnorm_inference(x, m, iv, s, b, attrs).get_name()
            'BatchnormInference_0::Y'
        """
        return self._family(
            BatchnormInferenceAttributes,
            self.core_graph.batchnorm_inference,
            x,
            mean,
            inv_variance,
            scale,
            bias,
            attributes,
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

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> x = hipdnn.Tensor.create([2, 4, 3, 3], hipdnn.DataType.FLOAT)
            >>> c = hipdnn.Tensor.create
            >>> m, v, s, b = (c([1, 4, 1, 1], hipdnn.DataType.FLOAT) for _ in "mvsb")
            >>> eps = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.BatchnormInferenceAttributesVarianceExt()
            >>> g = hipdnn.Graph()
            >>> g.batchnorm_inference_variance_ext(x, m, v, s, b, eps, attrs).get_name()
            'BatchnormInferenceVarianceExt_0::Y'
        """
        return self._family(
            BatchnormInferenceAttributesVarianceExt,
            self.core_graph.batchnorm_inference_variance_ext,
            x,
            mean,
            variance,
            scale,
            bias,
            epsilon,
            attributes,
        )

    def batchnorm_backward(
        self, dy: Any, x: Any, scale: Any, attributes: Any
    ) -> tuple[Any, Any, Any]:
        """Add a batch-norm backward node; returns ``(dx, dscale, dbias)``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> dy, x = (hipdnn.Tensor.create([2, 4, 3, 3], hipdnn.DataType.FLOAT) for _ in "dx")
            >>> scale = hipdnn.Tensor.create([1, 4, 1, 1], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.BatchnormBackwardAttributes()
            >>> [t.get_name() for t in hipdnn.Graph().batchnorm_backward(dy, x, scale, attrs)]
            ['BatchnormBackward_0::DX', 'BatchnormBackward_0::DSCALE', 'BatchnormBackward_0::DBIAS']
        """
        return self._family(
            BatchnormBackwardAttributes,
            self.core_graph.batchnorm_backward,
            dy,
            x,
            scale,
            attributes,
        )

    def layernorm_backward(
        self, dy: Any, x: Any, scale: Any, attributes: Any
    ) -> tuple[Any, Any, Any]:
        """Add a layer-norm backward node; returns ``(dx, dscale, dbias)``.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> dy, x = (hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT) for _ in "dx")
            >>> scale = hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.LayernormBackwardAttributes()
            >>> [t.get_name() for t in hipdnn.Graph().layernorm_backward(dy, x, scale, attrs)]
            ['LayernormBackward_0::DX', 'LayernormBackward_0::DSCALE', 'LayernormBackward_0::DBIAS']
        """
        return self._family(
            LayernormBackwardAttributes,
            self.core_graph.layernorm_backward,
            dy,
            x,
            scale,
            attributes,
        )

    def rmsnorm_backward(
        self, dy: Any, x: Any, scale: Any, inv_rms: Any, attributes: Any
    ) -> tuple[Any, Any, Any]:
        """Add an RMSNorm backward node; returns ``(dx, dscale, dbias)``, ``dbias`` ``None``
        unless the attributes' ``compute_dbias`` is set.

        Raises:
            TypeError: for arguments of other types (as nanobind does).

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> dy, x = (hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT) for _ in "dx")
            >>> scale = hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT)
            >>> inv_rms = hipdnn.Tensor.create([4, 1], hipdnn.DataType.FLOAT)
            >>> attrs = hipdnn.RMSNormBackwardAttributes()
            >>> dx, dscale, dbias = hipdnn.Graph().rmsnorm_backward(dy, x, scale, inv_rms, attrs)
            >>> dx.get_name(), dscale.get_name(), dbias
            ('RMSNormBackward_0::DX', 'RMSNormBackward_0::DSCALE', None)
        """
        return self._family(
            RMSNormBackwardAttributes,
            self.core_graph.rmsnorm_backward,
            dy,
            x,
            scale,
            inv_rms,
            attributes,
        )
