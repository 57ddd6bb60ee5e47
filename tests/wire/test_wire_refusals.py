"""(e) What the reader must refuse: ``HipdnnError(UNSUPPORTED_GRAPH_FORMAT)`` (A5, A6, A10, A12).

Each refused blob is first shown to be one hipDNN's Verifier accepts (where the spec says it
does), so the refusal is the project's rule and not a broken test blob. Then truncations and byte
flips of the anchors, judged by hipDNN's Verifier: whatever it rejects, the reader rejects too.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable

import py_oracle
import pytest
from cpp_oracle import CppOracle
from hipdnn_cases import (
    MODELLED,
    b8_desc,
    batchnorm_backward_pair,
    batchnorm_inference_pair,
    batchnorm_inference_variance,
    batchnorm_pair,
    block_scale_mx,
    conv_fprop_block,
    conv_training_step,
    custom_ops,
    forward_every_field,
    layernorm_backward_pair,
    layernorm_pair,
    matmul_batched,
    moe_routing_modes,
    pointwise_every_field,
    reduction_chain,
    resample_pool_pair,
    resample_training_step,
    rmsnorm_backward_pair,
    rmsnorm_pair,
)
from wire_model import SDPA_TAG, Desc

import hipdnn_graph as hg
from hipdnn_graph.descriptors import node_specs
from hipdnn_graph.descriptors.fb_read import NODE_KINDS


def _refused(blob: bytes, *words: str) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.deserialize(blob)
    error = info.value
    assert error.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT, repr(error)
    for word in words:
        assert word.lower() in str(error).lower(), (word, str(error))
    return error


def _verified(cpp: CppOracle, blob: bytes) -> None:
    assert cpp.read(blob)["verified"] is True, "hipDNN's Verifier accepts this blob"


def _b8_1_plus(node: Desc) -> Desc:
    desc = b8_desc(1)
    desc["nodes"].append(node)
    return desc


def test_other_node_kind_is_refused_by_name(cpp: CppOracle) -> None:
    """A6: `hipDNN node "rs" has kind <member> (<tag>); only ... are supported`, for the first
    ``NodeAttributes`` member no family models (found at run time, since families keep being
    added), or a tag past hipDNN's union (`an unknown kind`) once every member is modelled."""
    unmodelled = [tag for tag in range(1, len(NODE_KINDS)) if tag not in node_specs()]
    tag = unmodelled[0] if unmodelled else len(NODE_KINDS)
    kind = NODE_KINDS[tag] if unmodelled else "an unknown kind"
    n = {"name": "rs", "compute_data_type": 1, "attributes_type": tag, "has_attributes": True,
         "attributes": None}  # fmt: skip
    blob = py_oracle.build(_b8_1_plus(n))
    _verified(cpp, blob)
    _refused(blob, '"rs"', f"has kind {kind} ({tag});", "are supported")


@pytest.mark.parametrize(
    "node",
    [
        pytest.param({"attributes_type": 0, "has_attributes": False}, id="NONE"),
        pytest.param(
            {"attributes_type": SDPA_TAG, "has_attributes": False}, id="sdpa_tag_no_table"
        ),
        pytest.param({"attributes_type": 30, "has_attributes": True}, id="unknown_newer_tag_30"),
    ],
)
def test_node_without_a_readable_kind_is_refused(cpp: CppOracle, node: dict[str, object]) -> None:
    """The Verifier passes a tag without a table and unknown tags (A10); the reader refuses."""
    n = {"name": "odd", "compute_data_type": 1, "attributes": None, **node}
    blob = py_oracle.build(_b8_1_plus(n))
    _verified(cpp, blob)
    _refused(blob, "odd", str(node["attributes_type"]))


@pytest.mark.parametrize("tag", [1, 4, 6, 7, 8])
def test_value_tag_without_a_value_is_refused(cpp: CppOracle, tag: int) -> None:
    """A10: hipDNN's Verifier rejects a TensorValue tag without its struct."""
    desc = b8_desc(2)
    desc["tensors"][5].update(value_type=tag, value=None)  # Seed
    blob = py_oracle.build(desc)
    assert cpp.read(blob)["verified"] is False
    _refused(blob)


def test_unknown_value_tag_is_refused(cpp: CppOracle) -> None:
    """A TensorValue tag past BoolValue (a newer member) passes hipDNN's Verifier unchecked,
    like unknown NodeAttributes tags; its struct's size is unknown, so the reader refuses it."""
    desc = b8_desc(2)
    desc["tensors"][5].update(value_type=9, value=None)
    blob = py_oracle.build(desc)
    _verified(cpp, blob)
    _refused(blob)


def _set_tensor_type(value: int) -> Desc:
    desc = b8_desc(1)
    desc["tensors"][0]["data_type"] = value
    return desc


