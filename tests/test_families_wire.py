"""Pointwise and matmul graphs through the project's own tools: descriptors (pack/unpack), the
JSON schema, JSON shape refusals, the CLI (validate/show/run) and pictures (DOT, Mermaid). The
byte-exact wire against hipDNN's generated code is in tests/wire/."""

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
from hipdnn_graph.nodes.pointwise import PointwiseAttributeName as PA

M = hg.PointwiseMode


def _graph() -> hg.Graph:
    g = hg.Graph(name="pw", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 4])
    b = g.tensor(name="b", dim=[1, 4])
    s = g.pointwise(x, b, mode=M.ADD, name="add")
    y = g.pointwise(s, mode=M.RELU_FWD, name="relu", relu_upper_clip=6.0, axis=1)
    y.set_output(True)
    return g


def test_descriptors_pack_and_unpack_every_member() -> None:
    g = _graph()
    g.build_operation_graph()
    relu = g.nodes[1]
    tensors: dict[int, BackendDescriptor] = {}
    ops: list[BackendDescriptor] = []
    op = relu.create_operation(tensors, ops)
    assert op.get_attribute(PA.POINTWISE_MODE, T.POINTWISE_MODE) == [M.RELU_FWD]
    assert op.get_attribute(PA.POINTWISE_RELU_UPPER_CLIP, T.FLOAT) == [6.0]
    assert op.get_attribute(PA.POINTWISE_AXIS, T.INT64) == [1]
    assert op.get_attribute(PA.POINTWISE_RELU_LOWER_CLIP, T.FLOAT) == []
    assert op.get_attribute(PA.POINTWISE_MATH_PREC, T.DATA_TYPE) == [hg.DataType.FLOAT]
    back = hg.PointwiseNode(hg.PointwiseAttributes()).unpack_from_descriptor(op, {})
    a = back.attributes
    assert (a.get_mode(), a.get_relu_upper_clip(), a.get_axis(), a.get_name()) == (
        M.RELU_FWD, 6.0, 1, "relu",
    )  # fmt: skip
    assert a.get_input_0().get_uid() == relu.attributes.get_input_0().get_uid()
    assert "POINTWISE_MODE" in repr(op)


def test_descriptor_finalize_and_values_follow_the_spec() -> None:
    op = BackendDescriptor(DescriptorType.OPERATION_POINTWISE)
    with pytest.raises(
        DescriptorError, match=r"PointwiseOperationDescriptor::finalize\(\) failed: IN_0"
    ):
        op.finalize()
    with pytest.raises(DescriptorError, match="invalid value"):
        op.set_attribute(PA.POINTWISE_MODE, T.POINTWISE_MODE, [48])


def test_json_validates_against_the_exported_schema_and_refuses_wrong_shapes() -> None:
    text = _graph().to_json()
    doc = json.loads(text)
    jsonschema.validate(doc, json_schema())
    assert "attributes" not in doc["nodes"][0] and "parameters" not in doc["nodes"][0]
    ignored = json.loads(text)
    ignored["nodes"][0]["attributes"] = {"operation": "add"}  # not hipDNN's: ignored, as by it
    assert hg.Graph.from_json(json.dumps(ignored)).to_json() == text
    bad = json.loads(json.dumps(doc))
    bad["nodes"][1]["inputs"]["operation"] = "RELU_FWD"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())
    for edit, words in (
        (lambda d: d["nodes"][0]["inputs"].pop("elu_alpha"), "key 'elu_alpha' not found"),
        (
            lambda d: d["nodes"][0]["inputs"].update(swish_beta="1"),
            "swish_beta must be a finite number",
        ),
        (lambda d: d["nodes"][0]["inputs"].update(in_1_tensor_uid=99), "tensor uid 99"),
    ):
        broken = json.loads(json.dumps(doc))
        edit(broken)
        with pytest.raises(hg.HipdnnError) as info:
            hg.Graph.from_json(json.dumps(broken))
        assert words in info.value.message


def test_cli_validates_shows_and_draws_pointwise_graphs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = _graph()
    binary, text = tmp_path / "pw.bin", tmp_path / "pw.json"
    binary.write_bytes(g.serialize())
    text.write_text(g.to_json())
    assert main(["validate", str(text)]) == 0
    assert "add (POINTWISE) -> relu (POINTWISE)" in capsys.readouterr().out
    assert main(["show", str(binary)]) == 0
    out = capsys.readouterr().out
    assert "add  POINTWISE  compute FLOAT  [mode=ADD]" in out
    assert "relu  POINTWISE  compute FLOAT  [mode=RELU_FWD, relu_upper_clip=6.0, axis=1]" in out
    assert "IN_0=x#1 IN_1=b#2" in out and "OUT_0=relu::OUT_0" in out
    assert main(["show", "--mermaid", str(text)]) == 0
    assert "<b>relu</b><br/>POINTWISE" in capsys.readouterr().out
    assert main(["show", "--dot", str(binary)]) == 0
    assert 'label="add\\nPOINTWISE"' in capsys.readouterr().out
    assert main(["run", str(binary)]) == 0  # a torch family engine runs it (issue 25)
    assert "execute: median" in capsys.readouterr().out


