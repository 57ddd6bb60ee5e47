"""hipDNN's JSON, family by family, as hipDNN's own JSON helpers read and write it (issue 40).

For each family below, the node document is laid out the way hipDNN's writer (``to_json``) of
that table writes it, and the keys its reader (``json::to<Table>``) requires (``.at``, or
``operator[]`` of a const object) and defaults (``contains``/``value``) are listed from the same
header. The headers are hipDNN's ``flatbuffers_sdk`` JSON utilities, one per table:
``projects/hipdnn/flatbuffers_sdk/include/hipdnn_flatbuffers_sdk/utilities/json/<Table>.hpp``
in tfalders/rocm-libraries @ f6b59e297db83684f6d88a68a7ef1d369f94bf3f (the fork whose family
schemas ``shared/reference/hipdnn_family_schemas`` agree with), and, for the two MoE tables,
tvy-amd/rocm-libraries @ 49cebce189b66f88a25204b0da19749ea56fa803
(``MoeGroupedMatmulAttributes.hpp``) and @ 2cd1715cb5c68ec36cc333fa1c5fc41494116b3b
(``MoeGroupedMatmulBwdAttributes.hpp``). The findings are in docs/serialization.md.

Checked for each family: the document reads; ``to_json`` writes it back key for key and value
for value (hipDNN's keys, no more, no fewer); every key hipDNN requires is required here, with
the message naming it; every key hipDNN defaults reads as its default when left out; keys
hipDNN does not read are ignored.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

import hipdnn_graph as hg


@dataclass(frozen=True)
class Family:
    """One table's node as hipDNN's writer writes it, and what its reader requires/defaults.

    Attributes:
        node: The node object (without name/type/compute_data_type), as the writer writes it.
        required: Paths the reader requires (``.at`` or const ``operator[]``).
        defaulted: Path -> what the writer then writes for it (``None``: the writer leaves it
            out), for the keys the reader defaults when they are absent.
    """

    node: dict[str, Any]
    required: tuple[tuple[str, ...], ...]
    defaulted: dict[tuple[str, ...], Any] = field(default_factory=dict)


def _in(*keys: str) -> tuple[tuple[str, ...], ...]:
    return tuple(("inputs", k) for k in keys)


def _out(*keys: str) -> tuple[tuple[str, ...], ...]:
    return tuple(("outputs", k) for k in keys)


def _params(*keys: str) -> tuple[tuple[str, ...], ...]:
    return tuple(("parameters", k) for k in keys)


_CONV_PARAMETERS = {
    "conv_mode": "CROSS_CORRELATION",
    "dilation": [1, 1],
    "post_padding": [0, 1],
    "pre_padding": [1, 0],
    "stride": [2, 2],
}
_CONV_REQUIRED = (
    ("inputs",),
    ("outputs",),
    ("parameters",),
    *_params("pre_padding", "post_padding", "stride", "dilation", "conv_mode"),
)

#: BatchnormAttributes.hpp: every uid key is read with .at (the optional ones as
#: std::optional: null is no tensor), peer_stats as an array; the writer writes them all.
_BATCHNORM: dict[str, dict[str, Any]] = {
    "inputs": {
        "bias_tensor_uid": 3,
        "epsilon_tensor_uid": 4,
        "momentum_tensor_uid": 7,
        "peer_stats_tensor_uid": [],
        "prev_running_mean_tensor_uid": 5,
        "prev_running_variance_tensor_uid": 6,
        "scale_tensor_uid": 2,
        "x_tensor_uid": 1,
    },
    "outputs": {
        "inv_variance_tensor_uid": 10,
        "mean_tensor_uid": 9,
        "next_running_mean_tensor_uid": 11,
        "next_running_variance_tensor_uid": 12,
        "y_tensor_uid": 8,
    },
}

FAMILIES: dict[str, Family] = {
    "BatchnormAttributes": Family(
        _BATCHNORM,
        (
            ("inputs",),
            ("outputs",),
            *tuple(("inputs", k) for k in _BATCHNORM["inputs"]),
            *tuple(("outputs", k) for k in _BATCHNORM["outputs"]),
        ),
    ),
    # BatchnormBackwardAttributes.hpp: mean/inv_variance .at as std::optional, the rest int64
    "BatchnormBackwardAttributes": Family(
        {
            "inputs": {
                "dy_tensor_uid": 1,
                "inv_variance_tensor_uid": None,
                "mean_tensor_uid": None,
                "peer_stats_tensor_uid": [],
                "scale_tensor_uid": 5,
                "x_tensor_uid": 2,
            },
            "outputs": {"dbias_tensor_uid": 8, "dscale_tensor_uid": 7, "dx_tensor_uid": 6},
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("dy_tensor_uid", "x_tensor_uid", "mean_tensor_uid", "inv_variance_tensor_uid"),
            *_in("scale_tensor_uid", "peer_stats_tensor_uid"),
            *_out("dx_tensor_uid", "dscale_tensor_uid", "dbias_tensor_uid"),
        ),
    ),
    # BatchnormInferenceAttributes.hpp: five inputs and y, all int64 through .at
    "BatchnormInferenceAttributes": Family(
        {
            "inputs": {
                "bias_tensor_uid": 5,
                "inv_variance_tensor_uid": 3,
                "mean_tensor_uid": 2,
                "scale_tensor_uid": 4,
                "x_tensor_uid": 1,
            },
            "outputs": {"y_tensor_uid": 6},
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("x_tensor_uid", "mean_tensor_uid", "inv_variance_tensor_uid"),
            *_in("scale_tensor_uid", "bias_tensor_uid"),
            *_out("y_tensor_uid"),
        ),
    ),
    # BatchnormInferenceAttributesVarianceExt.hpp: as above with variance and epsilon
    "BatchnormInferenceAttributesVarianceExt": Family(
        {
            "inputs": {
                "bias_tensor_uid": 5,
                "epsilon_tensor_uid": 7,
                "mean_tensor_uid": 2,
                "scale_tensor_uid": 4,
                "variance_tensor_uid": 3,
                "x_tensor_uid": 1,
            },
            "outputs": {"y_tensor_uid": 6},
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("x_tensor_uid", "mean_tensor_uid", "variance_tensor_uid", "scale_tensor_uid"),
            *_in("bias_tensor_uid", "epsilon_tensor_uid"),
            *_out("y_tensor_uid"),
        ),
    ),
    # Convolution{Fwd,Bwd,Wrw}Attributes.hpp: uids in inputs/outputs, the four vectors and
    # conv_mode (UNSET / CONVOLUTION / CROSS_CORRELATION, Graph.hpp) under "parameters"
    "ConvolutionFwdAttributes": Family(
        {
            "inputs": {"w_tensor_uid": 2, "x_tensor_uid": 1},
            "outputs": {"y_tensor_uid": 3},
            "parameters": _CONV_PARAMETERS,
        },
        _CONV_REQUIRED + _in("x_tensor_uid", "w_tensor_uid") + _out("y_tensor_uid"),
    ),
    "ConvolutionBwdAttributes": Family(
        {
            "inputs": {"dy_tensor_uid": 1, "w_tensor_uid": 2},
            "outputs": {"dx_tensor_uid": 3},
            "parameters": {**_CONV_PARAMETERS, "conv_mode": "CONVOLUTION"},
        },
        _CONV_REQUIRED + _in("dy_tensor_uid", "w_tensor_uid") + _out("dx_tensor_uid"),
    ),
    "ConvolutionWrwAttributes": Family(
        {
            "inputs": {"dy_tensor_uid": 1, "x_tensor_uid": 2},
            "outputs": {"dw_tensor_uid": 3},
            "parameters": _CONV_PARAMETERS,
        },
        _CONV_REQUIRED + _in("x_tensor_uid", "dy_tensor_uid") + _out("dw_tensor_uid"),
    ),
    # MatmulAttributes.hpp: a, b in inputs, c in outputs, nothing else
    "MatmulAttributes": Family(
        {"inputs": {"a_tensor_uid": 1, "b_tensor_uid": 2}, "outputs": {"c_tensor_uid": 3}},
        (("inputs",), ("outputs",), *_in("a_tensor_uid", "b_tensor_uid"), *_out("c_tensor_uid")),
    ),
    # PointwiseAttributes.hpp: every field under "inputs" through .at (the optional ones as
    # std::optional, null when unset), the mode in lower case
    "PointwiseAttributes": Family(
        {
            "inputs": {
                "axis_tensor_uid": None,
                "elu_alpha": None,
                "in_0_tensor_uid": 1,
                "in_1_tensor_uid": None,
                "in_2_tensor_uid": None,
                "operation": "relu_fwd",
                "relu_lower_clip": 0.5,
                "relu_lower_clip_slope": None,
                "relu_upper_clip": 6.0,
                "softplus_beta": None,
                "swish_beta": None,
            },
            "outputs": {"out_0_tensor_uid": 2},
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("operation", "relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope"),
            *_in("axis_tensor_uid", "in_0_tensor_uid", "in_1_tensor_uid", "in_2_tensor_uid"),
            *_in("swish_beta", "elu_alpha", "softplus_beta"),
            *_out("out_0_tensor_uid"),
        ),
    ),
    # BlockScaleQuantizeAttributes.hpp: block_size written when not 0, axis when set,
    # transpose always; the reader defaults all three (0, none, false)
    "BlockScaleQuantizeAttributes": Family(
        {
            "axis": 1,
            "block_size": 32,
            "inputs": {"x_tensor_uid": 1},
            "outputs": {"scale_tensor_uid": 3, "y_tensor_uid": 2},
            "transpose": True,
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("x_tensor_uid"),
            *_out("y_tensor_uid", "scale_tensor_uid"),
        ),
        {("block_size",): None, ("axis",): None, ("transpose",): False},
    ),
    # BlockScaleDequantizeAttributes.hpp: block_size and is_negative_scale always written
    # (an empty block size as []), both defaulted by the reader ([] and false)
    "BlockScaleDequantizeAttributes": Family(
        {
            "block_size": [1, 32],
            "inputs": {"scale_tensor_uid": 2, "x_tensor_uid": 1},
            "is_negative_scale": True,
            "outputs": {"y_tensor_uid": 3},
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("x_tensor_uid", "scale_tensor_uid"),
            *_out("y_tensor_uid"),
        ),
        {("block_size",): [], ("is_negative_scale",): False},
    ),
    # CustomOpAttributes.hpp: four keys on the node object, all through .at
    "CustomOpAttributes": Family(
        {
            "custom_op_id": "example.split",
            "data": [202, 254, 0, 7],
            "input_tensor_uids": [2, 1],
            "output_tensor_uids": [3, 4],
        },
        (("custom_op_id",), ("input_tensor_uids",), ("output_tensor_uids",), ("data",)),
    ),
    # MoeGroupedMatmulAttributes.hpp: token_index/token_ks left out when absent (contains on
    # read), mode (none/gather/scatter) and top_k on the node object through .at
    "MoeGroupedMatmulAttributes": Family(
        {
            "inputs": {
                "first_token_offset_tensor_uid": 3,
                "token_index_tensor_uid": 5,
                "token_ks_tensor_uid": 6,
                "token_tensor_uid": 1,
                "weight_tensor_uid": 2,
            },
            "mode": "gather",
            "outputs": {"output_tensor_uid": 4},
            "top_k": 2,
        },
        (
            ("inputs",),
            ("outputs",),
            ("mode",),
            ("top_k",),
            *_in("token_tensor_uid", "weight_tensor_uid", "first_token_offset_tensor_uid"),
            *_out("output_tensor_uid"),
        ),
        {("inputs", "token_index_tensor_uid"): None, ("inputs", "token_ks_tensor_uid"): None},
    ),
    # MoeGroupedMatmulBwdAttributes.hpp: three inputs and dweight, all through .at
    "MoeGroupedMatmulBwdAttributes": Family(
        {
            "inputs": {
                "doutput_tensor_uid": 4,
                "first_token_offset_tensor_uid": 3,
                "token_tensor_uid": 1,
            },
            "outputs": {"dweight_tensor_uid": 5},
        },
        (
            ("inputs",),
            ("outputs",),
            *_in("doutput_tensor_uid", "token_tensor_uid", "first_token_offset_tensor_uid"),
            *_out("dweight_tensor_uid"),
        ),
    ),
}


def _uids(node: dict[str, Any]) -> list[int]:
    found: list[int] = []
    for key, value in node.items():
        if isinstance(value, dict):
            found += _uids(value)
        elif key.endswith("_tensor_uid") and type(value) is int:
            found.append(value)
        elif key.endswith("_tensor_uids"):
            found += value
    return sorted(set(found))


def _document(table: str, node: dict[str, Any]) -> dict[str, Any]:
    """A graph of one node as hipDNN's Graph.hpp writes it, a tensor for each uid."""
    tensors = [
        {
            "alignment": 16,
            "data_type": "float",
            "dims": [1, 2, 4, 4],
            "is_runtime_pass_by_value": False,
            "name": f"t{uid}",
            "strides": [32, 16, 4, 1],
            "uid": uid,
            "virtual": False,
        }
        for uid in _uids(node)
    ]
    return {
        "compute_data_type": "float",
        "intermediate_data_type": "float",
        "io_data_type": "float",
        "is_override_shape_enabled": False,
        "name": "family",
        "nodes": [{"compute_data_type": "float", "name": "n", "type": table, **node}],
        "tensors": tensors,
    }


