"""Hand-written descriptions of hipDNN graphs, as hipDNN (not this project) would write them.

Every case is a valid graph (shapes, types and wiring follow the project's graph rules) built
from hipDNN's schema alone, never from the project's writer. ``MODELLED`` holds content the
project models (it must read and write these back byte for byte); ``UNMODELLED`` holds content
that HIPDNN_WIRE.md A12 lets the project keep or refuse, never drop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from wire_model import (
    BATCHNORM_BACKWARD_TAG,
    BATCHNORM_INFERENCE_TAG,
    BATCHNORM_INFERENCE_VARIANCE_TAG,
    BATCHNORM_TAG,
    BLOCK_SCALE_DEQUANTIZE_TAG,
    BLOCK_SCALE_QUANTIZE_TAG,
    CONV_BWD_TAG,
    CONV_FWD_TAG,
    CONV_WRW_TAG,
    CUSTOM_OP_TAG,
    HIPDNN_DATA_TYPES,
    LAYERNORM_BACKWARD_TAG,
    LAYERNORM_TAG,
    MATMUL_TAG,
    MOE_BWD_TAG,
    MOE_TAG,
    POINTWISE_TAG,
    REDUCTION_TAG,
    RESAMPLE_BWD_TAG,
    RESAMPLE_FWD_TAG,
    RMSNORM_BACKWARD_TAG,
    RMSNORM_TAG,
    SDPA_BACKWARD_TAG,
    SDPA_TAG,
    Desc,
    description_from_hipdnn_json,
    f32_bits,
    graph_desc,
    node_desc,
    tensor_desc,
    value_fields,
)

DATA = Path(__file__).resolve().parent / "data"
DT = HIPDNN_DATA_TYPES
SHAPE = [1, 2, 8, 4]
STATS = [1, 2, 8, 1]


def b8(number: int) -> str:
    """The compact canonical text of spec example B8.<number> (as committed in data/)."""
    return (DATA / f"b8_{number}.json").read_text(encoding="utf-8").rstrip("\n")


def b8_desc(number: int) -> Desc:
    return description_from_hipdnn_json(json.loads(b8(number)))


def _qkvo(io: int = DT["HALF"], names: str = "QKVO") -> list[Desc]:
    return [tensor_desc(i + 1, n, io, SHAPE) for i, n in enumerate(names)]


def _fwd_uids() -> dict[str, int]:
    return {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4}


def forward_every_field() -> Desc:
    """A forward node with every slot and scalar the project models set."""
    half, f32 = DT["HALF"], DT["FLOAT"]
    tensors = [
        *_qkvo(),
        tensor_desc(5, "Stats", f32, STATS),
        tensor_desc(6, "Bias", half, [1, 2, 8, 8]),
        tensor_desc(7, "Scale", f32, [1], **value_fields("Float32Value", 0.125)),
        tensor_desc(8, "SeqLenQ", DT["INT32"], [1, 1, 1, 1]),
        tensor_desc(9, "SeqLenKV", DT["INT32"], [1, 1, 1, 1]),
        tensor_desc(10, "Seed", DT["INT64"], [1], **value_fields("Int64Value", 2**40 + 1)),
        tensor_desc(11, "Offset", DT["INT64"], [1], **value_fields("Int64Value", 0)),
        tensor_desc(12, "DropMask", half, [1, 2, 8, 8]),
        tensor_desc(13, "DropScale", f32, [1], **value_fields("Float32Value", 1.25)),
    ]
    node = node_desc(
        "fwd",
        SDPA_TAG,
        f32,
        **_fwd_uids(),
        stats_tensor_uid=5,
        attn_mask_tensor_uid=6,
        scale_tensor_uid=7,
        seq_len_q_tensor_uid=8,
        seq_len_kv_tensor_uid=9,
        seed_tensor_uid=10,
        offset_tensor_uid=11,
        dropout_mask_tensor_uid=12,
        dropout_scale_tensor_uid=13,
        generate_stats=True,
        alibi_mask=True,
        padding_mask=True,
        causal_mask=True,
        causal_mask_bottom_right=True,
        dropout_probability=f32_bits(0.1),
        attn_scale_value=f32_bits(0.3),
        left_bound=4,
        right_bound=0,
        diagonal_alignment=1,
    )
    return graph_desc("fwd_every_field", tensors, [node], io_data_type=half)


def backward_every_field() -> Desc:
    """A backward node with every slot and scalar set, tensors in hipDNN's (not uid) order."""
    bf16, f32 = DT["BFLOAT16"], DT["FLOAT"]
    names = ["Q", "K", "V", "O", "dO"]
    tensors = [
        tensor_desc(uid, n, bf16, SHAPE) for uid, n in zip([5, 3, 1, 2, 4], names, strict=True)
    ]
    tensors += [
        tensor_desc(6, "Stats", f32, STATS),
        tensor_desc(30, "dQ", bf16, SHAPE),
        tensor_desc(31, "dK", bf16, SHAPE),
        tensor_desc(32, "dV", bf16, SHAPE),
        tensor_desc(20, "Scale", f32, [1], is_runtime_pass_by_value=True),
        tensor_desc(21, "Bias", bf16, [1, 2, 8, 8]),
        tensor_desc(33, "dBias", bf16, [1, 2, 8, 8]),
        tensor_desc(22, "SeqLenQ", DT["INT32"], [1, 1, 1, 1]),
        tensor_desc(23, "SeqLenKV", DT["INT32"], [1, 1, 1, 1]),
        tensor_desc(24, "Seed", DT["INT64"], [1], **value_fields("Int64Value", -7)),
        tensor_desc(25, "Offset", DT["INT64"], [1], **value_fields("Int64Value", 2**62)),
        tensor_desc(26, "DropMask", bf16, [1, 2, 8, 8]),
        tensor_desc(27, "DropScale", f32, [1], **value_fields("Float32Value", 1.25)),
        tensor_desc(28, "DropScaleInv", f32, [1], **value_fields("Float32Value", 0.8)),
    ]
    node = node_desc(
        "bwd",
        SDPA_BACKWARD_TAG,
        f32,
        q_tensor_uid=5,
        k_tensor_uid=3,
        v_tensor_uid=1,
        o_tensor_uid=2,
        do_tensor_uid=4,
        stats_tensor_uid=6,
        dq_tensor_uid=30,
        dk_tensor_uid=31,
        dv_tensor_uid=32,
        scale_tensor_uid=20,
        attn_mask_tensor_uid=21,
        dbias_tensor_uid=33,
        seq_len_q_tensor_uid=22,
        seq_len_kv_tensor_uid=23,
        seed_tensor_uid=24,
        offset_tensor_uid=25,
        dropout_mask_tensor_uid=26,
        dropout_scale_tensor_uid=27,
        dropout_scale_inv_tensor_uid=28,
        alibi_mask=True,
        padding_mask=True,
        causal_mask=True,
        causal_mask_bottom_right=False,
        dropout_probability=f32_bits(0.25),
        attn_scale_value=f32_bits(1 / 3),
        left_bound=64,
        right_bound=None,
        diagonal_alignment=1,
    )
    return graph_desc("bwd_every_field", tensors, [node], io_data_type=bf16)