def _set_graph_type(value: int) -> Desc:
    desc = b8_desc(1)
    desc["io_data_type"] = value
    return desc


def _set_node_type(value: int) -> Desc:
    desc = b8_desc(1)
    desc["nodes"][0]["compute_data_type"] = value
    return desc


@pytest.mark.parametrize("where", [_set_tensor_type, _set_graph_type, _set_node_type],
                         ids=["tensor", "graph_io", "node_compute"])  # fmt: skip
@pytest.mark.parametrize("number", [19, 127, -1, -128])
def test_data_type_numbers_outside_the_schema_are_refused(
    cpp: CppOracle, where: Callable[[int], Desc], number: int
) -> None:
    """A5: numbers outside 0-18 are refused, naming the number."""
    blob = cpp.pack(where(number))
    _verified(cpp, blob)  # the Verifier does not check enum ranges
    _refused(blob, str(number))


@pytest.mark.parametrize(
    "field,value", [("diagonal_alignment", 2), ("diagonal_alignment", -1), ("implementation", 3)]
)
def test_enum_values_outside_the_schema_are_refused(cpp: CppOracle, field: str, value: int) -> None:
    desc = forward_every_field()
    desc["nodes"][0]["attributes"][field] = value
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, field)


@pytest.mark.parametrize("table", sorted(py_oracle.KNOWN_SLOTS))
def test_fields_of_a_newer_schema_are_refused(cpp: CppOracle, table: str) -> None:
    """A12: a non-zero vtable entry past the last known slot is refused, naming the table."""
    desc = b8_desc(2)  # forward and backward nodes: every table occurs but the pointwise one
    desc["nodes"] += pointwise_every_field()["nodes"] if table == "PointwiseAttributes" else []
    desc["nodes"] += matmul_batched()["nodes"] if table == "MatmulAttributes" else []
    desc = reduction_chain() if table == "ReductionAttributes" else desc
    desc = conv_fprop_block() if table == "ConvolutionFwdAttributes" else desc
    desc = (
        conv_training_step()
        if table in ("ConvolutionBwdAttributes", "ConvolutionWrwAttributes")
        else desc
    )
    desc = rmsnorm_pair() if table == "RMSNormAttributes" else desc
    desc = layernorm_pair() if table == "LayernormAttributes" else desc
    desc = batchnorm_pair() if table == "BatchnormAttributes" else desc
    desc = batchnorm_backward_pair() if table == "BatchnormBackwardAttributes" else desc
    desc = block_scale_mx() if table.startswith("BlockScale") else desc
    desc = batchnorm_inference_pair() if table == "BatchnormInferenceAttributes" else desc
    desc = resample_pool_pair() if table == "ResampleFwdAttributes" else desc
    desc = resample_training_step() if table == "ResampleBwdAttributes" else desc
    variance = table == "BatchnormInferenceAttributesVarianceExt"
    desc = batchnorm_inference_variance() if variance else desc
    desc = layernorm_backward_pair() if table == "LayernormBackwardAttributes" else desc
    desc = rmsnorm_backward_pair() if table == "RMSNormBackwardAttributes" else desc
    moe = table in ("MoeGroupedMatmulAttributes", "MoeGroupedMatmulBwdAttributes")
    desc = moe_routing_modes() if moe else desc
    desc = custom_ops() if table == "CustomOpAttributes" else desc
    blob = py_oracle.build(desc, newer_field_in=table)
    _verified(cpp, blob)  # unknown fields are not checked by the Verifier
    error = _refused(blob)
    assert table in str(error), f"the refusal does not name the table {table}: {error}"


def _judged_by_verifier(cpp: CppOracle, blob: bytes) -> None:
    """What hipDNN's Verifier rejects is refused; what it accepts reads or is refused, cleanly
    (a HipdnnError, never another exception)."""
    if not cpp.read(blob)["verified"]:
        _refused(blob)
        return
    with contextlib.suppress(hg.HipdnnError):
        hg.Graph.deserialize(blob).serialize()


@pytest.mark.parametrize("number", [1, 2])
def test_truncations_are_judged_as_the_verifier_does(cpp: CppOracle, number: int) -> None:
    """A truncation the Verifier still accepts cut only trailing padding (every referenced byte
    is in bounds), so it is the same graph: it reads and writes back the whole canonical blob.
    (The anchors end in 3 and 1 bytes of string padding, so such truncations exist.)"""
    blob = cpp.pack(b8_desc(number))
    sizes = sorted({*range(0, len(blob), 11), *range(len(blob) - 9, len(blob))})
    accepted = 0
    for size in sizes:
        if cpp.read(blob[:size])["verified"]:
            accepted += 1
            assert hg.Graph.deserialize(blob[:size]).serialize() == blob, size
        else:
            _refused(blob[:size])
    assert accepted >= 1


