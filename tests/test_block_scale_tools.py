"""Block-scale quantize/dequantize graphs through the project's own tools: descriptors
(pack/unpack every member), the JSON schema and hipDNN's JSON layout, bytes and JSON round trips,
the CLI (show/Mermaid/DOT/run). The byte-exact wire against hipDNN's generated code is in
tests/wire/."""

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
from hipdnn_graph.nodes.block_scale_dequantize import BlockScaleDequantizeAttributeName as DA
from hipdnn_graph.nodes.block_scale_quantize import BlockScaleQuantizeAttributeName as QA

F32 = hg.DataType.FLOAT


def _graph(
    axis: int | None = 1, transpose: bool = False, dq_block_size: tuple[int, ...] = (1, 32)
) -> hg.Graph:
    g = hg.Graph(name="mx", io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[4, 64])
    members: dict[str, object] = {"block_size": 32, "transpose": transpose, "name": "q"}
    if axis is not None:
        members["axis"] = axis
    y, scale = g.block_scale_quantize(x, **members)
    y.set_data_type(hg.DataType.FP8_E4M3)
    scale.set_data_type(hg.DataType.FP8_E8M0)
    out = g.block_scale_dequantize(
        y, scale, block_size=list(dq_block_size), is_negative_scale=True, name="dq"
    )
    out.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    tensors: dict[int, BackendDescriptor] = {}
    q = g.nodes[0].create_operation(tensors, [])
    assert q.descriptor_type == DescriptorType.OPERATION_BLOCK_SCALE_QUANTIZE
    assert q.get_attribute(QA.OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE, T.INT32) == [32]
    assert q.get_attribute(QA.OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT, T.INT64) == [1]
    assert q.get_attribute(QA.OPERATION_BLOCK_SCALE_QUANTIZE_TRANSPOSE_EXT, T.BOOLEAN) == [False]
    back = hg.BlockScaleQuantizeNode(hg.BlockScaleQuantizeAttributes()).unpack_from_descriptor(
        q, {}
    )
    a = back.attributes
    assert (back.name, a.get_block_size(), a.get_axis(), a.get_transpose()) == ("q", 32, 1, False)
    assert a.get_scale().get_dim() == [4, 2]
    dq = g.nodes[1].create_operation(tensors, [])
    assert dq.get_attribute(DA.OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE, T.INT32) == [1, 32]
    assert dq.get_attribute(DA.OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE, T.BOOLEAN) == [True]
    node = hg.BlockScaleDequantizeNode(hg.BlockScaleDequantizeAttributes())
    b = node.unpack_from_descriptor(dq, {}).attributes
    assert (b.get_block_size(), b.get_is_negative_scale(), b.get_name()) == ([1, 32], True, "dq")
    for kind, label in (
        (DescriptorType.OPERATION_BLOCK_SCALE_QUANTIZE, "BlockScaleQuantizeOperationDescriptor"),
        (
            DescriptorType.OPERATION_BLOCK_SCALE_DEQUANTIZE,
            "BlockScaleDequantizeOperationDescriptor",
        ),
    ):
        with pytest.raises(DescriptorError, match=rf"{label}::finalize"):
            BackendDescriptor(kind).finalize()


def test_an_unset_axis_is_left_out_of_the_descriptor() -> None:
    g = _graph(axis=None)
    g.build_operation_graph()
    q = g.nodes[0].create_operation({}, [])
    assert q.get_attribute(QA.OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT, T.INT64) == []
    back = hg.BlockScaleQuantizeNode(hg.BlockScaleQuantizeAttributes()).unpack_from_descriptor(
        q, {}
    )
    assert back.attributes.get_axis() is None


