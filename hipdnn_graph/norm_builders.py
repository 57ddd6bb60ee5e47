"""``Graph`` builder methods of the normalization families (hipDNN's ``Graph::rmsnorm``,
``layernorm``, ``batchnorm``, ``batchnorm_inference``, ``batchnorm_inference_variance_ext``,
``batchnorm_backward``, ``layernorm_backward`` and ``rmsnorm_backward``), a mixin of the family
builders.

Each method copies the attributes it is given (the caller's object stays as it was), names an
unnamed node ``<Prefix>_<index>`` and its unnamed inputs ``<node>::<SLOT>``, creates the virtual
outputs ``<node>::<SLOT>`` and adds the node.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[2, 8, 16])
    >>> eps = g.tensor(name="eps").set_value(1e-5)
    >>> y, inv_rms = g.rmsnorm(x, g.tensor(name="gamma", dim=[1, 1, 16]), epsilon=eps)
    >>> y.get_name(), inv_rms is None
    ('RMSNorm_0::Y', True)
"""

from __future__ import annotations

from typing import Any

from .builder_base import BuilderHost, name_unnamed
from .errors import HipdnnError
from .nodes.batchnorm import BatchnormNode
from .nodes.batchnorm_backward import BatchnormBackwardNode
from .nodes.batchnorm_inference import BatchnormInferenceNode
from .nodes.batchnorm_inference_variance import BatchnormInferenceVarianceNode
from .nodes.layernorm import LayerNormNode
from .nodes.layernorm_backward import LayernormBackwardNode
from .nodes.rmsnorm import RMSNormNode
from .nodes.rmsnorm_backward import RMSNormBackwardNode
from .tensor import TensorAttributes
from .types import ErrorCode, NormFwdPhase

__all__ = ["NormBuilders"]


