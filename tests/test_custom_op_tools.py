"""Custom op graphs through the project's own tools: descriptors (pack/unpack of the tensor
arrays, the id and the payload), the JSON schema and hipDNN's JSON layout (everything on the
node object, the payload an array of bytes), refusals, the CLI (show/run) and pictures."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import AttributeType as T
from hipdnn_graph.descriptors.enums import DescriptorType
from hipdnn_graph.nodes.custom_op import CustomOpAttributeName as CA

F = hg.DataType.FLOAT
D = DescriptorType.OPERATION_CUSTOM_OP_DESCRIPTOR_EXT


def _graph(data: bytes = b"\xca\xfe") -> hg.Graph:
    """A custom op (two inputs, two outputs) whose first output feeds a ReLU."""
    g = hg.Graph(name="cop", io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    a, b = g.tensor(name="a", dim=[4, 8]), g.tensor(name="b", dim=[4, 8])
    attrs = hg.CustomOpAttributes().set_custom_op_id("example.identity").set_data(data)
    y0, y1 = g.custom_op([a, b], 2, attrs, name="op")
    for t in (y0, y1):
        t.set_dim([4, 8]).set_stride([8, 1])
    y1.set_output(True)
    g.pointwise(y0, name="relu", mode=hg.PointwiseMode.RELU_FWD).set_output(True)
    return g


def test_descriptors_pack_and_unpack_the_lists_id_and_payload() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    inputs = op.get_attribute(CA.OPERATION_CUSTOM_OP_INPUTS_EXT, T.BACKEND_DESCRIPTOR)
    assert len(inputs) == 2
    assert op.get_attribute(CA.OPERATION_CUSTOM_OP_ID_EXT, T.CHAR) == ["example.identity"]
    assert op.get_attribute(CA.OPERATION_CUSTOM_OP_DATA_EXT, T.CHAR) == [b"\xca\xfe"]
    back = hg.CustomOpNode(hg.CustomOpAttributes()).unpack_from_descriptor(op, {}).attributes
    assert [t.get_name() for t in back.get_inputs()] == ["a", "b"]
    assert [t.get_name() for t in back.get_outputs()] == ["op::OUT_0", "op::OUT_1"]
    assert (back.get_custom_op_id(), back.get_data(), back.get_name()) == (
        "example.identity", [0xCA, 0xFE], "op",
    )  # fmt: skip
    empty = _graph(b"")
    empty.build_operation_graph()
    op = empty.nodes[0].create_operation({}, [])
    assert op.get_attribute(CA.OPERATION_CUSTOM_OP_DATA_EXT, T.CHAR) == []  # not set when empty
    with pytest.raises(DescriptorError, match=r"CustomOpOperationDescriptor::finalize"):
        BackendDescriptor(D).finalize()


def test_json_layout_schema_and_round_trips() -> None:
    g = _graph()
    doc = json.loads(g.to_json())
    node = doc["nodes"][0]
    assert node == {
        "compute_data_type": "float",
        "custom_op_id": "example.identity",
        "data": [202, 254],
        "input_tensor_uids": [1, 2],
        "name": "op",
        "output_tensor_uids": [3, 4],
        "type": "CustomOpAttributes",
    }
    jsonschema.validate(doc, json_schema())
    again = hg.Graph.from_json(json.dumps(doc))
    assert again.to_json() == g.to_json() and again.serialize() == g.serialize()
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("data", [256], "an array of bytes"),
        ("input_tensor_uids", [1, 99], "tensor uid 99 (input_tensor_uids[1])"),
        ("output_tensor_uids", "3", "an array"),
    ],
)
def test_json_refusals(key: str, value: object, words: str) -> None:
    doc = json.loads(_graph().to_json())
    doc["nodes"][0][key] = value
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert words in info.value.message


def test_cli_shows_draws_and_refuses_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cop.bin"
    g = _graph()
    path.write_bytes(g.serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "op  CUSTOM_OP  compute FLOAT" in out
    assert "in:  IN_0=a#1 IN_1=b#2" in out and "out: OUT_0=op::OUT_0#3 OUT_1=op::OUT_1#4" in out
    assert main(["run", str(path)]) == 1
    assert "does not run CUSTOM_OP nodes (node 'op')" in capsys.readouterr().err
    assert "CUSTOM_OP" in g.to_dot() and "OUT_1" in g.to_mermaid()