@pytest.mark.parametrize("case", ["b8_2", "backward_every_field", "graph_extras"])
def test_byte_flips_are_judged_as_the_verifier_does(cpp: CppOracle, case: str) -> None:
    blob = cpp.pack(MODELLED[case]())
    rng = random.Random(case)
    for _ in range(120):
        mutated = bytearray(blob)
        position = rng.randrange(len(blob))
        mutated[position] ^= 1 << rng.randrange(8)
        _judged_by_verifier(cpp, bytes(mutated))


def test_pointwise_mode_outside_the_schema_is_refused(cpp: CppOracle) -> None:
    """A PointwiseMode number the schema does not have (newer hipDNN's MOD is 48 in its
    frontend) is refused by name, in bytes and in JSON."""
    desc = pointwise_every_field()
    desc["nodes"][0]["attributes"]["operation"] = 48
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "PointwiseMode 48")
    text = hg.Graph.deserialize(cpp.pack(pointwise_every_field())).to_json()
    assert '"operation":"binary_select"' in text
    for spelled in ("mod", "BINARY_SELECT", "max"):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace('"binary_select"', f'"{spelled}"'))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert f"'{spelled}' is not a PointwiseMode" in info.value.message


def test_reduction_mode_outside_the_schema_is_refused(cpp: CppOracle) -> None:
    """A ReductionMode number the schema does not have is refused by name in bytes; in JSON,
    hipDNN's spellings only: its JSON helpers' ("min"), and the upper-case names its
    ``hipdnn_data_sdk`` helper and benchmark graphs write ("MIN"), not "min_op"."""
    desc = reduction_chain()
    desc["nodes"][0]["attributes"]["mode"] = 10
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "ReductionMode 10")
    text = hg.Graph.deserialize(cpp.pack(reduction_chain())).to_json()
    assert '"mode":"amax"' in text and '"mode":"add"' in text
    assert hg.Graph.from_json(text.replace('"amax"', '"min"')).nodes[0].attributes.mode == 3
    for spelled, number in (("MIN", 3), ("AMAX", 5)):
        read = hg.Graph.from_json(text.replace('"amax"', f'"{spelled}"'))
        assert read.nodes[0].attributes.mode == number
    for spelled in ("min_op", "Min", "MIN_OP"):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace('"amax"', f'"{spelled}"'))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert f"'{spelled}' is not a ReductionMode" in info.value.message


def test_norm_fwd_phase_outside_the_schema_is_refused(cpp: CppOracle) -> None:
    """A NormFwdPhase number the schema does not have is refused by name in bytes; in JSON only
    hipDNN's upper-case spellings are read (hipDNN reads any other string as NOT_SET; this
    project refuses it rather than change the graph), and NOT_SET is never written."""
    desc = rmsnorm_pair()
    desc["nodes"][0]["attributes"]["forward_phase"] = 3
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "NormFwdPhase 3")
    text = hg.Graph.deserialize(cpp.pack(rmsnorm_pair())).to_json()
    assert '"forward_phase":"TRAINING"' in text and '"forward_phase":"INFERENCE"' in text
    for spelled in ("training", "Training", "UNSET"):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace('"TRAINING"', f'"{spelled}"'))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert f"'{spelled}' is not a NormFwdPhase" in info.value.message


def test_layernorm_phase_numbers_outside_the_schema_are_refused(cpp: CppOracle) -> None:
    """Layer norm's JSON writes the phase as a number: a number outside NormFwdPhase (in bytes
    or JSON) and a string other than the upper-case names hipDNN's benchmark graphs write are
    refused; an absent phase reads as NOT_SET, as in hipDNN."""
    desc = layernorm_pair()
    desc["nodes"][0]["attributes"]["forward_phase"] = 3
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "NormFwdPhase 3")
    text = hg.Graph.deserialize(cpp.pack(layernorm_pair())).to_json()
    assert '"forward_phase":2' in text and '"forward_phase":1' in text
    named = hg.Graph.from_json(text.replace('"forward_phase":2', '"forward_phase":"TRAINING"'))
    assert named.nodes[0].attributes.get_forward_phase() == hg.NormFwdPhase.TRAINING
    for spelled, words in (("3", "3 is not a NormFwdPhase"), ('"training"', "must be an integer")):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace('"forward_phase":2', f'"forward_phase":{spelled}'))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert words in info.value.message
    absent = hg.Graph.from_json(text.replace('"forward_phase":2,', ""))
    assert absent.nodes[0].attributes.get_forward_phase() == hg.NormFwdPhase.NOT_SET


