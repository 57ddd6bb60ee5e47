"""hipDNN's JSON text of a wire description, written from HIPDNN_WIRE.md part B alone.

An independent writer for the tests: key names and order (B1, B3-B5), nulls, enum spellings
(B6), number formatting (B2: shortest round-trip digits, nlohmann's layout), escapes (B1) and the
project's additions where hipDNN's JSON loses data (B7). Its output for the B8 descriptions is
checked to be the spec's documents, character for character.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from wire_model import (
    BATCHNORM_BACKWARD_FIELDS,
    BATCHNORM_BACKWARD_TAG,
    BATCHNORM_FIELDS,
    BATCHNORM_INFERENCE_FIELDS,
    BATCHNORM_INFERENCE_TAG,
    BATCHNORM_INFERENCE_VARIANCE_FIELDS,
    BATCHNORM_INFERENCE_VARIANCE_TAG,
    BATCHNORM_TAG,
    BLOCK_SCALE_DEQUANTIZE_TAG,
    BLOCK_SCALE_QUANTIZE_TAG,
    CONV_BWD_TAG,
    CONV_FWD_TAG,
    CONV_MODES,
    CONV_VECTORS,
    CONV_WRW_TAG,
    CUSTOM_OP_TAG,
    FIELDS_BY_TAG,
    HIPDNN_DATA_TYPES,
    LAYERNORM_BACKWARD_TAG,
    LAYERNORM_TAG,
    MATMUL_TAG,
    MOE_BWD_FIELDS,
    MOE_BWD_TAG,
    MOE_FIELDS,
    MOE_MODES,
    MOE_TAG,
    NORM_FWD_PHASES,
    POINTWISE_FIELDS,
    POINTWISE_MODES,
    POINTWISE_TAG,
    REDUCTION_MODE_JSON,
    REDUCTION_TAG,
    RESAMPLE_BWD_TAG,
    RESAMPLE_FWD_TAG,
    RESAMPLE_VECTORS,
    RMSNORM_BACKWARD_TAG,
    RMSNORM_TAG,
    SDPA_TAG,
    TABLE_BY_TAG,
    VALUE_FORMAT_BY_TAG,
    VALUE_MEMBERS,
    Desc,
    bits_f32,
)

_DATA_TYPE_NAMES = {number: name.lower() for name, number in HIPDNN_DATA_TYPES.items()}
_MEMBER_NAMES = {tag: name for name, (tag, _) in VALUE_MEMBERS.items()}
_DIAGONAL = {0: "TOP_LEFT", 1: "BOTTOM_RIGHT"}
_IMPLEMENTATION = {0: "AUTO", 1: "COMPOSITE", 2: "UNIFIED"}

_FWD_INPUTS = [
    "q",
    "k",
    "v",
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
]
_FWD_OUTPUTS = ["o", "stats", "max", "sum_exp", "rng_dump", "amax_s", "amax_o"]
_FWD_SCALARS = [
    "generate_stats",
    "alibi_mask",
    "padding_mask",
    "causal_mask",
    "causal_mask_bottom_right",
    "dropout_probability",
    "attn_scale_value",
    "left_bound",
    "right_bound",
    "max_seq_len_kv",
    "diagonal_alignment",
    "mma_core_mode",
    "implementation",
]
_BWD_INPUTS = [
    "q",
    "k",
    "v",
    "o",
    "do",
    "stats",
    "scale",
    "attn_mask",
    "seq_len_q",
    "seq_len_kv",
    "seed",
    "offset",
    "dropout_mask",
    "dropout_scale",
    "dropout_scale_inv",
]
_BWD_OUTPUTS = ["dq", "dk", "dv", "dbias"]
_BWD_SCALARS = [
    "alibi_mask",
    "padding_mask",
    "causal_mask",
    "causal_mask_bottom_right",
    "dropout_probability",
    "attn_scale_value",
    "left_bound",
    "right_bound",
    "diagonal_alignment",
]


class Float(float):
    """A double to be written with B2's formatting."""


