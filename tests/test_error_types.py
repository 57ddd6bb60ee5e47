"""Bad input raises HipdnnError with the right code and a clear message, never another
exception type (issue 23, item 11): huge or infinite JSON numbers, lone surrogates in names,
impossible DeviceBuffer sizes, negative strides (they round-trip), an empty graph, UTF-16/32
text and the retired HDGR format."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from sdpa_graph_cases import WIRE_CASES

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.frontend import DeviceBuffer
from hipdnn_graph.types import ErrorCode

Capsys = pytest.CaptureFixture[str]


def _doc() -> dict[str, Any]:
    g = WIRE_CASES["bwd"]()
    g.validate()
    doc: dict[str, Any] = json.loads(g.to_json())
    return doc


def _raises(code: ErrorCode, call: Any) -> str:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    assert type(info.value) is hg.HipdnnError or isinstance(info.value, hg.HipdnnError)
    assert info.value.code == code, info.value.message
    return info.value.message


# ----- JSON numbers that have no finite double -------------------------------------------------


@pytest.mark.parametrize("number", ["1" + "0" * 400, "-" + "9" * 400, "1e400", "-1e999"])
def test_a_float_attribute_without_a_finite_double_is_refused(number: str) -> None:
    doc = _doc()
    doc["nodes"][0]["parameters"]["attn_scale_value"] = 12345
    text = json.dumps(doc).replace("12345", number)
    message = _raises(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, lambda: hg.Graph.from_json(text))
    assert message == (
        "Invalid hipDNN graph JSON: nodes[0].parameters.attn_scale_value must be a finite number"
    )


def test_a_tensor_value_without_a_finite_double_is_refused() -> None:
    doc = _doc()
    scale = dict(doc["tensors"][0], uid=99, name="S", dims=[1], strides=[1], data_type="float")
    scale.update(value=12345, value_type="Float32Value")
    doc["tensors"].append(scale)
    text = json.dumps(doc).replace("12345", "1" + "0" * 400)
    message = _raises(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, lambda: hg.Graph.from_json(text))
    assert message == "Tensor S: a Float32Value must be a finite number"


def test_the_cli_reports_a_400_digit_number_as_a_graph_error(
    tmp_path: Path, capsys: Capsys
) -> None:
    doc = _doc()
    doc["nodes"][0]["parameters"]["attn_scale_value"] = 12345
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc).replace("12345", "1" + "0" * 400))
    assert main(["validate", str(path)]) == 1  # a graph error, not 3 (internal error)
    err = capsys.readouterr().err
    assert "UNSUPPORTED_GRAPH_FORMAT" in err and "must be a finite number" in err
    assert "internal error" not in err


# ----- names that UTF-8 cannot encode -----------------------------------------------------------


@pytest.mark.parametrize(
    ("what", "make"),
    [
        ("Tensor name", lambda: hg.TensorAttributes(name="Q\ud800")),
        ("Tensor name", lambda: hg.TensorAttributes().set_name("Q\ud800")),
        ("Node name", lambda: hg.SdpaAttributes().set_name("Q\ud800")),
        ("Node name", lambda: hg.SdpaBackwardAttributes(name="Q\ud800")),
        ("Graph name", lambda: hg.Graph(name="Q\ud800")),
        ("Graph name", lambda: hg.Graph().set_name("Q\ud800")),
    ],
)
def test_a_lone_surrogate_in_a_name_is_refused_when_set(what: str, make: Any) -> None:
    message = _raises(ErrorCode.INVALID_VALUE, make)
    assert message == (
        f"{what} 'Q\\ud800' is not valid Unicode text: it holds a lone surrogate at position 1"
    )


def test_names_outside_ascii_are_kept() -> None:
    g = WIRE_CASES["bwd"]()
    g.tensors[0].set_name("Qé𝔸")
    g.validate()
    assert hg.Graph.deserialize(g.serialize()).tensors[0].name == "Qé𝔸"


def test_a_lone_surrogate_escaped_in_json_is_refused() -> None:
    g = WIRE_CASES["bwd"]()
    g.validate()
    text = g.to_json().replace('"name":"Q"', '"name":"Q\\ud800"', 1)
    message = _raises(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, lambda: hg.Graph.from_json(text))
    assert message == (
        "Invalid hipDNN graph JSON: tensors[0].name must be valid Unicode text "
        "(it holds a lone surrogate)"
    )


# ----- DeviceBuffer sizes no memory holds -------------------------------------------------------


@pytest.mark.parametrize("size", [2**62, 2**64])
def test_an_impossible_device_buffer_is_a_hipdnn_error(size: int) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        DeviceBuffer(size)
    assert isinstance(info.value, RuntimeError)  # as hipDNN's binding raises
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert info.value.message.startswith(f"DeviceBuffer of {size} bytes cannot be allocated in ")


def test_a_device_buffer_size_must_be_an_integer() -> None:
    with pytest.raises(hg.HipdnnError) as info:
        DeviceBuffer(1.5)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)
    assert info.value.message == "DeviceBuffer size must be an integer, got float"


# ----- negative strides, an empty graph ---------------------------------------------------------


def test_negative_strides_that_validate_also_serialize_and_read_back() -> None:
    # hipDNN's strides are int64 with no rule on their sign, and the engines here read a negative
    # stride as a dimension walked backwards: what validates is written and read back as it is
    g = WIRE_CASES["bwd"]()
    g.tensors[0].set_stride([-512, 128, 8, 1])
    g.validate()
    blob = g.serialize()
    back = hg.Graph.deserialize(blob)
    assert back.tensors[0].stride == [-512, 128, 8, 1]
    assert back.serialize() == blob
    assert hg.Graph.from_json(g.to_json()).serialize() == blob
    g.tensors[0].set_stride([-(2**62) - 1, 128, 8, 1])
    message = _raises(ErrorCode.INVALID_VALUE, g.serialize)
    assert message == f"Tensor Q strides must be in [-{2**62}, {2**62}]"


def test_an_empty_graph_validates_as_in_hipdnn_and_build_says_why_it_cannot() -> None:
    g = hg.Graph(name="nothing")
    g.validate()  # hipDNN's validate() accepts a graph without nodes
    message = _raises(ErrorCode.INVALID_VALUE, g.build)
    assert message == "Graph 'nothing' has no nodes: there is nothing to build"
    message = _raises(ErrorCode.INVALID_VALUE, g.build_operation_graph)
    assert message == "Graph 'nothing' has no nodes: there is nothing to build"


# ----- text in other encodings, the retired HDGR format -----------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_json_saved_as_utf16_or_utf32_is_named_as_such(encoding: str) -> None:
    g = WIRE_CASES["bwd"]()
    g.validate()
    data = g.to_json().encode(encoding)
    name = encoding[:6].upper()
    expected = (
        f"The input is {name} text, not a hipDNN graph: hipDNN's JSON is UTF-8 "
        "(save the file as UTF-8)"
    )
    for read in (hg.Graph.deserialize, hg.Graph.from_json):
        assert _raises(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, lambda r=read: r(data)) == expected


def test_the_cli_names_a_utf16_json_file(tmp_path: Path, capsys: Capsys) -> None:
    g = WIRE_CASES["bwd"]()
    g.validate()
    path = tmp_path / "graph.json"
    path.write_bytes(g.to_json().encode("utf-16"))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "UTF-16 text, not a hipDNN graph" in err and "Invalid hipDNN graph" not in err


def test_no_wire_case_reads_as_wide_text() -> None:
    for case, build in WIRE_CASES.items():
        g = build()
        g.validate()
        assert hg.Graph.deserialize(g.serialize()).to_json() == g.to_json(), case


def test_an_hdgr_file_is_named_as_the_retired_format() -> None:
    # the old writer's framing: root offset, then the identifier "HDGR" at bytes 4-7
    blob = struct.pack("<I", 16) + b"HDGR" + bytes(24)
    message = _raises(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, lambda: hg.Graph.deserialize(blob))
    assert message == (
        "The input is in hipdnn-graph's retired HDGR format, not hipDNN's serialized graph: "
        "load it with the hipdnn-graph version that wrote it and serialize it again"
    )
    assert "newer hipDNN" not in message


def test_a_lone_surrogate_assigned_past_the_setters_is_refused_when_written() -> None:
    g = WIRE_CASES["bwd"]()
    g.validate()
    g.tensors[0].name = "Q\udc00"  # a plain field assignment skips the setter's check
    expected = (
        "Tensor name 'Q\\udc00' is not valid Unicode text: it holds a lone surrogate at position 1"
    )
    for write in (g.serialize, g.key, g.to_json):
        assert _raises(ErrorCode.INVALID_VALUE, write) == expected
    g.tensors[0].name = "Q"
    g.nodes[0].attributes.name = "n\ud800"
    message = _raises(ErrorCode.INVALID_VALUE, g.serialize)
    assert message.startswith("Node name 'n\\ud800' is not valid Unicode text")
