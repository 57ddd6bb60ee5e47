"""Spec §1: enum integer values (hipDNN's) and the two error types."""

from __future__ import annotations

import pickle

import pytest

import hipdnn_graph as hg
from hipdnn_graph import (
    BuildPlanPolicy,
    DataType,
    DiagonalAlignment,
    ErrorCode,
    HeuristicMode,
    HipdnnError,
    NodeType,
    NotSupportedError,
)

ERROR_CODES = [
    "OK",
    "INVALID_VALUE",
    "HIPDNN_BACKEND_ERROR",
    "ATTRIBUTE_NOT_SET",
    "GRAPH_NOT_SUPPORTED",
    "SHAPE_DEDUCTION_FAILED",
    "INVALID_TENSOR_NAME",
    "INVALID_VARIANT_PACK",
    "GRAPH_EXECUTION_PLAN_CREATION_FAILED",
    "GRAPH_EXECUTION_FAILED",
    "HEURISTIC_QUERY_FAILED",
    "UNSUPPORTED_GRAPH_FORMAT",
    "CUDA_API_FAILED",
    "CUDNN_BACKEND_API_FAILED",
    "INVALID_CUDA_DEVICE",
    "HANDLE_ERROR",
    "NVRTC_COMPILATION_FAILED",
]

DATA_TYPES = {
    "NOT_SET": 0,
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
    "INT4": 12,
    "FP6_E2M3": 13,
    "FP6_E3M2": 14,
    "INT64": 15,
    "BOOLEAN": 16,
    "FP8_E4M3_FNUZ": 17,
    "FP8_E5M2_FNUZ": 18,
    "INT8x4": 19,
    "UINT8x4": 20,
    "INT8x32": 21,
    "FAST_FLOAT_FOR_FP8": 22,
    "COMPLEX_FP32": 23,
    "COMPLEX_FP64": 24,
}

NODE_TYPES = {
    "UNKNOWN": 0,
    "CONVOLUTION_FPROP": 1,
    "CONVOLUTION_DGRAD": 2,
    "CONVOLUTION_WGRAD": 3,
    "BATCHNORM": 4,
    "BATCHNORM_INFERENCE": 5,
    "BATCHNORM_BACKWARD": 6,
    "BATCHNORM_INFERENCE_VARIANCE_EXT": 7,
    "POINTWISE": 8,
    "MATMUL": 9,
    "LAYER_NORM": 10,
    "RMS_NORM": 11,
    "SDPA_FWD": 12,
    "SDPA_BWD": 13,
    "BLOCK_SCALE_QUANTIZE": 14,
    "BLOCK_SCALE_DEQUANTIZE": 15,
    "CUSTOM_OP": 16,
    "REDUCTION": 17,
    "RESAMPLE_FWD": 18,  # hipDNN's NodeType.hpp (newest read: RESAMPLE_FWD = 18)
    # hipDNN's NodeType.hpp numbers the newer families on (tvy-amd/rocm-libraries @ 01b8216b):
    # the two backward norms (19, 20) and the MoE families (21, 22) are mirrored
    "RMS_NORM_BACKWARD": 19,
    "LAYERNORM_BACKWARD": 20,
    "MOE_GROUPED_MATMUL": 21,
    "MOE_GROUPED_MATMUL_BWD": 22,
    "RESAMPLE_BWD": 23,  # not numbered by any header read here: the project's number
}


def _as_dict(enum_cls: type) -> dict[str, int]:
    return {m.name: int(m.value) for m in enum_cls}  # type: ignore[attr-defined]


def test_error_code_order_ok_is_zero() -> None:
    assert [m.name for m in sorted(ErrorCode, key=int)] == ERROR_CODES
    assert _as_dict(ErrorCode) == {name: i for i, name in enumerate(ERROR_CODES)}
    assert ErrorCode.OK == 0


def test_data_type_values() -> None:
    assert _as_dict(DataType) == DATA_TYPES


def test_node_type_values() -> None:
    assert _as_dict(NodeType) == NODE_TYPES


def test_heuristic_mode_order() -> None:
    assert [m.name for m in sorted(HeuristicMode, key=int)] == ["FALLBACK", "A", "B", "OPENSOURCE"]
    assert _as_dict(HeuristicMode) == {"FALLBACK": 0, "A": 1, "B": 2, "OPENSOURCE": 3}


def test_build_plan_policy_order() -> None:
    assert _as_dict(BuildPlanPolicy) == {"HEURISTICS_CHOICE": 0, "ALL": 1}