def format_double(x: float) -> str:
    """B2: shortest round-trip digits d1..dk with value 0.d1..dk x 10^n, laid out as nlohmann."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError("hipDNN's JSON has no NaN or infinity")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digit_tuple, exponent = Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    k = len(digits)
    n = len(digit_tuple) + int(exponent)  # value = 0.<all digits> x 10^n
    lead = "-" if sign else ""
    if k <= n <= 15:
        return lead + digits + "0" * (n - k) + ".0"
    if 0 < n <= 15:
        return lead + digits[:n] + "." + digits[n:]
    if -4 < n <= 0:
        return lead + "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{lead}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"


def _dump(value: Any) -> str:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-8"))
        return "{" + ",".join(f"{json.dumps(k)}:{_dump(value[k])}" for k in keys) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, Float):
        return format_double(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    assert value is None or isinstance(value, bool | int), value
    return json.dumps(value)


def _f32(bits: int | None) -> Float | None:
    return None if bits is None else Float(bits_f32(bits))


def _value(tag: int, hex_bytes: str) -> Any:
    raw = bytes.fromhex(hex_bytes)
    member = _MEMBER_NAMES[tag]
    (value,) = __import__("struct").unpack(VALUE_FORMAT_BY_TAG[tag], raw)
    if member in ("Float32Value", "Float16Value", "BFloat16Value", "Float64Value"):
        return Float(value)
    return value


def _tensor(t: Desc) -> dict[str, Any]:
    out: dict[str, Any] = {
        "alignment": t["alignment"],
        "data_type": _DATA_TYPE_NAMES[t["data_type"]],
        "dims": t["dims"] or [],
        "is_runtime_pass_by_value": t["is_runtime_pass_by_value"],
        "name": t["name"] or "",
        "strides": t["strides"] or [],
        "uid": t["uid"],
        "virtual": t["virtual"],
    }
    if t["ragged_offset_tensor_uid"] is not None:
        out["ragged_offset_tensor_uid"] = t["ragged_offset_tensor_uid"]
    if t["ragged_offset_multiplier"] != 1:
        out["ragged_offset_multiplier"] = t["ragged_offset_multiplier"]
    if t["value_type"]:
        out["value_type"] = _MEMBER_NAMES[t["value_type"]]
        out["value"] = _value(t["value_type"], t["value"])
    return out


def _scalar(name: str, value: Any) -> Any:
    if name in ("dropout_probability", "attn_scale_value"):
        return _f32(value)
    if name == "diagonal_alignment":
        return _DIAGONAL[value]
    if name == "implementation":
        return _IMPLEMENTATION[value]
    if name == "mma_core_mode":
        return _DATA_TYPE_NAMES[value]
    return value


def _pointwise(n: Desc) -> dict[str, Any]:
    """hipDNN's pointwise JSON: the operation (lower case) and every scalar among the inputs."""
    a = n["attributes"]
    inputs = {
        name: _f32(a[name]) if kind == "ofloat" else a[name]
        for name, kind in POINTWISE_FIELDS
        if name != "out_0_tensor_uid"
    }
    inputs["operation"] = POINTWISE_MODES[a["operation"]].lower()
    return {
        "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
        "inputs": inputs,
        "name": n["name"] or "",
        "outputs": {"out_0_tensor_uid": a["out_0_tensor_uid"]},
        "type": "PointwiseAttributes",
    }


_BN_INFERENCE = {
    BATCHNORM_INFERENCE_TAG: ("BatchnormInferenceAttributes", BATCHNORM_INFERENCE_FIELDS),
    BATCHNORM_INFERENCE_VARIANCE_TAG: (
        "BatchnormInferenceAttributesVarianceExt",
        BATCHNORM_INFERENCE_VARIANCE_FIELDS,
    ),
}
_BN_WITH_PEERS = {  # table, fields, the fields under "outputs"
    BATCHNORM_TAG: (
        "BatchnormAttributes",
        BATCHNORM_FIELDS,
        ("y", "mean", "inv_variance", "next_running_mean", "next_running_variance"),
    ),
    BATCHNORM_BACKWARD_TAG: (
        "BatchnormBackwardAttributes",
        BATCHNORM_BACKWARD_FIELDS,
        ("dx", "dscale", "dbias"),
    ),
}