def graph_extras() -> Desc:
    """Graph-level fields newer hipDNN stamps (id, API floor, override flag), an engine id at
    0 (present, not absent), an absent graph name and unnamed node, optional scalars at 0."""
    f32 = DT["FLOAT"]
    tensors = [*_qkvo(), tensor_desc(5, "Stats", f32, STATS)]
    node = node_desc(
        None,
        SDPA_TAG,
        f32,
        **_fwd_uids(),
        stats_tensor_uid=5,
        generate_stats=False,
        left_bound=0,
        attn_scale_value=f32_bits(0.0),
    )
    return graph_desc(
        None,
        tensors,
        [node],
        preferred_engine_id=0,
        is_override_shape_enabled=True,
        min_required_engine_api_version=[1, 2, 3],
        id="00112233445566778899aabbccddeeff",
    )


def big_numbers() -> Desc:
    """Large uids, a negative engine id (an unsigned id >= 2**63), odd strides and alignment,
    and names that need escaping or are not ASCII."""
    half, f32 = DT["HALF"], DT["FLOAT"]
    uids = [2**62, 2**40, 7, 2**63 - 1, 3]
    tensors = [
        tensor_desc(uids[0], 'Q "quoted"\n', half, SHAPE, [64, 4, 8, 1], alignment=64),
        tensor_desc(uids[1], "K/\u00e9\u6ce8", half, SHAPE),
        tensor_desc(uids[2], "V\u0001", half, [1, 1, 8, 4]),
        tensor_desc(uids[3], "O", half, SHAPE, virtual=False),
        tensor_desc(uids[4], "", f32, STATS, alignment=256),
    ]
    node = node_desc(
        "\U0001f600 attn",
        SDPA_TAG,
        f32,
        q_tensor_uid=uids[0],
        k_tensor_uid=uids[1],
        v_tensor_uid=uids[2],
        o_tensor_uid=uids[3],
        stats_tensor_uid=uids[4],
        generate_stats=True,
    )
    return graph_desc("big", tensors, [node], preferred_engine_id=-(2**63) + 5)


def io_type(name: str) -> Callable[[], Desc]:
    """A forward graph whose Q, K, V and O have hipDNN data type ``name`` (every type of the
    schema, including those without a TensorValue member)."""

    def build() -> Desc:
        tensors = _qkvo(DT[name])
        node = node_desc("fwd", SDPA_TAG, DT["FLOAT"], **_fwd_uids(), generate_stats=False)
        return graph_desc(f"io_{name.lower()}", tensors, [node], io_data_type=DT[name])

    return build


#: Scale tensors of every data type that has a TensorValue member, with that member (A4):
#: data type -> (member, value given to the struct).
SCALE_VALUES = {
    "FLOAT": ("Float32Value", f32_bits(0.1)),
    "HALF": ("Float16Value", f32_bits(0.1)),  # binary32, not rounded to 16 bits
    "BFLOAT16": ("BFloat16Value", f32_bits(-2.5)),
    "DOUBLE": ("Float64Value", 0.1),
    "INT32": ("Int32Value", -(2**31)),
    "INT64": ("Int64Value", 2**63 - 1),
    "UINT8": ("Float8Value", 255),
    "INT8": ("Float8Value", 0x80),  # -128
    "FP8_E4M3": ("Float8Value", 0x38),  # 1.0
    "FP8_E5M2": ("Float8Value", 0x3C),  # 1.0
    "FP8_E4M3_FNUZ": ("Float8Value", 0x40),  # 1.0
    "FP8_E5M2_FNUZ": ("Float8Value", 0x40),  # 1.0
}


def scale_value(dtype: str) -> Callable[[], Desc]:
    member, raw = SCALE_VALUES[dtype]

    def build() -> Desc:
        if member in ("Float32Value", "Float16Value", "BFloat16Value"):
            fields = {
                "value_type": value_fields(member, 0)["value_type"],
                "value": raw.to_bytes(4, "little").hex(),
            }
        else:
            fields = value_fields(member, raw)
        scale = tensor_desc(5, "Scale", DT[dtype], [1], **fields)
        node = node_desc(
            "fwd", SDPA_TAG, DT["FLOAT"], **_fwd_uids(), scale_tensor_uid=5, generate_stats=False
        )
        return graph_desc(f"scale_{dtype.lower()}", [*_qkvo(), scale], [node])

    return build


