"""Issue 11 items 5 and 8: what validate() checks after hipDNN's rules (shapes the engines rely
on, tensors shared between slots, pass-by-value usage, virtual graph inputs), each with a clear
INVALID_VALUE; hipDNN's first failing rule still comes first."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from sdpa_graph_cases import SHAPE, B, H, S, backward, forward, forward_backward, redim

import hipdnn_graph as hg

INVALID = hg.ErrorCode.INVALID_VALUE
P = "SdpaBwdNode: "


def _error(g: hg.Graph) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert not g.is_validated
    return info.value


def _expect(g: hg.Graph, message: str) -> None:
    err = _error(g)
    assert (err.code, err.message) == (INVALID, message)


def _bwd(g: hg.Graph) -> hg.SdpaBackwardAttributes:
    a = g.nodes[-1].attributes
    assert isinstance(a, hg.SdpaBackwardAttributes)
    return a


# ----- item 5: Stats, O and dO shapes ------------------------------------------------------------


def test_stats_with_heads_and_sequence_swapped_is_refused() -> None:
    """The issue's case: Stats declared [1, 8, 2, 1] for [1, 2, 8, 1] validated, dQ was wrong."""
    g = backward()
    redim(_bwd(g).get_stats(), [B, S, H, 1])
    _expect(g, f"{P}Stats dims [{B}, {S}, {H}, 1] must match [B, H, Sq, 1] dims [{B}, {H}, {S}, 1]")


@pytest.mark.parametrize("dims", [[B, H, S, 2], [1, H, S, 1], [B, S, H], [H, S]], ids=str)
def test_stats_shape_must_be_b_h_sq_1(dims: list[int]) -> None:
    g = backward()
    redim(_bwd(g).get_stats(), dims)
    _expect(g, f"{P}Stats dims {dims} must match [B, H, Sq, 1] dims [{B}, {H}, {S}, 1]")


def test_stats_of_rank_3_is_the_same_logsumexp() -> None:
    """hipDNN's SdpaBwdNode checks no Stats shape and its sample_sdpa_backward.json declares
    Stats [B, H, Sq]: that validates, and the NumPy reference reads it as [B, H, Sq, 1]."""
    results = []
    for dims in ([B, H, S, 1], [B, H, S]):
        g = backward()
        redim(_bwd(g).get_stats(), dims)
        g.validate()
        g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
        g.build()
        pack = hg.testing.make_inputs(g, np.random.default_rng(0))
        g.execute(pack)
        results.append([np.array(pack[t]) for t in hg.testing.graph_outputs(g)])
    for four, three in zip(*results, strict=True):
        assert np.array_equal(four, three)


def test_o_and_do_inconsistent_with_q_and_v_are_refused() -> None:
    g = backward()
    a = _bwd(g)
    for t in (a.get_o(), a.get_do()):  # dO matches O (hipDNN's rule), both disagree with Q/V
        redim(t, [B, H, S, 4])
    _expect(g, f"{P}O dims [{B}, {H}, {S}, 4] must match [B, H, Sq, Dv] dims {SHAPE}")


def test_hipdnn_rule_is_reported_before_the_stats_check() -> None:
    g = backward()
    a = _bwd(g)
    redim(a.get_stats(), [B, S, H, 1])
    redim(a.get_k(), [B, H, S, 4])
    _expect(g, f"{P}head_dim mismatch between Q and K: 8 vs 4")


def test_forward_stats_feeding_the_backward_passes() -> None:
    g = forward_backward()
    g.validate()
    assert _bwd(g).get_stats().get_dim() == [B, H, S, 1]


# ----- item 5: one tensor in two slots -----------------------------------------------------------


def test_one_tensor_as_dk_and_dv_is_refused() -> None:
    g = backward()
    a = _bwd(g)
    a.set_dv(a.get_dk())
    _expect(
        g,
        "Node grad: outputs dK and dV are the same tensor grad::dK; "
        "each output needs a tensor of its own",
    )


def test_an_output_that_is_also_an_input_is_refused_by_the_node() -> None:
    g = backward()
    a = _bwd(g)
    a.set_dq(a.get_q())
    node = hg.SdpaBwdNode(a, g.attributes)
    node.pre_validate_node()
    node.infer_properties_node()
    with pytest.raises(hg.HipdnnError) as info:
        node.post_validate_node()
    assert info.value.message == (
        "Node grad: tensor Q is both input Q and output dQ; an output needs a tensor of its own"
    )