def test_diagonal_alignment_values() -> None:
    assert _as_dict(DiagonalAlignment) == {"TOP_LEFT": 0, "BOTTOM_RIGHT": 1}


@pytest.mark.parametrize(
    "enum_cls", [ErrorCode, DataType, NodeType, HeuristicMode, BuildPlanPolicy, DiagonalAlignment]
)
def test_enums_are_int_compatible_and_exported(enum_cls: type) -> None:
    first = next(iter(enum_cls))  # type: ignore[call-overload]
    assert int(first) == first.value
    assert enum_cls(first.value) is first
    assert getattr(hg, enum_cls.__name__) is enum_cls


def test_hipdnn_error_carries_code_and_exact_message() -> None:
    err = HipdnnError(ErrorCode.INVALID_VALUE, "Tensor Q must have only positive dimensions")
    assert err.code is ErrorCode.INVALID_VALUE
    assert err.message == "Tensor Q must have only positive dimensions"
    assert str(err) == "Tensor Q must have only positive dimensions"
    assert isinstance(err, Exception)


def test_hipdnn_error_accepts_plain_int_code() -> None:
    err = HipdnnError(3, "x")  # type: ignore[arg-type]
    assert err.code is ErrorCode.ATTRIBUTE_NOT_SET


def test_not_supported_error_is_hipdnn_error_with_graph_not_supported() -> None:
    err = NotSupportedError("no engine applies")
    assert isinstance(err, HipdnnError)
    assert err.code is ErrorCode.GRAPH_NOT_SUPPORTED
    assert str(err) == err.message == "no engine applies"
    with pytest.raises(HipdnnError):
        raise err


@pytest.mark.parametrize(
    "err",
    [HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, "missing"), NotSupportedError("nope")],
    ids=["HipdnnError", "NotSupportedError"],
)
def test_errors_pickle_round_trip(err: HipdnnError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert (back.code, back.message) == (err.code, err.message)


# ----- enums print their names (issue 41 item 21) ----------------------------------------------

#: every enum users meet, the core's and hipDNN's Python API's own
_PRINTED_ENUMS = [
    getattr(hg.types, name)
    for name in (
        "ErrorCode", "DataType", "HeuristicMode", "BuildPlanPolicy", "DiagonalAlignment",
        "AttentionImplementation", "NodeType", "PointwiseMode", "ReductionMode",
        "ConvolutionMode", "NormFwdPhase", "ResampleMode", "PaddingMode", "MoeGroupedMatmulMode",
    )
]  # fmt: skip


@pytest.mark.parametrize("enum", _PRINTED_ENUMS, ids=lambda e: e.__name__)
def test_enum_members_print_as_class_dot_name(enum: type[int]) -> None:
    # hipDNN's nanobind enums are enum.Enum subclasses: str() is "DataType.FLOAT", not "1"
    for member in enum:  # type: ignore[attr-defined]
        expected = f"{enum.__name__}.{member.name}"
        assert str(member) == expected
        assert f"{member}" == expected
        assert "%s" % member == expected  # noqa: UP031 (the %-operator is what is tested)
        assert f"{member:>40}" == expected.rjust(40)
        assert repr(member) == f"<{expected}: {member.value}>"
        assert int(member) == member.value  # still an IntEnum: numbers compare and convert
        assert enum(int(member)) is member


def test_frontend_enums_print_as_class_dot_name(capsys: pytest.CaptureFixture[str]) -> None:
    from hipdnn_graph import frontend

    print(hg.DataType.FLOAT, frontend.TimingQuality.UNSTALLED, frontend.BehaviorNote(2))
    assert capsys.readouterr().out == (
        "DataType.FLOAT TimingQuality.UNSTALLED BehaviorNote.SUPPORTS_GRAPH_CAPTURE\n"
    )


def test_enum_in_an_error_message_reads_as_its_name() -> None:
    err = HipdnnError(ErrorCode.INVALID_VALUE, f"bad type {DataType.FP8_E4M3}")
    assert str(err) == "bad type DataType.FP8_E4M3"
    assert DataType.FLOAT + 1 == 2 and int(DataType.HALF) == 2


def test_silu_is_swish_fwd_and_documented_not_aliased() -> None:
    # neither hipDNN's nor cuDNN's PointwiseMode has SILU; SiLU is SWISH_FWD with swish_beta 1
    assert not hasattr(hg.PointwiseMode, "SILU_FWD")
    assert "SiLU" in (hg.PointwiseMode.__doc__ or "")
