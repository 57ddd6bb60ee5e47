"""Resample graphs through the project's own tools: descriptors (pack/unpack, the packers' mode
refusal), the JSON schema and hipDNN's JSON layout (keys on the node, modes as numbers, an
absent INDEX's uid left out), the CLI (validate/show/draw, and run on the NumPy reference and on
the torch eager engine)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import DescriptorType

M, P = hg.ResampleMode, hg.PaddingMode


def _graph() -> hg.Graph:
    g = hg.Graph(
        name="rs",
        io_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
    )
    x = g.tensor(name="x", dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
    members = {"pre_padding": [0, 0], "post_padding": [0, 0], "stride": [2, 2], "window": [2, 2]}
    y, index = g.resample(
        x, name="pool", resample_mode=M.MAXPOOL, padding_mode=P.NEG_INF_PAD,
        generate_index=True, **members,
    )  # fmt: skip
    y.set_output(True)
    dy = g.tensor(name="dy", dim=[1, 3, 2, 2], stride=[12, 4, 2, 1])
    back = hg.ResampleBwdAttributes().set_name("back").set_resample_mode(M.MAXPOOL)
    dx = g.resample_bwd(dy, back.set_padding_mode(P.NEG_INF_PAD), index=index, **members)
    dx.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    fwd = g.nodes[0].create_operation({}, [])
    assert fwd.descriptor_type == DescriptorType.OPERATION_RESAMPLE_FWD
    a = hg.ResampleFwdNode(hg.ResampleFwdAttributes()).unpack_from_descriptor(fwd, {}).attributes
    assert a.get_x().get_name() == "x" and a.get_index().get_name() == "pool::Index"
    assert (a.get_window(), a.get_stride(), a.get_generate_index()) == ([2, 2], [2, 2], True)
    assert (a.get_resample_mode(), a.get_padding_mode()) == (M.MAXPOOL, P.NEG_INF_PAD)
    bwd = g.nodes[1].create_operation({}, [])
    assert bwd.descriptor_type == DescriptorType.OPERATION_RESAMPLE_BWD
    b = hg.ResampleBwdNode(hg.ResampleBwdAttributes()).unpack_from_descriptor(bwd, {}).attributes
    assert b.get_dy().get_name() == "dy" and b.get_index().get_name() == "pool::Index"
    assert b.get_dx().get_dim() == [1, 3, 4, 4] and b.get_pre_padding() == [0, 0]
    with pytest.raises(DescriptorError, match=r"ResampleFwdOperationDescriptor"):
        BackendDescriptor(DescriptorType.OPERATION_RESAMPLE_FWD).finalize()
    g.nodes[1].attributes.set_padding_mode(P.EDGE_VAL_PAD)
    with pytest.raises(hg.HipdnnError, match="Unsupported padding mode"):
        g.nodes[1].create_operation({}, [])


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    fwd, bwd = doc["nodes"]
    assert fwd == {
        "compute_data_type": "float",
        "generate_index": True,
        "index_tensor_uid": 3,
        "name": "pool",
        "padding_mode": 1,
        "post_padding": [0, 0],
        "pre_padding": [0, 0],
        "resample_mode": 1,
        "stride": [2, 2],
        "type": "ResampleFwdAttributes",
        "window": [2, 2],
        "x_tensor_uid": 1,
        "y_tensor_uid": 2,
    }
    assert (
        bwd["dy_tensor_uid"] == 4 and bwd["index_tensor_uid"] == 3 and "generate_index" not in bwd
    )
    jsonschema.validate(doc, json_schema())
    for edit, words in (
        (lambda n: n.pop("window"), "key 'window' not found"),
        (lambda n: n.update(resample_mode="maxpool"), "resample_mode"),
        (lambda n: n.update(padding_mode=3), "PaddingMode"),
        (lambda n: n.update(stride=[2, 2.5]), "stride"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken["nodes"][0])
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message, (words, info.value.message)
    optional = json.loads(json.dumps(doc))
    del optional["nodes"][0]["generate_index"]
    read = hg.Graph.from_json(json.dumps(optional)).nodes[0].attributes
    assert read.generate_index is None and read.get_generate_index() is False  # unset reads false
    bad = json.loads(json.dumps(doc))
    bad["nodes"][0]["resample_mode"] = "maxpool"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())


def test_cli_validates_shows_draws_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = _graph()
    binary, text = tmp_path / "rs.bin", tmp_path / "rs.json"
    binary.write_bytes(g.serialize())
    text.write_text(g.to_json())
    assert main(["validate", str(text)]) == 0
    assert "2 node(s): pool (RESAMPLE_FWD) -> back (RESAMPLE_BWD)" in capsys.readouterr().out
    assert main(["show", str(binary)]) == 0
    out = capsys.readouterr().out
    assert "pool  RESAMPLE_FWD  compute FLOAT" in out and "window=[2, 2]" in out
    assert "resample_mode=MAXPOOL, padding_mode=NEG_INF_PAD, generate_index=True" in out
    assert "out: Y=pool::Y#2 INDEX=pool::Index#3" in out
    assert "in:  DY=dy#4 INDEX=pool::Index#3" in out and "out: DX=back::DX#5" in out
    assert main(["show", "--mermaid", str(text)]) == 0
    assert "<b>back</b><br/>RESAMPLE_BWD" in capsys.readouterr().out
    assert main(["show", "--dot", str(binary)]) == 0
    assert 'label="pool\\nRESAMPLE_FWD"' in capsys.readouterr().out
    assert main(["run", str(binary), "--engine", "NUMPY_REFERENCE_ENGINE"]) == 0
    assert "engine NUMPY_REFERENCE_ENGINE" in capsys.readouterr().out
    if importlib.util.find_spec("torch") is not None:  # the torch family engines run it too
        assert main(["run", str(binary), "--engine", "TORCH_EAGER_ENGINE"]) == 0
        assert "engine TORCH_EAGER_ENGINE" in capsys.readouterr().out
