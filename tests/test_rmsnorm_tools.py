"""RMSNorm graphs through the project's own tools: descriptors (pack/unpack), the JSON schema
and hipDNN's JSON layout (absent optional uids left out, ``forward_phase`` on the node only when
set), the CLI (show/run) and pictures. The byte-exact wire against hipDNN's generated code is in
tests/wire/."""

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
from hipdnn_graph.nodes.rmsnorm import RMSNormAttributeName as RA

P = hg.NormFwdPhase


def _graph(phase: hg.NormFwdPhase = P.TRAINING, bias: bool = True) -> hg.Graph:
    g = hg.Graph(name="rms", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4, 8, 16])
    gamma = g.tensor(name="gamma", dim=[1, 1, 16])
    extra = {"bias": g.tensor(name="beta", dim=[1, 1, 16])} if bias else {}
    eps = g.tensor(name="eps").set_value(1e-5)
    y, inv_rms = g.rmsnorm(x, gamma, epsilon=eps, forward_phase=phase, name="norm", **extra)
    y.set_output(True)
    if inv_rms is not None:
        inv_rms.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    node = g.nodes[0]
    op = node.create_operation({}, [])
    assert op.descriptor_type == DescriptorType.OPERATION_RMSNORM_DESCRIPTOR_EXT
    assert op.get_attribute(RA.OPERATION_RMSNORM_FWD_PHASE_EXT, T.NORM_FWD_PHASE) == [P.TRAINING]
    assert op.get_attribute(RA.RMSNORM_COMP_TYPE_EXT, T.DATA_TYPE) == [hg.DataType.FLOAT]
    back = hg.RMSNormNode(hg.RMSNormAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert (a.get_forward_phase(), back.name) == (P.TRAINING, "norm")
    assert a.get_inv_rms().get_dim() == [4, 8, 1] and a.get_bias().get_name() == "beta"
    assert a.get_epsilon().get_value() == pytest.approx(1e-5)
    with pytest.raises(
        DescriptorError, match=r"RMSNormOperationDescriptor::finalize\(\) failed: X"
    ):
        BackendDescriptor(DescriptorType.OPERATION_RMSNORM_DESCRIPTOR_EXT).finalize()
    with pytest.raises(DescriptorError, match="invalid value"):
        BackendDescriptor(DescriptorType.OPERATION_RMSNORM_DESCRIPTOR_EXT).set_attribute(
            RA.OPERATION_RMSNORM_FWD_PHASE_EXT, T.NORM_FWD_PHASE, [3]
        )


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert node["forward_phase"] == "TRAINING"
    assert node["inputs"] == {
        "bias_tensor_uid": 3, "epsilon_tensor_uid": 4, "scale_tensor_uid": 2, "x_tensor_uid": 1,
    }  # fmt: skip
    assert node["outputs"] == {"inv_rms_tensor_uid": 6, "y_tensor_uid": 5}
    jsonschema.validate(doc, json_schema())
    lean = json.loads(_graph(P.INFERENCE, bias=False).to_json())["nodes"][0]
    assert "bias_tensor_uid" not in lean["inputs"] and lean["outputs"] == {"y_tensor_uid": 4}
    for edit, words in (
        (lambda n: n["inputs"].update(bias_tensor_uid=None), "bias_tensor_uid must be an integer"),
        (lambda n: n.update(forward_phase="training"), "'training' is not a NormFwdPhase"),
        (
            lambda n: n.update(attributes={}),
            "['forward_phase'] given both in 'attributes' and on the node",
        ),
        (lambda n: n["inputs"].pop("epsilon_tensor_uid"), "key 'epsilon_tensor_uid' not found"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message
    # no forward_phase key: NOT_SET, as hipDNN reads it (and validation then refuses the node)
    unset = json.loads(json.dumps(doc))
    del unset["nodes"][0]["forward_phase"]
    jsonschema.validate(unset, json_schema())
    read = hg.Graph.from_json(json.dumps(unset))
    assert read.nodes[0].attributes.get_forward_phase() is P.NOT_SET
    assert "forward_phase" not in read.to_json()


def test_cli_shows_draws_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rms.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "norm  RMS_NORM  compute FLOAT  [forward_phase=TRAINING]" in out
    assert "in:  X=x#1 SCALE=gamma#2 EPSILON=eps#4 BIAS=beta#3" in out
    assert "out: Y=norm::Y#5 INV_RMS=norm::INV_RMS#6" in out
    assert main(["show", "--mermaid", str(path)]) == 0
    assert "<b>norm</b><br/>RMS_NORM" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out