class NormBuilders(BuilderHost):
    """The builder methods of the normalization families (mixed into ``Graph``)."""

    def rmsnorm(
        self, x: Any = None, scale: Any = None, attributes: Any = None, **keywords: Any
    ) -> tuple[TensorAttributes, TensorAttributes | None]:
        """Add an RMSNorm forward node: ``rmsnorm(x, scale, attrs)``; returns ``(y, inv_rms)``:
        the virtual ``<node>::Y`` and, in the ``TRAINING`` phase, ``<node>::INV_RMS`` (``None``
        otherwise). Epsilon, the phase and an optional bias come with the attributes; keywords
        set ``name``, ``forward_phase``, ``epsilon``, ``bias`` and ``compute_data_type``. Inputs
        keep their names, as in hipDNN.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        if not isinstance(x, TensorAttributes) or not isinstance(scale, TensorAttributes):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "rmsnorm() takes tensors x and scale, then RMSNormAttributes",
            )
        attrs = self._family_attributes(attributes, RMSNormNode, keywords, "rmsnorm")
        y = self._output_tensor(f"{attrs.name}::Y")
        inv_rms = None
        if attrs.forward_phase == NormFwdPhase.TRAINING:
            inv_rms = self._output_tensor(f"{attrs.name}::INV_RMS")
            attrs.set_inv_rms(inv_rms)
        attrs.set_x(x).set_scale(scale).set_y(y)
        self._add_node(RMSNormNode(attrs, self.attributes))
        return y, inv_rms

    def layernorm(
        self,
        x: Any = None,
        scale: Any = None,
        bias: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> tuple[TensorAttributes, TensorAttributes | None, TensorAttributes | None]:
        """Add a layer-norm forward node: ``layernorm(x, scale, bias, attrs)``; returns
        ``(y, mean, inv_variance)``: the virtual ``<node>::Y`` and, unless the phase is
        ``INFERENCE``, ``<node>::MEAN`` and ``<node>::INV_VARIANCE`` (``None`` otherwise).
        Unnamed X, SCALE, BIAS and epsilon are renamed ``<node>::X`` … ``<node>::EPSILON``;
        keywords set ``name``, ``forward_phase``, ``epsilon``, ``normalized_dim_count`` and
        ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        if not all(isinstance(t, TensorAttributes) for t in (x, scale, bias)):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "layernorm() takes tensors x, scale and bias, then LayernormAttributes",
            )
        attrs = self._family_attributes(attributes, LayerNormNode, keywords, "layernorm")
        epsilon = attrs.get_epsilon()
        name_unnamed(attrs.name, ((x, "X"), (scale, "SCALE"), (bias, "BIAS"), (epsilon, "EPSILON")))
        y = self._output_tensor(f"{attrs.name}::Y")
        mean = inv_variance = None
        if attrs.forward_phase != NormFwdPhase.INFERENCE:
            mean = self._output_tensor(f"{attrs.name}::MEAN")
            inv_variance = self._output_tensor(f"{attrs.name}::INV_VARIANCE")
            attrs.set_mean(mean).set_inv_variance(inv_variance)
        attrs.set_x(x).set_scale(scale).set_bias(bias).set_y(y)
        self._add_node(LayerNormNode(attrs, self.attributes))
        return y, mean, inv_variance

    # ----- batch norm (hipDNN's Graph::batchnorm) -----
    def batchnorm(
        self,
        x: Any = None,
        scale: Any = None,
        bias: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> tuple[
        TensorAttributes,
        TensorAttributes,
        TensorAttributes,
        TensorAttributes | None,
        TensorAttributes | None,
    ]:
        """Add a batch-norm training forward node: ``batchnorm(x, scale, bias, attrs)``; returns
        ``(y, mean, inv_variance, next_running_mean, next_running_variance)``: the virtual
        ``<node>::Y``, ``<node>::MEAN``, ``<node>::INV_VARIANCE`` and, when the previous running
        mean, variance and momentum are set, ``<node>::NEXT_RUNNING_MEAN`` and
        ``<node>::NEXT_RUNNING_VARIANCE`` (``None`` otherwise). Keywords set ``name``,
        ``epsilon``, ``prev_running_mean``, ``prev_running_variance``, ``momentum`` and
        ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
            >>> x = g.tensor(name="x", dim=[4, 3, 8, 8])
            >>> scale, bias = g.tensor(name="s", dim=[1, 3, 1, 1]), g.tensor(name="b", dim=[1, 3, 1, 1])
            >>> eps = g.tensor(name="eps", dim=[1]).set_value(1e-5)
            >>> y, mean, inv_var, nm, nv = g.batchnorm(x, scale, bias, epsilon=eps)
            >>> y.get_name(), mean.get_name(), nm
            ('Batchnorm_0::Y', 'Batchnorm_0::MEAN', None)
        """  # noqa: E501
        if not all(isinstance(t, TensorAttributes) for t in (x, scale, bias)):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "batchnorm() takes tensors x, scale and bias, then BatchnormAttributes",
            )
        attrs = self._family_attributes(attributes, BatchnormNode, keywords, "batchnorm")
        y = self._output_tensor(f"{attrs.name}::Y")
        mean = self._output_tensor(f"{attrs.name}::MEAN")
        inv_variance = self._output_tensor(f"{attrs.name}::INV_VARIANCE")
        next_mean = next_variance = None
        running = (attrs.get_prev_running_mean(), attrs.get_prev_running_variance())
        if None not in running and attrs.get_momentum() is not None:
            next_mean = self._output_tensor(f"{attrs.name}::NEXT_RUNNING_MEAN")
            next_variance = self._output_tensor(f"{attrs.name}::NEXT_RUNNING_VARIANCE")
        attrs.set_x(x).set_scale(scale).set_bias(bias).set_y(y)
        attrs.set_mean(mean).set_inv_variance(inv_variance)
        attrs.set_next_running_mean(next_mean).set_next_running_variance(next_variance)
        self._add_node(BatchnormNode(attrs, self.attributes))
        return y, mean, inv_variance, next_mean, next_variance

    # ----- batch norm inference (hipDNN's Graph::batchnorm_inference) -----
    def batchnorm_inference(
        self,
        x: Any = None,
        mean: Any = None,
        inv_variance: Any = None,
        scale: Any = None,
        bias: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> TensorAttributes:
        """Add a batch-norm inference node:
        ``batchnorm_inference(x, mean, inv_variance, scale, bias, attrs)``; returns the virtual
        ``<node>::Y``. Keywords set ``name`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
            >>> x = g.tensor(name="x", dim=[2, 3, 4, 4])
            >>> m, v, s, b = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in "mvsb")
            >>> g.batchnorm_inference(x, m, v, s, b).get_name()
            'BatchnormInference_0::Y'
        """
        inputs = (x, mean, inv_variance, scale, bias)
        if not all(isinstance(t, TensorAttributes) for t in inputs):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "batchnorm_inference() takes tensors x, mean, inv_variance, scale and bias, then "
                "BatchnormInferenceAttributes",
            )
        attrs = self._family_attributes(
            attributes, BatchnormInferenceNode, keywords, "batchnorm_inference"
        )
        y = self._output_tensor(f"{attrs.name}::Y")
        attrs.set_x(x).set_mean(mean).set_inv_variance(inv_variance)
        attrs.set_scale(scale).set_bias(bias).set_y(y)
        self._add_node(BatchnormInferenceNode(attrs, self.attributes))
        return y

    # ----- batch norm inference from the variance (Graph::batchnorm_inference_variance_ext) -----
    def batchnorm_inference_variance_ext(
        self,
        x: Any = None,
        mean: Any = None,
        variance: Any = None,
        scale: Any = None,
        bias: Any = None,
        epsilon: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> TensorAttributes:
        """Add a batch-norm inference node taking the variance and epsilon:
        ``batchnorm_inference_variance_ext(x, mean, variance, scale, bias, epsilon, attrs)``;
        returns the virtual ``<node>::Y``. Keywords set ``name`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
            >>> x = g.tensor(name="x", dim=[2, 3, 4, 4])
            >>> m, v, s, b = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in "mvsb")
            >>> eps = g.tensor(name="eps").set_value(1e-5)
            >>> g.batchnorm_inference_variance_ext(x, m, v, s, b, eps).get_name()
            'BatchnormInferenceVarianceExt_0::Y'
        """
        inputs = (x, mean, variance, scale, bias)
        if not all(isinstance(t, TensorAttributes) for t in inputs) or epsilon is None:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "batchnorm_inference_variance_ext() takes tensors x, mean, variance, scale, bias "
                "and epsilon (a tensor or a number), then BatchnormInferenceAttributesVarianceExt",
            )
        attrs = self._family_attributes(
            attributes, BatchnormInferenceVarianceNode, keywords, "batchnorm_inference_variance_ext"
        )
        y = self._output_tensor(f"{attrs.name}::Y")
        attrs.set_x(x).set_mean(mean).set_variance(variance)
        attrs.set_scale(scale).set_bias(bias).set_epsilon(epsilon).set_y(y)
        self._add_node(BatchnormInferenceVarianceNode(attrs, self.attributes))
        return y

    # ----- batch norm backward (hipDNN's Graph::batchnorm_backward) -----
    def batchnorm_backward(
        self,
        dy: Any = None,
        x: Any = None,
        scale: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes]:
        """Add a batch-norm backward node: ``batchnorm_backward(dy, x, scale, attrs)``; returns
        the virtual ``(<node>::DX, <node>::DSCALE, <node>::DBIAS)``. Keywords set ``name``,
        ``mean``, ``inv_variance`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
            >>> dy, x = g.tensor(name="dy", dim=[2, 3, 4, 4]), g.tensor(name="x", dim=[2, 3, 4, 4])
            >>> dx, dscale, dbias = g.batchnorm_backward(dy, x, g.tensor(name="s", dim=[1, 3, 1, 1]))
            >>> dx.get_name(), dbias.get_name()
            ('BatchnormBackward_0::DX', 'BatchnormBackward_0::DBIAS')
        """  # noqa: E501
        if not all(isinstance(t, TensorAttributes) for t in (dy, x, scale)):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "batchnorm_backward() takes tensors dy, x and scale, then "
                "BatchnormBackwardAttributes",
            )
        attrs = self._family_attributes(
            attributes, BatchnormBackwardNode, keywords, "batchnorm_backward"
        )
        dx = self._output_tensor(f"{attrs.name}::DX")
        dscale = self._output_tensor(f"{attrs.name}::DSCALE")
        dbias = self._output_tensor(f"{attrs.name}::DBIAS")
        attrs.set_x(x).set_dy(dy).set_scale(scale)
        attrs.set_dx(dx).set_dscale(dscale).set_dbias(dbias)
        self._add_node(BatchnormBackwardNode(attrs, self.attributes))
        return dx, dscale, dbias

    # ----- layer-norm and RMSNorm backward (hipDNN's Graph::layernorm_backward/rmsnorm_backward)
    def layernorm_backward(
        self,
        dy: Any = None,
        x: Any = None,
        scale: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes]:
        """Add a layer-norm backward node: ``layernorm_backward(dy, x, scale, attrs)``; returns
        the virtual ``(<node>::DX, <node>::DSCALE, <node>::DBIAS)``. Unnamed DY, X, SCALE and the
        attributes' MEAN, INV_VARIANCE and EPSILON are renamed ``<node>::DY`` … as hipDNN does;
        keywords set ``name``, ``mean``, ``inv_variance``, ``epsilon``, ``normalized_dim_count``
        and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
            >>> dy, x = g.tensor(dim=[2, 6, 4]), g.tensor(name="x", dim=[2, 6, 4])
            >>> dx, dscale, dbias = g.layernorm_backward(dy, x, g.tensor(dim=[1, 6, 4]))
            >>> dy.get_name(), dx.get_name(), dbias.get_name()
            ('LayernormBackward_0::DY', 'LayernormBackward_0::DX', 'LayernormBackward_0::DBIAS')
        """
        if not all(isinstance(t, TensorAttributes) for t in (dy, x, scale)):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "layernorm_backward() takes tensors dy, x and scale, then "
                "LayernormBackwardAttributes",
            )
        attrs = self._family_attributes(
            attributes, LayernormBackwardNode, keywords, "layernorm_backward"
        )
        name_unnamed(attrs.name, (
            (dy, "DY"), (x, "X"), (scale, "SCALE"), (attrs.get_mean(), "MEAN"),
            (attrs.get_inv_variance(), "INV_VARIANCE"), (attrs.get_epsilon(), "EPSILON"),
        ))  # fmt: skip
        dx = self._output_tensor(f"{attrs.name}::DX")
        dscale = self._output_tensor(f"{attrs.name}::DSCALE")
        dbias = self._output_tensor(f"{attrs.name}::DBIAS")
        attrs.set_dy(dy).set_x(x).set_scale(scale)
        attrs.set_dx(dx).set_dscale(dscale).set_dbias(dbias)
        self._add_node(LayernormBackwardNode(attrs, self.attributes))
        return dx, dscale, dbias

    def rmsnorm_backward(
        self,
        dy: Any = None,
        x: Any = None,
        scale: Any = None,
        inv_rms: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes | None]:
        """Add an RMSNorm backward node: ``rmsnorm_backward(dy, x, scale, inv_rms, attrs)``;
        returns the virtual ``(<node>::DX, <node>::DSCALE, dbias)``, ``dbias`` the virtual
        ``<node>::DBIAS`` when the attributes' ``compute_dbias`` is set, else ``None``. Inputs
        keep their names, as in hipDNN; keywords set ``name``, ``compute_dbias`` and
        ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
            >>> dy, x = g.tensor(dim=[2, 6, 4]), g.tensor(dim=[2, 6, 4])
            >>> s, r = g.tensor(dim=[1, 1, 4]), g.tensor(dim=[2, 6, 1])
            >>> dx, dscale, dbias = g.rmsnorm_backward(dy, x, s, r, compute_dbias=True)
            >>> dx.get_name(), dbias.get_name(), dy.get_name()
            ('RMSNormBackward_0::DX', 'RMSNormBackward_0::DBIAS', '')
        """
        if not all(isinstance(t, TensorAttributes) for t in (dy, x, scale, inv_rms)):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "rmsnorm_backward() takes tensors dy, x, scale and inv_rms, then "
                "RMSNormBackwardAttributes",
            )
        attrs = self._family_attributes(
            attributes, RMSNormBackwardNode, keywords, "rmsnorm_backward"
        )
        dx = self._output_tensor(f"{attrs.name}::DX")
        dscale = self._output_tensor(f"{attrs.name}::DSCALE")
        dbias = None
        if attrs.compute_dbias:
            dbias = self._output_tensor(f"{attrs.name}::DBIAS")
            attrs.set_dbias(dbias)
        attrs.set_dy(dy).set_x(x).set_scale(scale).set_inv_rms(inv_rms)
        attrs.set_dx(dx).set_dscale(dscale)
        self._add_node(RMSNormBackwardNode(attrs, self.attributes))
        return dx, dscale, dbias