def _moe(n: Desc) -> dict[str, Any]:
    """hipDNN's MoE JSON: uids in inputs/outputs (absent routing uids left out), the forward's
    mode (lower-case name) and top_k on the node."""
    a = n["attributes"]
    forward = n["attributes_type"] == MOE_TAG
    fields = MOE_FIELDS if forward else MOE_BWD_FIELDS
    outputs = {"output_tensor_uid", "dweight_tensor_uid"}
    groups: dict[str, dict[str, Any]] = {"inputs": {}, "outputs": {}}
    for field, _ in fields:
        if field.endswith("_tensor_uid") and a[field] is not None:
            groups["outputs" if field in outputs else "inputs"][field] = a[field]
    node = {
        "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
        **groups,
        "name": n["name"] or "",
        "type": "MoeGroupedMatmulAttributes" if forward else "MoeGroupedMatmulBwdAttributes",
    }
    if forward:
        node.update(mode=MOE_MODES[a["mode"]].lower(), top_k=a["top_k"])
    return node


def _custom_op(n: Desc) -> dict[str, Any]:
    """hipDNN's custom-op JSON: every field on the node (absent vectors as [], an absent id as
    ""); test_generation_marker is not written."""
    a = n["attributes"]
    return {
        "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
        "custom_op_id": a["custom_op_id"] or "",
        "data": a["data"] or [],
        "input_tensor_uids": a["input_tensor_uids"] or [],
        "name": n["name"] or "",
        "output_tensor_uids": a["output_tensor_uids"] or [],
        "type": "CustomOpAttributes",
    }


