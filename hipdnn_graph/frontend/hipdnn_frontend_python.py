"""Every name of hipDNN's compiled extension ``hipdnn_frontend.hipdnn_frontend_python``.

hipDNN's wheel does ``from .hipdnn_frontend_python import *``; its tests also import the private
``_get_data_ptr`` from here. :mod:`hipdnn_graph.frontend` does the same with this module.

Example:
    >>> from hipdnn_graph.frontend.hipdnn_frontend_python import _get_data_ptr
    >>> _get_data_ptr(4096)
    4096
"""

from __future__ import annotations

from typing import Any

from .. import __version__
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
from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..graph.autotune_types import (
    AutotuneCacheWriteOutcome,
    AutotuneConfig,
    AutotuneResult,
    AutotuneStorageConfig,
    AutotuneStrategy,
    EngineSweepSpec,
    KnobSweepAxis,
    PrimingFailurePolicy,
    TuneMode,
)
from ..types import (
    BuildPlanPolicy,
    ConvolutionMode,
    DataType,
    DiagonalAlignment,
    ErrorCode,
    HeuristicMode,
    MoeGroupedMatmulMode,
    NormFwdPhase,
    PaddingMode,
    PointwiseMode,
    ReductionMode,
    ResampleMode,
)
from ._attributes import SdpaAttributes
from ._enums import AttentionImplementation, BehaviorNote, PluginLoadingMode, TimingQuality
from ._errors import Error, UnsupportedFeatureError
from ._execute import ExecutionTiming
from ._graph import Graph
from ._handle import (
    EngineInfo,
    Handle,
    create_handle,
    destroy_handle,
    engine_id_to_name,
    get_loaded_engine_plugin_paths,
    get_stream,
    hip_device_synchronize,
    hip_get_device_count,
    hip_stream_synchronize,
    set_engine_plugin_paths,
    set_stream,
)
from ._hip import HipEvent, HipStallGate, hip_can_use_stream_wait_value
from ._knobs import (
    EngineConfigInfo,
    EngineVariant,
    FloatConstraint,
    IntConstraint,
    Knob,
    KnobSetting,
    KnobValueType,
    StringConstraint,
)
from ._memory import DeviceBuffer, get_data_ptr
from ._tensor import Tensor
from ._unsupported import MODULE_NAMES, unsupported_name

__all__ = [
    "AttentionImplementation",
    "AutotuneCacheWriteOutcome",
    "AutotuneConfig",
    "AutotuneResult",
    "AutotuneStorageConfig",
    "AutotuneStrategy",
    "BatchnormAttributes",
    "BatchnormBackwardAttributes",
    "BatchnormInferenceAttributes",
    "BatchnormInferenceAttributesVarianceExt",
    "BehaviorNote",
    "BlockScaleDequantizeAttributes",
    "BlockScaleQuantizeAttributes",
    "BuildPlanPolicy",
    "ConvDgradAttributes",
    "ConvFpropAttributes",
    "ConvWgradAttributes",
    "ConvolutionDgradAttributes",
    "ConvolutionFpropAttributes",
    "ConvolutionMode",
    "ConvolutionWgradAttributes",
    "CustomOpAttributes",
    "DataType",
    "DeviceBuffer",
    "DiagonalAlignment",
    "EngineConfigInfo",
    "EngineInfo",
    "EngineSweepSpec",
    "EngineVariant",
    "Error",
    "ErrorCode",
    "ExecutionTiming",
    "FloatConstraint",
    "Graph",
    "Handle",
    "HeuristicMode",
    "HipEvent",
    "HipStallGate",
    "IntConstraint",
    "Knob",
    "KnobSetting",
    "KnobSweepAxis",
    "KnobValueType",
    "LayernormAttributes",
    "LayernormBackwardAttributes",
    "MatmulAttributes",
    "MoeGroupedMatmulAttributes",
    "MoeGroupedMatmulMode",
    "NormFwdPhase",
    "PaddingMode",
    "PluginLoadingMode",
    "PointwiseAttributes",
    "PointwiseMode",
    "PrimingFailurePolicy",
    "RMSNormAttributes",
    "RMSNormBackwardAttributes",
    "ReductionAttributes",
    "ReductionMode",
    "ResampleBwdAttributes",
    "ResampleFwdAttributes",
    "ResampleMode",
    "SdpaAttributes",
    "SdpaBackwardAttributes",
    "StringConstraint",
    "Tensor",
    "TimingQuality",
    "TuneMode",
    "UnsupportedFeatureError",
    "__version__",
    "create_handle",
    "destroy_handle",
    "engine_id_to_name",
    "get_loaded_engine_plugin_paths",
    "get_stream",
    "hip_can_use_stream_wait_value",
    "hip_device_synchronize",
    "hip_get_device_count",
    "hip_stream_synchronize",
    "set_engine_plugin_paths",
    "set_stream",
]


#: hipDNN binds each convolution's attributes under two names (one class each)
ConvolutionFpropAttributes = ConvFpropAttributes
ConvolutionDgradAttributes = ConvDgradAttributes
ConvolutionWgradAttributes = ConvWgradAttributes


def _get_data_ptr(value: Any) -> int:
    """The address hipDNN's ``execute`` would read from ``value`` (see
    :func:`hipdnn_graph.frontend._memory.get_data_ptr`)."""
    return get_data_ptr(value, "value")


def __getattr__(name: str) -> Any:
    if name in MODULE_NAMES:
        raise unsupported_name(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
