"""Batch-norm inference-from-variance graphs through the project's own tools: descriptors
(pack/unpack), the JSON schema and hipDNN's JSON layout, the CLI (show/run)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import DescriptorType

D = DescriptorType.OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT


def _graph() -> hg.Graph:
    g = hg.Graph(name="bnv", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    stats = [g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("mean", "var", "gamma", "beta")]
    eps = g.tensor(name="eps").set_value(1e-5)
    g.batchnorm_inference_variance_ext(x, *stats, eps, name="bn").set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_slot() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    node = hg.BatchnormInferenceVarianceNode(hg.BatchnormInferenceAttributesVarianceExt())
    a = node.unpack_from_descriptor(op, {}).attributes
    assert a.get_variance().get_name() == "var" and a.get_epsilon().get_name() == "eps"
    with pytest.raises(DescriptorError, match=r"BatchnormInferenceVarianceExtOperationDescriptor"):
        BackendDescriptor(D).finalize()


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node["type"] == "BatchnormInferenceAttributesVarianceExt"
    assert sorted(node["inputs"]) == [
        "bias_tensor_uid",
        "epsilon_tensor_uid",
        "mean_tensor_uid",
        "scale_tensor_uid",
        "variance_tensor_uid",
        "x_tensor_uid",
    ]
    assert node["outputs"] == {"y_tensor_uid": 7}
    jsonschema.validate(doc, json_schema())


def test_cli_shows_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bnv.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    assert "bn  BATCHNORM_INFERENCE_VARIANCE_EXT  compute FLOAT" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
