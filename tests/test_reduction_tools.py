"""Reduction graphs through the project's own tools: descriptors (pack/unpack), the JSON schema
and hipDNN's JSON layout (keys on the node object; ``is_deterministic`` optional on read), the
CLI (validate/show/run) and pictures (DOT, Mermaid). The byte-exact wire against hipDNN's
generated code is in tests/wire/."""

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
from hipdnn_graph.nodes.reduction import ReductionAttributeName as RA

M = hg.ReductionMode


def _graph() -> hg.Graph:
    g = hg.Graph(name="red", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4, 8])
    y = g.reduction(x, mode=M.NORM2, is_deterministic=True, name="norm")
    y.set_dim([4, 1]).set_stride([1, 1]).set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    node = g.nodes[0]
    tensors: dict[int, BackendDescriptor] = {}
    op = node.create_operation(tensors, [])
    assert op.descriptor_type == DescriptorType.OPERATION_REDUCTION
    assert op.get_attribute(RA.REDUCTION_OPERATOR, T.REDUCTION_MODE) == [M.NORM2]
    assert op.get_attribute(RA.REDUCTION_IS_DETERMINISTIC, T.BOOLEAN) == [True]
    assert op.get_attribute(RA.REDUCTION_COMP_TYPE, T.DATA_TYPE) == [hg.DataType.FLOAT]
    back = hg.ReductionNode(hg.ReductionAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert (a.get_mode(), a.get_is_deterministic(), back.name) == (M.NORM2, True, "norm")
    assert a.get_y().get_dim() == [4, 1] and a.get_x().get_uid() == node.attributes.get_x().uid
    with pytest.raises(
        DescriptorError, match=r"ReductionOperationDescriptor::finalize\(\) failed: X"
    ):
        BackendDescriptor(DescriptorType.OPERATION_REDUCTION).finalize()
    with pytest.raises(DescriptorError, match="invalid value"):
        op2 = BackendDescriptor(DescriptorType.OPERATION_REDUCTION)
        op2.set_attribute(RA.REDUCTION_OPERATOR, T.REDUCTION_MODE, [10])


def test_json_keys_sit_on_the_node_and_match_the_exported_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node == {
        "compute_data_type": "float",
        "in_tensor_uid": 1,
        "is_deterministic": True,
        "mode": "norm2",
        "name": "norm",
        "out_tensor_uid": 2,
        "type": "ReductionAttributes",
    }
    jsonschema.validate(doc, json_schema())
    # hipDNN's reader takes is_deterministic as false when absent (older hipDNN wrote none)
    del node["is_deterministic"]
    jsonschema.validate(doc, json_schema())
    read = hg.Graph.from_json(json.dumps(doc))
    assert read.nodes[0].attributes.get_is_deterministic() is False
    assert '"is_deterministic":false' in read.to_json()
    for edit, words in (
        (lambda n: n.pop("mode"), "key 'mode' not found"),
        (lambda n: n.update(inputs={}), "['mode'] given both in 'attributes' and on the node"),
        (lambda n: n.update(is_deterministic=1), "is_deterministic must be true or false"),
        (lambda n: n.update(mode=["add"]), "mode must be a string"),
        (lambda n: n.update(in_tensor_uid=99), "tensor uid 99"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message
    bad = json.loads(json.dumps(doc))
    bad["nodes"][0]["mode"] = "ADD"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())


def test_cli_validates_shows_draws_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = _graph()
    binary, text = tmp_path / "red.bin", tmp_path / "red.json"
    binary.write_bytes(g.serialize())
    text.write_text(g.to_json())
    assert main(["validate", str(text)]) == 0
    assert "1 node(s): norm (REDUCTION)" in capsys.readouterr().out
    assert main(["show", str(binary)]) == 0
    out = capsys.readouterr().out
    assert "norm  REDUCTION  compute FLOAT  [mode=NORM2, is_deterministic=True]" in out
    assert "in:  X=x#1" in out and "out: Y=norm::Y#2" in out
    assert main(["show", "--mermaid", str(text)]) == 0
    assert "<b>norm</b><br/>REDUCTION" in capsys.readouterr().out
    assert main(["show", "--dot", str(binary)]) == 0
    assert 'label="norm\\nREDUCTION"' in capsys.readouterr().out
    assert main(["run", str(binary)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
