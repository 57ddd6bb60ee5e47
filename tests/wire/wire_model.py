"""The oracles' common description of a hipDNN serialized Graph ("wire description").

A wire description is a plain dict with every field of hipDNN's ``Graph``, its tensors and its
SDPA nodes, by hipDNN's field names (HIPDNN_WIRE.md A2-A8): ``None`` for an absent optional,
string or vector; floats as their binary32 bits (an int); TensorValue structs as ``value_type``
(the union tag) plus ``value`` (hex of the struct's little-endian bytes); the graph ``id`` as 32
hex digits; ``min_required_engine_api_version`` as ``[major, minor, patch]``. Both oracles (the
C++ checker and the generated Python code) read blobs into this form and build blobs from it.

This module also derives the description a graph *should* have from the graph's own public API
(:func:`expected_description`), independently of the project's writer, and reads hipDNN's JSON
form (spec part B) into a description (:func:`description_from_hipdnn_json`).
"""

from __future__ import annotations

import struct
from typing import Any

import ml_dtypes
import numpy as np

import hipdnn_graph as hg

Desc = dict[str, Any]

# ----- hipDNN's schema facts (HIPDNN_WIRE.md A4-A8), checked against the schema text by
# ----- test_wire_model_matches_schemas.

#: hipDNN's DataType numbers (data_types.fbs).
HIPDNN_DATA_TYPES = {
    "UNSET": 0,
    "FLOAT": 1,
    "HALF": 2,
    "BFLOAT16": 3,
    "DOUBLE": 4,
    "UINT8": 5,
    "INT32": 6,
    "INT8": 7,
    "FP8_E4M3": 8,
    "FP8_E5M2": 9,
    "FP8_E8M0": 10,
    "FP4_E2M1": 11,
    "FP6_E2M3": 12,
    "FP6_E3M2": 13,
    "INT4": 14,
    "INT64": 15,
    "BOOLEAN": 16,
    "FP8_E4M3_FNUZ": 17,
    "FP8_E5M2_FNUZ": 18,
}

#: TensorValue member -> (tag, struct format): the members are structs (A4).
VALUE_MEMBERS = {
    "Float32Value": (1, "<f"),
    "Float16Value": (2, "<f"),
    "BFloat16Value": (3, "<f"),
    "Float8Value": (4, "<B"),
    "Int32Value": (5, "<i"),
    "Float64Value": (6, "<d"),
    "Int64Value": (7, "<q"),
    "BoolValue": (8, "<?"),
}
VALUE_FORMAT_BY_TAG = dict(VALUE_MEMBERS.values())

#: NodeAttributes tags the project reads (A6) and one it must refuse.
SDPA_TAG, SDPA_BACKWARD_TAG, MATMUL_TAG = 12, 15, 9
#: further families the project reads, from hipDNN's schemas (matmul in the reference folder;
#: pointwise, reduction, RMSNorm, layer norm among the family schemas of schema_copies.py)
POINTWISE_TAG, REDUCTION_TAG, RMSNORM_TAG, LAYERNORM_TAG = 2, 18, 10, 11
#: batch norm (batchnorm_attributes.fbs)
BATCHNORM_TAG = 4
#: batch-norm inference (batchnorm_inference_attributes.fbs)
BATCHNORM_INFERENCE_TAG = 1
#: batch-norm backward (batchnorm_backward_attributes.fbs)
BATCHNORM_BACKWARD_TAG = 3
#: batch-norm inference from the variance (batchnorm_inference_attributes_variance_ext.fbs)
BATCHNORM_INFERENCE_VARIANCE_TAG = 8
#: block-scale dequantize and quantize (block_scale_*_attributes.fbs)
BLOCK_SCALE_DEQUANTIZE_TAG, BLOCK_SCALE_QUANTIZE_TAG = 13, 14
#: layer-norm and RMSNorm backward (layernorm_backward_attributes.fbs and
#: rmsnorm_backward_attributes.fbs)
LAYERNORM_BACKWARD_TAG, RMSNORM_BACKWARD_TAG = 20, 17
#: the convolution families (hipDNN's schemas; ConvMode from convolution_common.fbs)
CONV_FWD_TAG, CONV_BWD_TAG, CONV_WRW_TAG = 5, 6, 7
#: ConvMode names by number (convolution_common.fbs; hipDNN's JSON writes them as they are)
CONV_MODES = ["UNSET", "CONVOLUTION", "CROSS_CORRELATION"]
#: the vector fields (kind "longs") of every convolution table, in slot order
CONV_VECTORS = ["pre_padding", "post_padding", "stride", "dilation"]
#: resample forward (hipDNN's resample_fwd_attributes.fbs) and backward
#: (resample_bwd_attributes.fbs); their enums from resample_common.fbs
RESAMPLE_FWD_TAG, RESAMPLE_BWD_TAG = 19, 21
#: the vector fields (kind "longs") of both resample tables, in slot order
RESAMPLE_VECTORS = ["pre_padding", "post_padding", "stride", "window"]
#: ResampleMode and PaddingMode names by number (resample_common.fbs; hipDNN's JSON writes the
#: numbers)
RESAMPLE_MODES = ["NOT_SET", "MAXPOOL", "AVGPOOL_EXCLUDE_PADDING", "AVGPOOL_INCLUDE_PADDING"]
PADDING_MODES = ["PADDING_NOT_SET", "NEG_INF_PAD", "ZERO_PAD"]
#: the MoE grouped matmul families (hipDNN's moe_grouped_matmul{,_bwd}_attributes.fbs)
MOE_TAG, MOE_BWD_TAG = 22, 23
#: the custom op family (hipDNN's custom_op_attributes.fbs)
CUSTOM_OP_TAG = 16
#: MoeGroupedMatmulMode names by number (the schema's; hipDNN's JSON writes them lower-case)
MOE_MODES = ["NONE", "GATHER", "SCATTER"]