def two_forward_nodes() -> Desc:
    """Two independent-looking forward nodes chained through a virtual output, in topological
    order, sharing K and V."""
    half, f32 = DT["HALF"], DT["FLOAT"]
    tensors = [
        *_qkvo(names="QKV"),  # uids 1-3
        tensor_desc(4, "fwd1::O", half, SHAPE, virtual=True),
        tensor_desc(5, "O2", half, SHAPE),
    ]
    n1 = node_desc("fwd1", SDPA_TAG, f32, **_fwd_uids(), generate_stats=False)
    n2 = node_desc(
        "fwd2",
        SDPA_TAG,
        f32,
        q_tensor_uid=4,
        k_tensor_uid=2,
        v_tensor_uid=3,
        o_tensor_uid=5,
        generate_stats=False,
        causal_mask=True,
    )
    return graph_desc("chain", tensors, [n1, n2])


def float_formats() -> Desc:
    """Floats whose JSON layout differs between nlohmann and Python's repr (B2): 2**50 as a
    binary32 attribute (1.125899906842624e+15), 1e15 as a Float64Value (1e+15), -0.0 and a
    binary32 1e-5 (9.999999747378752e-06)."""
    f32, half = DT["FLOAT"], DT["HALF"]
    tensors = [
        *_qkvo(),
        tensor_desc(5, "Scale", f32, [1], **value_fields("Float32Value", -0.0)),
        tensor_desc(6, "Seed", DT["INT64"], [1], **value_fields("Int64Value", -(2**63))),
        tensor_desc(7, "Offset", DT["INT64"], [1], **value_fields("Int64Value", 1)),
        tensor_desc(8, "DropMask", half, [1, 2, 8, 8]),
        tensor_desc(9, "DropScale", DT["DOUBLE"], [1], **value_fields("Float64Value", 1e15)),
    ]
    node = node_desc(
        "fwd",
        SDPA_TAG,
        f32,
        **_fwd_uids(),
        scale_tensor_uid=5,
        seed_tensor_uid=6,
        offset_tensor_uid=7,
        dropout_mask_tensor_uid=8,
        dropout_scale_tensor_uid=9,
        generate_stats=False,
        attn_scale_value=f32_bits(2.0**50),
        dropout_probability=f32_bits(1e-5),
    )
    return graph_desc("floats", tensors, [node], io_data_type=half)


def pointwise_every_field() -> Desc:
    """A ternary pointwise node with every field of its table set (axis among them)."""
    f32, half = DT["FLOAT"], DT["HALF"]
    tensors = [tensor_desc(i + 1, n, half, [2, 8]) for i, n in enumerate(("C", "A", "B", "Y"))]
    node = node_desc(
        "select",
        POINTWISE_TAG,
        f32,
        operation=4,  # BINARY_SELECT
        relu_lower_clip=f32_bits(0.1),
        relu_upper_clip=f32_bits(6.0),
        relu_lower_clip_slope=f32_bits(-0.0),
        axis_tensor_uid=3,
        in_0_tensor_uid=1,
        in_1_tensor_uid=2,
        in_2_tensor_uid=3,
        out_0_tensor_uid=4,
        swish_beta=f32_bits(1.0),
        elu_alpha=f32_bits(2.0**50),
        softplus_beta=f32_bits(1e-5),
    )
    return graph_desc("pointwise_every_field", tensors, [node], io_data_type=half)


def pointwise_max_min_chain() -> Desc:
    """MAX (MAX_OP, 28) then MIN (MIN_OP, 29) then a unary mode, chained through virtual tensors,
    with only the required fields set."""
    f32 = DT["FLOAT"]
    tensors = [
        tensor_desc(1, "X", f32, [4]),
        tensor_desc(2, "Z", f32, [4]),
        tensor_desc(3, "max::OUT_0", f32, [4], virtual=True),
        tensor_desc(4, "min::OUT_0", f32, [4], virtual=True),
        tensor_desc(5, "Y", f32, [4]),
    ]
    nodes = [
        node_desc("max", POINTWISE_TAG, f32, operation=28, in_0_tensor_uid=1,
                  in_1_tensor_uid=2, out_0_tensor_uid=3),
        node_desc("min", POINTWISE_TAG, f32, operation=29, in_0_tensor_uid=3,
                  in_1_tensor_uid=1, out_0_tensor_uid=4),
        node_desc("sigmoid", POINTWISE_TAG, f32, operation=37, in_0_tensor_uid=4,
                  out_0_tensor_uid=5),
    ]  # fmt: skip
    return graph_desc("pointwise_chain", tensors, nodes, io_data_type=f32)


def matmul_batched() -> Desc:
    """A batched matmul (B broadcast over the batch) followed by a bias add and a ReLU: the
    matmul-epilogue graph hipDNN users write."""
    bf16, f32 = DT["BFLOAT16"], DT["FLOAT"]
    tensors = [
        tensor_desc(1, "A", bf16, [4, 16, 32]),
        tensor_desc(2, "B", bf16, [1, 32, 8]),
        tensor_desc(3, "mm::C", f32, [4, 16, 8], virtual=True),
        tensor_desc(4, "bias", bf16, [1, 1, 8]),
        tensor_desc(5, "add::OUT_0", f32, [4, 16, 8], virtual=True),
        tensor_desc(6, "Y", bf16, [4, 16, 8]),
    ]
    nodes = [
        node_desc("mm", MATMUL_TAG, f32, a_tensor_uid=1, b_tensor_uid=2, c_tensor_uid=3),
        node_desc("add", POINTWISE_TAG, f32, operation=2, in_0_tensor_uid=3, in_1_tensor_uid=4,
                  out_0_tensor_uid=5),
        node_desc("relu", POINTWISE_TAG, f32, operation=34, in_0_tensor_uid=5,
                  out_0_tensor_uid=6),
    ]  # fmt: skip
    return graph_desc("matmul_epilogue", tensors, nodes, io_data_type=bf16)


