"""Batch-norm inference graphs through the project's own tools: descriptors (pack/unpack), the
JSON schema and hipDNN's JSON layout, the CLI (show/Mermaid/run). The byte-exact wire against
hipDNN's generated code is in tests/wire/."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import DescriptorType

D = DescriptorType.OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT


def _graph() -> hg.Graph:
    g = hg.Graph(name="bni", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    stats = [g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("mean", "inv_var", "gamma", "beta")]
    g.batchnorm_inference(x, *stats, name="bn").set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_slot() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    back = hg.BatchnormInferenceNode(hg.BatchnormInferenceAttributes()).unpack_from_descriptor(
        op, {}
    )
    a = back.attributes
    assert back.name == "bn" and a.get_inv_variance().get_name() == "inv_var"
    assert a.get_y().get_dim() == [2, 3, 4, 4]
    with pytest.raises(DescriptorError, match=r"BatchnormInferenceOperationDescriptor::finalize"):
        BackendDescriptor(D).finalize()


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node["type"] == "BatchnormInferenceAttributes"
    assert node["inputs"] == {
        "bias_tensor_uid": 5,
        "inv_variance_tensor_uid": 3,
        "mean_tensor_uid": 2,
        "scale_tensor_uid": 4,
        "x_tensor_uid": 1,
    }
    assert node["outputs"] == {"y_tensor_uid": 6}
    jsonschema.validate(doc, json_schema())
    broken = json.loads(json.dumps(doc))
    broken["nodes"][0]["inputs"].pop("mean_tensor_uid")
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(broken))
    assert "key 'mean_tensor_uid' not found" in info.value.message


def test_cli_shows_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bni.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "bn  BATCHNORM_INFERENCE  compute FLOAT" in out
    assert "in:  X=x#1 MEAN=mean#2 INV_VARIANCE=inv_var#3 SCALE=gamma#4 BIAS=beta#5" in out
    assert main(["show", "--mermaid", str(path)]) == 0
    assert "<b>bn</b><br/>BATCHNORM_INFERENCE" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