# Field kinds: "req" long; "opt" optional integer; "obool" optional bool; "bool"; "ofloat"
# optional float (bits); "enum" int8; "str" string; "int" int32 (default 0); "vec"/"longs"
# vectors of int64, "ivec" a vector of int32 and "bytes" a vector of ubyte (all None when absent,
# as lists of ints).
#: the vector field kinds -> the byte width of one element (int64, int32, ubyte)
VECTOR_WIDTHS = {"vec": 8, "longs": 8, "ivec": 4, "bytes": 1}
_FWD_OPTIONAL_UIDS = [
    "attn_mask",
    "scale",
    "seq_len_q",
    "seq_len_kv",
    "seed",
    "offset",
    "dropout_mask",
    "dropout_scale",
    "page_table_k",
    "page_table_v",
    "block_mask",
    "sink_token",
    "descale_q",
    "descale_k",
    "descale_v",
    "descale_s",
    "scale_s",
    "scale_o",
    "stats",
    "max",
    "sum_exp",
    "rng_dump",
    "amax_s",
    "amax_o",
]
#: SdpaAttributes fields in slot order (A7), with their kinds.
SDPA_FIELDS: list[tuple[str, str]] = [
    *((f"{x}_tensor_uid", "req") for x in "qkvo"),
    *((f"{x}_tensor_uid", "opt") for x in _FWD_OPTIONAL_UIDS),
    ("generate_stats", "obool"),
    *(
        (f, "bool")
        for f in ("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right")
    ),
    ("dropout_probability", "ofloat"),
    ("attn_scale_value", "ofloat"),
    ("left_bound", "opt"),
    ("right_bound", "opt"),
    ("max_seq_len_kv", "opt"),
    ("diagonal_alignment", "enum"),
    ("mma_core_mode", "enum"),
    ("implementation", "enum"),
    ("umd_flops", "str"),
    ("umd_bytes", "str"),
]
_BWD_OPTIONAL_UIDS = [
    "scale",
    "attn_mask",
    "seq_len_q",
    "seq_len_kv",
    "seed",
    "offset",
    "dropout_mask",
    "dropout_scale",
    "dropout_scale_inv",
    "dbias",
]
#: SdpaBackwardAttributes fields in slot order (A8), with their kinds.
SDPA_BACKWARD_FIELDS: list[tuple[str, str]] = [
    *((f"{x}_tensor_uid", "req") for x in ["q", "k", "v", "o", "do", "stats", "dq", "dk", "dv"]),
    *((f"{x}_tensor_uid", "opt") for x in _BWD_OPTIONAL_UIDS),
    *(
        (f, "bool")
        for f in ("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right")
    ),
    ("dropout_probability", "ofloat"),
    ("attn_scale_value", "ofloat"),
    ("left_bound", "opt"),
    ("right_bound", "opt"),
    ("diagonal_alignment", "enum"),
]
#: PointwiseAttributes fields in slot order (hipDNN's pointwise_attributes.fbs).
POINTWISE_FIELDS: list[tuple[str, str]] = [
    ("operation", "enum"),
    ("relu_lower_clip", "ofloat"),
    ("relu_upper_clip", "ofloat"),
    ("relu_lower_clip_slope", "ofloat"),
    ("axis_tensor_uid", "opt"),
    ("in_0_tensor_uid", "req"),
    ("in_1_tensor_uid", "opt"),
    ("in_2_tensor_uid", "opt"),
    ("out_0_tensor_uid", "req"),
    ("swish_beta", "ofloat"),
    ("elu_alpha", "ofloat"),
    ("softplus_beta", "ofloat"),
]
#: MatmulAttributes fields in slot order (matmul_attributes.fbs).
MATMUL_FIELDS: list[tuple[str, str]] = [
    ("a_tensor_uid", "req"),
    ("b_tensor_uid", "req"),
    ("c_tensor_uid", "req"),
    ("umd_flops", "str"),
    ("umd_bytes", "str"),
]
#: ReductionAttributes fields in slot order (reduction_attributes.fbs).
REDUCTION_FIELDS: list[tuple[str, str]] = [
    ("mode", "enum"),
    ("in_tensor_uid", "req"),
    ("out_tensor_uid", "req"),
    ("is_deterministic", "bool"),
]
#: hipDNN's ReductionMode names by number (MIN/MAX are MIN_OP/MAX_OP in the schema)
REDUCTION_MODES = [
    "NOT_SET", "ADD", "MUL", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS",
]  # fmt: skip
#: hipDNN's JSON spelling of each ReductionMode (its NLOHMANN_JSON_SERIALIZE_ENUM)
REDUCTION_MODE_JSON = [m.removesuffix("_OP").lower() for m in REDUCTION_MODES]
#: RMSNormAttributes fields in slot order (rmsnorm_attributes.fbs).
RMSNORM_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("epsilon_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    ("bias_tensor_uid", "opt"),
    ("inv_rms_tensor_uid", "opt"),
    ("forward_phase", "enum"),
]
#: LayernormAttributes fields in slot order (layernorm_attributes.fbs).
LAYERNORM_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("bias_tensor_uid", "req"),
    ("epsilon_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    ("normalized_dim_count", "req"),
    ("mean_tensor_uid", "opt"),
    ("inv_variance_tensor_uid", "opt"),
    ("forward_phase", "enum"),
]
#: BatchnormAttributes fields in slot order (batchnorm_attributes.fbs); ``vec``
#: is a vector of int64 (None when absent: Graph::Pack leaves an empty vector out).
BATCHNORM_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("bias_tensor_uid", "req"),
    ("epsilon_tensor_uid", "req"),
    ("peer_stats_tensor_uid", "vec"),
    ("prev_running_mean_tensor_uid", "opt"),
    ("prev_running_variance_tensor_uid", "opt"),
    ("momentum_tensor_uid", "opt"),
    ("y_tensor_uid", "req"),
    ("mean_tensor_uid", "opt"),
    ("inv_variance_tensor_uid", "opt"),
    ("next_running_mean_tensor_uid", "opt"),
    ("next_running_variance_tensor_uid", "opt"),
]
#: BatchnormInferenceAttributes fields in slot order (batchnorm_inference_attributes.fbs).
BATCHNORM_INFERENCE_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("mean_tensor_uid", "req"),
    ("inv_variance_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("bias_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
]
#: BatchnormInferenceAttributesVarianceExt fields in slot order.
BATCHNORM_INFERENCE_VARIANCE_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("mean_tensor_uid", "req"),
    ("variance_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("bias_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    ("epsilon_tensor_uid", "req"),
]
#: BatchnormBackwardAttributes fields in slot order.
BATCHNORM_BACKWARD_FIELDS: list[tuple[str, str]] = [
    ("dy_tensor_uid", "req"),
    ("x_tensor_uid", "req"),
    ("mean_tensor_uid", "opt"),
    ("inv_variance_tensor_uid", "opt"),
    ("scale_tensor_uid", "req"),
    ("peer_stats_tensor_uid", "vec"),
    ("dx_tensor_uid", "req"),
    ("dscale_tensor_uid", "req"),
    ("dbias_tensor_uid", "req"),
]
#: BlockScaleQuantizeAttributes fields in slot order; block_size an int32
#: whose default 0 is "not set".
BLOCK_SCALE_QUANTIZE_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("block_size", "int"),
    ("axis", "opt"),
    ("transpose", "bool"),
]
#: BlockScaleDequantizeAttributes fields in slot order.
BLOCK_SCALE_DEQUANTIZE_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    ("block_size", "ivec"),
    ("is_negative_scale", "bool"),
]
#: LayernormBackwardAttributes fields in slot order.
LAYERNORM_BACKWARD_FIELDS: list[tuple[str, str]] = [
    ("dy_tensor_uid", "req"),
    ("x_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("mean_tensor_uid", "opt"),
    ("inv_variance_tensor_uid", "opt"),
    ("epsilon_tensor_uid", "opt"),
    ("dx_tensor_uid", "req"),
    ("dscale_tensor_uid", "req"),
    ("dbias_tensor_uid", "req"),
    ("normalized_dim_count", "req"),
]
#: RMSNormBackwardAttributes fields in slot order.
RMSNORM_BACKWARD_FIELDS: list[tuple[str, str]] = [
    ("dy_tensor_uid", "req"),
    ("x_tensor_uid", "req"),
    ("scale_tensor_uid", "req"),
    ("inv_rms_tensor_uid", "req"),
    ("dx_tensor_uid", "req"),
    ("dscale_tensor_uid", "req"),
    ("dbias_tensor_uid", "opt"),
]
#: hipDNN's NormFwdPhase names by number (norm_common.fbs; its JSON writes them as they are)
NORM_FWD_PHASES = ["NOT_SET", "INFERENCE", "TRAINING"]
#: ConvolutionFwdAttributes fields in slot order (hipDNN's convolution_fwd_attributes.fbs).
CONV_FWD_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("w_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    *[(name, "longs") for name in CONV_VECTORS],
    ("conv_mode", "enum"),
    ("umd_flops", "str"),
    ("umd_bytes", "str"),
]


def _conv_fields(*uids: str) -> list[tuple[str, str]]:
    """A convolution table's fields in slot order: three uids, then what all three share."""
    return [(f"{u}_tensor_uid", "req") for u in uids] + CONV_FWD_FIELDS[3:]


#: MoeGroupedMatmulAttributes fields in slot order (moe_grouped_matmul_attributes.fbs).
MOE_FIELDS: list[tuple[str, str]] = [
    ("token_tensor_uid", "req"),
    ("weight_tensor_uid", "req"),
    ("first_token_offset_tensor_uid", "req"),
    ("token_index_tensor_uid", "opt"),
    ("token_ks_tensor_uid", "opt"),
    ("output_tensor_uid", "req"),
    ("mode", "enum"),
    ("top_k", "int"),
]
#: MoeGroupedMatmulBwdAttributes fields in slot order (moe_grouped_matmul_bwd_attributes.fbs).
MOE_BWD_FIELDS: list[tuple[str, str]] = [
    ("doutput_tensor_uid", "req"),
    ("token_tensor_uid", "req"),
    ("first_token_offset_tensor_uid", "req"),
    ("dweight_tensor_uid", "req"),
]
#: CustomOpAttributes fields in slot order (custom_op_attributes.fbs).
CUSTOM_OP_FIELDS: list[tuple[str, str]] = [
    ("custom_op_id", "str"),
    ("input_tensor_uids", "vec"),
    ("output_tensor_uids", "vec"),
    ("data", "bytes"),
    ("test_generation_marker", "int"),
]
#: ConvolutionBwdAttributes and ConvolutionWrwAttributes (hipDNN's schemas)
CONV_BWD_FIELDS = _conv_fields("dy", "w", "dx")
CONV_WRW_FIELDS = _conv_fields("x", "dy", "dw")
#: ResampleFwdAttributes fields in slot order (hipDNN's resample_fwd_attributes.fbs).
RESAMPLE_FWD_FIELDS: list[tuple[str, str]] = [
    ("x_tensor_uid", "req"),
    ("y_tensor_uid", "req"),
    ("index_tensor_uid", "opt"),
    *[(name, "longs") for name in RESAMPLE_VECTORS],
    ("resample_mode", "enum"),
    ("padding_mode", "enum"),
    ("generate_index", "obool"),
]
#: ResampleBwdAttributes fields in slot order (resample_bwd_attributes.fbs).
RESAMPLE_BWD_FIELDS: list[tuple[str, str]] = [
    ("dy_tensor_uid", "req"),
    ("dx_tensor_uid", "req"),
    *RESAMPLE_FWD_FIELDS[2:-1],
]
FIELDS_BY_TAG = {
    SDPA_TAG: SDPA_FIELDS,
    SDPA_BACKWARD_TAG: SDPA_BACKWARD_FIELDS,
    POINTWISE_TAG: POINTWISE_FIELDS,
    MATMUL_TAG: MATMUL_FIELDS,
    REDUCTION_TAG: REDUCTION_FIELDS,
    RMSNORM_TAG: RMSNORM_FIELDS,
    LAYERNORM_TAG: LAYERNORM_FIELDS,
    BATCHNORM_TAG: BATCHNORM_FIELDS,
    BATCHNORM_BACKWARD_TAG: BATCHNORM_BACKWARD_FIELDS,
    BLOCK_SCALE_QUANTIZE_TAG: BLOCK_SCALE_QUANTIZE_FIELDS,
    BLOCK_SCALE_DEQUANTIZE_TAG: BLOCK_SCALE_DEQUANTIZE_FIELDS,
    BATCHNORM_INFERENCE_TAG: BATCHNORM_INFERENCE_FIELDS,
    BATCHNORM_INFERENCE_VARIANCE_TAG: BATCHNORM_INFERENCE_VARIANCE_FIELDS,
    LAYERNORM_BACKWARD_TAG: LAYERNORM_BACKWARD_FIELDS,
    RMSNORM_BACKWARD_TAG: RMSNORM_BACKWARD_FIELDS,
    CONV_FWD_TAG: CONV_FWD_FIELDS,
    CONV_BWD_TAG: CONV_BWD_FIELDS,
    CONV_WRW_TAG: CONV_WRW_FIELDS,
    RESAMPLE_FWD_TAG: RESAMPLE_FWD_FIELDS,
    RESAMPLE_BWD_TAG: RESAMPLE_BWD_FIELDS,
    MOE_TAG: MOE_FIELDS,
    MOE_BWD_TAG: MOE_BWD_FIELDS,
    CUSTOM_OP_TAG: CUSTOM_OP_FIELDS,
}
#: each table's name by tag
TABLE_BY_TAG = {
    SDPA_TAG: "SdpaAttributes",
    SDPA_BACKWARD_TAG: "SdpaBackwardAttributes",
    POINTWISE_TAG: "PointwiseAttributes",
    MATMUL_TAG: "MatmulAttributes",
    REDUCTION_TAG: "ReductionAttributes",
    RMSNORM_TAG: "RMSNormAttributes",
    LAYERNORM_TAG: "LayernormAttributes",
    BATCHNORM_TAG: "BatchnormAttributes",
    BATCHNORM_BACKWARD_TAG: "BatchnormBackwardAttributes",
    BLOCK_SCALE_QUANTIZE_TAG: "BlockScaleQuantizeAttributes",
    BLOCK_SCALE_DEQUANTIZE_TAG: "BlockScaleDequantizeAttributes",
    BATCHNORM_INFERENCE_TAG: "BatchnormInferenceAttributes",
    BATCHNORM_INFERENCE_VARIANCE_TAG: "BatchnormInferenceAttributesVarianceExt",
    LAYERNORM_BACKWARD_TAG: "LayernormBackwardAttributes",
    RMSNORM_BACKWARD_TAG: "RMSNormBackwardAttributes",
    CONV_FWD_TAG: "ConvolutionFwdAttributes",
    CONV_BWD_TAG: "ConvolutionBwdAttributes",
    CONV_WRW_TAG: "ConvolutionWrwAttributes",
    RESAMPLE_FWD_TAG: "ResampleFwdAttributes",
    RESAMPLE_BWD_TAG: "ResampleBwdAttributes",
    MOE_TAG: "MoeGroupedMatmulAttributes",
    MOE_BWD_TAG: "MoeGroupedMatmulBwdAttributes",
    CUSTOM_OP_TAG: "CustomOpAttributes",
}
#: hipDNN's PointwiseMode names by number (MAX/MIN are MAX_OP/MIN_OP in the schema)
POINTWISE_MODES = [
    "UNSET",
    "ABS",
    "ADD",
    "ADD_SQUARE",
    "BINARY_SELECT",
    "CEIL",
    "CMP_EQ",
    "CMP_GE",
    "CMP_GT",
    "CMP_LE",
    "CMP_LT",
    "CMP_NEQ",
    "DIV",
    "ELU_BWD",
    "ELU_FWD",
    "ERF",
    "EXP",
    "FLOOR",
    "GELU_APPROX_TANH_BWD",
    "GELU_APPROX_TANH_FWD",
    "GELU_BWD",
    "GELU_FWD",
    "GEN_INDEX",
    "IDENTITY",
    "LOG",
    "LOGICAL_AND",
    "LOGICAL_NOT",
    "LOGICAL_OR",
    "MAX_OP",
    "MIN_OP",
    "MUL",
    "NEG",
    "RECIPROCAL",
    "RELU_BWD",
    "RELU_FWD",
    "RSQRT",
    "SIGMOID_BWD",
    "SIGMOID_FWD",
    "SIN",
    "SOFTPLUS_BWD",
    "SOFTPLUS_FWD",
    "SQRT",
    "SUB",
    "SWISH_BWD",
    "SWISH_FWD",
    "TAN",
    "TANH_BWD",
    "TANH_FWD",
]

#: Fields of the description of a tensor, in slot order (A3).
TENSOR_KEYS = [
    "uid",
    "name",
    "data_type",
    "strides",
    "dims",
    "virtual",
    "value_type",
    "value",
    "is_runtime_pass_by_value",
    "ragged_offset_tensor_uid",
    "alignment",
    "ragged_offset_multiplier",
]
GRAPH_KEYS = [
    "name",
    "compute_data_type",
    "intermediate_data_type",
    "io_data_type",
    "tensors",
    "nodes",
    "preferred_engine_id",
    "is_override_shape_enabled",
    "min_required_engine_api_version",
    "id",
]
STRING_FIELDS = ("name", "umd_flops", "umd_bytes", "custom_op_id")
#: vector fields (absent and empty read alike, A12)
VECTOR_FIELDS = (
    "strides", "dims", "peer_stats_tensor_uid", "input_tensor_uids", "output_tensor_uids", "data",
    "block_size",
)  # fmt: skip

_DEFAULTS = {
    "req": 0,
    "opt": None,
    "obool": None,
    "bool": False,
    "ofloat": None,
    "enum": 0,
    "int": 0,
    "longs": None,
    "ivec": None,
}


def f32_bits(x: float) -> int:
    """The binary32 bits of the float32 nearest to ``x``."""
    return int(np.array([x], dtype="<f4").view("<u4")[0])


def bits_f32(bits: int) -> float:
    """The float32 with these bits, widened exactly to a Python float."""
    return float(np.array([bits], dtype="<u4").view("<f4")[0])


def default_attributes(tag: int) -> Desc:
    """An attribute table (of a modelled family) with every field at its schema default."""
    return {name: _DEFAULTS.get(kind) for name, kind in FIELDS_BY_TAG[tag]}


def tensor_desc(
    uid: int,
    name: str | None,
    data_type: int,
    dims: list[int] | None,
    strides: list[int] | None = None,
    **fields: Any,
) -> Desc:
    """A tensor description with defaults; packed strides when only dims are given."""
    if strides is None and dims is not None:
        strides = hg.generate_strides(dims)
    t: Desc = {
        "uid": uid,
        "name": name,
        "data_type": data_type,
        "strides": strides,
        "dims": dims,
        "virtual": False,
        "value_type": 0,
        "value": None,
        "is_runtime_pass_by_value": False,
        "ragged_offset_tensor_uid": None,
        "alignment": 16,
        "ragged_offset_multiplier": 1,
    }
    unknown = set(fields) - set(t)
    assert not unknown, unknown
    t.update(fields)
    return t


def value_fields(member: str, value: Any) -> dict[str, Any]:
    """``value_type`` and ``value`` of a tensor holding ``value`` as TensorValue ``member``."""
    tag, fmt = VALUE_MEMBERS[member]
    return {"value_type": tag, "value": struct.pack(fmt, value).hex()}


def node_desc(name: str | None, tag: int, compute_data_type: int = 1, **attributes: Any) -> Desc:
    """A node description; ``attributes`` override the defaults of the node's table."""
    attrs = default_attributes(tag) if tag in FIELDS_BY_TAG else None
    if attrs is not None:
        unknown = set(attributes) - set(attrs)
        assert not unknown, unknown
        attrs.update(attributes)
    return {
        "name": name,
        "compute_data_type": compute_data_type,
        "attributes_type": tag,
        "has_attributes": tag != 0,
        "attributes": attrs,
    }


def graph_desc(name: str | None, tensors: list[Desc], nodes: list[Desc], **fields: Any) -> Desc:
    g: Desc = {
        "name": name,
        "compute_data_type": 1,
        "intermediate_data_type": 1,
        "io_data_type": 2,
        "tensors": tensors,
        "nodes": nodes,
        "preferred_engine_id": None,
        "is_override_shape_enabled": False,
        "min_required_engine_api_version": None,
        "id": None,
    }
    unknown = set(fields) - set(g)
    assert not unknown, unknown
    g.update(fields)
    return g


def normalized(desc: Desc) -> Desc:
    """``desc`` with absent and empty strings/vectors made alike ("" and []), as A12 allows."""

    def norm(d: Desc) -> Desc:
        out = dict(d)
        for key in STRING_FIELDS:
            if key in out and out[key] is None:
                out[key] = ""
        for key in VECTOR_FIELDS:
            if key in out and out[key] is None:
                out[key] = []
        return out

    g = norm(desc)
    g["tensors"] = [norm(t) for t in desc["tensors"] or []]
    g["nodes"] = []
    for n in desc["nodes"] or []:
        node = norm(n)
        if n["attributes"] is not None:
            node["attributes"] = norm(n["attributes"])
        g["nodes"].append(node)
    return g


# ----- what a graph built with the project's API must read as (A2-A8) -----


def hipdnn_data_type(dt: hg.DataType) -> int:
    """hipDNN's number of the project's data type (by name; NOT_SET is UNSET)."""
    name = "UNSET" if dt.name == "NOT_SET" else dt.name
    return HIPDNN_DATA_TYPES[name]


_FP8_DTYPES = {
    "FP8_E4M3": ml_dtypes.float8_e4m3fn,
    "FP8_E5M2": ml_dtypes.float8_e5m2,
    "FP8_E4M3_FNUZ": ml_dtypes.float8_e4m3fnuz,
    "FP8_E5M2_FNUZ": ml_dtypes.float8_e5m2fnuz,
}


def expected_value(data_type: hg.DataType, value: Any) -> dict[str, Any]:
    """``value_type`` and ``value`` a tensor of ``data_type`` holding ``value`` is written with.

    The member follows the data type (A4): float types hold the nearest binary32, integer types
    their own width, 8-bit types the 8-bit pattern (FP8 types: the value encoded in that FP8).
    """
    if value is None:
        return {"value_type": 0, "value": None}
    name = data_type.name
    if name in ("FLOAT", "HALF", "BFLOAT16"):
        member = {"FLOAT": "Float32Value", "HALF": "Float16Value", "BFLOAT16": "BFloat16Value"}
        return value_fields(member[name], float(np.float32(value)))
    if name == "DOUBLE":
        return value_fields("Float64Value", float(value))
    if name == "INT32":
        return value_fields("Int32Value", int(value))
    if name == "INT64":
        return value_fields("Int64Value", int(value))
    if name in ("UINT8", "INT8"):
        return value_fields("Float8Value", int(value) & 0xFF)
    if name == "BOOLEAN":
        return value_fields("BoolValue", bool(value))
    if name in _FP8_DTYPES:
        encoded = np.array([value], dtype=_FP8_DTYPES[name])
        assert float(encoded[0]) == value, f"{value} is not exact in {name}"
        return value_fields("Float8Value", int(encoded.view(np.uint8)[0]))
    raise AssertionError(f"no TensorValue member for {name}")


def _uid(t: hg.TensorAttributes | None) -> int | None:
    return None if t is None else t.get_uid()


def _expected_tensor(t: hg.TensorAttributes) -> Desc:
    offsets = t.get_ragged_offset()
    return tensor_desc(
        t.get_uid(),
        t.get_name(),
        hipdnn_data_type(t.get_data_type()),
        list(t.get_dim()),
        list(t.get_stride()),
        virtual=t.get_is_virtual(),
        is_runtime_pass_by_value=t.get_is_runtime_pass_by_value(),
        alignment=t.get_alignment(),
        ragged_offset_tensor_uid=None if offsets is None else offsets.get_uid(),
        ragged_offset_multiplier=t.get_ragged_offset_multiplier(),
        **expected_value(t.get_data_type(), t.get_value()),
    )


def _common_scalars(a: Any) -> dict[str, Any]:
    def bits(x: float | None) -> int | None:
        return None if x is None else f32_bits(x)

    return {
        "alibi_mask": a.get_alibi_mask(),
        "padding_mask": a.get_padding_mask(),
        "causal_mask": a.get_causal_mask(),
        "causal_mask_bottom_right": a.get_causal_mask_bottom_right(),
        "dropout_probability": bits(a.get_dropout_probability()),
        "attn_scale_value": bits(a.get_attn_scale_value()),
        "left_bound": a.get_diagonal_band_left_bound(),
        "right_bound": a.get_diagonal_band_right_bound(),
        "diagonal_alignment": int(a.get_diagonal_alignment()),
    }


def _expected_pointwise(node: Any) -> Desc:
    a = node.attributes

    def bits(x: float | None) -> int | None:
        return None if x is None else f32_bits(x)

    return node_desc(
        node.name,
        POINTWISE_TAG,
        hipdnn_data_type(a.get_compute_data_type()),
        operation=int(a.get_mode()),
        relu_lower_clip=bits(a.get_relu_lower_clip()),
        relu_upper_clip=bits(a.get_relu_upper_clip()),
        relu_lower_clip_slope=bits(a.get_relu_lower_clip_slope()),
        axis_tensor_uid=a.get_axis(),
        in_0_tensor_uid=_uid(a.get_input_0()),
        in_1_tensor_uid=_uid(a.get_input_1()),
        in_2_tensor_uid=_uid(a.get_input_2()),
        out_0_tensor_uid=_uid(a.get_output_0()),
        swish_beta=bits(a.get_swish_beta()),
        elu_alpha=bits(a.get_elu_alpha()),
        softplus_beta=bits(a.get_softplus_beta()),
    )


def _expected_node(node: Any) -> Desc:
    if isinstance(node, hg.PointwiseNode):
        return _expected_pointwise(node)
    if isinstance(
        node,
        (
            hg.BatchnormNode,
            hg.BatchnormBackwardNode,
            hg.BatchnormInferenceNode,
            hg.BatchnormInferenceVarianceNode,
        ),
    ):
        a = node.attributes
        uids = {
            f"{slot.name.lower()}_tensor_uid": _uid(tensor)
            for slot, tensor in [*a.inputs.items(), *a.outputs.items()]
        }
        tag = {
            hg.BatchnormNode: BATCHNORM_TAG,
            hg.BatchnormBackwardNode: BATCHNORM_BACKWARD_TAG,
            hg.BatchnormInferenceNode: BATCHNORM_INFERENCE_TAG,
            hg.BatchnormInferenceVarianceNode: BATCHNORM_INFERENCE_VARIANCE_TAG,
        }[type(node)]
        return node_desc(node.name, tag, hipdnn_data_type(a.get_compute_data_type()), **uids)
    if isinstance(node, (hg.LayernormBackwardNode, hg.RMSNormBackwardNode)):
        a = node.attributes
        tag = LAYERNORM_BACKWARD_TAG
        if isinstance(node, hg.RMSNormBackwardNode):
            tag = RMSNORM_BACKWARD_TAG
        fields = dict.fromkeys(f for f, _ in FIELDS_BY_TAG[tag] if f.endswith("_tensor_uid"))
        slots = a.tensors_by_slot()
        uids = {f: _uid(slots.get(f.removesuffix("_tensor_uid").upper())) for f in fields}
        if tag == LAYERNORM_BACKWARD_TAG:
            uids["normalized_dim_count"] = a.get_normalized_dim_count()
        return node_desc(node.name, tag, hipdnn_data_type(a.get_compute_data_type()), **uids)
    if isinstance(node, hg.LayerNormNode):
        a = node.attributes
        return node_desc(
            node.name,
            LAYERNORM_TAG,
            hipdnn_data_type(a.get_compute_data_type()),
            x_tensor_uid=_uid(a.get_x()),
            scale_tensor_uid=_uid(a.get_scale()),
            bias_tensor_uid=_uid(a.get_bias()),
            epsilon_tensor_uid=_uid(a.get_epsilon()),
            y_tensor_uid=_uid(a.get_y()),
            normalized_dim_count=a.get_normalized_dim_count(),
            mean_tensor_uid=_uid(a.get_mean()),
            inv_variance_tensor_uid=_uid(a.get_inv_variance()),
            forward_phase=int(a.get_forward_phase()),
        )
    if isinstance(node, hg.RMSNormNode):
        a = node.attributes
        return node_desc(
            node.name,
            RMSNORM_TAG,
            hipdnn_data_type(a.get_compute_data_type()),
            x_tensor_uid=_uid(a.get_x()),
            scale_tensor_uid=_uid(a.get_scale()),
            epsilon_tensor_uid=_uid(a.get_epsilon()),
            y_tensor_uid=_uid(a.get_y()),
            bias_tensor_uid=_uid(a.get_bias()),
            inv_rms_tensor_uid=_uid(a.get_inv_rms()),
            forward_phase=int(a.get_forward_phase()),
        )
    conv_tags = {
        hg.ConvolutionFpropNode: CONV_FWD_TAG,
        hg.ConvolutionDgradNode: CONV_BWD_TAG,
        hg.ConvolutionWgradNode: CONV_WRW_TAG,
    }
    if type(node) in conv_tags:
        c = node.attributes
        tag = conv_tags[type(node)]
        uids = {
            field: _uid(c.tensors_by_slot()[field.removesuffix("_tensor_uid").upper()])
            for field, _ in FIELDS_BY_TAG[tag][:3]
        }
        return node_desc(
            node.name,
            tag,
            hipdnn_data_type(c.get_compute_data_type()),
            conv_mode=int(c.get_convolution_mode()),
            **uids,
            **{name: getattr(c, name) or None for name in CONV_VECTORS},
        )
    if isinstance(node, hg.ResampleFwdNode | hg.ResampleBwdNode):
        r = node.attributes
        fwd = isinstance(node, hg.ResampleFwdNode)
        uids = {
            f"{slot.name.lower()}_tensor_uid": _uid(tensor)
            for slot, tensor in [*r.inputs.items(), *r.outputs.items()]
        }
        return node_desc(
            node.name,
            RESAMPLE_FWD_TAG if fwd else RESAMPLE_BWD_TAG,
            hipdnn_data_type(r.get_compute_data_type()),
            resample_mode=int(r.get_resample_mode()),
            padding_mode=int(r.get_padding_mode()),
            **({"generate_index": r.generate_index} if fwd else {}),
            **uids,
            **{name: getattr(r, name) or None for name in RESAMPLE_VECTORS},
        )
    if isinstance(node, hg.BlockScaleQuantizeNode):
        q = node.attributes
        return node_desc(
            node.name,
            BLOCK_SCALE_QUANTIZE_TAG,
            hipdnn_data_type(q.get_compute_data_type()),
            x_tensor_uid=_uid(q.get_x()),
            y_tensor_uid=_uid(q.get_y()),
            scale_tensor_uid=_uid(q.get_scale()),
            block_size=q.get_block_size() or 0,
            axis=q.get_axis(),
            transpose=q.get_transpose(),
        )
    if isinstance(node, hg.BlockScaleDequantizeNode):
        d = node.attributes
        return node_desc(
            node.name,
            BLOCK_SCALE_DEQUANTIZE_TAG,
            hipdnn_data_type(d.get_compute_data_type()),
            x_tensor_uid=_uid(d.get_x()),
            scale_tensor_uid=_uid(d.get_scale()),
            y_tensor_uid=_uid(d.get_y()),
            block_size=d.get_block_size() or None,
            is_negative_scale=d.get_is_negative_scale(),
        )
    if isinstance(node, hg.ReductionNode):
        a = node.attributes
        return node_desc(
            node.name,
            REDUCTION_TAG,
            hipdnn_data_type(a.get_compute_data_type()),
            mode=int(a.get_mode()),
            in_tensor_uid=_uid(a.get_x()),
            out_tensor_uid=_uid(a.get_y()),
            is_deterministic=a.get_is_deterministic(),
        )
    if isinstance(node, hg.CustomOpNode):  # Graph::Pack leaves empty strings and vectors out
        a = node.attributes
        return node_desc(
            node.name,
            CUSTOM_OP_TAG,
            hipdnn_data_type(a.get_compute_data_type()),
            custom_op_id=a.get_custom_op_id() or None,
            input_tensor_uids=[t.get_uid() for t in a.get_inputs()] or None,
            output_tensor_uids=[t.get_uid() for t in a.get_outputs()] or None,
            data=a.get_data() or None,
        )
    if isinstance(node, (hg.MoeGroupedMatmulNode, hg.MoeGroupedMatmulBwdNode)):
        a = node.attributes
        moe: dict[str, Any] = {
            f"{slot.name.lower()}_tensor_uid": _uid(tensor)
            for slot, tensor in [*a.inputs.items(), *a.outputs.items()]
        }
        tag = MOE_BWD_TAG
        if isinstance(node, hg.MoeGroupedMatmulNode):  # the schema's mode number is its name's
            tag = MOE_TAG
            moe.update(mode=MOE_MODES.index(a.get_mode().name), top_k=a.get_top_k())
        return node_desc(node.name, tag, hipdnn_data_type(a.get_compute_data_type()), **moe)
    if isinstance(node, hg.MatmulNode):
        a = node.attributes
        return node_desc(
            node.name,
            MATMUL_TAG,
            hipdnn_data_type(a.get_compute_data_type()),
            a_tensor_uid=_uid(a.get_a()),
            b_tensor_uid=_uid(a.get_b()),
            c_tensor_uid=_uid(a.get_c()),
        )
    a = node.attributes
    common_uids = {
        "q_tensor_uid": _uid(a.get_q()),
        "k_tensor_uid": _uid(a.get_k()),
        "v_tensor_uid": _uid(a.get_v()),
        "o_tensor_uid": _uid(a.get_o()),
        "scale_tensor_uid": _uid(a.get_attn_scale()),
        "attn_mask_tensor_uid": _uid(a.get_bias()),
        "seq_len_q_tensor_uid": _uid(a.get_seq_len_q()),
        "seq_len_kv_tensor_uid": _uid(a.get_seq_len_kv()),
        "seed_tensor_uid": _uid(a.get_seed()),
        "offset_tensor_uid": _uid(a.get_offset()),
        "dropout_mask_tensor_uid": _uid(a.get_dropout_mask()),
        "dropout_scale_tensor_uid": _uid(a.get_dropout_scale()),
        "stats_tensor_uid": _uid(a.get_stats()),
    }
    cdt = hipdnn_data_type(a.get_compute_data_type())
    if isinstance(node, hg.SdpaFwdNode):
        return node_desc(
            node.name,
            SDPA_TAG,
            cdt,
            **common_uids,
            **_common_scalars(a),
            generate_stats=a.get_generate_stats(),
        )
    assert isinstance(node, hg.SdpaBwdNode), node
    return node_desc(
        node.name,
        SDPA_BACKWARD_TAG,
        cdt,
        **common_uids,
        **_common_scalars(a),
        do_tensor_uid=_uid(a.get_do()),
        dq_tensor_uid=_uid(a.get_dq()),
        dk_tensor_uid=_uid(a.get_dk()),
        dv_tensor_uid=_uid(a.get_dv()),
        dropout_scale_inv_tensor_uid=_uid(a.get_dropout_scale_inv()),
        dbias_tensor_uid=_uid(a.get_dbias()),
    )


def expected_description(g: hg.Graph) -> Desc:
    """What ``g.serialize()`` must read as, from the graph's own public API (call it after
    ``serialize()``, which validates and assigns uids). Tensors in the graph's declaration order
    (compare them by uid: the spec fixes the order only for graphs that were read)."""
    engine = g.get_preferred_engine_id_ext()
    used = g.graph_tensors()
    # hipDNN stamps the engine plugin API floor its features need (1.2.0 for a runtime
    # pass-by-value tensor, 1.1.0 for override shapes); the baseline 1.0.0 stays implicit here
    if any(t.get_is_runtime_pass_by_value() for t in used):
        floor: list[int] | None = [1, 2, 0]
    elif g.wire_metadata.is_override_shape_enabled:
        floor = [1, 1, 0]
    else:
        floor = None
    return graph_desc(
        g.get_name(),
        [_expected_tensor(t) for t in used],
        [_expected_node(n) for n in g.nodes],
        compute_data_type=hipdnn_data_type(g.get_compute_data_type()),
        intermediate_data_type=hipdnn_data_type(g.get_intermediate_data_type()),
        io_data_type=hipdnn_data_type(g.get_io_data_type()),
        # hipDNN's field is a signed long: an id >= 2**63 is carried as its two's complement
        preferred_engine_id=None if engine is None else engine - (engine >> 63 << 64),
        min_required_engine_api_version=floor,
    )


# ----- hipDNN's JSON (spec part B) -> description, written from the spec alone -----

_JSON_DATA_TYPES = {name.lower(): number for name, number in HIPDNN_DATA_TYPES.items()}
_JSON_ENUMS = {"TOP_LEFT": 0, "BOTTOM_RIGHT": 1, "AUTO": 0, "COMPOSITE": 1, "UNIFIED": 2}
_JSON_KINDS = {name: tag for tag, name in TABLE_BY_TAG.items()}
_POINTWISE_FLOATS = {name for name, kind in POINTWISE_FIELDS if kind == "ofloat"}


def description_from_hipdnn_json(doc: dict[str, Any]) -> Desc:
    """The wire description of a hipDNN JSON document (B3-B6)."""
    tensors = []
    for t in doc["tensors"]:
        extra = {}
        if "value_type" in t:
            extra = value_fields(t["value_type"], t["value"])
        tensors.append(
            tensor_desc(
                t["uid"],
                t["name"],
                _JSON_DATA_TYPES[t["data_type"]],
                t["dims"],
                t["strides"],
                virtual=t["virtual"],
                is_runtime_pass_by_value=t["is_runtime_pass_by_value"],
                alignment=t.get("alignment", 16),
                ragged_offset_tensor_uid=t.get("ragged_offset_tensor_uid"),
                ragged_offset_multiplier=t.get("ragged_offset_multiplier", 1),
                **extra,
            )
        )
    nodes = []
    for n in doc["nodes"]:
        tag = _JSON_KINDS[n["type"]]
        if tag == POINTWISE_TAG:  # everything but the output among the inputs
            attrs = {**n["inputs"], **n["outputs"]}
            for key in _POINTWISE_FLOATS:
                attrs[key] = None if attrs[key] is None else f32_bits(attrs[key])
            attrs["operation"] = [m.lower() for m in POINTWISE_MODES].index(attrs["operation"])
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == LAYERNORM_TAG:  # count and phase (a number, optional) on the node
            attrs = {**n["inputs"], **n["outputs"]}
            attrs["normalized_dim_count"] = n["normalized_dim_count"]
            attrs["forward_phase"] = n.get("forward_phase", 0)
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == LAYERNORM_BACKWARD_TAG:  # absent uids null; the count on the node object
            attrs = {**n["inputs"], **n["outputs"]}
            attrs["normalized_dim_count"] = n["normalized_dim_count"]
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == RMSNORM_BACKWARD_TAG:  # an absent dbias left out
            attrs = {"dbias_tensor_uid": None, **n["inputs"], **n["outputs"]}
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == RMSNORM_TAG:  # absent uids left out; forward_phase on the node when set
            attrs = {"bias_tensor_uid": None, "inv_rms_tensor_uid": None, **n["inputs"]}
            attrs.update(n["outputs"])
            attrs["forward_phase"] = NORM_FWD_PHASES.index(n.get("forward_phase", "NOT_SET"))
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag in (
            CONV_FWD_TAG,
            CONV_BWD_TAG,
            CONV_WRW_TAG,
        ):  # uids in inputs/outputs, the members under "parameters"
            p = n["parameters"]
            attrs = {**n["inputs"], **n["outputs"]}
            attrs.update({name: p[name] or None for name in CONV_VECTORS})
            attrs["conv_mode"] = CONV_MODES.index(p["conv_mode"])
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag in (RESAMPLE_FWD_TAG, RESAMPLE_BWD_TAG):  # every key on the node object
            attrs = {
                name: n.get(name)
                for name, kind in FIELDS_BY_TAG[tag]
                if kind in ("req", "opt", "enum")  # index_tensor_uid absent when unset
            }
            attrs.update({name: n[name] or None for name in RESAMPLE_VECTORS})
            if tag == RESAMPLE_FWD_TAG:
                attrs["generate_index"] = n.get("generate_index")  # absent: unset
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == REDUCTION_TAG:  # every key on the node object; is_deterministic optional
            attrs = {
                "mode": REDUCTION_MODE_JSON.index(n["mode"]),
                "in_tensor_uid": n["in_tensor_uid"],
                "out_tensor_uid": n["out_tensor_uid"],
                "is_deterministic": n.get("is_deterministic", False),
            }
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == BLOCK_SCALE_QUANTIZE_TAG:  # block_size/axis on the node when set
            attrs = {**n["inputs"], **n["outputs"]}
            attrs["block_size"] = n.get("block_size", 0)
            attrs["axis"] = n.get("axis")
            attrs["transpose"] = n.get("transpose", False)
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == BLOCK_SCALE_DEQUANTIZE_TAG:  # block_size on the node ([] or absent: empty)
            attrs = {**n["inputs"], **n["outputs"]}
            attrs["block_size"] = n.get("block_size") or None
            attrs["is_negative_scale"] = n.get("is_negative_scale", False)
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag in (BATCHNORM_TAG, BATCHNORM_BACKWARD_TAG):  # peer stats an array, [] for none
            attrs = {**n["inputs"], **n["outputs"]}
            attrs["peer_stats_tensor_uid"] = attrs["peer_stats_tensor_uid"] or None
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag == CUSTOM_OP_TAG:  # every key on the node; empty vectors and id as absent
            attrs = {
                "custom_op_id": n["custom_op_id"] or None,
                "input_tensor_uids": n["input_tensor_uids"] or None,
                "output_tensor_uids": n["output_tensor_uids"] or None,
                "data": n["data"] or None,
            }
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag in (MOE_TAG, MOE_BWD_TAG):  # absent routing uids left out; mode, top_k on the node
            attrs = {**n["inputs"], **n["outputs"]}
            if tag == MOE_TAG:
                attrs["mode"] = [m.lower() for m in MOE_MODES].index(n["mode"])
                attrs["top_k"] = n["top_k"]
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        if tag in (MATMUL_TAG, BATCHNORM_INFERENCE_TAG, BATCHNORM_INFERENCE_VARIANCE_TAG):
            attrs = {**n["inputs"], **n["outputs"]}
            nodes.append(
                node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs)
            )
            continue
        scalars = n["attributes"] if tag == SDPA_TAG else n["parameters"]
        attrs = {**n["inputs"], **n["outputs"]}
        for key, value in scalars.items():
            if key in ("dropout_probability", "attn_scale_value"):
                value = None if value is None else f32_bits(value)
            elif key == "mma_core_mode":
                value = _JSON_DATA_TYPES[value]
            elif isinstance(value, str):
                value = _JSON_ENUMS[value]
            attrs[key] = value
        nodes.append(node_desc(n["name"], tag, _JSON_DATA_TYPES[n["compute_data_type"]], **attrs))
    version = doc.get("min_required_engine_api_version")
    return graph_desc(
        doc["name"] or None,
        tensors,
        nodes,
        compute_data_type=_JSON_DATA_TYPES[doc["compute_data_type"]],
        intermediate_data_type=_JSON_DATA_TYPES[doc["intermediate_data_type"]],
        io_data_type=_JSON_DATA_TYPES[doc["io_data_type"]],
        preferred_engine_id=doc.get("preferred_engine_id"),
        is_override_shape_enabled=doc.get("is_override_shape_enabled", False),
        min_required_engine_api_version=(
            None if version is None else [version[k] for k in ("major", "minor", "patch")]
        ),
        id=None if doc.get("id") is None else doc["id"].replace("-", ""),
    )
