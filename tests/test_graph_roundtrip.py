"""Graph-level round trips: hipDNN's bytes, hipDNN's JSON and descriptors give back the same
graph, keys follow content, uids are assigned deterministically, descriptor rules hold."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sdpa_graph_cases import (
    BIG_ENGINE_NAME,
    CASES,
    SCALARS,
    WIRE_CASES,
    by_uid,
    full_backward,
    scalars,
    tensor_fields,
    user_uids,
)

import hipdnn_graph as hg
from hipdnn_graph.backend import engine_id
from hipdnn_graph.descriptors import DescriptorError
from hipdnn_graph.types import ErrorCode

IDS = sorted(WIRE_CASES)


def _validated(case: str) -> hg.Graph:
    g = CASES[case]()
    g.validate()
    return g


def _reloads(g: hg.Graph) -> dict[str, hg.Graph]:
    descriptor = g.build_operation_graph().get_operation_graph_descriptor()
    return {
        "bytes": hg.Graph.deserialize(g.serialize()),
        "json": hg.Graph.from_json(g.to_json()),
        "descriptor": hg.Graph.from_operation_graph_descriptor(descriptor),
    }


# ----- lossless round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("case", IDS)
def test_round_trips_give_identical_json_bytes_and_key(case: str) -> None:
    g = _validated(case)
    text, blob, key = g.to_json(), g.serialize(), g.key()
    for how, back in _reloads(g).items():
        if how == "descriptor":  # descriptors carry no declaration order: tensors by uid
            assert by_uid(back.to_json()) == by_uid(text)
            continue
        assert back.to_json() == text, how
        assert back.serialize() == blob, how
        assert back.key() == key, how
        back.validate()
        assert back.to_json() == text, f"{how}: validate() changed the graph"
    # JSON and bytes hold the same content
    assert hg.Graph.from_json(text).serialize() == blob
    assert hg.Graph.deserialize(blob).to_json() == text


@pytest.mark.parametrize("case", IDS)
def test_round_trips_keep_every_tensor_field_node_and_engine(case: str) -> None:
    g = _validated(case)
    g.build_operation_graph()
    expected = sorted(tensor_fields(t) for t in g.graph_tensors())
    for how, back in _reloads(g).items():
        assert sorted(tensor_fields(t) for t in back.tensors) == expected, how
        assert [n.name for n in back.nodes] == [n.name for n in g.nodes], how
        assert [type(n) for n in back.nodes] == [type(n) for n in g.nodes], how
        assert back.get_preferred_engine_id_ext() == g.get_preferred_engine_id_ext(), how
        assert back.attributes == g.attributes, how


@pytest.mark.parametrize("case", IDS)
def test_reloaded_tensors_are_shared_handles_once_per_uid(case: str) -> None:
    g = _validated(case)
    for how, back in _reloads(g).items():
        by_uid: dict[int, hg.TensorAttributes] = {}
        for node in back.nodes:
            for t in (*node.inputs(), *node.outputs()):
                assert by_uid.setdefault(t.get_uid(), t) is t, how
        assert sorted(by_uid) == sorted(t.get_uid() for t in back.tensors), how
        assert len({id(t) for t in back.tensors}) == len(back.tensors), how


@pytest.mark.parametrize("case", ["fwd_bwd", "bwd_full", "user_uids"])
def test_repeated_round_trips_are_stable(case: str) -> None:
    g = _validated(case)
    blob, text = g.serialize(), g.to_json()
    current = g
    for _ in range(3):
        current = hg.Graph.from_json(hg.Graph.deserialize(current.serialize()).to_json())
    assert current.serialize() == blob
    assert current.to_json() == text
    for _ in range(3):
        descriptor = current.build_operation_graph().get_operation_graph_descriptor()
        current = hg.Graph.from_operation_graph_descriptor(descriptor)
    assert by_uid(current.to_json()) == by_uid(text)


def test_a_reloaded_graph_is_not_validated_until_asked() -> None:
    back = hg.Graph.deserialize(_validated("fwd_bwd").serialize())
    assert not back.is_validated
    back.validate()
    assert back.is_validated


def test_preferred_engine_id_above_2_63_survives() -> None:
    big = engine_id(BIG_ENGINE_NAME)
    assert big >= 2**63
    g = _validated("engine_by_name")
    assert g.get_preferred_engine_id_ext() == big
    for how, back in _reloads(g).items():
        assert back.get_preferred_engine_id_ext() == big, how
    assert '"preferred_engine_id":' + str(big - 2**64) in g.to_json()


_WIRE_SCALARS = [(n, v) for n, v in SCALARS if f"scalar_{n}" in WIRE_CASES]


@pytest.mark.parametrize(("name", "value"), _WIRE_SCALARS, ids=[n for n, _ in _WIRE_SCALARS])
def test_pass_by_value_scalars_keep_value_type_and_data_type(name: str, value: Any) -> None:
    g = scalars(value)
    g.validate()
    original = {t.name: t for t in g.tensors}
    for how, back in _reloads(g).items():
        for t in back.tensors:
            o = original[t.name]
            assert t.get_data_type() == o.get_data_type(), (how, t.name)
            assert t.get_value() == o.get_value(), (how, t.name)
            assert type(t.get_value()) is type(o.get_value()), (how, t.name)
    scale = original["Scale"]
    assert scale.get_is_pass_by_value() and not scale.get_is_runtime_pass_by_value()


def test_a_value_reads_back_as_the_type_its_data_type_stores() -> None:
    # hipDNN stores a FLOAT tensor's value in a Float32Value: an int held there reads back as a
    # float, and the bytes (and JSON) of both graphs are the same
    g = scalars(2, hg.DataType.FLOAT)
    back = hg.Graph.deserialize(g.serialize())
    value = next(t for t in back.tensors if t.name == "Scale").get_value()
    assert value == 2.0 and type(value) is float
    assert back.serialize() == g.serialize() and back.to_json() == g.to_json()
    assert '"value":2.0,"value_type":"Float32Value"' in g.to_json()


def test_scalar_data_types_cover_every_supported_kind() -> None:
    kinds = set()
    for _, value in SCALARS:
        g = scalars(value)
        kinds.add(next(t for t in g.tensors if t.name == "Scale").get_data_type())
    assert kinds >= {
        hg.DataType.FLOAT, hg.DataType.DOUBLE, hg.DataType.HALF, hg.DataType.BFLOAT16,
        hg.DataType.INT32, hg.DataType.INT64, hg.DataType.BOOLEAN,
    }  # fmt: skip


def test_runtime_pass_by_value_flag_survives() -> None:
    g = _validated("runtime_pass_by_value")
    for how, back in _reloads(g).items():
        scale = next(t for t in back.tensors if t.name == "Scale")
        assert scale.get_is_runtime_pass_by_value() and scale.get_value() is None, how


def test_generate_stats_false_has_no_stats_tensor() -> None:
    g = _validated("fwd_no_stats")
    for how, back in _reloads(g).items():
        (node,) = back.nodes
        assert node.attributes.get_generate_stats() is False, how
        assert node.attributes.get_stats() is None, how
        assert [t.name for t in node.outputs()] == ["attn::O"], how


def test_unnamed_graph_keeps_default_names() -> None:
    g = _validated("unnamed")
    for how, back in _reloads(g).items():
        assert back.get_name() == "", how
        assert [n.name for n in back.nodes] == ["SdpaFwd_0", "SdpaBwd_1"], how
        names = sorted(t.name for t in back.tensors)
        assert names == sorted(t.name for t in g.tensors), how
        assert {"SdpaBwd_1::Q", "SdpaBwd_1::dO", "SdpaFwd_0::O", "SdpaBwd_1::dV"} <= set(names)


# ----- keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", IDS)
def test_equal_graphs_built_twice_have_equal_keys(case: str) -> None:
    assert CASES[case]().key() == CASES[case]().key()


def test_keys_of_different_cases_differ() -> None:
    keys = {case: CASES[case]().key() for case in IDS}
    assert len(set(keys.values())) == len(keys)


def _tensor(g: hg.Graph, name: str) -> hg.TensorAttributes:
    return next(t for t in g.tensors if t.name == name)


def _node(g: hg.Graph) -> Any:
    return g.nodes[0].attributes


def _fix_dims(g: hg.Graph, name: str, dims: list[int]) -> hg.TensorAttributes:
    return _tensor(g, name).set_dim(dims).set_stride(hg.generate_strides(dims))


def _no_dropout_mask(a: hg.SdpaBackwardAttributes) -> None:
    a.set_dropout_mask(None).set_dropout_scale(None).set_dropout_scale_inv(None)


def _seed_offset(g: hg.Graph) -> tuple[hg.TensorAttributes, hg.TensorAttributes]:
    return _tensor(g, "Seed"), _tensor(g, "Offset")


#: One single change each, applied to the every-slot backward graph; every one changes the key.
MUTATIONS: dict[str, Callable[[hg.Graph], Any]] = {
    "graph name": lambda g: g.set_name("other"),
    "io type": lambda g: g.set_io_data_type(hg.DataType.HALF),
    "intermediate type": lambda g: g.set_intermediate_data_type(hg.DataType.HALF),
    "compute type": lambda g: g.set_compute_data_type(hg.DataType.HALF),
    "preferred engine": lambda g: g.set_preferred_engine_id_ext(7),
    "tensor name": lambda g: _tensor(g, "Q").set_name("Q2"),
    "output name": lambda g: _tensor(g, "bwd::dQ").set_name("grad_q"),
    "node name": lambda g: _node(g).set_name("bwd2"),
    "node compute type": lambda g: _node(g).set_compute_data_type(hg.DataType.DOUBLE),
    "tensor data type": lambda g: _tensor(g, "Bias").set_data_type(hg.DataType.FLOAT),
    "bias dims": lambda g: [_fix_dims(g, n, [1, 1, 16, 16]) for n in ("Bias", "dBias")],
    "mask dims": lambda g: _fix_dims(g, "DropMask", [1, 4, 16, 16]),
    "q stride": lambda g: _tensor(g, "Q").set_stride([512, 8, 32, 1]),
    "seed dims": lambda g: _fix_dims(g, "Seed", [1, 1]),
    "virtual flag": lambda g: _tensor(g, "bwd::dQ").set_is_virtual(True),
    "runtime pass-by-value": lambda g: _tensor(g, "Seed").set_is_pass_by_value(True),
    "alignment": lambda g: _tensor(g, "K").set_alignment(32),
    "scale value": lambda g: _tensor(g, "Scale").set_value(0.25),
    "scale value type": lambda g: _tensor(g, "Scale").set_value(np.float64(0.125)),
    "dropout scale": lambda g: _tensor(g, "DropScale").set_value(2.0),
    "uid": lambda g: _tensor(g, "K").set_uid(99),
    "uid swap": lambda g: (_tensor(g, "Q").set_uid(2), _tensor(g, "K").set_uid(1)),
    "alibi": lambda g: _node(g).set_alibi_mask(False),
    "padding": lambda g: _node(g).set_padding_mask(False),
    "causal": lambda g: _node(g).set_causal_mask(False),
    "causal bottom right": lambda g: _node(g).set_causal_mask_bottom_right(False),
    "dropout probability": lambda g: _node(g)._set_dropout_probability(0.2, *_seed_offset(g)),
    "attn scale value": lambda g: _node(g).set_attn_scale(None).set_attn_scale(0.5),
    "left bound": lambda g: _node(g).set_diagonal_band_left_bound(63),
    "no left bound": lambda g: _node(g).set_diagonal_band_left_bound(None),
    "right bound": lambda g: _node(g).set_diagonal_band_right_bound(1),
    "alignment enum": lambda g: _node(g).set_diagonal_alignment(hg.DiagonalAlignment.TOP_LEFT),
    "no dbias": lambda g: _node(g).set_dbias(None),
    "no dropout mask": lambda g: _no_dropout_mask(_node(g)),
}  # fmt: skip


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_any_single_change_changes_the_key(mutation: str) -> None:
    g = full_backward()
    g.validate()
    g.build_operation_graph()
    before, text = g.key(), g.to_json()
    changed = full_backward()
    changed.build_operation_graph()
    MUTATIONS[mutation](changed)
    changed.validate()  # the change keeps the graph valid, so the key is the only difference
    after = changed.key()
    assert changed.to_json() != text
    assert after != before
    assert hg.Graph.deserialize(changed.serialize()).key() == after


def test_key_changes_with_generate_stats_and_uid_of_a_forward_graph() -> None:
    keys = {CASES["fwd"]().key(), CASES["fwd_no_stats"]().key()}
    g = CASES["fwd"]()
    g.tensors[0].set_uid(10)
    keys.add(g.key())
    assert len(keys) == 3


def test_key_is_a_64_bit_int() -> None:
    key = full_backward().key()
    assert isinstance(key, int) and 0 <= key < 2**64


# ----- uids --------------------------------------------------------------------------------------


def test_uids_are_assigned_in_declaration_order_from_1() -> None:
    g = full_backward()
    g.build_operation_graph()
    assert [t.get_uid() for t in g.tensors] == list(range(1, 20))
    assert [t.name for t in g.tensors][:6] == ["Q", "K", "V", "O", "dO", "Stats"]


def test_assigned_uids_skip_user_uids_and_keep_them() -> None:
    g = user_uids()
    g.build_operation_graph()
    uids = {t.name: t.get_uid() for t in g.tensors}
    assert uids["Q"] == 3 and uids["V"] == 1 and uids["fwd::O"] == 2**40
    # declaration order: Q, K, V, fwd::O, fwd::Stats, dO, bwd::dQ, bwd::dK, bwd::dV
    assert [uids[n] for n in ("K", "fwd::Stats", "dO", "bwd::dQ", "bwd::dK", "bwd::dV")] == [
        2, 4, 5, 6, 7, 8,
    ]  # fmt: skip


def test_uid_assignment_is_deterministic() -> None:
    def uids() -> list[int]:
        g = CASES["fwd_bwd"]()
        g.build_operation_graph()
        return [t.get_uid() for t in g.tensors]

    assert uids() == uids()


@pytest.mark.parametrize("case", IDS)
def test_validate_never_assigns_uids(case: str) -> None:
    g = CASES[case]()
    before = [t.uid for t in g.tensors]
    g.validate()
    assert [t.uid for t in g.tensors] == before


def test_duplicate_user_uids_are_rejected_by_validate_and_serialize() -> None:
    g = CASES["fwd"]()
    g.tensors[0].set_uid(5)
    g.tensors[1].set_uid(5)
    for call in (g.validate, g.serialize, g.to_json, g.key):
        with pytest.raises(hg.HipdnnError) as err:
            call()
        assert err.value.code == ErrorCode.INVALID_VALUE
        assert err.value.message == "Duplicate tensor UIDs found in the graph: 5"


def test_serialize_validates_an_invalid_graph_first() -> None:
    g = CASES["bwd"]()
    g.tensors[0].set_dim([2, 4, 16]).set_stride([64, 16, 1])
    with pytest.raises(hg.HipdnnError) as err:
        g.serialize()
    assert err.value.message == "SdpaBwdNode: Query tensor Q must be rank-4, got rank=3"


# ----- descriptor rules through the graph --------------------------------------------------------


def _lowering_error(g: hg.Graph) -> DescriptorError | hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as err:
        g.build_operation_graph()
    return err.value


def test_missing_required_slot_fails_finalize_with_hipdnn_message() -> None:
    g = _validated("bwd")
    attrs = g.nodes[0].attributes
    del attrs.inputs[attrs.InputNames.dO]  # behind validate()'s back
    err = _lowering_error(g)
    assert isinstance(err, DescriptorError)
    assert err.code == ErrorCode.HIPDNN_BACKEND_ERROR
    assert err.message == "SdpaBwdOperationDescriptor::finalize() failed: dO tensor not set"


def test_missing_forward_output_fails_finalize_with_hipdnn_message() -> None:
    g = _validated("fwd")
    attrs = g.nodes[0].attributes
    del attrs.outputs[attrs.OutputNames.O]
    err = _lowering_error(g)
    assert isinstance(err, DescriptorError)
    assert err.message == "SdpaFwdOperationDescriptor::finalize() failed: O tensor not set"


def test_first_missing_slot_wins_through_the_graph() -> None:
    g = _validated("bwd")
    attrs = g.nodes[0].attributes
    del attrs.outputs[attrs.OutputNames.dV]
    del attrs.inputs[attrs.InputNames.K]
    assert _lowering_error(g).message == (
        "SdpaBwdOperationDescriptor::finalize() failed: K tensor not set"
    )


def test_unset_compute_type_cannot_be_packed() -> None:
    g = _validated("bwd")
    # behind validate()'s back: an assignment would un-validate the graph, and build would
    # validate again (filling the type from the graph)
    g.nodes[0].attributes.__dict__["compute_data_type"] = hg.DataType.NOT_SET
    err = _lowering_error(g)
    assert err.code == ErrorCode.INVALID_VALUE
    assert err.message == "Unsupported data type for SdpaBwdNode compute type: NOT_SET"


def test_a_graph_breaking_a_record_rule_is_not_written() -> None:
    # valid for validate() (a seed of any rank), but not readable: serialize refuses it
    g = hg.Graph(
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v = (g.tensor(name=n, dim=[1, 2, 8, 16]) for n in "QKV")
    seed = g.tensor(name="Seed", dim=[1] * 9, data_type=hg.DataType.INT64)
    offset = g.tensor(name="Offset", dim=[1], data_type=hg.DataType.INT64)
    for t in g.sdpa(q, k, v, dropout=(0.1, seed, offset)):
        assert t is not None
        t.set_output(True)
    g.validate()
    for call in (g.serialize, g.to_json, g.key):
        with pytest.raises(hg.HipdnnError) as err:
            call()
        assert err.value.code == ErrorCode.INVALID_VALUE
        assert err.value.message == "Tensor Seed has rank 9, more than 8"


def test_reloaded_objects_behave_like_declared_ones() -> None:
    g = hg.Graph.deserialize(_validated("bwd_full").serialize())
    t = g.tensors[0]
    assert t.set_name("renamed").set_dim([2, 4, 16, 8]).get_name() == "renamed"
    assert "name" in t.model_fields_set
    assert t.clone().logically_equals(t) and t.clone() != t
    assert repr(t).startswith("TensorAttributes(name='renamed', uid=1")
    a = g.nodes[0].attributes
    assert not a.has_unsupported_usage()
    a.set_deterministic_algorithm(True)
    assert a.get_unsupported_reason() == "Deterministic SDPA backward is unsupported by hipDNN"
    copy = a.copy_for_node()
    assert copy.get_q() is a.get_q() and copy.inputs is not a.inputs
    assert a.model_dump()["name"] == "bwd"
    assert g.nodes[0].graph_attributes is g.attributes


def test_tensors_no_node_uses_survive_bytes_and_json_round_trips() -> None:
    g = _validated("bwd")
    doc = json.loads(g.to_json())
    spare = dict(doc["tensors"][0], uid=99, name="spare")
    doc["tensors"].insert(1, spare)  # listed between used tensors: the order is kept too
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    loaded = hg.Graph.from_json(text)
    assert loaded.to_json() == text
    blob = loaded.serialize()
    back = hg.Graph.deserialize(blob)
    assert back.serialize() == blob
    assert back.to_json() == text
    assert [t.name for t in back.wire_tensors()][:3] == ["Q", "spare", "K"]
    assert "spare" not in [t.name for t in back.graph_tensors()]  # no node reads or writes it
    assert back.key() != g.key()
