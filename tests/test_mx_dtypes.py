"""The MX element and scale types (FP8_E8M0, FP4_E2M1, FP6_E2M3, FP6_E3M2) have their ml_dtypes
NumPy dtype; torch has an element-for-element dtype only for FP8_E8M0."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend.dtypes import numpy_dtype, torch_dtype
from hipdnn_graph.dtype_names import data_type_of

MX_TYPES = [
    (hg.DataType.FP8_E8M0, ml_dtypes.float8_e8m0fnu),
    (hg.DataType.FP4_E2M1, ml_dtypes.float4_e2m1fn),
    (hg.DataType.FP6_E2M3, ml_dtypes.float6_e2m3fn),
    (hg.DataType.FP6_E3M2, ml_dtypes.float6_e3m2fn),
]


@pytest.mark.parametrize(("data_type", "scalar_type"), MX_TYPES)
def test_numpy_dtype_both_ways(data_type: hg.DataType, scalar_type: Any) -> None:
    assert numpy_dtype(data_type) == np.dtype(scalar_type)
    assert data_type_of(np.dtype(scalar_type)) is data_type
    assert hg.TensorAttributes().set_data_type(scalar_type).get_data_type() is data_type


def test_torch_e8m0_both_ways() -> None:
    torch = pytest.importorskip("torch")
    assert torch_dtype(hg.DataType.FP8_E8M0) is torch.float8_e8m0fnu
    assert data_type_of(torch.float8_e8m0fnu) is hg.DataType.FP8_E8M0


@pytest.mark.parametrize(
    "data_type", [hg.DataType.FP4_E2M1, hg.DataType.FP6_E2M3, hg.DataType.FP6_E3M2]
)
def test_torch_refuses_the_sub_byte_types(data_type: hg.DataType) -> None:
    pytest.importorskip("torch")
    with pytest.raises(hg.HipdnnError, match="has no torch equivalent") as info:
        torch_dtype(data_type)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


def test_torch_packed_fp4_is_not_fp4() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(KeyError, match="float4_e2m1fn_x2"):
        data_type_of(torch.float4_e2m1fn_x2)