def conv_fprop_block() -> Desc:
    """Two forward convolutions of a convolution block: a 3x3 cross-correlation (stride 1, same
    padding, channels-last X) and a strided, dilated, asymmetrically padded true convolution
    (every member of the table set, the mode not its default)."""
    half, f32 = DT["HALF"], DT["FLOAT"]
    tensors = [
        tensor_desc(1, "X", half, [2, 8, 16, 16], [2048, 1, 128, 8]),
        tensor_desc(2, "W1", half, [16, 8, 3, 3]),
        tensor_desc(3, "c1::Y", f32, [2, 16, 16, 16], [4096, 1, 256, 16], virtual=True),
        tensor_desc(4, "W2", half, [32, 4, 3, 2]),
        tensor_desc(5, "Y", half, [2, 32, 7, 6], [1344, 1, 192, 32]),
    ]
    nodes = [
        node_desc("c1", CONV_FWD_TAG, f32, x_tensor_uid=1, w_tensor_uid=2, y_tensor_uid=3,
                  pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                  conv_mode=2),
        node_desc("c2", CONV_FWD_TAG, f32, x_tensor_uid=3, w_tensor_uid=4, y_tensor_uid=5,
                  pre_padding=[1, 0], post_padding=[0, 2], stride=[2, 3], dilation=[2, 1],
                  conv_mode=1),
    ]  # fmt: skip
    return graph_desc("conv_block", tensors, nodes, io_data_type=half)


def resample_pool_pair() -> Desc:
    """A max pooling that writes its INDEX (channels-last, NEG_INF_PAD, generate_index set) and
    an average pooling with padding counted (3-D, asymmetric padding, no INDEX: its uid left
    out), every member of ResampleFwdAttributes set."""
    half, f32, i32 = DT["HALF"], DT["FLOAT"], DT["INT32"]
    tensors = [
        tensor_desc(1, "X", half, [2, 8, 16, 16], [2048, 1, 128, 8]),
        tensor_desc(2, "max::Y", half, [2, 8, 8, 8], [512, 1, 64, 8]),
        tensor_desc(3, "max::Index", i32, [2, 8, 8, 8], [512, 1, 64, 8]),
        tensor_desc(4, "V", f32, [1, 4, 6, 7, 5]),
        tensor_desc(5, "avg::Y", f32, [1, 4, 3, 4, 2]),
    ]
    nodes = [
        node_desc("max", RESAMPLE_FWD_TAG, f32, x_tensor_uid=1, y_tensor_uid=2,
                  index_tensor_uid=3, pre_padding=[0, 0], post_padding=[0, 0], stride=[2, 2],
                  window=[2, 2], resample_mode=1, padding_mode=1, generate_index=True),
        node_desc("avg", RESAMPLE_FWD_TAG, f32, x_tensor_uid=4, y_tensor_uid=5,
                  pre_padding=[1, 0, 1], post_padding=[0, 1, 0], stride=[2, 2, 3],
                  window=[3, 2, 3], resample_mode=3, padding_mode=2),
    ]  # fmt: skip
    return graph_desc("pool_pair", tensors, nodes, io_data_type=half)


def resample_training_step() -> Desc:
    """A max pooling's backward from its forward's INDEX, and an average pooling's backward
    (padding excluded, no INDEX): the two uses of ResampleBwdAttributes."""
    f32, i32 = DT["FLOAT"], DT["INT32"]
    tensors = [
        tensor_desc(1, "dY", f32, [2, 3, 4, 4]),
        tensor_desc(2, "Index", i32, [2, 3, 4, 4]),
        tensor_desc(3, "dX", f32, [2, 3, 8, 8]),
        tensor_desc(4, "dY2", f32, [1, 3, 16, 16]),
        tensor_desc(5, "dX2", f32, [1, 3, 31, 31]),
    ]
    nodes = [
        node_desc("max_bwd", RESAMPLE_BWD_TAG, f32, dy_tensor_uid=1, dx_tensor_uid=3,
                  index_tensor_uid=2, pre_padding=[0, 0], post_padding=[0, 0], stride=[2, 2],
                  window=[2, 2], resample_mode=1, padding_mode=1),
        node_desc("avg_bwd", RESAMPLE_BWD_TAG, f32, dy_tensor_uid=4, dx_tensor_uid=5,
                  pre_padding=[1, 1], post_padding=[1, 1], stride=[2, 2], window=[3, 3],
                  resample_mode=2, padding_mode=2),
    ]  # fmt: skip
    return graph_desc("pool_backward", tensors, nodes)


def conv_training_step() -> Desc:
    """A convolution's training step: the data gradient (strided, asymmetric padding, a true
    convolution) and the weight gradient (dilated, grouped DW given) of one layer."""
    half, f32 = DT["HALF"], DT["FLOAT"]
    tensors = [
        tensor_desc(1, "dY", half, [2, 16, 8, 8]),
        tensor_desc(2, "W", half, [16, 8, 3, 3]),
        tensor_desc(3, "dX", half, [2, 8, 16, 16]),
        tensor_desc(4, "X", half, [2, 8, 12, 12]),
        tensor_desc(5, "dW", f32, [16, 4, 3, 3]),
    ]
    nodes = [
        node_desc("dgrad", CONV_BWD_TAG, f32, dy_tensor_uid=1, w_tensor_uid=2, dx_tensor_uid=3,
                  pre_padding=[1, 0], post_padding=[0, 1], stride=[2, 2], dilation=[1, 1],
                  conv_mode=1),
        node_desc("wgrad", CONV_WRW_TAG, f32, x_tensor_uid=4, dy_tensor_uid=1, dw_tensor_uid=5,
                  pre_padding=[0, 0], post_padding=[0, 0], stride=[1, 1], dilation=[2, 2],
                  conv_mode=2),
    ]  # fmt: skip
    return graph_desc("conv_training_step", tensors, nodes, io_data_type=half)


