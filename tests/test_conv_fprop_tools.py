"""Forward-convolution graphs through the project's own tools: descriptors (pack/unpack with
the shared convolution attributes), the JSON schema and hipDNN's JSON layout (uids in
inputs/outputs, members under "parameters"), the CLI (validate/show/run) and pictures (DOT,
Mermaid). The byte-exact wire against hipDNN's generated code is in tests/wire/."""

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
from hipdnn_graph.nodes.conv_spec import ConvolutionAttributeName as CA

M = hg.ConvolutionMode


def _graph() -> hg.Graph:
    g = hg.Graph(name="cv", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 4, 8, 8])
    w = g.tensor(name="w", dim=[6, 4, 3, 3])
    y = g.conv_fprop(
        x, w, name="conv", pre_padding=[1, 0], post_padding=[1, 2], stride=[1, 2],
        dilation=[1, 1], convolution_mode=M.CONVOLUTION,
    )  # fmt: skip
    y.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    node = g.nodes[0]
    op = node.create_operation({}, [])
    assert op.descriptor_type == DescriptorType.OPERATION_CONVOLUTION_FORWARD
    assert op.get_attribute(CA.CONVOLUTION_PRE_PADDINGS, T.INT64) == [1, 0]
    assert op.get_attribute(CA.CONVOLUTION_POST_PADDINGS, T.INT64) == [1, 2]
    assert op.get_attribute(CA.CONVOLUTION_FILTER_STRIDES, T.INT64) == [1, 2]
    assert op.get_attribute(CA.CONVOLUTION_DILATIONS, T.INT64) == [1, 1]
    assert op.get_attribute(CA.CONVOLUTION_CONV_MODE, T.INT64) == [M.CONVOLUTION]
    assert op.get_attribute(CA.CONVOLUTION_COMP_TYPE, T.DATA_TYPE) == [hg.DataType.FLOAT]
    back = hg.ConvolutionFpropNode(hg.ConvFpropAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert (a.pre_padding, a.post_padding, a.stride, a.dilation, back.name) == (
        [1, 0], [1, 2], [1, 2], [1, 1], "conv",
    )  # fmt: skip
    assert a.get_convolution_mode() is M.CONVOLUTION
    assert a.get_y().get_dim() == [2, 6, 8, 4]
    with pytest.raises(DescriptorError, match=r"ConvolutionFwdOperationDescriptor::finalize"):
        BackendDescriptor(DescriptorType.OPERATION_CONVOLUTION_FORWARD).finalize()
    op2 = BackendDescriptor(DescriptorType.OPERATION_CONVOLUTION_FORWARD)
    with pytest.raises(DescriptorError, match="elementCount must be positive"):
        op2.set_attribute(CA.CONVOLUTION_FILTER_STRIDES, T.INT64, [])
    with pytest.raises(DescriptorError, match="invalid value"):
        op2.set_attribute(CA.CONVOLUTION_CONV_MODE, T.INT64, [3])


def test_json_layout_and_the_exported_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node == {
        "compute_data_type": "float",
        "inputs": {"w_tensor_uid": 2, "x_tensor_uid": 1},
        "name": "conv",
        "outputs": {"y_tensor_uid": 3},
        "parameters": {
            "conv_mode": "CONVOLUTION",
            "dilation": [1, 1],
            "post_padding": [1, 2],
            "pre_padding": [1, 0],
            "stride": [1, 2],
        },
        "type": "ConvolutionFwdAttributes",
    }
    jsonschema.validate(doc, json_schema())
    for edit, words in (
        (lambda n: n["parameters"].pop("stride"), "key 'stride' not found"),
        (lambda n: n["parameters"].update(dilation=[1, 1.5]), "dilation"),
        (lambda n: n["parameters"].update(conv_mode=1), "conv_mode"),
        (lambda n: n["inputs"].update(w_tensor_uid=99), "tensor uid 99"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message
    bad = json.loads(json.dumps(doc))
    bad["nodes"][0]["parameters"]["stride"] = "1,2"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())


def test_cli_validates_shows_draws_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = _graph()
    binary, text = tmp_path / "cv.bin", tmp_path / "cv.json"
    binary.write_bytes(g.serialize())
    text.write_text(g.to_json())
    assert main(["validate", str(text)]) == 0
    assert "1 node(s): conv (CONVOLUTION_FPROP)" in capsys.readouterr().out
    assert main(["show", str(binary)]) == 0
    out = capsys.readouterr().out
    assert "conv  CONVOLUTION_FPROP  compute FLOAT" in out and "stride=[1, 2]" in out
    assert "in:  X=x#1 W=w#2" in out and "out: Y=conv::Y#3" in out
    assert main(["show", "--mermaid", str(text)]) == 0
    assert "<b>conv</b><br/>CONVOLUTION_FPROP" in capsys.readouterr().out
    assert main(["show", "--dot", str(binary)]) == 0
    assert 'label="conv\\nCONVOLUTION_FPROP"' in capsys.readouterr().out
    assert main(["run", str(binary)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
