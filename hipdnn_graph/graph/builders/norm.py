"""``Graph`` builder methods of the normalization families (hipDNN's ``Graph::rmsnorm``,
``layernorm``, ``batchnorm``, ``batchnorm_inference``, ``batchnorm_inference_variance_ext``,
``batchnorm_backward``, ``layernorm_backward`` and ``rmsnorm_backward``), a mixin of the family
builders.

Each method is one call of :meth:`~hipdnn_graph.graph.builders.base.BuilderHost._add_family`,
the recipe hipDNN's ``Graph`` node methods share.

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

from typing import Any, TypeAlias

from ...nodes.batchnorm import BATCHNORM_SPEC
from ...nodes.batchnorm_backward import BATCHNORM_BACKWARD_SPEC
from ...nodes.batchnorm_inference import BATCHNORM_INFERENCE_SPEC
from ...nodes.batchnorm_inference_variance import BATCHNORM_INFERENCE_VARIANCE_SPEC
from ...nodes.layernorm import LAYERNORM_SPEC
from ...nodes.layernorm_backward import LAYERNORM_BACKWARD_SPEC
from ...nodes.rmsnorm import RMSNORM_SPEC
from ...nodes.rmsnorm_backward import RMSNORM_BACKWARD_SPEC
from ...tensor import TensorAttributes
from ...types import NormFwdPhase
from .base import BuilderHost, FamilyRecipe

__all__ = ["NormBuilders"]


T: TypeAlias = TensorAttributes
Maybe: TypeAlias = TensorAttributes | None


def _running_stats(a: Any) -> bool:
    """Batch norm updates the running statistics: their previous values and momentum are set."""
    running = (a.get_prev_running_mean(), a.get_prev_running_variance(), a.get_momentum())
    return None not in running


def _statistics(a: Any) -> bool:
    """Layer norm writes MEAN and INV_VARIANCE: its phase is not ``INFERENCE``."""
    return bool(a.forward_phase != NormFwdPhase.INFERENCE)


_RMSNORM: FamilyRecipe[tuple[T, Maybe]] = FamilyRecipe(
    RMSNORM_SPEC, "rmsnorm", ("X", "SCALE"),
    made_when={"INV_RMS": lambda a: a.forward_phase == NormFwdPhase.TRAINING},
)  # fmt: skip
_LAYERNORM: FamilyRecipe[tuple[T, Maybe, Maybe]] = FamilyRecipe(
    LAYERNORM_SPEC, "layernorm", ("X", "SCALE", "BIAS"),
    named=("X", "SCALE", "BIAS", "EPSILON"),
    made_when={"MEAN": _statistics, "INV_VARIANCE": _statistics},
)  # fmt: skip
_BATCHNORM: FamilyRecipe[tuple[T, T, T, Maybe, Maybe]] = FamilyRecipe(
    BATCHNORM_SPEC, "batchnorm", ("X", "SCALE", "BIAS"), clear_absent=True,
    made_when={"NEXT_RUNNING_MEAN": _running_stats, "NEXT_RUNNING_VARIANCE": _running_stats},
)  # fmt: skip
_BATCHNORM_INFERENCE: FamilyRecipe[T] = FamilyRecipe(
    BATCHNORM_INFERENCE_SPEC, "batchnorm_inference", ("X", "MEAN", "INV_VARIANCE", "SCALE", "BIAS")
)
_BATCHNORM_INFERENCE_VARIANCE: FamilyRecipe[T] = FamilyRecipe(
    BATCHNORM_INFERENCE_VARIANCE_SPEC, "batchnorm_inference_variance_ext",
    ("X", "MEAN", "VARIANCE", "SCALE", "BIAS", "EPSILON"),
)  # fmt: skip
_BATCHNORM_BACKWARD: FamilyRecipe[tuple[T, T, T]] = FamilyRecipe(
    BATCHNORM_BACKWARD_SPEC, "batchnorm_backward", ("DY", "X", "SCALE")
)
_LAYERNORM_BACKWARD: FamilyRecipe[tuple[T, T, T]] = FamilyRecipe(
    LAYERNORM_BACKWARD_SPEC, "layernorm_backward", ("DY", "X", "SCALE"),
    named=("DY", "X", "SCALE", "MEAN", "INV_VARIANCE", "EPSILON"),
)  # fmt: skip
_RMSNORM_BACKWARD: FamilyRecipe[tuple[T, T, Maybe]] = FamilyRecipe(
    RMSNORM_BACKWARD_SPEC, "rmsnorm_backward", ("DY", "X", "SCALE", "INV_RMS"),
    made_when={"DBIAS": lambda a: bool(a.compute_dbias)},
)  # fmt: skip


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
        return self._add_family(_RMSNORM, (x, scale), attributes, keywords)

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
        return self._add_family(_LAYERNORM, (x, scale, bias), attributes, keywords)

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
        return self._add_family(_BATCHNORM, (x, scale, bias), attributes, keywords)

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
        return self._add_family(_BATCHNORM_INFERENCE, inputs, attributes, keywords)

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
        inputs = (x, mean, variance, scale, bias, epsilon)
        return self._add_family(_BATCHNORM_INFERENCE_VARIANCE, inputs, attributes, keywords)

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
        return self._add_family(_BATCHNORM_BACKWARD, (dy, x, scale), attributes, keywords)

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
        return self._add_family(_LAYERNORM_BACKWARD, (dy, x, scale), attributes, keywords)

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
        inputs = (dy, x, scale, inv_rms)
        return self._add_family(_RMSNORM_BACKWARD, inputs, attributes, keywords)