def reduction_chain() -> Desc:
    """A deterministic AMAX over the last two axes, then a plain sum over the first: two
    reductions (one with the flag set, one without) of the kind hipDNN's amax scaling uses."""
    f32, half = DT["FLOAT"], DT["HALF"]
    tensors = [
        tensor_desc(1, "X", half, [2, 8, 16, 64]),
        tensor_desc(2, "amax::Y", f32, [2, 8, 1, 1], [8, 1, 1, 1], virtual=True),
        tensor_desc(3, "Total", f32, [1, 8, 1, 1], [8, 1, 1, 1]),
    ]
    nodes = [
        node_desc("amax", REDUCTION_TAG, f32, mode=5, in_tensor_uid=1, out_tensor_uid=2,
                  is_deterministic=True),
        node_desc("sum", REDUCTION_TAG, f32, mode=1, in_tensor_uid=2, out_tensor_uid=3,
                  is_deterministic=False),
    ]  # fmt: skip
    return graph_desc("reduction_chain", tensors, nodes, io_data_type=half)


def rmsnorm_pair() -> Desc:
    """An RMSNorm in training (bias, inv_rms, a scale normalizing the last axis) feeding one in
    inference (no bias, no inv_rms): every field of the table, set and absent."""
    f32, bf16 = DT["FLOAT"], DT["BFLOAT16"]
    eps = value_fields("Float32Value", 1e-5)
    tensors = [
        tensor_desc(1, "X", bf16, [4, 128, 64]),
        tensor_desc(2, "gamma", f32, [1, 1, 64]),
        tensor_desc(3, "eps", f32, [1], [1], **eps),
        tensor_desc(4, "beta", f32, [1, 1, 64]),
        tensor_desc(5, "norm1::Y", f32, [4, 128, 64], virtual=True),
        tensor_desc(6, "norm1::INV_RMS", f32, [4, 128, 1]),
        tensor_desc(7, "Y", bf16, [4, 128, 64]),
    ]
    nodes = [
        node_desc("norm1", RMSNORM_TAG, f32, x_tensor_uid=1, scale_tensor_uid=2,
                  epsilon_tensor_uid=3, y_tensor_uid=5, bias_tensor_uid=4,
                  inv_rms_tensor_uid=6, forward_phase=2),
        node_desc("norm2", RMSNORM_TAG, f32, x_tensor_uid=5, scale_tensor_uid=2,
                  epsilon_tensor_uid=3, y_tensor_uid=7, forward_phase=1),
    ]  # fmt: skip
    return graph_desc("rmsnorm_pair", tensors, nodes, io_data_type=bf16)


def layernorm_pair() -> Desc:
    """A layer norm in training (mean and inv_variance written, a full-rank scale) feeding one
    in inference (no statistics, a reduced-rank scale): every field of the table."""
    f32, half = DT["FLOAT"], DT["HALF"]
    eps = value_fields("Float32Value", 1e-5)
    tensors = [
        tensor_desc(1, "X", half, [2, 6, 4]),
        tensor_desc(2, "gamma", f32, [1, 6, 4]),
        tensor_desc(3, "beta", f32, [1, 6, 4]),
        tensor_desc(4, "eps", f32, [1], [1], **eps),
        tensor_desc(5, "ln1::Y", f32, [2, 6, 4], virtual=True),
        tensor_desc(6, "ln1::MEAN", f32, [2, 1, 1]),
        tensor_desc(7, "ln1::INV_VARIANCE", f32, [2, 1, 1]),
        tensor_desc(8, "gamma2", f32, [6, 4]),
        tensor_desc(9, "beta2", f32, [6, 4]),
        tensor_desc(10, "Y", half, [2, 6, 4]),
    ]
    nodes = [
        node_desc("ln1", LAYERNORM_TAG, f32, x_tensor_uid=1, scale_tensor_uid=2,
                  bias_tensor_uid=3, epsilon_tensor_uid=4, y_tensor_uid=5,
                  normalized_dim_count=2, mean_tensor_uid=6, inv_variance_tensor_uid=7,
                  forward_phase=2),
        node_desc("ln2", LAYERNORM_TAG, f32, x_tensor_uid=5, scale_tensor_uid=8,
                  bias_tensor_uid=9, epsilon_tensor_uid=4, y_tensor_uid=10, forward_phase=1),
    ]  # fmt: skip
    return graph_desc("layernorm_pair", tensors, nodes, io_data_type=half)


def batchnorm_pair() -> Desc:
    """A batch norm in training with running statistics (all thirteen fields, peer stats empty as
    hipDNN writes them) feeding one without (absent optionals, NHWC input strides)."""
    f32, half = DT["FLOAT"], DT["HALF"]
    eps = value_fields("Float32Value", 1e-5)
    mom = value_fields("Float32Value", 0.1)
    c = [1, 3, 1, 1]
    cs = [3, 1, 3, 3]
    tensors = [
        tensor_desc(1, "X", half, [4, 3, 8, 8], [192, 1, 24, 3]),
        tensor_desc(2, "gamma", f32, c, cs),
        tensor_desc(3, "beta", f32, c, cs),
        tensor_desc(4, "eps", f32, [1], [1], **eps),
        tensor_desc(5, "running_mean", f32, c, cs),
        tensor_desc(6, "running_var", f32, c, cs),
        tensor_desc(7, "momentum", f32, [1], [1], **mom),
        tensor_desc(8, "bn1::Y", f32, [4, 3, 8, 8], [192, 1, 24, 3], virtual=True),
        tensor_desc(9, "bn1::MEAN", f32, c, cs),
        tensor_desc(10, "bn1::INV_VARIANCE", f32, c, cs),
        tensor_desc(11, "bn1::NEXT_RUNNING_MEAN", f32, c, cs),
        tensor_desc(12, "bn1::NEXT_RUNNING_VARIANCE", f32, c, cs),
        tensor_desc(13, "Y", half, [4, 3, 8, 8], [192, 1, 24, 3]),
    ]
    nodes = [
        node_desc("bn1", BATCHNORM_TAG, f32, x_tensor_uid=1, scale_tensor_uid=2,
                  bias_tensor_uid=3, epsilon_tensor_uid=4, prev_running_mean_tensor_uid=5,
                  prev_running_variance_tensor_uid=6, momentum_tensor_uid=7, y_tensor_uid=8,
                  mean_tensor_uid=9, inv_variance_tensor_uid=10,
                  next_running_mean_tensor_uid=11, next_running_variance_tensor_uid=12),
        node_desc("bn2", BATCHNORM_TAG, f32, x_tensor_uid=8, scale_tensor_uid=2,
                  bias_tensor_uid=3, epsilon_tensor_uid=4, y_tensor_uid=13),
    ]  # fmt: skip
    return graph_desc("batchnorm_pair", tensors, nodes, io_data_type=half)


