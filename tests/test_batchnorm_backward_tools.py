"""Batch-norm backward graphs through the project's own tools: descriptors (pack/unpack), the
JSON schema and hipDNN's JSON layout (peer stats an array, absent saved statistics null), the CLI
(show/run)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import DescriptorType

D = DescriptorType.OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT


def _graph() -> hg.Graph:
    g = hg.Graph(name="bnb", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy, x = g.tensor(name="dy", dim=[2, 3, 4, 4]), g.tensor(name="x", dim=[2, 3, 4, 4])
    for t in g.batchnorm_backward(dy, x, g.tensor(name="gamma", dim=[1, 3, 1, 1]), name="bwd"):
        t.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_slot() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    node = hg.BatchnormBackwardNode(hg.BatchnormBackwardAttributes())
    a = node.unpack_from_descriptor(op, {}).attributes
    assert a.get_dy().get_name() == "dy" and a.get_dscale().get_dim() == [1, 3, 1, 1]
    assert a.get_mean() is None and a.get_peer_stats() == []
    with pytest.raises(DescriptorError, match=r"BatchnormBackwardOperationDescriptor"):
        BackendDescriptor(D).finalize()


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node["inputs"] == {
        "dy_tensor_uid": 1,
        "inv_variance_tensor_uid": None,
        "mean_tensor_uid": None,
        "peer_stats_tensor_uid": [],
        "scale_tensor_uid": 3,
        "x_tensor_uid": 2,
    }
    assert sorted(node["outputs"]) == ["dbias_tensor_uid", "dscale_tensor_uid", "dx_tensor_uid"]
    jsonschema.validate(doc, json_schema())
    node["inputs"]["peer_stats_tensor_uid"] = [9]
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert "BatchnormBackwardAttributes.peer_stats_tensor_uid = (9,)" in info.value.message


def test_cli_shows_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bnb.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "bwd  BATCHNORM_BACKWARD  compute FLOAT" in out
    assert "out: DX=bwd::DX#4 DSCALE=bwd::DSCALE#5 DBIAS=bwd::DBIAS#6" in out
    assert main(["run", str(path)]) == 0  # on an engine that runs the family
    assert "execute: median" in capsys.readouterr().out
