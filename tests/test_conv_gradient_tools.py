"""The data- and weight-gradient convolutions through the project's own tools: descriptors
(pack/unpack on the gradient descriptors and the shared convolution attributes), hipDNN's JSON
layout and the exported schema, the CLI (show/DOT/Mermaid, run refused naming the family)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import AttributeType as T
from hipdnn_graph.descriptors.enums import DescriptorType as D
from hipdnn_graph.nodes.conv_spec import ConvolutionAttributeName as CA

MEMBERS = {"pre_padding": [1, 0], "post_padding": [0, 1], "stride": [2, 2], "dilation": [1, 1]}


def _graph() -> hg.Graph:
    g = hg.Graph(name="grads", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    grad = g.tensor(name="grad", dim=[2, 6, 4, 4])
    dy = g.pointwise(grad, name="scale", mode=hg.PointwiseMode.NEG)  # connects both gradients
    w = g.tensor(name="w", dim=[6, 4, 3, 3])
    dx = g.conv_dgrad(dy, w, name="dg", **MEMBERS)
    x = g.tensor(name="x", dim=[2, 4, 8, 8])
    dw = g.conv_wgrad(dy, x, name="wg", convolution_mode=hg.ConvolutionMode.CONVOLUTION, **MEMBERS)
    dx.set_output(True)
    dw.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    dg, wg = (n for n in g.nodes if n.name in ("dg", "wg"))
    op = dg.create_operation({}, [])
    assert op.descriptor_type == D.OPERATION_CONVOLUTION_BACKWARD_DATA
    assert op.get_attribute(CA.CONVOLUTION_PRE_PADDINGS, T.INT64) == [1, 0]
    assert op.get_attribute(CA.CONVOLUTION_FILTER_STRIDES, T.INT64) == [2, 2]
    back = hg.ConvolutionDgradNode(hg.ConvDgradAttributes()).unpack_from_descriptor(op, {})
    assert (back.attributes.post_padding, back.name) == ([0, 1], "dg")
    assert back.attributes.get_dx().get_dim() == [2, 4, 8, 8]
    op = wg.create_operation({}, [])
    assert op.descriptor_type == D.OPERATION_CONVOLUTION_BACKWARD_FILTER
    assert op.get_attribute(CA.CONVOLUTION_CONV_MODE, T.INT64) == [hg.ConvolutionMode.CONVOLUTION]
    back = hg.ConvolutionWgradNode(hg.ConvWgradAttributes()).unpack_from_descriptor(op, {})
    assert back.attributes.get_convolution_mode() is hg.ConvolutionMode.CONVOLUTION
    assert back.attributes.get_dw().get_dim() == [6, 4, 3, 3]
    for kind, cls in (
        (D.OPERATION_CONVOLUTION_BACKWARD_DATA, "ConvolutionBwdOperationDescriptor"),
        (D.OPERATION_CONVOLUTION_BACKWARD_FILTER, "ConvolutionWrwOperationDescriptor"),
    ):
        with pytest.raises(DescriptorError, match=rf"{cls}::finalize\(\) failed"):
            BackendDescriptor(kind).finalize()


def test_json_layout_and_the_exported_schema() -> None:
    doc = json.loads(_graph().to_json())
    dg, wg = (n for n in doc["nodes"] if n["name"] in ("dg", "wg"))
    assert (dg["type"], sorted(dg["inputs"]), list(dg["outputs"])) == (
        "ConvolutionBwdAttributes", ["dy_tensor_uid", "w_tensor_uid"], ["dx_tensor_uid"],
    )  # fmt: skip
    assert (wg["type"], sorted(wg["inputs"]), list(wg["outputs"])) == (
        "ConvolutionWrwAttributes", ["dy_tensor_uid", "x_tensor_uid"], ["dw_tensor_uid"],
    )  # fmt: skip
    assert wg["parameters"] == {**MEMBERS, "conv_mode": "CONVOLUTION"}
    jsonschema.validate(doc, json_schema())
    assert hg.Graph.from_json(json.dumps(doc)).to_json() == _graph().to_json()
    broken = json.loads(json.dumps(doc))
    next(n for n in broken["nodes"] if n["name"] == "wg")["parameters"].pop("dilation")
    with pytest.raises(hg.HipdnnError, match="key 'dilation' not found"):
        hg.Graph.from_json(json.dumps(broken))


def test_cli_shows_draws_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "grads.bin"
    binary.write_bytes(_graph().serialize())
    assert main(["show", str(binary)]) == 0
    out = capsys.readouterr().out
    assert "dg  CONVOLUTION_DGRAD  compute FLOAT" in out and "wg  CONVOLUTION_WGRAD" in out
    assert "in:  DY=scale::OUT_0#" in out and " X=x#" in out and "out: DW=wg::DW#" in out
    assert main(["show", "--mermaid", str(binary)]) == 0
    assert "<b>wg</b><br/>CONVOLUTION_WGRAD" in capsys.readouterr().out
    assert main(["show", "--dot", str(binary)]) == 0
    assert 'label="dg\\nCONVOLUTION_DGRAD"' in capsys.readouterr().out
    alone = hg.Graph(name="dg", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy = alone.tensor(name="dy", dim=[2, 6, 4, 4])
    alone.conv_wgrad(dy, alone.tensor(name="x", dim=[2, 4, 8, 8]), name="wg", **MEMBERS)
    alone.nodes[0].attributes.get_dw().set_output(True)
    binary.write_bytes(alone.serialize())
    assert main(["run", str(binary)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