def _node(n: Desc) -> dict[str, Any]:
    if n["attributes_type"] == POINTWISE_TAG:
        return _pointwise(n)
    if n["attributes_type"] == CUSTOM_OP_TAG:
        return _custom_op(n)
    if n["attributes_type"] in (MOE_TAG, MOE_BWD_TAG):
        return _moe(n)
    if n["attributes_type"] == LAYERNORM_TAG:  # hipDNN's layer-norm JSON: numbers on the node
        a = n["attributes"]
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "forward_phase": a["forward_phase"],
            "inputs": {
                k: a[k]
                for k in (
                    "bias_tensor_uid",
                    "epsilon_tensor_uid",
                    "scale_tensor_uid",
                    "x_tensor_uid",
                )
            },
            "name": n["name"] or "",
            "normalized_dim_count": a["normalized_dim_count"],
            "outputs": {
                k: a[k] for k in ("inv_variance_tensor_uid", "mean_tensor_uid", "y_tensor_uid")
            },
            "type": "LayernormAttributes",
        }
    if n["attributes_type"] == LAYERNORM_BACKWARD_TAG:  # absent uids null, the count on the node
        a = n["attributes"]
        ins = ("dy", "x", "scale", "mean", "inv_variance", "epsilon")
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {f"{k}_tensor_uid": a[f"{k}_tensor_uid"] for k in ins},
            "name": n["name"] or "",
            "normalized_dim_count": a["normalized_dim_count"],
            "outputs": {f"{k}_tensor_uid": a[f"{k}_tensor_uid"] for k in ("dx", "dscale", "dbias")},
            "type": "LayernormBackwardAttributes",
        }
    if n["attributes_type"] == RMSNORM_BACKWARD_TAG:  # an absent dbias left out
        a = n["attributes"]
        ins = ("dy", "x", "scale", "inv_rms")
        outputs = {k: a[k] for k in ("dx_tensor_uid", "dscale_tensor_uid")}
        if a["dbias_tensor_uid"] is not None:
            outputs["dbias_tensor_uid"] = a["dbias_tensor_uid"]
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {f"{k}_tensor_uid": a[f"{k}_tensor_uid"] for k in ins},
            "name": n["name"] or "",
            "outputs": outputs,
            "type": "RMSNormBackwardAttributes",
        }
    if n["attributes_type"] == RMSNORM_TAG:  # hipDNN's RMSNorm JSON: absent uids left out
        a = n["attributes"]
        inputs = {k: a[k] for k in ("x_tensor_uid", "scale_tensor_uid", "epsilon_tensor_uid")}
        outputs = {"y_tensor_uid": a["y_tensor_uid"]}
        if a["bias_tensor_uid"] is not None:
            inputs["bias_tensor_uid"] = a["bias_tensor_uid"]
        if a["inv_rms_tensor_uid"] is not None:
            outputs["inv_rms_tensor_uid"] = a["inv_rms_tensor_uid"]
        node = {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": inputs,
            "name": n["name"] or "",
            "outputs": outputs,
            "type": "RMSNormAttributes",
        }
        if a["forward_phase"]:
            node["forward_phase"] = NORM_FWD_PHASES[a["forward_phase"]]
        return node
    if n["attributes_type"] == BLOCK_SCALE_QUANTIZE_TAG:  # members on the node, two when set
        a = n["attributes"]
        node = {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {"x_tensor_uid": a["x_tensor_uid"]},
            "name": n["name"] or "",
            "outputs": {
                "scale_tensor_uid": a["scale_tensor_uid"],
                "y_tensor_uid": a["y_tensor_uid"],
            },
            "transpose": a["transpose"],
            "type": "BlockScaleQuantizeAttributes",
        }
        if a["block_size"] != 0:
            node["block_size"] = a["block_size"]
        if a["axis"] is not None:
            node["axis"] = a["axis"]
        return node
    if n["attributes_type"] == BLOCK_SCALE_DEQUANTIZE_TAG:  # block_size always, [] when empty
        a = n["attributes"]
        return {
            "block_size": list(a["block_size"] or ()),
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {
                "scale_tensor_uid": a["scale_tensor_uid"],
                "x_tensor_uid": a["x_tensor_uid"],
            },
            "is_negative_scale": a["is_negative_scale"],
            "name": n["name"] or "",
            "outputs": {"y_tensor_uid": a["y_tensor_uid"]},
            "type": "BlockScaleDequantizeAttributes",
        }
    if n["attributes_type"] == REDUCTION_TAG:  # hipDNN's reduction JSON: keys on the node
        a = n["attributes"]
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "in_tensor_uid": a["in_tensor_uid"],
            "is_deterministic": a["is_deterministic"],
            "mode": REDUCTION_MODE_JSON[a["mode"]],
            "name": n["name"] or "",
            "out_tensor_uid": a["out_tensor_uid"],
            "type": "ReductionAttributes",
        }
    if n["attributes_type"] in _BN_WITH_PEERS:  # uids only, absent ones null, peers a list
        a = n["attributes"]
        table, fields, outputs = _BN_WITH_PEERS[n["attributes_type"]]
        groups: dict[str, dict[str, Any]] = {"inputs": {}, "outputs": {}}
        for field, _ in fields:
            output = field[: -len("_tensor_uid")] in outputs
            value = a[field]
            if field == "peer_stats_tensor_uid":  # hipDNN's JSON writes the vector, [] for none
                value = value or []
            groups["outputs" if output else "inputs"][field] = value
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": groups["inputs"],
            "name": n["name"] or "",
            "outputs": groups["outputs"],
            "type": table,
        }
    if n["attributes_type"] in _BN_INFERENCE:  # uids only, y the one output
        a = n["attributes"]
        table, fields = _BN_INFERENCE[n["attributes_type"]]
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {f: a[f] for f, _ in fields if f != "y_tensor_uid"},
            "name": n["name"] or "",
            "outputs": {"y_tensor_uid": a["y_tensor_uid"]},
            "type": table,
        }
    tag = n["attributes_type"]
    if tag in (CONV_FWD_TAG, CONV_BWD_TAG, CONV_WRW_TAG):  # conv JSON: members under "parameters"
        a = n["attributes"]
        params: dict[str, Any] = {name: a[name] or [] for name in CONV_VECTORS}
        params["conv_mode"] = CONV_MODES[a["conv_mode"]]
        first, second, out = (f for f, _ in FIELDS_BY_TAG[tag][:3])
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {first: a[first], second: a[second]},
            "name": n["name"] or "",
            "outputs": {out: a[out]},
            "parameters": params,
            "type": TABLE_BY_TAG[tag],
        }
    if tag in (RESAMPLE_FWD_TAG, RESAMPLE_BWD_TAG):  # hipDNN's resample JSON: keys on the node
        a = n["attributes"]
        node: dict[str, Any] = {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "name": n["name"] or "",
            "padding_mode": a["padding_mode"],  # no spelling table: the number
            "resample_mode": a["resample_mode"],
            "type": TABLE_BY_TAG[tag],
            **{name: a[name] or [] for name in RESAMPLE_VECTORS},
        }
        for field, kind in FIELDS_BY_TAG[tag]:
            if kind == "req" or (kind == "opt" and a[field] is not None):
                node[field] = a[field]  # index_tensor_uid only when set
        if tag == RESAMPLE_FWD_TAG and a["generate_index"] is not None:
            node["generate_index"] = a["generate_index"]  # written when set, false included
        return node
    if n["attributes_type"] == MATMUL_TAG:  # hipDNN's matmul JSON: uids only
        a = n["attributes"]
        return {
            "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
            "inputs": {"a_tensor_uid": a["a_tensor_uid"], "b_tensor_uid": a["b_tensor_uid"]},
            "name": n["name"] or "",
            "outputs": {"c_tensor_uid": a["c_tensor_uid"]},
            "type": "MatmulAttributes",
        }
    a = n["attributes"]
    forward = n["attributes_type"] == SDPA_TAG
    inputs, outputs, scalars = (
        (_FWD_INPUTS, _FWD_OUTPUTS, _FWD_SCALARS)
        if forward
        else (_BWD_INPUTS, _BWD_OUTPUTS, _BWD_SCALARS)
    )
    params = {s: _scalar(s, a[s]) for s in scalars}
    if forward:
        for s in ("umd_flops", "umd_bytes"):
            if a[s] is not None:
                params[s] = a[s]
    return {
        "compute_data_type": _DATA_TYPE_NAMES[n["compute_data_type"]],
        "inputs": {f"{x}_tensor_uid": a[f"{x}_tensor_uid"] for x in inputs},
        "name": n["name"] or "",
        "outputs": {f"{x}_tensor_uid": a[f"{x}_tensor_uid"] for x in outputs},
        "attributes" if forward else "parameters": params,
        "type": "SdpaAttributes" if forward else "SdpaBackwardAttributes",
    }


def hipdnn_json(desc: Desc) -> str:
    """The canonical compact hipDNN JSON text of a wire description."""
    doc: dict[str, Any] = {
        "compute_data_type": _DATA_TYPE_NAMES[desc["compute_data_type"]],
        "intermediate_data_type": _DATA_TYPE_NAMES[desc["intermediate_data_type"]],
        "io_data_type": _DATA_TYPE_NAMES[desc["io_data_type"]],
        "is_override_shape_enabled": desc["is_override_shape_enabled"],
        "name": desc["name"] or "",
        "nodes": [_node(n) for n in desc["nodes"] or []],
        "tensors": [_tensor(t) for t in desc["tensors"] or []],
    }
    if desc["preferred_engine_id"] is not None:
        doc["preferred_engine_id"] = desc["preferred_engine_id"]
    if desc["id"] is not None:
        h = desc["id"]
        doc["id"] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    if desc["min_required_engine_api_version"] is not None:
        doc["min_required_engine_api_version"] = dict(
            zip(("major", "minor", "patch"), desc["min_required_engine_api_version"], strict=True)
        )
    return _dump(doc)
