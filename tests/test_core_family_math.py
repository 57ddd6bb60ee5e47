"""The facts both built-in plugins share, in the core (hipdnn_graph.nodes.moe_math,
block_scale_math, custom_op): one definition, used by each plugin, with the messages the
plugins' own tests assert."""

from __future__ import annotations

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes import block_scale_math, custom_op, moe_math
from hipdnn_graph_numpy_reference.families import block_scale as ref_block_scale
from hipdnn_graph_numpy_reference.families import custom_op as ref_custom_op
from hipdnn_graph_numpy_reference.families import moe_grouped_matmul as ref_moe

F = hg.DataType.FLOAT


@pytest.mark.parametrize(
    ("module", "core", "names"),
    [
        (ref_moe, moe_math, ["check_offsets", "moe_routes", "moe_grouped_matmul_refusal",
                             "moe_grouped_matmul_bwd_refusal"]),
        (ref_block_scale, block_scale_math, ["block_scale_quantize_refusal",
                                             "block_scale_dequantize_refusal",
                                             "QUANTIZE_Y_TYPES", "QUANTIZE_SCALE_TYPES"]),
        (ref_custom_op, custom_op, ["custom_op_refusal"]),
    ],
)  # fmt: skip
def test_the_reference_re_exports_the_cores_definitions(
    module: object, core: object, names: list[str]
) -> None:
    for name in names:
        assert getattr(module, name) is getattr(core, name), name


def test_a_node_not_validated_gets_a_reason_not_a_crash() -> None:
    quantize = hg.BlockScaleQuantizeNode(hg.BlockScaleQuantizeAttributes().set_name("q"))
    dequantize = hg.BlockScaleDequantizeNode(hg.BlockScaleDequantizeAttributes().set_name("d"))
    assert block_scale_math.block_scale_quantize_refusal(quantize) == (
        "node 'q': no X or Y or SCALE tensor"
    )
    assert block_scale_math.block_scale_dequantize_refusal(dequantize) == (
        "node 'd': no X or SCALE tensor"
    )


def _moe(mode: hg.MoeGroupedMatmulMode, top_k: int = 1) -> hg.MoeGroupedMatmulNode:
    g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    i32 = hg.DataType.INT32
    index = g.tensor(name="i", dim=[3, 1, 1], data_type=i32)
    ks = g.tensor(name="k", dim=[3, 1, 1], data_type=i32)
    g.moe_grouped_matmul(
        g.tensor(name="t", dim=[1, 3, 2]),
        g.tensor(name="w", dim=[2, 2, 1]),
        g.tensor(name="o", dim=[2, 1, 1], data_type=i32),
        index if mode != hg.MoeGroupedMatmulMode.NONE else None,
        ks if mode == hg.MoeGroupedMatmulMode.SCATTER else None,
        mode=mode,
        top_k=top_k,
    )
    node = g.nodes[0]
    assert isinstance(node, hg.MoeGroupedMatmulNode)
    return node


def test_scatter_routes_are_checked_in_the_core() -> None:
    node = _moe(hg.MoeGroupedMatmulMode.SCATTER, top_k=2)
    inputs = {
        "FIRST_TOKEN_OFFSET": np.array([0, 2]),
        "TOKEN_INDEX": np.array([0, 1, 0]),
        "TOKEN_KS": np.array([0, 1, 0]),
    }
    with pytest.raises(hg.HipdnnError) as err:
        moe_math.moe_routes(node, inputs, tokens=3, experts=2, out_rows=6)
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == "node 'MoeGroupedMatmul_0': duplicate SCATTER destination row 0"
    inputs["TOKEN_KS"] = np.array([0, 1, 1])
    src, dst, expert = moe_math.moe_routes(node, inputs, tokens=3, experts=2, out_rows=6)
    assert (src.tolist(), dst.tolist(), expert.tolist()) == ([0, 1, 2], [0, 3, 1], [0, 0, 1])


def test_routing_ints_refuses_fractions() -> None:
    node = _moe(hg.MoeGroupedMatmulMode.NONE)
    with pytest.raises(hg.HipdnnError) as err:
        moe_math.routing_ints(node, {"TOKEN_INDEX": np.array([0.5])}, "TOKEN_INDEX")
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert "TOKEN_INDEX holds values that are not integers" in err.value.message