def test_an_output_that_is_also_an_input_is_a_cycle_for_the_graph() -> None:
    g = backward()
    a = _bwd(g)
    a.set_dq(a.get_q())
    _expect(g, "Graph contains a cycle, cannot be sorted.")  # hipDNN's step 2 comes first


# ----- item 5: changes after validate() ----------------------------------------------------------

CHANGES: dict[str, Callable[[hg.Graph], object]] = {
    "tensor set_dim": lambda g: _bwd(g).get_q().set_dim([B, H, S, 4]),
    "tensor set_stride": lambda g: _bwd(g).get_k().set_stride([1, 1, 1, 1]),
    "tensor set_data_type": lambda g: _bwd(g).get_v().set_data_type(hg.DataType.HALF),
    "tensor set_uid": lambda g: _bwd(g).get_o().set_uid(7),
    "tensor set_name": lambda g: _bwd(g).get_o().set_name("renamed"),
    "tensor set_output": lambda g: _bwd(g).get_dq().set_output(False),
    "tensor set_value": lambda g: _bwd(g).get_do().set_value(1.0),
    "tensor set_alignment": lambda g: _bwd(g).get_stats().set_alignment(0),
    "output tensor set_dim": lambda g: _bwd(g).get_dv().set_dim([1, 1, 1, 1]),
    "node set_causal_mask": lambda g: _bwd(g).set_causal_mask(True),
    "node set_attn_scale": lambda g: _bwd(g).set_attn_scale(0.5),
    "node set_dk": lambda g: _bwd(g).set_dk(_bwd(g).get_dq()),
    "node set_name": lambda g: _bwd(g).set_name("other"),
    "node unsupported setter": lambda g: _bwd(g).set_rng_dump(True),
    "graph attributes": lambda g: g.attributes.set_compute_data_type(hg.DataType.HALF),
    "graph setter": lambda g: g.set_io_data_type(hg.DataType.HALF),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_any_change_after_validate_unmarks_the_graph(change: str) -> None:
    g = backward()
    g.validate()
    assert g.is_validated
    CHANGES[change](g)
    assert not g.is_validated


def test_changes_to_other_objects_keep_the_graph_validated() -> None:
    g = backward()
    g.validate()
    other = backward()
    _bwd(other).get_q().set_dim([1, 1, 1, 1])
    hg.TensorAttributes(name="loose").set_dim([3])
    assert g.is_validated
    g.build_operation_graph()  # uids assigned by lowering are not a change
    assert g.is_validated


def test_build_validates_again_after_a_change() -> None:
    g = backward()
    g.build_operation_graph()
    redim(_bwd(g).get_k(), [B, H, S, 4])
    with pytest.raises(hg.HipdnnError) as info:
        g.build_operation_graph()
    assert info.value.message == f"{P}head_dim mismatch between Q and K: 8 vs 4"


def test_replacing_a_node_attributes_object_unmarks_the_graph() -> None:
    g = backward()
    g.validate()
    node = g.nodes[0]
    node.attributes = node.attributes.copy_for_node()
    assert not g.is_validated


# ----- item 8: what engines found only at execution ----------------------------------------------


def test_a_constant_value_on_a_rank4_input_is_refused() -> None:
    g = backward()
    q = _bwd(g).get_q()
    q.set_value(np.float32(1.0))
    redim(q, SHAPE)
    _expect(
        g,
        f"{P}Q tensor Q holds a constant value; only the scalar slots (Attn_scale, "
        "Dropout_scale, Dropout_scale_inv, Seed, Offset) take pass-by-value tensors",
    )


def test_a_runtime_pass_by_value_input_outside_the_scalar_slots_is_refused() -> None:
    g = backward()
    _bwd(g).get_k().set_is_pass_by_value(True)
    _expect(
        g,
        f"{P}K tensor K is pass-by-value; only the scalar slots (Attn_scale, Dropout_scale, "
        "Dropout_scale_inv, Seed, Offset) take pass-by-value tensors",
    )


def test_an_output_that_holds_a_value_is_refused() -> None:
    g = backward()
    dq = _bwd(g).get_dq()
    dq.set_value(2.0).set_output(True)
    redim(dq, SHAPE)
    _expect(
        g,
        f"{P}dQ tensor grad::dQ holds a constant value; only the scalar slots (Attn_scale, "
        "Dropout_scale, Dropout_scale_inv, Seed, Offset) take pass-by-value tensors",
    )


def test_a_non_scalar_pass_by_value_tensor_is_refused() -> None:
    g = backward()
    a = _bwd(g)
    mask = g.tensor(name="Mask", dim=[B, H, S, S])
    scale = g.tensor(name="DropScale").set_value(1.25)
    inv = g.tensor(name="DropScaleInv").set_value(0.8).set_dim([2]).set_stride([1])
    a.set_dropout(mask, scale, inv)
    _expect(g, f"{P}Dropout_scale_inv must be a scalar (single element), but has 2 elements")


def test_a_virtual_graph_input_is_refused() -> None:
    g = backward()
    _bwd(g).get_do().set_is_virtual(True)
    _expect(
        g,
        "Tensor dO is virtual but no node produces it: a graph input must be a real tensor "
        "(set_is_virtual(False))",
    )


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ([3, H, S, S], f"ATTN_MASK batch dim must equal batch ({B}) or 1, got 3"),
        ([B, 3, S, S], f"ATTN_MASK num_heads dim must equal num_heads ({H}) or 1, got 3"),
        ([3, S, S], f"ATTN_MASK num_heads dim must equal num_heads ({H}) or 1, got 3"),
    ],
    ids=str,
)
def test_a_bias_that_does_not_broadcast_is_refused(dims: list[int], message: str) -> None:
    g = backward()
    _bwd(g).set_bias(g.tensor(name="Bias", dim=dims))
    _expect(g, P + message)