def _written_node(doc: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = json.loads(hg.Graph.from_json(json.dumps(doc)).to_json())["nodes"][0]
    for key in ("compute_data_type", "name", "type"):
        del node[key]
    return node


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path[:-1]:
        obj = obj[key]
    return obj


@pytest.mark.parametrize("table", sorted(FAMILIES))
def test_hipdnns_document_reads_and_writes_back_key_for_key(table: str) -> None:
    family = FAMILIES[table]
    assert _written_node(_document(table, family.node)) == family.node


@pytest.mark.parametrize(
    "table,path",
    [(t, p) for t in sorted(FAMILIES) for p in FAMILIES[t].required],
    ids=lambda v: v if isinstance(v, str) else ".".join(v),
)
def test_every_key_hipdnn_requires_is_required(table: str, path: tuple[str, ...]) -> None:
    doc = _document(table, copy.deepcopy(FAMILIES[table].node))
    del _at(doc["nodes"][0], path)[path[-1]]
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    where = ".".join(("nodes[0]", *path[:-1]))
    assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert info.value.message == f"Invalid hipDNN graph JSON: key '{path[-1]}' not found in {where}"


@pytest.mark.parametrize(
    "table,path",
    [(t, p) for t in sorted(FAMILIES) for p in FAMILIES[t].defaulted],
    ids=lambda v: v if isinstance(v, str) else ".".join(v),
)
def test_every_key_hipdnn_defaults_reads_as_its_default(table: str, path: tuple[str, ...]) -> None:
    family = FAMILIES[table]
    doc = _document(table, copy.deepcopy(family.node))
    del _at(doc["nodes"][0], path)[path[-1]]
    expected = copy.deepcopy(family.node)
    written = family.defaulted[path]
    if written is None:
        del _at(expected, path)[path[-1]]
    else:
        _at(expected, path)[path[-1]] = written
    assert _written_node(doc) == expected


@pytest.mark.parametrize("table", sorted(FAMILIES))
def test_keys_hipdnn_does_not_read_are_ignored(table: str) -> None:
    node = copy.deepcopy(FAMILIES[table].node)
    node["_comment"] = "hipDNN's reader never asks for this key"
    for group in ("inputs", "outputs", "parameters"):
        if group in node:
            node[group]["_comment"] = "nor for this one"
    assert _written_node(_document(table, node)) == FAMILIES[table].node


def test_batchnorms_optional_tensors_read_as_null_and_write_null() -> None:
    """BatchnormAttributes.hpp reads the running statistics, momentum and saved statistics as
    std::optional of a required key, and writes an absent one as null."""
    node = copy.deepcopy(_BATCHNORM)
    for key in ("prev_running_mean", "prev_running_variance", "momentum"):
        node["inputs"][f"{key}_tensor_uid"] = None
    for key in ("mean", "inv_variance", "next_running_mean", "next_running_variance"):
        node["outputs"][f"{key}_tensor_uid"] = None
    assert _written_node(_document("BatchnormAttributes", node)) == node


@pytest.mark.parametrize(
    "table,path",
    [
        ("BatchnormAttributes", ("inputs", "epsilon_tensor_uid")),
        ("BatchnormBackwardAttributes", ("outputs", "dbias_tensor_uid")),
        ("MoeGroupedMatmulAttributes", ("inputs", "token_index_tensor_uid")),
        ("CustomOpAttributes", ("custom_op_id",)),
    ],
)
def test_null_where_hipdnn_reads_a_value_is_refused(table: str, path: tuple[str, ...]) -> None:
    """Keys hipDNN reads as a plain int64 or string (``get<int64_t>``/``get<std::string>`` of
    null is nlohmann's type error) are refused when null."""
    doc = _document(table, copy.deepcopy(FAMILIES[table].node))
    _at(doc["nodes"][0], path)[path[-1]] = None
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert "nodes[0]" in info.value.message and path[-1] in info.value.message


#: hipDNN's spellings (NLOHMANN_JSON_SERIALIZE_ENUM): PointwiseMode in PointwiseAttributes.hpp,
#: ConvMode in Graph.hpp, MoeGroupedMatmulMode in MoeGroupedMatmulAttributes.hpp.
SPELLINGS: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {
    ("PointwiseAttributes", ("inputs", "operation")): (
        "unset",
        "abs",
        "add",
        "add_square",
        "binary_select",
        "ceil",
        "cmp_eq",
        "cmp_ge",
        "cmp_gt",
        "cmp_le",
        "cmp_lt",
        "cmp_neq",
        "div",
        "elu_bwd",
        "elu_fwd",
        "erf",
        "exp",
        "floor",
        "gelu_approx_tanh_bwd",
        "gelu_approx_tanh_fwd",
        "gelu_bwd",
        "gelu_fwd",
        "gen_index",
        "identity",
        "log",
        "logical_and",
        "logical_not",
        "logical_or",
        "max_op",
        "min_op",
        "mul",
        "neg",
        "reciprocal",
        "relu_bwd",
        "relu_fwd",
        "rsqrt",
        "sigmoid_bwd",
        "sigmoid_fwd",
        "sin",
        "softplus_bwd",
        "softplus_fwd",
        "sqrt",
        "sub",
        "swish_bwd",
        "swish_fwd",
        "tan",
        "tanh_bwd",
        "tanh_fwd",
    ),
    ("ConvolutionFwdAttributes", ("parameters", "conv_mode")): (
        "UNSET",
        "CONVOLUTION",
        "CROSS_CORRELATION",
    ),
    ("MoeGroupedMatmulAttributes", ("mode",)): ("none", "gather", "scatter"),
}


@pytest.mark.parametrize(
    "table,path,spelling",
    [(t, p, s) for (t, p), spellings in SPELLINGS.items() for s in spellings],
    ids=lambda v: v if isinstance(v, str) else ".".join(v),
)
def test_every_enum_spelling_of_hipdnn_reads_and_writes_back(
    table: str, path: tuple[str, ...], spelling: str
) -> None:
    node = copy.deepcopy(FAMILIES[table].node)
    _at(node, path)[path[-1]] = spelling
    assert _written_node(_document(table, node)) == node


@pytest.mark.parametrize("table,path", sorted(SPELLINGS))
def test_a_spelling_hipdnn_does_not_write_is_refused(table: str, path: tuple[str, ...]) -> None:
    """hipDNN's nlohmann enum reader turns an unknown string into the table's first value
    (UNSET, or MoE's none); this project refuses it by name instead of guessing."""
    doc = _document(table, copy.deepcopy(FAMILIES[table].node))
    _at(doc["nodes"][0], path)[path[-1]] = "RELU_FWD_TYPO"
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert info.value.message.startswith("hipDNN node \"n\": 'RELU_FWD_TYPO' is not a ")