def batchnorm_inference_pair() -> Desc:
    """Two batch-norm inference nodes in a row sharing their saved statistics (every field of
    the table; NHWC strides)."""
    f32, half = DT["FLOAT"], DT["HALF"]
    c, cs = [1, 8, 1, 1], [8, 1, 8, 8]
    tensors = [
        tensor_desc(1, "X", half, [2, 8, 5, 5], [200, 1, 40, 8]),
        tensor_desc(2, "running_mean", f32, c, cs),
        tensor_desc(3, "inv_std", f32, c, cs),
        tensor_desc(4, "gamma", f32, c, cs),
        tensor_desc(5, "beta", f32, c, cs),
        tensor_desc(6, "bn1::Y", f32, [2, 8, 5, 5], [200, 1, 40, 8], virtual=True),
        tensor_desc(7, "Y", half, [2, 8, 5, 5], [200, 1, 40, 8]),
    ]
    nodes = [
        node_desc("bn1", BATCHNORM_INFERENCE_TAG, f32, x_tensor_uid=1, mean_tensor_uid=2,
                  inv_variance_tensor_uid=3, scale_tensor_uid=4, bias_tensor_uid=5,
                  y_tensor_uid=6),
        node_desc("bn2", BATCHNORM_INFERENCE_TAG, f32, x_tensor_uid=6, mean_tensor_uid=2,
                  inv_variance_tensor_uid=3, scale_tensor_uid=4, bias_tensor_uid=5,
                  y_tensor_uid=7),
    ]  # fmt: skip
    return graph_desc("batchnorm_inference_pair", tensors, nodes, io_data_type=half)


def batchnorm_inference_variance() -> Desc:
    """A batch-norm inference from the saved variance and an epsilon value (every field of the
    table)."""
    f32 = DT["FLOAT"]
    c = [1, 4, 1, 1]
    tensors = [
        tensor_desc(1, "X", f32, [3, 4, 2, 2]),
        tensor_desc(2, "running_mean", f32, c),
        tensor_desc(3, "running_var", f32, c),
        tensor_desc(4, "gamma", f32, c),
        tensor_desc(5, "beta", f32, c),
        tensor_desc(6, "Y", f32, [3, 4, 2, 2]),
        tensor_desc(7, "eps", f32, [1], [1], **value_fields("Float32Value", 1e-5)),
    ]
    nodes = [
        node_desc("bn", BATCHNORM_INFERENCE_VARIANCE_TAG, f32, x_tensor_uid=1,
                  mean_tensor_uid=2, variance_tensor_uid=3, scale_tensor_uid=4,
                  bias_tensor_uid=5, y_tensor_uid=6, epsilon_tensor_uid=7),
    ]  # fmt: skip
    return graph_desc("batchnorm_inference_variance", tensors, nodes)


def batchnorm_backward_pair() -> Desc:
    """A batch-norm backward with the saved statistics and one without (every field of the
    table; peer stats absent, as Graph::Pack leaves an empty vector out)."""
    f32 = DT["FLOAT"]
    c, cs = [1, 3, 1, 1], [3, 1, 3, 3]
    x = [4, 3, 2, 2]
    tensors = [
        tensor_desc(1, "dY", f32, x),
        tensor_desc(2, "X", f32, x),
        tensor_desc(3, "saved_mean", f32, c, cs),
        tensor_desc(4, "saved_inv_std", f32, c, cs),
        tensor_desc(5, "gamma", f32, c, cs),
        tensor_desc(6, "dX", f32, x),
        tensor_desc(7, "dgamma", f32, c, cs),
        tensor_desc(8, "dbeta", f32, c, cs),
        tensor_desc(9, "dX2", f32, x),
        tensor_desc(10, "dgamma2", f32, c, cs),
        tensor_desc(11, "dbeta2", f32, c, cs),
    ]
    nodes = [
        node_desc("bwd1", BATCHNORM_BACKWARD_TAG, f32, dy_tensor_uid=1, x_tensor_uid=2,
                  mean_tensor_uid=3, inv_variance_tensor_uid=4, scale_tensor_uid=5,
                  dx_tensor_uid=6, dscale_tensor_uid=7, dbias_tensor_uid=8),
        node_desc("bwd2", BATCHNORM_BACKWARD_TAG, f32, dy_tensor_uid=1, x_tensor_uid=2,
                  scale_tensor_uid=5, dx_tensor_uid=9, dscale_tensor_uid=10,
                  dbias_tensor_uid=11),
    ]  # fmt: skip
    return graph_desc("batchnorm_backward_pair", tensors, nodes)


def block_scale_mx() -> Desc:
    """MX block scaling as hipDNN writes it: two quantize nodes (one with every member set, one
    with the default axis and transpose) and a dequantize of each (every field of both tables;
    block_size one entry and two)."""
    f32, e4m3, e8m0 = DT["FLOAT"], DT["FP8_E4M3"], DT["FP8_E8M0"]
    x = [4, 64]
    tensors = [
        tensor_desc(1, "x", f32, x),
        tensor_desc(2, "xq", e4m3, x),
        tensor_desc(3, "xs", e8m0, [4, 2]),
        tensor_desc(4, "xq_t", e4m3, x, [1, 4]),
        tensor_desc(5, "xs_t", e8m0, [4, 4], [1, 4]),
        tensor_desc(6, "y", f32, x),
        tensor_desc(7, "y_t", f32, x),
    ]
    nodes = [
        node_desc("q", BLOCK_SCALE_QUANTIZE_TAG, f32, x_tensor_uid=1, y_tensor_uid=2,
                  scale_tensor_uid=3, block_size=32, axis=1),
        node_desc("q_t", BLOCK_SCALE_QUANTIZE_TAG, f32, x_tensor_uid=1, y_tensor_uid=4,
                  scale_tensor_uid=5, block_size=16, transpose=True),
        node_desc("dq", BLOCK_SCALE_DEQUANTIZE_TAG, f32, x_tensor_uid=2, scale_tensor_uid=3,
                  y_tensor_uid=6, block_size=[1, 32]),
        node_desc("dq_t", BLOCK_SCALE_DEQUANTIZE_TAG, f32, x_tensor_uid=4, scale_tensor_uid=5,
                  y_tensor_uid=7, block_size=[16], is_negative_scale=True),
    ]  # fmt: skip
    return graph_desc("block_scale_mx", tensors, nodes)


