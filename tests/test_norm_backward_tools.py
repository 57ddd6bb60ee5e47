"""Layer-norm and RMSNorm backward graphs through the project's own tools: descriptors
(pack/unpack), the JSON schema and hipDNN's JSON layout (layer norm: absent statistics and
epsilon ``null``, ``normalized_dim_count`` on the node; RMSNorm: an absent dbias left out), the
CLI (show/run, DOT and Mermaid). The byte-exact wire against hipDNN's generated code is in
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
from hipdnn_graph.nodes.layernorm_backward import LayernormBackwardAttributeName as LA

LN = DescriptorType.OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT
RMS = DescriptorType.OPERATION_RMSNORM_BACKWARD_DESCRIPTOR_EXT


def _ln_graph(saved: bool = True) -> hg.Graph:
    g = hg.Graph(name="lnb", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy, x = g.tensor(name="dy", dim=[4, 8, 16]), g.tensor(name="x", dim=[4, 8, 16])
    attrs = hg.LayernormBackwardAttributes()
    if saved:
        mean, inv_var = g.tensor(name="mean", dim=[4, 1, 1]), g.tensor(name="iv", dim=[4, 1, 1])
        attrs.set_saved_mean_and_inv_variance(mean, inv_var)
    for t in g.layernorm_backward(dy, x, g.tensor(name="gamma", dim=[1, 8, 16]), attrs, name="b"):
        t.set_output(True)
    return g


def _rms_graph(dbias: bool = True) -> hg.Graph:
    g = hg.Graph(name="rmsb", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy, x = g.tensor(name="dy", dim=[4, 8, 16]), g.tensor(name="x", dim=[4, 8, 16])
    gamma, inv_rms = g.tensor(name="gamma", dim=[1, 1, 16]), g.tensor(name="r", dim=[4, 8, 1])
    for t in g.rmsnorm_backward(dy, x, gamma, inv_rms, compute_dbias=dbias, name="rb"):
        if t is not None:
            t.set_output(True)
    return g


def test_layernorm_backward_descriptors_pack_and_unpack_every_member() -> None:
    g = _ln_graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == LN and int(LN) == 35
    assert op.get_attribute(LA.LAYERNORM_BACKWARD_NORMALIZED_DIM_COUNT_EXT, T.INT64) == [2]
    back = hg.LayernormBackwardNode(hg.LayernormBackwardAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert (a.get_normalized_dim_count(), back.name) == (2, "b")
    assert a.get_mean().get_name() == "mean" and a.get_epsilon() is None
    assert a.get_dscale().get_dim() == [1, 8, 16]
    with pytest.raises(DescriptorError, match=r"LayernormBackwardOperationDescriptor"):
        BackendDescriptor(LN).finalize()


def test_rmsnorm_backward_descriptors_pack_and_unpack_every_slot() -> None:
    g = _rms_graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == RMS
    back = hg.RMSNormBackwardNode(hg.RMSNormBackwardAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert a.get_inv_rms().get_name() == "r" and a.get_dbias().get_dim() == [1, 1, 16]
    with pytest.raises(DescriptorError, match=r"RMSNormBackwardOperationDescriptor"):
        BackendDescriptor(RMS).finalize()


def test_layernorm_backward_json_layout_and_schema() -> None:
    doc = json.loads(_ln_graph(saved=False).to_json())
    node = doc["nodes"][0]
    assert node["type"] == "LayernormBackwardAttributes" and node["normalized_dim_count"] == 2
    assert node["inputs"] == {
        "dy_tensor_uid": 1,
        "epsilon_tensor_uid": None,
        "inv_variance_tensor_uid": None,
        "mean_tensor_uid": None,
        "scale_tensor_uid": 3,
        "x_tensor_uid": 2,
    }
    assert sorted(node["outputs"]) == ["dbias_tensor_uid", "dscale_tensor_uid", "dx_tensor_uid"]
    jsonschema.validate(doc, json_schema())
    jsonschema.validate(json.loads(_ln_graph().to_json()), json_schema())
    for edit, words in (
        (lambda n: n.pop("normalized_dim_count"), "key 'normalized_dim_count' not found"),
        (lambda n: n["inputs"].pop("epsilon_tensor_uid"), "key 'epsilon_tensor_uid' not found"),
        (lambda n: n.update(normalized_dim_count=1.5), "normalized_dim_count must be an integer"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message
    # in the nested layout of hipDNN's sample_layernorm_backward.json, absent tensors are left
    # out: the node's fields under "attributes", epsilon's key absent, read as no epsilon
    node = doc["nodes"][0]
    del node["inputs"]["epsilon_tensor_uid"]
    node["attributes"] = {"normalized_dim_count": node.pop("normalized_dim_count")}
    read = hg.Graph.from_json(json.dumps(doc)).nodes[0].attributes
    assert read.get_epsilon() is None and read.normalized_dim_count == 2


def test_rmsnorm_backward_json_layout_and_schema() -> None:
    doc = json.loads(_rms_graph(dbias=False).to_json())
    node = doc["nodes"][0]
    assert node["inputs"] == {
        "dy_tensor_uid": 1,
        "inv_rms_tensor_uid": 4,
        "scale_tensor_uid": 3,
        "x_tensor_uid": 2,
    }
    assert node["outputs"] == {"dscale_tensor_uid": 6, "dx_tensor_uid": 5}  # no dbias key
    jsonschema.validate(doc, json_schema())
    full = json.loads(_rms_graph().to_json())
    assert full["nodes"][0]["outputs"]["dbias_tensor_uid"] == 7
    jsonschema.validate(full, json_schema())
    del doc["nodes"][0]["inputs"]["inv_rms_tensor_uid"]
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert "key 'inv_rms_tensor_uid' not found" in info.value.message


@pytest.mark.parametrize(
    ("build", "kind", "line"),
    [
        (_ln_graph, "LAYERNORM_BACKWARD", "out: DX=b::DX#6 DSCALE=b::DSCALE#7 DBIAS=b::DBIAS#8"),
        (_rms_graph, "RMS_NORM_BACKWARD", "out: DX=rb::DX#5 DSCALE=rb::DSCALE#6 DBIAS=rb::DBIAS#7"),
    ],
)
def test_cli_shows_and_runs(
    build: object,
    kind: str,
    line: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    g = build()  # type: ignore[operator]
    name = g.nodes[0].name
    path = tmp_path / "g.bin"
    path.write_bytes(g.serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{name}  {kind}  compute FLOAT" in out and line in out
    assert main(["show", "--mermaid", str(path)]) == 0
    assert f"<b>{name}</b><br/>{kind}" in capsys.readouterr().out
    assert main(["show", "--dot", str(path)]) == 0
    assert kind in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # on the torch family engine, or the NumPy reference
    assert "execute: median" in capsys.readouterr().out
