"""The Graph builder methods are one recipe (``BuilderHost._add_family``) read from each family's
``NodeSpec`` and its ``FamilyRecipe``: the recipes name only their spec's slots, every family
with named slots has one, each method refuses bad inputs with its own message before anything
is made, and the differences between families (outputs made on a condition, cleared or kept,
given outputs, spellings, fixed members) hold."""

from __future__ import annotations

from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.descriptors.node_spec import node_specs
from hipdnn_graph.graph.builders import block_scale, families, norm, resample, sdpa
from hipdnn_graph.graph.builders.base import FamilyRecipe

F32 = hg.DataType.FLOAT


def _recipes() -> list[FamilyRecipe[Any]]:
    modules = (block_scale, families, norm, resample, sdpa)
    return [v for m in modules for v in vars(m).values() if isinstance(v, FamilyRecipe)]


def _graph() -> hg.Graph:
    return hg.Graph(io_data_type=F32, compute_data_type=F32, intermediate_data_type=F32)


@pytest.mark.parametrize("recipe", _recipes(), ids=lambda r: r.op)
def test_a_recipe_names_only_its_specs_slots(recipe: FamilyRecipe[Any]) -> None:
    spec = recipe.spec
    inputs = {s.name for s in spec.inputs}
    outputs = {s.name for s in spec.outputs}
    assert set(recipe.inputs) <= inputs and len(set(recipe.inputs)) == len(recipe.inputs)
    assert set(recipe.optional) <= set(recipe.inputs)
    assert set(recipe.named) <= inputs | outputs
    for member in (recipe.made_when, recipe.returns, recipe.spelled, recipe.output_types):
        assert set(member) <= outputs
    assert callable(getattr(hg.Graph, recipe.op))


def test_every_family_with_named_slots_has_a_builder_recipe() -> None:
    with_slots = {s.label for s in node_specs().values() if s.slots}
    assert {r.spec.label for r in _recipes()} == with_slots
    assert len(with_slots) == len(node_specs()) - 1  # the custom op's tensors are lists


REFUSALS = [
    ("rmsnorm", "rmsnorm() takes tensors x and scale, then RMSNormAttributes"),
    ("layernorm", "layernorm() takes tensors x, scale and bias, then LayernormAttributes"),
    ("batchnorm", "batchnorm() takes tensors x, scale and bias, then BatchnormAttributes"),
    ("batchnorm_inference", "batchnorm_inference() takes tensors x, mean, inv_variance, scale "
     "and bias, then BatchnormInferenceAttributes"),
    ("batchnorm_inference_variance_ext", "batchnorm_inference_variance_ext() takes tensors x, "
     "mean, variance, scale, bias and epsilon (a tensor or a number), then "
     "BatchnormInferenceAttributesVarianceExt"),
    ("batchnorm_backward",
     "batchnorm_backward() takes tensors dy, x and scale, then BatchnormBackwardAttributes"),
    ("layernorm_backward",
     "layernorm_backward() takes tensors dy, x and scale, then LayernormBackwardAttributes"),
    ("rmsnorm_backward", "rmsnorm_backward() takes tensors dy, x, scale and inv_rms, then "
     "RMSNormBackwardAttributes"),
    ("matmul", "matmul() takes tensors A and B, then MatmulAttributes"),
    ("conv_fprop", "conv_fprop() takes tensors X and W, then ConvFpropAttributes"),
    ("conv_dgrad", "conv_dgrad() takes tensors DY and W, then ConvDgradAttributes"),
    ("conv_wgrad", "conv_wgrad() takes tensors DY and X, then ConvWgradAttributes"),
    ("block_scale_quantize",
     "block_scale_quantize() takes tensor x, then BlockScaleQuantizeAttributes"),
    ("block_scale_dequantize",
     "block_scale_dequantize() takes tensors x and scale, then BlockScaleDequantizeAttributes"),
    ("resample", "resample() takes tensor x, then ResampleFwdAttributes"),
    ("resample_fwd", "resample_fwd() takes tensor x, then ResampleFwdAttributes"),
    ("resample_bwd", "resample_bwd() takes tensor dy, then ResampleBwdAttributes, then an "
     "optional tensor index"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "message"), REFUSALS, ids=[op for op, _ in REFUSALS])
def test_a_builder_refuses_an_input_with_its_message_before_making_anything(
    op: str, message: str
) -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    with pytest.raises(hg.HipdnnError) as err:
        getattr(g, op)(1, x, name="n", no_such_keyword=1)  # the input check comes first
    assert err.value.code is hg.ErrorCode.INVALID_VALUE
    assert str(err.value).endswith(message)
    assert [t.name for t in g.tensors] == ["x"] and g.nodes == []


def test_moe_refuses_each_input_that_is_neither_a_tensor_nor_none() -> None:
    g = _graph()
    with pytest.raises(hg.HipdnnError, match=r"takes a tensor or None for WEIGHT, got int$"):
        g.moe_grouped_matmul(None, 1, None, None, None)
    with pytest.raises(hg.HipdnnError, match=r"takes a tensor or None for DOUTPUT, got str$"):
        g.moe_grouped_matmul_bwd("dy")


