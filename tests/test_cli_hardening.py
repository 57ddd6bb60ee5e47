"""The command line against hostile files and arguments (issue 11, items 4 and 9): reads are
capped whatever the file is, names cannot forge terminal output, JSON is recognised with a
byte-order mark or as a non-object document, and bad --seed/--device are usage errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import detect_format, main, safe_text

Capsys = pytest.CaptureFixture[str]

EVIL_GRAPH = "g\x1b[2K\rOK: forged\n"
EVIL_TENSOR = "Q\nOK: x\u202e"
EVIL_NODE = "fwd\x1b[31m"


def _graph(name: str = "attn") -> hg.Graph:
    g = hg.Graph(
        name=name,
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name=EVIL_TENSOR if name == EVIL_GRAPH else "Q", dim=[1, 2, 8, 4])
    node = EVIL_NODE if name == EVIL_GRAPH else "fwd"
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name=node, generate_stats=False)
    o.set_output(True)
    return g


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("command", ["validate", "show", "convert"])
def test_reading_dev_zero_stops_at_the_cap(command: str) -> None:
    # before: st_size is 0 for /dev/zero, so the whole device was read (without end); here the
    # address space is capped at 2 GiB, so an unbounded read fails fast instead of filling RAM
    code = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from hipdnn_graph.cli import main
        extra = ["--to", "json", "-o", "-"] if {command!r} == "convert" else []
        sys.exit(main([{command!r}, "/dev/zero", *extra]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "hipdnn-graph: error: '/dev/zero' holds more than 67108864 bytes; serialized graphs "
        "are limited to 67108864 bytes\n"
    )


def test_a_fifo_is_read_up_to_the_cap(tmp_path: Path, capsys: Capsys) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    text = _graph().to_json().encode()
    writer = subprocess.Popen(
        [sys.executable, "-c", f"open({str(fifo)!r}, 'wb').write({text!r})"],
    )
    try:
        assert main(["validate", str(fifo)]) == 0
    finally:
        writer.wait(60)
    assert capsys.readouterr().out.startswith("OK: graph 'attn' (json)")


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_names_with_control_characters_cannot_forge_lines(
    tmp_path: Path, capsys: Capsys, fmt: str
) -> None:
    g = _graph(EVIL_GRAPH)
    path = tmp_path / "g.data"
    path.write_bytes(g.to_json().encode() if fmt == "json" else g.serialize())
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"OK: graph 'g\\x1b[2K\\rOK: forged\\n' ({fmt}): 4 tensors, 1 node(s): "
        "fwd\\x1b[31m (SDPA_FWD)\n"
    )
    for extra in ([], ["--dot"], ["--mermaid"]):
        assert main(["show", str(path), *extra]) == 0
        shown = capsys.readouterr().out
        assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown
        assert not any(line.startswith("OK") for line in shown.splitlines())
    assert main(["show", str(path)]) == 0
    assert "  1    Q\\nOK: x\\u202e  [1,2,8,4]" in capsys.readouterr().out


def test_error_messages_escape_names_too(tmp_path: Path, capsys: Capsys) -> None:
    path = tmp_path / "g.json"
    path.write_text(_graph(EVIL_GRAPH).to_json())
    assert main(["run", str(path), "--engine", "NO\x1b[31mSUCH"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "no engine named 'NO\\x1b[31mSUCH'" in err


def test_json_with_a_byte_order_mark_is_json(tmp_path: Path, capsys: Capsys) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + _graph().to_json().encode())
    assert detect_format(path.read_bytes()) == "json"
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.startswith("OK: graph 'attn' (json): 4 tensors")


@pytest.mark.parametrize("document", ["null", "  [1, 2]", '"text"', "42", "true"])
def test_json_documents_that_are_no_object_get_a_json_error(
    tmp_path: Path, capsys: Capsys, document: str
) -> None:
    path = tmp_path / "doc.json"
    path.write_text(document)
    assert detect_format(path.read_bytes()) == "json"
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "JSON" in err and "HDGR" not in err, err


def test_negative_seed_is_a_usage_error(tmp_path: Path, capsys: Capsys) -> None:
    path = tmp_path / "g.json"
    path.write_text(_graph().to_json())
    assert main(["run", str(path), "--seed", "-1"]) == 2
    assert "argument --seed: must be 0 or more, got -1" in capsys.readouterr().err
    assert main(["run", str(path), "--seed", "3", "--engine", "NUMPY_REFERENCE_ENGINE"]) == 0
    assert "seed 3" in capsys.readouterr().out


@pytest.mark.parametrize("device", ["meta", "mps", "cuda:x", "", "cpu\n"])
def test_devices_run_cannot_use_are_usage_errors(
    tmp_path: Path, capsys: Capsys, device: str
) -> None:
    path = tmp_path / "g.json"
    path.write_text(_graph().to_json())
    assert main(["run", str(path), "--device", device]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"hipdnn-graph: error: bad --device {safe_text(device)!r}: use auto, numpy, cpu, cuda "
        "or cuda:N\n"
    )


def test_cpu_device_runs(tmp_path: Path, capsys: Capsys) -> None:
    pytest.importorskip("torch")
    path = tmp_path / "g.json"
    path.write_text(_graph().to_json())
    assert main(["run", str(path), "--device", "cpu"]) == 0
    assert "torch tensors on cpu" in capsys.readouterr().out


def test_safe_text_keeps_printable_text() -> None:
    assert safe_text("Q_é_ü_名前 [1,2]") == "Q_é_ü_名前 [1,2]"
    assert safe_text("a\tb\x00\x7f\x85") == "a\\tb\\x00\\x7f\\x85"
    assert safe_text("a\nb", keep_newlines=True) == "a\nb"