def layernorm_backward_pair() -> Desc:
    """A layer-norm backward with the saved statistics and an epsilon, and one with neither (a
    reduced-rank scale; every field of the table, set and absent)."""
    f32, half = DT["FLOAT"], DT["HALF"]
    eps = value_fields("Float32Value", 1e-5)
    x, s, st = [2, 6, 4], [1, 6, 4], [2, 1, 1]
    tensors = [
        tensor_desc(1, "dY", half, x),
        tensor_desc(2, "X", half, x),
        tensor_desc(3, "gamma", f32, s),
        tensor_desc(4, "saved_mean", f32, st),
        tensor_desc(5, "saved_inv_std", f32, st),
        tensor_desc(6, "eps", f32, [1], [1], **eps),
        tensor_desc(7, "dX", half, x),
        tensor_desc(8, "dgamma", f32, s),
        tensor_desc(9, "dbeta", f32, s),
        tensor_desc(10, "gamma2", f32, [6, 4]),
        tensor_desc(11, "dX2", half, x),
        tensor_desc(12, "dgamma2", f32, [6, 4]),
        tensor_desc(13, "dbeta2", f32, [6, 4]),
    ]
    nodes = [
        node_desc("lnb1", LAYERNORM_BACKWARD_TAG, f32, dy_tensor_uid=1, x_tensor_uid=2,
                  scale_tensor_uid=3, mean_tensor_uid=4, inv_variance_tensor_uid=5,
                  epsilon_tensor_uid=6, dx_tensor_uid=7, dscale_tensor_uid=8,
                  dbias_tensor_uid=9, normalized_dim_count=2),
        node_desc("lnb2", LAYERNORM_BACKWARD_TAG, f32, dy_tensor_uid=1, x_tensor_uid=2,
                  scale_tensor_uid=10, dx_tensor_uid=11, dscale_tensor_uid=12,
                  dbias_tensor_uid=13, normalized_dim_count=2),
    ]  # fmt: skip
    return graph_desc("layernorm_backward_pair", tensors, nodes, io_data_type=half)


def rmsnorm_backward_pair() -> Desc:
    """An RMSNorm backward computing dbias and one without it (every field, set and absent)."""
    f32, bf16 = DT["FLOAT"], DT["BFLOAT16"]
    x, s = [4, 16, 64], [1, 1, 64]
    tensors = [
        tensor_desc(1, "dY", bf16, x),
        tensor_desc(2, "X", bf16, x),
        tensor_desc(3, "gamma", f32, s),
        tensor_desc(4, "inv_rms", f32, [4, 16, 1]),
        tensor_desc(5, "dX", bf16, x),
        tensor_desc(6, "dgamma", f32, s),
        tensor_desc(7, "dbeta", f32, s),
        tensor_desc(8, "dX2", bf16, x),
        tensor_desc(9, "dgamma2", f32, s),
    ]
    nodes = [
        node_desc("rmsb1", RMSNORM_BACKWARD_TAG, f32, dy_tensor_uid=1, x_tensor_uid=2,
                  scale_tensor_uid=3, inv_rms_tensor_uid=4, dx_tensor_uid=5,
                  dscale_tensor_uid=6, dbias_tensor_uid=7),
        node_desc("rmsb2", RMSNORM_BACKWARD_TAG, f32, dy_tensor_uid=1, x_tensor_uid=2,
                  scale_tensor_uid=3, inv_rms_tensor_uid=4, dx_tensor_uid=8,
                  dscale_tensor_uid=9),
    ]  # fmt: skip
    return graph_desc("rmsnorm_backward_pair", tensors, nodes, io_data_type=bf16)


def moe_routing_modes() -> Desc:
    """MoE grouped matmuls in each routing mode (NONE; GATHER with its token index; SCATTER with
    both routing tensors and top_k 2, from two batches of offsets) and the weight gradient of
    the first: every field of both tables, the absent routing uids absent."""
    f32, i32 = DT["FLOAT"], DT["INT32"]
    tensors = [
        tensor_desc(1, "token", f32, [1, 8, 16]),
        tensor_desc(2, "weight", f32, [2, 16, 32], [512, 1, 16]),
        tensor_desc(3, "offsets", i32, [2, 1, 1], [1, 1, 1]),
        tensor_desc(4, "none::OUTPUT", f32, [1, 8, 32]),
        tensor_desc(5, "token_index", i32, [1, 6, 1]),
        tensor_desc(6, "gather::OUTPUT", f32, [1, 6, 32]),
        tensor_desc(7, "batched_offsets", i32, [4, 1, 1], [1, 1, 1]),
        tensor_desc(8, "scatter_index", i32, [1, 8, 1]),
        tensor_desc(9, "token_ks", i32, [1, 8, 1]),
        tensor_desc(10, "scatter::OUTPUT", f32, [1, 8, 32]),
        tensor_desc(11, "dweight", f32, [2, 16, 32], [512, 1, 16]),
    ]
    nodes = [
        node_desc("none", MOE_TAG, f32, token_tensor_uid=1, weight_tensor_uid=2,
                  first_token_offset_tensor_uid=3, output_tensor_uid=4),
        node_desc("gather", MOE_TAG, f32, token_tensor_uid=1, weight_tensor_uid=2,
                  first_token_offset_tensor_uid=3, token_index_tensor_uid=5,
                  output_tensor_uid=6, mode=1),
        node_desc("scatter", MOE_TAG, f32, token_tensor_uid=1, weight_tensor_uid=2,
                  first_token_offset_tensor_uid=7, token_index_tensor_uid=8,
                  token_ks_tensor_uid=9, output_tensor_uid=10, mode=2, top_k=2),
        node_desc("dweight", MOE_BWD_TAG, f32, doutput_tensor_uid=4, token_tensor_uid=1,
                  first_token_offset_tensor_uid=3, dweight_tensor_uid=11),
    ]  # fmt: skip
    return graph_desc("moe_routing_modes", tensors, nodes)


