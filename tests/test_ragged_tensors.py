"""Packed (ragged) tensors: ``set_ragged_offset`` in the builder, its rules, the graph's view of
the offsets tensors, both wire formats, the facade, ``hipdnn-graph show`` and the engines that
refuse them by name."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.cli import main
from hipdnn_graph.descriptors import json_schema

B, H, S, D = 3, 2, 8, 4
TOKEN_MAJOR = [S * H * D, D, H * D, 1]


def _offsets(
    name: str, batch: int = B, dtype: hg.DataType = hg.DataType.INT32
) -> hg.TensorAttributes:
    return hg.TensorAttributes(
        name=name, dim=[batch + 1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dtype
    )


def _packed_graph() -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name="packed",
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v = (g.tensor(name=n, dim=[B, H, S, D], stride=TOKEN_MAJOR) for n in "QKV")
    off_q, off_kv = _offsets("off_q"), _offsets("off_kv", dtype=hg.DataType.INT64)
    q.set_ragged_offset(off_q)
    k.set_ragged_offset(off_kv).set_ragged_offset_multiplier(H * D)
    v.set_ragged_offset(off_kv).set_ragged_offset_multiplier(H * D)
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=True)
    o.set_output(True).set_stride(TOKEN_MAJOR).set_ragged_offset(off_q)  # after sdpa(), as hipDNN
    return g, {"Q": q, "K": k, "V": v, "O": o, "off_q": off_q, "off_kv": off_kv}


# ----- the builder and its rules ----------------------------------------------------------------


def test_setters_chain_and_getters_read_back() -> None:
    off = _offsets("off")
    t = hg.TensorAttributes(name="q")
    assert t.get_ragged_offset() is None and t.get_ragged_offset_multiplier() == 1
    assert t.set_ragged_offset(off).set_ragged_offset_multiplier(64) is t
    assert t.get_ragged_offset() is off and t.get_ragged_offset_multiplier() == 64
    assert t.clear_ragged_offset().get_ragged_offset() is None


def test_keywords_and_clone() -> None:
    off = _offsets("off")
    t = hg.TensorAttributes(name="q", ragged_offset=off, ragged_offset_multiplier=8)
    assert t.get_ragged_offset() is off and t.get_ragged_offset_multiplier() == 8
    copy = t.clone()
    assert copy is not t and copy.get_ragged_offset() is off  # the offsets handle is shared
    with pytest.raises(hg.HipdnnError) as err:
        hg.TensorAttributes(name="q", ragged_offset_multiplier=True)
    assert (
        err.value.message
        == "TensorAttributes ragged_offset_multiplier must be an integer, got True"
    )


def test_setter_arguments_are_checked() -> None:
    t = hg.TensorAttributes(name="q")
    with pytest.raises(hg.HipdnnError) as err:
        t.set_ragged_offset([0, 4])  # type: ignore[arg-type]
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == "Tensor q ragged offset must be a tensor, got list"
    with pytest.raises(hg.HipdnnError) as err:
        t.set_ragged_offset_multiplier(2.0)  # type: ignore[arg-type]
    assert err.value.message == "Tensor q ragged_offset_multiplier must be an integer, got 2.0"


def _primary(**changes: object) -> hg.TensorAttributes:
    t = hg.TensorAttributes(
        name="q", dim=[B, H, S, D], stride=TOKEN_MAJOR, data_type=hg.DataType.HALF
    )
    return t.set_ragged_offset(_offsets("off"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: t.ragged_offset.set_data_type(hg.DataType.FLOAT),
            "Tensor q ragged offset off must have INT32 or INT64 data type, got FLOAT",
        ),
        (
            lambda t: t.ragged_offset.set_dim([B, 1, 1, 1]),
            "Tensor q ragged offset off must have dims [4, 1, ...] (batch + 1), got [3, 1, 1, 1]",
        ),
        (
            lambda t: t.ragged_offset.set_dim([B + 1, 2]),
            "Tensor q ragged offset off must have dims [4, 1, ...] (batch + 1), got [4, 2]",
        ),
        (
            lambda t: t.ragged_offset.set_ragged_offset(_offsets("inner")),
            "Tensor q ragged offset off cannot be ragged itself",
        ),
        (
            lambda t: t.set_ragged_offset_multiplier(0),
            "Tensor q ragged_offset_multiplier must be >= 1, got 0",
        ),
        (
            lambda t: t.set_is_virtual(True),
            "Tensor q cannot be ragged and virtual or pass by value",
        ),
    ],
)
def test_rules_refuse_with_a_message(change: object, message: str) -> None:
    t = _primary()
    t.validate()  # well formed
    change(t)  # type: ignore[operator]
    with pytest.raises(hg.HipdnnError) as err:
        t.validate()
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == message


def test_rank_one_offsets_are_accepted() -> None:
    t = _primary()
    t.ragged_offset.set_dim([B + 1]).set_stride([1])  # type: ignore[union-attr]
    t.validate()


def test_the_graph_reads_the_offsets_tensors() -> None:
    g, t = _packed_graph()
    g.validate()
    assert [x.name for x in g.graph_inputs()] == ["Q", "K", "V", "off_q", "off_kv"]
    assert [x.name for x in g.tensors] == [
        "Q", "K", "V", "fwd::O", "fwd::Stats", "off_q", "off_kv",
    ]  # fmt: skip
    # a broken offsets tensor breaks the graph's validation
    t["off_kv"].set_dim([B, 1, 1, 1])
    assert not g.is_validated
    with pytest.raises(hg.HipdnnError) as err:
        g.validate()
    assert "Tensor K ragged offset off_kv must have dims [4, 1, ...]" in err.value.message


def test_offsets_a_node_writes_are_refused() -> None:
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    lengths = g.tensor(name="lengths", dim=[B + 1, 1, 1, 1], data_type=hg.DataType.INT32)
    offsets = g.pointwise(lengths, mode=hg.PointwiseMode.IDENTITY, name="copy")
    offsets.set_output(True).set_name("offsets")
    x = g.tensor(name="x", dim=[B, H, S, D], stride=TOKEN_MAJOR).set_ragged_offset(offsets)
    g.pointwise(x, mode=hg.PointwiseMode.EXP, name="exp").set_output(True)
    with pytest.raises(hg.HipdnnError) as err:
        g.validate()
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == (
        "Ragged offset tensor offsets is written by a node; offsets must be graph inputs"
    )


def test_raggedness_is_part_of_the_content() -> None:
    a, b = _primary(), _primary()
    assert a.logically_equals(b)
    b.set_ragged_offset_multiplier(2)
    assert not a.logically_equals(b)
    assert not a.logically_equals(_primary().clear_ragged_offset())


# ----- wire -------------------------------------------------------------------------------------


def test_json_and_bytes_round_trip_keep_the_offsets() -> None:
    g, _ = _packed_graph()
    text, blob = g.to_json(), g.serialize()
    doc = json.loads(text)
    jsonschema.validate(doc, json_schema())
    by_name = {t["name"]: t for t in doc["tensors"]}
    assert by_name["Q"]["ragged_offset_tensor_uid"] == by_name["off_q"]["uid"]
    assert by_name["fwd::O"]["ragged_offset_tensor_uid"] == by_name["off_q"]["uid"]
    assert by_name["K"]["ragged_offset_multiplier"] == H * D
    assert "ragged_offset_multiplier" not in by_name["Q"]  # the default is not written
    assert "ragged_offset_tensor_uid" not in by_name["off_q"]
    for back in (hg.Graph.from_json(text), hg.Graph.deserialize(blob)):
        tensors = {t.name: t for t in back.tensors}
        assert tensors["Q"].get_ragged_offset() is tensors["off_q"]
        assert tensors["fwd::O"].get_ragged_offset() is tensors["off_q"]
        assert tensors["K"].get_ragged_offset() is tensors["V"].get_ragged_offset()
        assert tensors["V"].get_ragged_offset_multiplier() == H * D
        assert back.to_json() == text and back.serialize() == blob
        back.validate()


def test_content_key_tells_packed_from_padded() -> None:
    from hipdnn_graph.graph.content_key import graph_content_key

    g, t = _packed_graph()
    first = graph_content_key(g)
    t["V"].set_ragged_offset_multiplier(1)
    assert graph_content_key(g) != first


# ----- facade, CLI, engines ---------------------------------------------------------------------


def test_facade_tensor_takes_ragged_offsets() -> None:
    graph = hipdnn.Graph()
    graph.set_io_data_type(hipdnn.DataType.FLOAT)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    off = hipdnn.Tensor.create([B + 1, 1, 1, 1], hipdnn.DataType.INT32)
    q = hipdnn.Tensor.create([B, H, S, D], hipdnn.DataType.FLOAT).set_stride(TOKEN_MAJOR)
    assert q.set_ragged_offset(off) is q and q.get_ragged_offset() is off
    graph.sdpa(q, q, q, hipdnn.SdpaAttributes())
    assert graph.validate().is_good()
    off.set_data_type(hipdnn.DataType.HALF)
    error = graph.validate()
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
    assert "must have INT32 or INT64 data type, got HALF" in error.get_message()


def test_cli_show_names_each_tensors_offsets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g, _ = _packed_graph()
    path = tmp_path / "packed.json"
    path.write_text(g.to_json())
    assert main(["show", str(path)]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[4:11]}
    assert rows["Q"].rstrip().endswith("off_q#6")
    assert rows["K"].rstrip().endswith(f"off_kv#7 x{H * D}")
    assert rows["fwd::O"].rstrip().endswith("off_q#6")
    assert rows["off_q"].rstrip().endswith("no")


def test_engines_without_ragged_support_refuse_by_name() -> None:
    from hipdnn_graph.backend.contract import checked_support, node_type_refusal
    from hipdnn_graph.backend.registry import current_registry

    g, _ = _packed_graph()
    g.validate()
    engines = [
        e
        for e in current_registry().engines()
        if not getattr(e, "supports_ragged", False) and node_type_refusal(e, g) is None
    ]
    assert "TORCH_SDPA_CUDNN_ENGINE" in {e.name for e in engines}
    assert "TORCH_SDPA_FLASH_ENGINE" not in {e.name for e in engines}  # its varlen kernels do
    assert "NUMPY_REFERENCE_ENGINE" not in {e.name for e in engines}  # it runs packed graphs
    for engine in engines:
        ok, reason = checked_support(engine, g)
        assert not ok
        assert reason.startswith(
            "does not support packed (ragged) tensors: Q has ragged offsets off_q"
        )