def test_a_refused_epsilon_leaves_no_output_in_the_graph() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    m, v, s, b = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in "mvsb")
    with pytest.raises(hg.HipdnnError, match="Slot EPSILON expects a TensorAttributes, got str"):
        g.batchnorm_inference_variance_ext(x, m, v, s, b, "eps")
    assert [t.name for t in g.tensors] == ["x", "m", "v", "s", "b"]
    y = g.batchnorm_inference_variance_ext(x, m, v, s, b, 1e-5)
    assert y.get_name() == "BatchnormInferenceVarianceExt_0::Y"
    assert g.nodes[0].attributes.get_epsilon().get_value() == pytest.approx(1e-5)


def test_an_output_not_made_is_kept_or_cleared_as_the_family_does() -> None:
    g = _graph()
    x, scale = g.tensor(dim=[2, 8, 16]), g.tensor(dim=[1, 1, 16])
    mine = hg.TensorAttributes(name="mine")
    given = hg.RMSNormAttributes().set_forward_phase(hg.NormFwdPhase.INFERENCE)
    _, inv_rms = g.rmsnorm(x, scale, given.set_inv_rms(mine), epsilon=1e-5)
    assert inv_rms is None and g.nodes[0].attributes.get_inv_rms() is mine
    assert given.get_y() is None  # the caller's attributes stay as they were

    bn = hg.BatchnormAttributes().set_next_running_mean(mine)
    c = g.tensor(dim=[1, 3, 1, 1])
    outs = g.batchnorm(g.tensor(dim=[2, 3, 4, 4]), c, c, bn, epsilon=1e-5)
    assert outs[3] is None and g.nodes[1].attributes.get_next_running_mean() is None


def test_outputs_made_on_a_condition_and_in_the_specs_order() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[2, 6, 4])
    s, b = g.tensor(name="s", dim=[1, 6, 4]), g.tensor(name="b", dim=[1, 6, 4])
    outs = g.layernorm(x, s, b, forward_phase=hg.NormFwdPhase.TRAINING, epsilon=1e-5)
    names = ["Layernorm_0::Y", "Layernorm_0::MEAN", "Layernorm_0::INV_VARIANCE"]
    assert [t.get_name() if t is not None else None for t in outs] == names
    assert g.nodes[0].attributes.get_epsilon().get_name() == "Layernorm_0::EPSILON"
    _, mean, inv_var = g.layernorm(x, s, b, forward_phase=hg.NormFwdPhase.INFERENCE, epsilon=1.0)
    assert mean is None and inv_var is None


def test_positional_slots_the_caller_left_out_keep_their_names() -> None:
    g = _graph()
    held = hg.TensorAttributes(dim=[2, 8])
    given = hg.PointwiseAttributes().set_mode(hg.PointwiseMode.ADD).set_input_1(held)
    out = g.pointwise(g.tensor(dim=[2, 8]), given)
    assert held.get_name() == "" and g.nodes[0].attributes.get_input_0().get_name() == (
        "Pointwise_0::IN_0"
    )
    assert out.get_name() == "Pointwise_0::OUT_0"


def test_a_given_output_is_used_and_renamed_when_unnamed() -> None:
    g = _graph()
    x, y = g.tensor(dim=[2, 8]), hg.TensorAttributes(dim=[2, 1])
    assert g.reduction(x, y, mode=hg.ReductionMode.ADD) is y
    assert (x.get_name(), y.get_name()) == ("Reduction_0::X", "Reduction_0::Y")
    assert g.reduction(x, mode=hg.ReductionMode.ADD).get_name() == "Reduction_1::Y"
    assert len(g.tensors) == 3  # x, the given y and the second node's new Y


def test_resample_spells_and_types_its_index_and_resample_fwd_returns_only_y() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
    members: dict[str, Any] = {
        "resample_mode": hg.ResampleMode.MAXPOOL, "padding_mode": hg.PaddingMode.NEG_INF_PAD,
        "pre_padding": [0, 0], "post_padding": [0, 0], "stride": [2, 2], "window": [2, 2],
        "generate_index": True,
    }  # fmt: skip
    _, index = g.resample(x, **members)
    assert index is not None and index.get_name() == "ResampleFwd_0::Index"
    assert index.get_data_type() is hg.DataType.INT32
    only = g.resample_fwd(x, **members)
    assert isinstance(only, hg.TensorAttributes) and only.get_name() == "ResampleFwd_1::Y"
    assert g.nodes[1].attributes.generate_index is False
    dx = g.resample_bwd(g.tensor(dim=[1, 3, 2, 2]), None, index, **{
        k: v for k, v in members.items() if k != "generate_index"})  # fmt: skip
    assert dx.get_name() == "ResampleBwd_2::DX" and g.nodes[2].attributes.get_index() is index


def test_sdpa_backward_keeps_a_keyword_dbias_and_returns_three() -> None:
    g = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=F32,
                 intermediate_data_type=F32)  # fmt: skip
    q = g.tensor(dim=[1, 2, 16, 64])
    k, v, o, d_o = (g.tensor_like(q) for _ in range(4))
    stats = g.tensor(name="stats", dim=[1, 2, 16, 1], data_type=F32)
    dbias = hg.TensorAttributes(name="dbias")
    outs = g.sdpa_backward(q, k, v, o, d_o, stats, dBias=dbias)
    assert [t.get_name() for t in outs] == ["SdpaBwd_0::dQ", "SdpaBwd_0::dK", "SdpaBwd_0::dV"]
    assert (q.get_name(), d_o.get_name(), o.get_name()) == ("SdpaBwd_0::Q", "SdpaBwd_0::dO", "")
    assert g.nodes[0].attributes.outputs[hg.SdpaBackwardAttributes.OutputNames.dBias] is dbias