def custom_ops() -> Desc:
    """Two custom ops (every field of the table but the test generator's marker): a
    two-in/two-out op with a payload whose first output feeds one with no payload and no
    inputs' order reversed."""
    f32, half = DT["FLOAT"], DT["HALF"]
    tensors = [
        tensor_desc(1, "a", f32, [4, 8]),
        tensor_desc(2, "b", f32, [4, 8]),
        tensor_desc(3, "split::OUT_0", f32, [4, 4], virtual=True),
        tensor_desc(4, "split::OUT_1", half, [4, 4]),
        tensor_desc(5, "y", half, [4, 4]),
    ]
    nodes = [
        node_desc("split", CUSTOM_OP_TAG, f32, custom_op_id="example.split",
                  input_tensor_uids=[2, 1], output_tensor_uids=[3, 4],
                  data=[0xCA, 0xFE, 0, 7]),
        node_desc("act", CUSTOM_OP_TAG, f32, custom_op_id="mylib.fused_add",
                  input_tensor_uids=[3], output_tensor_uids=[5]),
    ]  # fmt: skip
    return graph_desc("custom_ops", tensors, nodes, io_data_type=half)


def _with_custom_op(**attrs: object) -> Callable[[], Desc]:
    def build() -> Desc:
        desc = custom_ops()
        desc["nodes"][0]["attributes"].update(attrs)
        return desc

    return build


def _with_matmul(**attrs: object) -> Callable[[], Desc]:
    def build() -> Desc:
        desc = matmul_batched()
        desc["nodes"][0]["attributes"].update(attrs)
        return desc

    return build


MODELLED: dict[str, Callable[[], Desc]] = {
    "b8_1": lambda: b8_desc(1),
    "b8_2": lambda: b8_desc(2),
    "forward_every_field": forward_every_field,
    "backward_every_field": backward_every_field,
    "graph_extras": graph_extras,
    "big_numbers": big_numbers,
    "two_forward_nodes": two_forward_nodes,
    "float_formats": float_formats,
    "pointwise_every_field": pointwise_every_field,
    "pointwise_max_min_chain": pointwise_max_min_chain,
    "matmul_batched": matmul_batched,
    "reduction_chain": reduction_chain,
    "conv_fprop_block": conv_fprop_block,
    "conv_training_step": conv_training_step,
    "resample_pool_pair": resample_pool_pair,
    "resample_training_step": resample_training_step,
    "rmsnorm_pair": rmsnorm_pair,
    "layernorm_pair": layernorm_pair,
    "batchnorm_pair": batchnorm_pair,
    "batchnorm_backward_pair": batchnorm_backward_pair,
    "block_scale_mx": block_scale_mx,
    "batchnorm_inference_pair": batchnorm_inference_pair,
    "batchnorm_inference_variance": batchnorm_inference_variance,
    "layernorm_backward_pair": layernorm_backward_pair,
    "rmsnorm_backward_pair": rmsnorm_backward_pair,
    "moe_routing_modes": moe_routing_modes,
    "custom_ops": custom_ops,
    **{f"io_{name.lower()}": io_type(name) for name in HIPDNN_DATA_TYPES if name != "UNSET"},
    **{f"scale_{name.lower()}": scale_value(name) for name in SCALE_VALUES},
}


def _with_fwd(**attrs: object) -> Callable[[], Desc]:
    def build() -> Desc:
        desc = forward_every_field()
        desc["nodes"][0]["attributes"].update(attrs)
        return desc

    return build


def _with_tensor(index: int, **fields: object) -> Callable[[], Desc]:
    def build() -> Desc:
        desc = forward_every_field()
        desc["tensors"][index].update(fields)
        return desc

    return build


#: a packed (ragged) Q: its offsets tensor by uid, with and without an offset multiplier
MODELLED["ragged_offset_tensor_uid"] = _with_tensor(0, ragged_offset_tensor_uid=8)
MODELLED["ragged_offsets_with_multiplier"] = _with_tensor(
    0, ragged_offset_tensor_uid=8, ragged_offset_multiplier=32
)

#: A12: content the project may keep or refuse (UNSUPPORTED_GRAPH_FORMAT), but never drop.
UNMODELLED: dict[str, Callable[[], Desc]] = {
    "mismatched_value_member": _with_tensor(6, **value_fields("Float64Value", 0.125)),
    "page_table_k": _with_fwd(page_table_k_tensor_uid=9),
    "descale_q": _with_fwd(descale_q_tensor_uid=7),
    "max_tensor": _with_fwd(max_tensor_uid=5, stats_tensor_uid=None),
    "max_seq_len_kv": _with_fwd(max_seq_len_kv=8),
    "mma_core_mode": _with_fwd(mma_core_mode=DT["FP8_E4M3"]),
    "implementation": _with_fwd(implementation=2),
    "umd_flops": _with_fwd(umd_flops='{"*":[{"var":"q.0"},2]}', umd_bytes="64"),
    "matmul_umd_bytes": _with_matmul(umd_bytes="128"),
    "custom_op_marker": _with_custom_op(test_generation_marker=3),
}
