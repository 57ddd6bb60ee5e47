"""MoE grouped matmul graphs (forward and backward) through the project's own tools: descriptors
(pack/unpack), the JSON schema and hipDNN's JSON layout (absent routing tensors left out, mode and
top_k on the node), the CLI (show/run) and pictures."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError, json_schema
from hipdnn_graph.descriptors.enums import AttributeType as T
from hipdnn_graph.descriptors.enums import DescriptorType
from hipdnn_graph.nodes.moe_grouped_matmul import MoeGroupedMatmulAttributeName as MA

F, I32 = hg.DataType.FLOAT, hg.DataType.INT32
D = DescriptorType.OPERATION_MOE_GROUPED_MATMUL
DB = DescriptorType.OPERATION_MOE_GROUPED_MATMUL_BWD


def _graph(mode: hg.MoeGroupedMatmulMode = hg.MoeGroupedMatmulMode.SCATTER) -> hg.Graph:
    g = hg.Graph(name="moe", io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    token, weight = g.tensor(name="token", dim=[1, 8, 16]), g.tensor(name="w", dim=[2, 16, 32])
    offsets = g.tensor(name="off", dim=[2, 1, 1], data_type=I32)
    index = ks = None
    if mode != hg.MoeGroupedMatmulMode.NONE:
        index = g.tensor(name="idx", dim=[1, 8, 1], data_type=I32)
    if mode == hg.MoeGroupedMatmulMode.SCATTER:
        ks = g.tensor(name="ks", dim=[1, 8, 1], data_type=I32)
    top_k = 2 if mode == hg.MoeGroupedMatmulMode.SCATTER else 0
    out = g.moe_grouped_matmul(token, weight, offsets, index, ks, name="fc", mode=mode, top_k=top_k)
    out.set_output(True)
    g.moe_grouped_matmul_bwd(out, token, offsets, name="dfc").set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_slot_and_member() -> None:
    g = _graph()
    g.build_operation_graph()
    op = g.nodes[0].create_operation({}, [])
    assert op.descriptor_type == D
    assert op.get_attribute(MA.OPERATION_MOE_GROUPED_MATMUL_MODE, T.MOE_GROUPED_MATMUL_MODE) == [
        hg.MoeGroupedMatmulMode.SCATTER
    ]
    assert op.get_attribute(MA.OPERATION_MOE_GROUPED_MATMUL_TOP_K, T.INT32) == [2]
    a = hg.MoeGroupedMatmulNode(hg.MoeGroupedMatmulAttributes()).unpack_from_descriptor(op, {})
    attrs = a.attributes
    assert (attrs.get_mode(), attrs.get_top_k(), attrs.get_name()) == (
        hg.MoeGroupedMatmulMode.SCATTER, 2, "fc",
    )  # fmt: skip
    assert attrs.get_token_ks().get_name() == "ks"  # type: ignore[union-attr]
    bwd = g.nodes[1].create_operation({}, [])
    assert bwd.descriptor_type == DB
    back = hg.MoeGroupedMatmulBwdNode(hg.MoeGroupedMatmulBwdAttributes())
    dweight = back.unpack_from_descriptor(bwd, {}).attributes.get_dweight()
    assert dweight is not None and dweight.get_stride() == [512, 1, 16]
    with pytest.raises(DescriptorError, match=r"MoeGroupedMatmulOperationDescriptor"):
        BackendDescriptor(D).finalize()
    with pytest.raises(DescriptorError, match=r"MoeGroupedMatmulBwdOperationDescriptor"):
        BackendDescriptor(DB).finalize()


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph(hg.MoeGroupedMatmulMode.GATHER).to_json())
    fwd, bwd = doc["nodes"]
    assert fwd["inputs"] == {
        "first_token_offset_tensor_uid": 3,
        "token_index_tensor_uid": 4,
        "token_tensor_uid": 1,
        "weight_tensor_uid": 2,
    }
    assert (fwd["mode"], fwd["top_k"], fwd["outputs"]) == ("gather", 0, {"output_tensor_uid": 5})
    assert sorted(bwd) == ["compute_data_type", "inputs", "name", "outputs", "type"]
    assert bwd["outputs"] == {"dweight_tensor_uid": 6}
    jsonschema.validate(doc, json_schema())
    fwd["mode"] = "not_set"
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert info.value.message == "hipDNN node \"fc\": 'not_set' is not a MoeGroupedMatmulMode"
    fwd["mode"], fwd["top_k"] = "gather", 2**31
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(json.dumps(doc))
    assert "top_k" in info.value.message and "32-bit" in info.value.message


def test_an_unset_mode_has_no_wire_number() -> None:
    """hipDNN's schema has no NOT_SET (its packer answers "Unsupported mode"): the writers name
    it instead of writing a number (a graph whose tensors have uids is written as it stands)."""
    g = _graph(hg.MoeGroupedMatmulMode.NONE)
    blob = g.serialize()
    g.nodes[0].attributes.mode = hg.MoeGroupedMatmulMode.NOT_SET
    for write, where in ((g.serialize, "Node fc mode"), (g.to_json, "Node fc")):
        with pytest.raises(hg.HipdnnError) as info:
            write()
        assert (info.value.code, info.value.message) == (
            hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
            f"{where}: MoeGroupedMatmulMode NOT_SET has no number in hipDNN's schema",
        )
    g.nodes[0].attributes.mode = hg.MoeGroupedMatmulMode.NONE
    assert g.serialize() == blob


def test_cli_shows_draws_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "moe.bin"
    g = _graph()
    path.write_bytes(g.serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "fc  MOE_GROUPED_MATMUL  compute FLOAT" in out
    assert "dfc  MOE_GROUPED_MATMUL_BWD  compute FLOAT" in out
    assert "out: DWEIGHT=dfc::DWEIGHT#7" in out
    # it plans on a torch engine (where torch is installed; else the NumPy reference),
    # whose lowerings check the routing data as the reference does: the inputs `run` draws (the
    # kit's input maker) are valid offsets and SCATTER routes for both nodes
    assert main(["run", str(path)]) == 0
    engine = _expected_engine()
    assert f"engine {engine}" in capsys.readouterr().out
    dot = g.to_dot()
    assert "MOE_GROUPED_MATMUL" in dot and "TOKEN_KS" in dot
    assert "MOE_GROUPED_MATMUL_BWD" in g.to_mermaid()


def _expected_engine() -> str:
    """Where ``run`` plans a graph of two nodes: the torch fusion engine on a GPU (or with a
    cheap compile backend), the torch eager engine on the CPU (where Inductor's compile does
    not pay by default), the NumPy reference without torch."""
    if importlib.util.find_spec("torch") is None:
        return "NUMPY_REFERENCE_ENGINE"
    import torch

    cheap = os.environ.get("HIPDNN_GRAPH_TORCH_COMPILE_BACKEND", "inductor") != "inductor"
    fused = torch.cuda.is_available() or cheap
    return "TORCH_FUSION_ENGINE" if fused else "TORCH_EAGER_ENGINE"
