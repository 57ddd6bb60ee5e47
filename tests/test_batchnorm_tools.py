"""Batch-norm graphs through the project's own tools: descriptors (pack/unpack), the JSON schema
and hipDNN's JSON layout (uids in inputs/outputs, absent optionals as ``null``, peer stats an
array), the CLI (show/Mermaid/run). The byte-exact wire against hipDNN's generated code is in
tests/wire/."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import DescriptorType
from hipdnn_graph.nodes.batchnorm import BatchnormAttributeName as BA

D = DescriptorType.OPERATION_BATCHNORM_DESCRIPTOR_EXT


def _graph(running: bool = True) -> hg.Graph:
    g = hg.Graph(name="bn", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    gamma, beta = g.tensor(name="gamma", dim=[1, 3, 1, 1]), g.tensor(name="beta", dim=[1, 3, 1, 1])
    eps = g.tensor(name="eps").set_value(1e-5)
    attrs = hg.BatchnormAttributes().set_name("bn").set_epsilon(eps)
    if running:
        rm, rv = g.tensor(name="rm", dim=[1, 3, 1, 1]), g.tensor(name="rv", dim=[1, 3, 1, 1])
        attrs.set_previous_running_stats(rm, rv, g.tensor(name="momentum").set_value(0.1))
    for t in g.batchnorm(x, gamma, beta, attrs):
        if t is not None:
            t.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_slot() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    back = hg.BatchnormNode(hg.BatchnormAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert back.name == "bn" and a.get_momentum().get_name() == "momentum"
    assert a.get_next_running_variance().get_dim() == [1, 3, 1, 1]
    assert a.get_peer_stats() == []
    assert int(BA.OPERATION_BATCHNORM_PEER_STATS_EXT) == 2913
    with pytest.raises(DescriptorError, match=r"BatchnormOperationDescriptor::finalize\(\) failed"):
        BackendDescriptor(D).finalize()


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node["inputs"]["peer_stats_tensor_uid"] == []
    assert sorted(node["outputs"]) == [
        "inv_variance_tensor_uid",
        "mean_tensor_uid",
        "next_running_mean_tensor_uid",
        "next_running_variance_tensor_uid",
        "y_tensor_uid",
    ]
    jsonschema.validate(doc, json_schema())
    lean = json.loads(_graph(running=False).to_json())
    assert lean["nodes"][0]["inputs"]["momentum_tensor_uid"] is None  # null, as hipDNN writes it
    jsonschema.validate(lean, json_schema())
    for edit, words in (
        (lambda n: n["inputs"].pop("momentum_tensor_uid"), "key 'momentum_tensor_uid' not found"),
        (lambda n: n["inputs"].update(peer_stats_tensor_uid=[1.5]), "array of 64-bit integers"),
        (lambda n: n["inputs"].update(peer_stats_tensor_uid=None), "an array"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message
    bad = json.loads(json.dumps(doc))
    bad["nodes"][0]["inputs"]["peer_stats_tensor_uid"] = "none"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())


def test_cli_shows_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bn.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "bn  BATCHNORM  compute FLOAT" in out
    assert "in:  X=x#1 SCALE=gamma#2 BIAS=beta#3 PREV_RUNNING_MEAN=rm#5" in out
    assert "NEXT_RUNNING_VARIANCE=bn::NEXT_RUNNING_VARIANCE#" in out
    assert main(["show", "--mermaid", str(path)]) == 0
    assert "<b>bn</b><br/>BATCHNORM" in capsys.readouterr().out
    assert main(["show", "--dot", str(path)]) == 0
    assert "BATCHNORM" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