def test_enum_fields_at_their_default_read_as_enum_members() -> None:
    """A ``Kind.ENUM`` field absent from the bytes (its default) reads as the enum's member, in
    every family (an absent diagonal alignment once read as a bare 0)."""
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    q = g.tensor(name="q", dim=[1, 1, 4, 8])
    o, _ = g.sdpa(q, q, q, name="attn", generate_stats=False)
    y = g.pointwise(o, mode=M.EXP, name="exp")
    y.set_output(True)
    for read in (hg.Graph.deserialize(g.serialize()), hg.Graph.from_json(g.to_json())):
        attn = next(n for n in read.nodes if n.name == "attn")
        assert type(attn.attributes.diagonal_alignment) is hg.DiagonalAlignment
        assert all(
            type(n.attributes.mode) is M for n in read.nodes if isinstance(n, hg.PointwiseNode)
        )


def test_matmul_through_descriptors_json_schema_and_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = hg.Graph(name="mm", io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    c = g.matmul(g.tensor(name="a", dim=[2, 4, 8]), g.tensor(name="b", dim=[2, 8, 3]), name="mm")
    y = g.pointwise(c, mode=M.TANH_FWD, name="act")
    y.set_output(True)
    g.build_operation_graph()
    tensors: dict[int, BackendDescriptor] = {}
    op = g.nodes[0].create_operation(tensors, [])
    assert op.descriptor_type == DescriptorType.OPERATION_MATMUL
    back = hg.MatmulNode(hg.MatmulAttributes()).unpack_from_descriptor(op, {})
    assert back.attributes.get_c().get_dim() == [2, 4, 3] and back.name == "mm"
    with pytest.raises(DescriptorError, match=r"MatmulOperationDescriptor::finalize\(\) failed: A"):
        BackendDescriptor(DescriptorType.OPERATION_MATMUL).finalize()
    doc = json.loads(g.to_json())
    jsonschema.validate(doc, json_schema())
    assert sorted(doc["nodes"][0]) == ["compute_data_type", "inputs", "name", "outputs", "type"]
    assert doc["nodes"][0]["inputs"] == {"a_tensor_uid": 1, "b_tensor_uid": 2}
    doc["nodes"][0]["inputs"]["umd_flops"] = "1"  # not read by hipDNN's matmul JSON: ignored
    assert hg.Graph.from_json(json.dumps(doc)).to_json() == g.to_json()
    path = tmp_path / "mm.bin"
    path.write_bytes(g.serialize())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mm  MATMUL  compute FLOAT" in out and "in:  A=a#1 B=b#2" in out
    assert "act  POINTWISE  compute FLOAT  [mode=TANH_FWD]" in out


def test_refused_kinds_carry_hipdnns_union_names() -> None:
    """Every ``NodeAttributes`` member is named as graph.fbs names it, in bytes and in JSON: each
    modelled family's table is its member's name, and a member no family models (the first one
    found at run time, since families keep being added) is refused by that name."""
    from hipdnn_graph.descriptors.fb_read import NODE_KINDS
    from hipdnn_graph.descriptors.node_spec import node_specs

    schema = Path(__file__).resolve().parents[2] / "shared/reference/hipdnn_schemas/graph.fbs"
    if not schema.is_file():
        pytest.skip("hipDNN's reference schemas are not beside the checkout")
    text = schema.read_text()
    union = text.split("union NodeAttributes {")[1].split("}")[0]
    names = [line.strip().rstrip(",") for line in union.splitlines() if line.strip()]
    assert list(NODE_KINDS) == ["NONE", *names]
    specs = node_specs()
    for tag, spec in specs.items():
        assert NODE_KINDS[tag] == spec.table, tag
    unmodelled = [tag for tag in range(1, len(NODE_KINDS)) if tag not in specs]
    if not unmodelled:
        return  # every member is modelled: nothing is left to refuse
    tag = unmodelled[0]
    doc = json.loads(_graph().to_json())
    doc["nodes"][0]["type"] = NODE_KINDS[tag]
    with pytest.raises(hg.HipdnnError, match=rf"kind {NODE_KINDS[tag]} \({tag}\)"):
        hg.Graph.from_json(json.dumps(doc))