def test_json_layout_and_schema() -> None:
    doc = json.loads(_graph().to_json())
    q, dq = doc["nodes"]
    assert (q["type"], q["inputs"], q["outputs"]) == (
        "BlockScaleQuantizeAttributes",
        {"x_tensor_uid": 1},
        {"scale_tensor_uid": 3, "y_tensor_uid": 2},
    )
    assert (q["block_size"], q["axis"], q["transpose"]) == (32, 1, False)
    assert (dq["block_size"], dq["is_negative_scale"]) == ([1, 32], True)
    assert dq["inputs"] == {"scale_tensor_uid": 3, "x_tensor_uid": 2}
    jsonschema.validate(doc, json_schema())
    unset = json.loads(_graph(axis=None).to_json())["nodes"][0]
    assert "axis" not in unset  # hipDNN writes axis (and block_size) only when set
    # hipDNN's reader: block_size, axis and transpose may be absent
    for key, default in (("axis", None), ("transpose", False), ("block_size", None)):
        edited = json.loads(json.dumps(doc))
        edited["nodes"][0].pop(key)
        attrs = hg.Graph.from_json(json.dumps(edited)).nodes[0].attributes
        assert getattr(attrs, key) == default
    edited = json.loads(json.dumps(doc))
    edited["nodes"][1].pop("is_negative_scale")
    edited["nodes"][1].pop("block_size")
    attrs = hg.Graph.from_json(json.dumps(edited)).nodes[1].attributes
    assert (attrs.get_block_size(), attrs.get_is_negative_scale()) == ([], False)
    broken = json.loads(json.dumps(doc))
    broken["nodes"][1]["block_size"] = [1, 2**31]
    with pytest.raises(hg.HipdnnError, match="an array of 32-bit integers"):
        hg.Graph.from_json(json.dumps(broken))
    broken["nodes"][1]["block_size"] = [32]
    broken["nodes"][0]["block_size"] = 2**31
    with pytest.raises(hg.HipdnnError, match="a 32-bit integer"):
        hg.Graph.from_json(json.dumps(broken))


@pytest.mark.parametrize(("axis", "transpose"), [(1, False), (None, True), (1, True)])
def test_bytes_and_json_round_trip(axis: int | None, transpose: bool) -> None:
    g = _graph(axis, transpose)
    blob, text = g.serialize(), g.to_json()
    assert hg.Graph.deserialize(blob).serialize() == blob
    again = hg.Graph.from_json(text)
    assert again.to_json() == text and again.serialize() == blob
    a = hg.Graph.deserialize(blob).nodes[0].attributes
    assert (a.get_block_size(), a.get_axis(), a.get_transpose()) == (32, axis, transpose)


def test_cli_shows_draws_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mx.bin"
    path.write_bytes(_graph().serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "q  BLOCK_SCALE_QUANTIZE  compute FLOAT" in out
    assert "dq  BLOCK_SCALE_DEQUANTIZE  compute FLOAT" in out
    assert "out: Y=q::Y#2 SCALE=q::SCALE#3" in out
    assert main(["show", "--mermaid", str(path)]) == 0
    assert "<b>dq</b><br/>BLOCK_SCALE_DEQUANTIZE" in capsys.readouterr().out
    assert main(["show", "--dot", str(path)]) == 0
    assert "BLOCK_SCALE_QUANTIZE" in capsys.readouterr().out
    # block_size [1, 32] for X [4, 64], SCALE [4, 2]: hipDNN's two references read it apart
    assert main(["run", str(path)]) == 1
    assert "NUMPY_REFERENCE_ENGINE: node 'dq': hipDNN's references read block_size [1, 32]" in (
        capsys.readouterr().err
    )
    path.write_bytes(_graph(dq_block_size=(32,)).serialize())  # the same to both
    assert main(["run", str(path)]) == 0  # on a torch engine where torch is installed
    engine = _expected_engine()
    assert f"engine {engine}" in capsys.readouterr().out


def test_writers_refuse_block_sizes_past_32_bits() -> None:
    g = _graph()
    dq = g.nodes[1].attributes
    dq.__dict__["block_size"] = [1, 2**31]  # past the setters' check
    for write in (g.serialize, g.to_json):
        with pytest.raises(hg.HipdnnError, match=r"2147483648 does not fit a 32-bit int") as info:
            write()
        assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT


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