@pytest.mark.parametrize("dims", [[1, 1, S, S], [B, H, S, S], [1, H, 1, S], [S, S], [S]], ids=str)
def test_biases_that_broadcast_pass(dims: list[int]) -> None:
    g = backward()
    _bwd(g).set_bias(g.tensor(name="Bias", dim=dims))
    g.validate()


def test_the_forward_refuses_a_bias_with_the_wrong_batch() -> None:
    g = forward()
    g.nodes[0].attributes.set_bias(g.tensor(name="Bias", dim=[3, 1, S, S]))
    _expect(g, f"SdpaFwdNode: ATTN_MASK batch dim must equal batch ({B}) or 1, got 3")


def test_values_set_behind_the_setters_are_checked_by_validate() -> None:
    """Attributes read from a descriptor are assigned directly; validate() still refuses them."""
    g = backward()
    _bwd(g).attn_scale_value = float("nan")
    _expect(g, f"{P}attn_scale_value must be a finite number that fits in float32, got nan")
    g = forward()
    g.nodes[0].attributes.dropout_probability = 1.0
    _expect(g, "SdpaFwdNode: dropout_probability must be in [0, 1), got 1.0")


def test_a_scale_tensor_holding_a_non_finite_value_is_refused() -> None:
    g = backward()
    _bwd(g).set_attn_scale(g.tensor(name="Scale").set_value(float("inf")))
    _expect(g, f"{P}Attn_scale tensor Scale holds inf, not a finite number that fits in float32")


@pytest.mark.usefixtures("only_numpy")
def test_checked_graphs_now_fail_in_validate_not_in_execute() -> None:
    """Before, this graph validated and built, and execute() failed with GRAPH_EXECUTION_FAILED
    carrying the engine's KeyError."""
    g = backward()
    _bwd(g).get_do().set_is_virtual(True)
    with pytest.raises(hg.HipdnnError) as info:
        g.build()
    assert info.value.code == INVALID
    assert "is virtual but no node produces it" in info.value.message


# ----- the documentation's tables are the code's ---------------------------------------------


