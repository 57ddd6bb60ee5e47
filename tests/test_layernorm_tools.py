"""Layer-norm graphs through the project's own tools: descriptors (pack/unpack), the JSON schema
and hipDNN's JSON layout (``normalized_dim_count`` and a numeric ``forward_phase`` on the node,
absent statistics as ``null``), the CLI (show/run). The byte-exact wire against hipDNN's
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
from hipdnn_graph.nodes.layernorm import LayernormAttributeName as LA

P = hg.NormFwdPhase
D = DescriptorType.OPERATION_LAYERNORM_DESCRIPTOR_EXT


def _graph(phase: hg.NormFwdPhase = P.TRAINING) -> hg.Graph:
    g = hg.Graph(name="ln", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4, 8, 16])
    gamma, beta = g.tensor(name="gamma", dim=[16]), g.tensor(name="beta", dim=[16])
    eps = g.tensor(name="eps").set_value(1e-5)
    outputs = g.layernorm(
        x, gamma, beta, epsilon=eps, forward_phase=phase, name="ln", normalized_dim_count=1
    )
    for t in outputs:
        if t is not None:
            t.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    assert op.get_attribute(LA.OPERATION_LAYERNORM_FWD_PHASE_EXT, T.NORM_FWD_PHASE) == [P.TRAINING]
    assert op.get_attribute(LA.OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT, T.INT64) == [1]
    back = hg.LayerNormNode(hg.LayernormAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert (a.get_forward_phase(), a.get_normalized_dim_count(), back.name) == (P.TRAINING, 1, "ln")
    assert a.get_mean().get_dim() == [4, 1, 1] and a.get_bias().get_name() == "beta"
    with pytest.raises(DescriptorError, match=r"LayernormOperationDescriptor::finalize\(\) failed"):
        BackendDescriptor(D).finalize()


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    node = doc["nodes"][0]
    assert (node["forward_phase"], node["normalized_dim_count"]) == (2, 1)
    assert node["outputs"] == {
        "inv_variance_tensor_uid": 7,
        "mean_tensor_uid": 6,
        "y_tensor_uid": 5,
    }
    jsonschema.validate(doc, json_schema())
    lean = json.loads(_graph(P.INFERENCE).to_json())
    assert lean["nodes"][0]["outputs"]["mean_tensor_uid"] is None  # null, as hipDNN writes it
    assert lean["nodes"][0]["forward_phase"] == 1
    jsonschema.validate(lean, json_schema())
    for edit, words in (
        (lambda n: n.pop("normalized_dim_count"), "key 'normalized_dim_count' not found"),
        (lambda n: n["outputs"].pop("mean_tensor_uid"), "key 'mean_tensor_uid' not found"),
        (lambda n: n.update(forward_phase="TRAINED"), "forward_phase must be an integer"),
        (lambda n: n.update(forward_phase=True), "forward_phase must be an integer"),
        (lambda n: n.update(normalized_dim_count=1.5), "normalized_dim_count must be an integer"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message
    # the phase's name (hipDNN's benchmark graphs write "TRAINING") reads as its number
    named = json.loads(json.dumps(doc))
    named["nodes"][0]["forward_phase"] = "INFERENCE"
    assert hg.Graph.from_json(json.dumps(named)).nodes[0].attributes.forward_phase is P.INFERENCE
    bad = json.loads(json.dumps(doc))
    bad["nodes"][0]["forward_phase"] = 5
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())


def test_cli_shows_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ln.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ln  LAYER_NORM  compute FLOAT  [normalized_dim_count=1, forward_phase=TRAINING]" in out
    assert "in:  X=x#1 SCALE=gamma#2 BIAS=beta#3 EPSILON=eps#4" in out
    assert "out: Y=ln::Y#5 MEAN=ln::MEAN#6 INV_VARIANCE=ln::INV_VARIANCE#7" in out
    assert main(["show", "--mermaid", str(path)]) == 0
    assert "<b>ln</b><br/>LAYER_NORM" in capsys.readouterr().out
    # In TRAINING, hipDNN infers MEAN [4, 1, 1] beside the SCALE of rank 1, which does not hold
    # one value per batch position of normalized_dim_count=1: every engine refuses it. The same
    # node in INFERENCE has no statistics and runs on a torch family engine (issue 25).
    assert main(["run", str(path)]) == 1
    assert "not one value per" in capsys.readouterr().err
    inference = tmp_path / "ln_inference.bin"
    inference.write_bytes(_graph(P.INFERENCE).serialize())
    assert main(["run", str(inference)]) == 0
    assert "execute: median" in capsys.readouterr().out
