"""hipDNN bindings this module does not provide, each failing with a message that names it.

hipdnn-graph builds SDPA (forward and backward), pointwise, matmul, reduction, RMSNorm and
layer-norm (forward and backward), convolution (forward, data and weight gradients), batch-norm,
resample (forward and backward), MoE grouped matmul, custom op and block-scale (quantize,
dequantize) graphs: every op family of hipDNN's bindings, with its engine configurations and
knobs, autotuning and engine filtering, and its HIP helpers. hipDNN's internal graph passes,
which ``validate()`` runs, are not bound.
Reaching for one raises :class:`~hipdnn_graph.frontend.UnsupportedFeatureError`
(``GRAPH_NOT_SUPPORTED``, also an ``AttributeError``, so ``hasattr`` answers ``False``).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> try:
    ...     hipdnn.Graph().topologicallySortGraph
    ... except hipdnn.UnsupportedFeatureError as err:
    ...     print(err.code.name, str(err).split(" (")[0])
    GRAPH_NOT_SUPPORTED Graph.topologicallySortGraph()
"""

from __future__ import annotations

from ._errors import UnsupportedFeatureError

__all__ = ["GRAPH_METHODS", "MODULE_NAMES", "unsupported_graph_method", "unsupported_name"]

_OPS = (
    "only sdpa(), sdpa_backward(), pointwise(), matmul(), reduction(), rmsnorm(), layernorm(), "
    "conv_fprop(), conv_dgrad(), conv_wgrad(), batchnorm(), batchnorm_backward(), "
    "batchnorm_inference(), batchnorm_inference_variance_ext(), layernorm_backward(), "
    "rmsnorm_backward(), moe_grouped_matmul(), custom_op(), resample(), resample_fwd(), "
    "resample_bwd(), block_scale_quantize() and block_scale_dequantize() graphs are"
)
#: Graph methods of hipDNN's bindings that are missing here -> what they belong to
GRAPH_METHODS: dict[str, str] = {
    "checkNoDuplicateTensorIds": "hipDNN's internal graph passes (validate() runs them)",
    "topologicallySortGraph": "hipDNN's internal graph passes (validate() runs them)",
}

#: module-level names of hipDNN's bindings that are missing here -> what they belong to
#: (none at present: every module-level name of hipDNN's bindings is bound)
MODULE_NAMES: dict[str, str] = {}


def unsupported_graph_method(name: str) -> UnsupportedFeatureError:
    """The error for ``Graph.<name>``."""
    return UnsupportedFeatureError(
        f"Graph.{name}() ({GRAPH_METHODS[name]}) is not supported by hipdnn_graph.frontend: {_OPS}"
    )


def unsupported_name(name: str) -> UnsupportedFeatureError:
    """The error for the module-level ``<name>``."""
    return UnsupportedFeatureError(
        f"hipdnn_frontend.{name} ({MODULE_NAMES[name]}) is not supported by "
        f"hipdnn_graph.frontend: {_OPS}"
    )