def _hook() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "docs" / "hooks" / "hipdnn_docs.py"
    spec = importlib.util.spec_from_file_location("hipdnn_docs_hook_checks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("node", ["SdpaBwdNode", "SdpaFwdNode"])
def test_the_checks_table_lists_every_check_in_order(node: str) -> None:
    table = _hook().rules_table(node, "checks")
    names = [r.__name__ for r in getattr(hg, node).checks]
    rows = [line.split("`")[1] for line in table.splitlines()[2:] if line.startswith("| ") and
            not line.startswith("| |")]  # fmt: skip
    assert rows == names


def test_a_generated_check_message_matches_the_raised_one() -> None:
    table = _hook().rules_table("SdpaBwdNode", "checks")
    template = re.findall(r"`(SdpaBwdNode: Stats dims [^`]*)`", table)[0]
    g = backward()
    redim(_bwd(g).get_stats(), [B, S, H, 1])
    pattern = "".join(
        ".+" if part.startswith("<") else re.escape(part)
        for part in re.split(r"(<[^>]*>)", template)
        if part
    )
    assert re.fullmatch(pattern, _error(g).message)


# ----- issue 23 item 8: scale constants that overflow float32 compute --------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1.7e308, -4e38])
@pytest.mark.parametrize("slot", ["Dropout_scale", "Dropout_scale_inv"])
def test_a_dropout_scale_constant_outside_float32_is_refused(slot: str, value: float) -> None:
    g = backward()
    a = _bwd(g)
    mask = g.tensor(name="Mask", dim=[B, H, S, S], data_type=hg.DataType.FLOAT)
    constants = {
        name: g.tensor(name=name).set_value(np.float64(value if name == slot else 1.25))
        for name in ("Dropout_scale", "Dropout_scale_inv")
    }
    a.set_dropout(mask, constants["Dropout_scale"], constants["Dropout_scale_inv"])
    _expect(g, f"{P}{slot} tensor {slot} holds {value}, not a finite number that fits in float32")


@pytest.mark.parametrize("build", [forward, backward])
def test_an_attn_scale_constant_outside_float32_is_refused(build: Callable[[], hg.Graph]) -> None:
    g = build()
    a = g.nodes[-1].attributes
    a.set_attn_scale(g.tensor(name="Scale").set_value(np.float64(1.7e308)))
    node = "SdpaBwdNode" if build is backward else "SdpaFwdNode"
    _expect(
        g,
        f"{node}: Attn_scale tensor Scale holds 1.7e+308, not a finite number that fits in float32",
    )


def test_float32_scale_constants_at_the_limit_validate() -> None:
    g = backward()
    _bwd(g).set_attn_scale(g.tensor(name="Scale").set_value(np.float64(3.4028234663852886e38)))
    g.validate()


def _dropout_forward(
    scale: hg.TensorAttributes | None,
) -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[1, 2, 8, 4])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    mask = g.tensor(name="Mask", dim=[1, 2, 8, 8])
    if scale is None:
        scale = g.tensor(
            name="S", dim=[1], stride=[1], data_type=hg.DataType.FLOAT, is_pass_by_value=True
        )
    else:
        g.tensor(scale)
    o, _ = g.sdpa(q, k, v, name="fwd", dropout=(mask, scale), generate_stats=False)
    o.set_output(True)
    return g, [q, k, v, mask, scale, o]


@pytest.mark.parametrize("engine", ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"])
def test_a_one_element_dropout_scale_buffer_executes_like_the_number(engine: str) -> None:
    """Before: validate() and build() accepted a [1] Dropout_scale buffer (a scalar slot takes
    one), and the NumPy engine's execute() failed with an internal TypeError."""
    if engine.startswith("TORCH"):
        pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    data = [rng.standard_normal([1, 2, 8, 4]).astype(np.float32) for _ in range(3)]
    keep = (rng.random([1, 2, 8, 8]) > 0.2).astype(np.float32)
    outputs = []
    buffer = hg.TensorAttributes(name="S", dim=[1], stride=[1], data_type=hg.DataType.FLOAT)
    for scale, value in ((None, 1.25), (buffer, np.array([1.25], np.float32))):
        g, (q, k, v, mask, s, o) = _dropout_forward(scale)
        g.set_preferred_engine_id_ext(engine)
        g.build()
        assert g.get_plan_name() == engine
        out = np.zeros([1, 2, 8, 4], np.float32)
        g.execute({q: data[0], k: data[1], v: data[2], mask: keep, s: value, o: out})
        outputs.append(out)
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-6)
    assert np.isfinite(outputs[0]).all() and outputs[0].any()