def test_batchnorm_peer_stats_are_refused_by_name_and_an_empty_vector_reads(
    cpp: CppOracle,
) -> None:
    """Peer statistics (multi-GPU batch norm) are not modelled: a hipDNN blob that carries some is
    refused naming the field; an empty vector (as hipDNN's frontend writes it) reads and writes
    back canonical (left out, as Graph::Pack does)."""
    desc = batchnorm_pair()
    desc["nodes"][0]["attributes"]["peer_stats_tensor_uid"] = [5, 6]
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "BatchnormAttributes.peer_stats_tensor_uid = (5, 6)")
    empty = py_oracle.build(batchnorm_pair(), empty_as_present=True)
    assert cpp.read(empty)["nodes"][0]["attributes"]["peer_stats_tensor_uid"] == []
    assert hg.Graph.deserialize(empty).serialize() == cpp.pack(batchnorm_pair())


def test_conv_mode_outside_the_schema_is_refused(cpp: CppOracle) -> None:
    """A ConvMode number the schema does not have is refused by name in bytes; in JSON, hipDNN's
    spellings only ("CONVOLUTION", not "convolution" or "NOT_SET"); the vectors must be arrays
    of integers."""
    desc = conv_fprop_block()
    desc["nodes"][0]["attributes"]["conv_mode"] = 3
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "ConvMode 3")
    text = hg.Graph.deserialize(cpp.pack(conv_fprop_block())).to_json()
    assert '"conv_mode":"CROSS_CORRELATION"' in text and '"conv_mode":"CONVOLUTION"' in text
    for spelled in ("convolution", "NOT_SET"):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace('"CONVOLUTION"', f'"{spelled}"'))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert f"'{spelled}' is not a ConvMode" in info.value.message
    unset = hg.Graph.from_json(text.replace('"CONVOLUTION"', '"UNSET"'))
    assert unset.nodes[1].attributes.convolution_mode is hg.ConvolutionMode.NOT_SET
    with pytest.raises(hg.HipdnnError):
        hg.Graph.from_json(text.replace('"stride":[2,3]', '"stride":[2,"3"]'))


@pytest.mark.parametrize(
    ("build", "field", "number", "enum"),
    [
        (resample_pool_pair, "resample_mode", 4, "ResampleMode"),
        (resample_pool_pair, "padding_mode", 3, "PaddingMode"),
        (resample_training_step, "resample_mode", 5, "ResampleMode"),
        (resample_training_step, "padding_mode", -1, "PaddingMode"),
    ],
)
def test_resample_modes_outside_the_schema_are_refused(
    cpp: CppOracle, build: Callable[[], Desc], field: str, number: int, enum: str
) -> None:
    """A ResampleMode/PaddingMode number resample_common.fbs does not have (BILINEAR, NEAREST
    and EDGE_VAL_PAD included) is refused by name in bytes; in JSON the number is written (no
    spelling table); the schema's names, which hipDNN's benchmark graphs write, read too; any
    other spelling and an unknown number are refused."""
    desc = build()
    desc["nodes"][0]["attributes"][field] = number
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, f"{enum} {number}")
    text = hg.Graph.deserialize(cpp.pack(build())).to_json()
    good = f'"{field}":{build()["nodes"][0]["attributes"][field]}'
    assert good in text
    names = {"resample_mode": "MAXPOOL", "padding_mode": "ZERO_PAD"}
    named = hg.Graph.from_json(text.replace(good, f'"{field}":"{names[field]}"', 1))
    number_of_name = 2 if field == "padding_mode" else 1
    assert named.to_json() == text.replace(good, f'"{field}":{number_of_name}', 1)
    for wrong in (f'"{field}":{number}', f'"{field}":"maxpool"', f'"{field}":"zero_pad"'):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace(good, wrong, 1))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT, wrong


def test_moe_mode_outside_the_schema_is_refused(cpp: CppOracle) -> None:
    """A MoeGroupedMatmulMode number the schema does not have (3; hipDNN's frontend NOT_SET has
    no schema number) is refused by name in bytes; in JSON only hipDNN's lower-case spellings
    are read."""
    desc = moe_routing_modes()
    desc["nodes"][1]["attributes"]["mode"] = 3
    blob = cpp.pack(desc)
    _verified(cpp, blob)
    _refused(blob, "MoeGroupedMatmulMode 3")
    text = hg.Graph.deserialize(cpp.pack(moe_routing_modes())).to_json()
    assert '"mode":"gather"' in text and '"mode":"scatter"' in text
    for spelled in ("GATHER", "not_set"):
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(text.replace('"gather"', f'"{spelled}"'))
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert f"'{spelled}' is not a MoeGroupedMatmulMode" in info.value.message
