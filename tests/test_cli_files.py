"""The command line with files a hipDNN user brings: ``run --inputs/--save`` (.npz in, .npz
out), ``convert`` to standard output with ``--indent``, and ``--version``/``--help`` that answer
without loading the graph code (issue 41 items 23 and 24)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.cli.convert import indent_json

Capsys = pytest.CaptureFixture[str]

ROOT = Path(__file__).resolve().parents[1]


def _pointwise_file(tmp_path: Path) -> Path:
    """y = x + b (b broadcast), and a runtime pass-by-value scale: z = y * s."""
    g = hg.Graph(
        name="axpb",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    x, b = g.tensor(name="x", dim=[2, 3]), g.tensor(name="b", dim=[1, 3])
    s = g.tensor(hg.TensorAttributes(name="s").set_as_runtime_parameter())
    s.set_data_type(hg.DataType.FLOAT).set_dim([1]).set_stride([1])
    y = g.pointwise(x, b, mode=hg.PointwiseMode.ADD, name="add")
    z = g.pointwise(y, s, mode=hg.PointwiseMode.MUL, name="scale")
    z.set_output(True).set_name("z")
    path = tmp_path / "axpb.json"
    path.write_text(g.to_json())
    return path


def _npz(path: Path, **arrays: object) -> Path:
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


# ----- run --inputs / --save ---------------------------------------------------------------------


def test_run_takes_inputs_by_name_and_saves_the_outputs(tmp_path: Path, capsys: Capsys) -> None:
    graph_file = _pointwise_file(tmp_path)
    x = np.arange(6, dtype=np.float64).reshape(2, 3)  # float64 is cast into the FLOAT tensor
    inputs = _npz(tmp_path / "in.npz", x=x, b=np.array([[10.0, 20.0, 30.0]]), s=np.float32(2))
    out = tmp_path / "out.npz"
    args = ["run", str(graph_file), "--inputs", str(inputs), "--save", str(out)]
    assert main([*args, "--engine", "NUMPY_REFERENCE_ENGINE"]) == 0
    text = capsys.readouterr().out
    assert f"over 1 run(s), inputs from {inputs}" in text
    assert f"saved 1 output(s) to {out}" in text
    with np.load(out) as saved:
        assert saved.files == ["z"]
        np.testing.assert_array_equal(saved["z"], (x + np.array([10.0, 20.0, 30.0])) * 2)
        assert saved["z"].dtype == np.float32


def test_run_takes_inputs_by_uid(tmp_path: Path, capsys: Capsys) -> None:
    graph_file = _pointwise_file(tmp_path)
    g = hg.Graph.from_json(graph_file.read_text())
    uid = {t.name: t.uid for t in g.wire_tensors()}
    inputs = _npz(
        tmp_path / "in.npz",
        **{str(uid["x"]): np.ones((2, 3)), str(uid["b"]): np.zeros((1, 3)), "s": np.ones(1)},
    )
    out = tmp_path / "out.npz"
    args = ["run", str(graph_file), "--inputs", str(inputs), "--save", str(out)]
    assert main([*args, "--engine", "NUMPY_REFERENCE_ENGINE"]) == 0
    capsys.readouterr()
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["z"], np.ones((2, 3)))


@pytest.mark.parametrize(
    ("arrays", "code", "message"),
    [
        (
            {"x": np.ones((2, 3)), "b": np.ones((1, 3))},
            "INVALID_VARIANT_PACK",
            "no value for the graph input(s) 's' (uid 3)",
        ),
        (
            {"x": np.ones((3, 2)), "b": np.ones((1, 3)), "s": np.ones(1)},
            "INVALID_VARIANT_PACK",
            "input 'x' has dims [3, 2]; tensor 'x' (uid 1) has dims [2, 3]",
        ),
        (
            {"x": np.ones((2, 3)), "b": np.ones((1, 3)), "s": np.ones(2)},
            "INVALID_VARIANT_PACK",
            "input 's' has 2 elements; the pass-by-value tensor 's' (uid 3) takes one",
        ),
        (
            {"x": np.ones((2, 3), dtype=np.complex64), "b": np.ones((1, 3)), "s": np.ones(1)},
            "INVALID_VARIANT_PACK",
            "input 'x' holds complex64 values; tensor 'x' (uid 1) is FLOAT",
        ),
        (
            {"x": np.ones((2, 3)), "b": np.ones((1, 3)), "s": np.ones(1), "y": np.ones(1)},
            "INVALID_TENSOR_NAME",
            "input 'y' is neither the name nor the uid of one of the graph's runtime inputs "
            "(by name: b, s, x; or by uid)",
        ),
        (
            {"x": np.ones((2, 3)), "1": np.ones((2, 3)), "b": np.ones((1, 3)), "s": np.ones(1)},
            "INVALID_TENSOR_NAME",
            "inputs 'x' and '1' both give tensor 'x' (uid 1)",
        ),
    ],
    ids=["missing", "wrong-dims", "scalar-of-two", "wrong-kind", "unknown", "twice"],
)
def test_run_refuses_inputs_that_do_not_fit(
    tmp_path: Path, capsys: Capsys, arrays: dict[str, object], code: str, message: str
) -> None:
    graph_file = _pointwise_file(tmp_path)
    inputs = _npz(tmp_path / "in.npz", **arrays)
    out = tmp_path / "out.npz"
    assert main(["run", str(graph_file), "--inputs", str(inputs), "--save", str(out)]) == 1
    assert capsys.readouterr().err == f"{code}: {message}\n"
    assert not out.exists()


def test_run_reads_no_member_larger_than_its_tensor(tmp_path: Path, capsys: Capsys) -> None:
    # A header that promises 2**40 elements is refused from the header, before any allocation.
    graph_file = _pointwise_file(tmp_path)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)}
    )
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", header.getvalue())  # the magic, the header and no data
    assert main(["run", str(graph_file), "--inputs", str(path)]) == 1
    assert capsys.readouterr().err == (
        "INVALID_VARIANT_PACK: input 'x' has dims [1099511627776]; tensor 'x' (uid 1) has "
        "dims [2, 3]\n"
    )


def test_run_refuses_pickles_and_files_that_are_not_npz(tmp_path: Path, capsys: Capsys) -> None:
    graph_file = _pointwise_file(tmp_path)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, x=np.array([{"a": 1}], dtype=object))
    assert main(["run", str(graph_file), "--inputs", str(pickled)]) == 1
    assert capsys.readouterr().err == (
        "INVALID_VARIANT_PACK: input 'x' holds object values; tensor 'x' (uid 1) is FLOAT\n"
    )
    text = tmp_path / "text.npz"
    text.write_text("not a zip")
    assert main(["run", str(graph_file), "--inputs", str(text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hipdnn-graph: error: cannot read inputs from '{text}': ")
    missing = tmp_path / "missing.npz"
    assert main(["run", str(graph_file), "--inputs", str(missing)]) == 2
    assert "cannot read inputs from" in capsys.readouterr().err


def test_run_without_inputs_draws_random_ones_and_saves_them_too(
    tmp_path: Path, capsys: Capsys
) -> None:
    graph_file = ROOT / "examples" / "data" / "hipdnn_sdpa_bwd.json"
    out = tmp_path / "grads.npz"
    args = ["run", str(graph_file), "--engine", "NUMPY_REFERENCE_ENGINE", "--seed", "4"]
    assert main([*args, "--save", str(out)]) == 0
    assert "seed 4" in capsys.readouterr().out
    with np.load(out) as saved:  # BFLOAT16 outputs: .npy has no such type, float32 holds them
        assert saved.files == ["dQ", "dK", "dV"]
        for grad in ("dQ", "dK", "dV"):
            assert saved[grad].shape == (1, 2, 8, 4) and saved[grad].dtype == np.float32
            assert np.isfinite(saved[grad]).all() and np.abs(saved[grad]).sum() > 0
            bf16 = saved[grad].astype(hg.backend.dtypes.numpy_dtype(hg.DataType.BFLOAT16))
            np.testing.assert_array_equal(bf16.astype(np.float32), saved[grad])
    assert main([*args, "--save", str(tmp_path / "no-dir" / "x.npz")]) == 2
    assert "cannot write" in capsys.readouterr().err


# ----- convert: stdout and --indent --------------------------------------------------------------


def test_convert_writes_to_stdout_without_o(tmp_path: Path, capsys: Capsys) -> None:
    source = ROOT / "examples" / "data" / "hipdnn_sdpa_bwd.json"
    assert main(["convert", str(source), "--to", "json"]) == 0
    assert capsys.readouterr().out == source.read_text().strip() + "\n"


def test_convert_indent_lays_json_out_as_json_dumps_does(capsys: Capsys) -> None:
    source = ROOT / "examples" / "data" / "hipdnn_sdpa_bwd.json"
    compact = hg.Graph.from_json(source.read_text()).to_json()
    assert main(["convert", str(source), "--to", "json", "--indent", "2"]) == 0
    out = capsys.readouterr().out
    expected = json.dumps(json.loads(compact), indent=2, sort_keys=True, ensure_ascii=False)
    assert out == expected + "\n"
    assert hg.Graph.from_json(out).to_json() == compact
    assert main(["convert", str(source), "--to", "binary", "--indent", "2"]) == 2
    assert "--indent applies to JSON output (--to json) only" in capsys.readouterr().err
    assert main(["convert", str(source), "--to", "json", "--indent", "-1"]) == 2


def test_indent_json_keeps_every_token_as_written() -> None:
    # hipDNN writes 1e15 <= |x| < 1e16 unlike Python; strings may hold , : { [ and escapes
    text = '{"a":1000000000000000.0,"b":"x,{y}:[\\"z\\"]","c":[],"d":{},"e":[1,[2]]}'
    laid = indent_json(text, 1)
    assert laid == (
        '{\n "a": 1000000000000000.0,\n "b": "x,{y}:[\\"z\\"]",\n "c": [],\n "d": {},\n'
        ' "e": [\n  1,\n  [\n   2\n  ]\n ]\n}'
    )
    assert json.loads(laid) == json.loads(text)


def test_convert_does_not_write_binary_to_a_terminal(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = ROOT / "examples" / "data" / "hipdnn_sdpa_bwd.json"
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["convert", str(source), "--to", "binary"]) == 2
    assert "binary output is not written to a terminal" in capsys.readouterr().err


# ----- --version and --help load no graph code ----------------------------------------------------


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"]])
def test_version_and_help_import_no_graph_code(argv: list[str]) -> None:
    script = (
        "import sys\n"
        "from hipdnn_graph.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = ('pydantic', 'networkx', 'numpy', 'ml_dtypes', 'hipdnn_graph.graph')\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert res.stdout.strip().splitlines()[-1] == "0 []"


# ----- the hipDNN-made files of examples/data -------------------------------------------------


@pytest.mark.parametrize(
    "name", ["hipdnn_sdpa_bwd.json", "hipdnn_sdpa_bwd.bin", "hipdnn_sdpa_bwd.hdgp"]
)
def test_every_example_data_file_validates_and_runs(
    name: str, tmp_path: Path, capsys: Capsys
) -> None:
    path = ROOT / "examples" / "data" / name
    assert main(["validate", str(path)]) == 0
    fmt = "json" if name.endswith(".json") else "binary"
    summary = f"OK: graph 'sdpa_bwd_min' ({fmt}): 9 tensors, 1 node(s): bwd (SDPA_BWD)\n"
    assert capsys.readouterr().out == summary
    out = tmp_path / "grads.npz"
    args = ["run", str(path), "--engine", "NUMPY_REFERENCE_ENGINE", "--save", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    with np.load(out) as saved:
        assert saved.files == ["dQ", "dK", "dV"]


def test_example_data_files_hold_one_graph() -> None:
    data = ROOT / "examples" / "data"
    text = (data / "hipdnn_sdpa_bwd.json").read_text().strip()
    blob = (data / "hipdnn_sdpa_bwd.bin").read_bytes()
    container = (data / "hipdnn_sdpa_bwd.hdgp").read_bytes()
    assert container[4:8] == b"HDGP" and blob[4:8] != b"HDGP"
    assert hg.Graph.from_json(text).serialize() == blob
    assert hg.Graph.deserialize(container).to_json() == text
    assert hg.Graph.deserialize(blob).to_json() == text


# ----- g.summary() is what `hipdnn-graph show` prints --------------------------------------------


def test_summary_is_the_text_show_prints(tmp_path: Path, capsys: Capsys) -> None:
    path = _pointwise_file(tmp_path)
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    g = hg.Graph.from_json(path.read_text())
    g.validate()
    text = g.summary()
    assert shown == text.replace("graph 'axpb': ", "graph 'axpb' (json): ", 1)
    assert (
        text.splitlines()[0]
        == "graph 'axpb': 5 tensors, 2 node(s): add (POINTWISE) -> scale (POINTWISE)"
    )
    assert "  3    s           [1]    [1]      FLOAT  no       runtime" in text.splitlines()


def test_the_package_loads_each_exported_name_on_first_use() -> None:
    script = (
        "import sys, hipdnn_graph as hg\n"
        "light = 'pydantic' not in sys.modules and 'hipdnn_graph.graph' not in sys.modules\n"
        "names = [n for n in hg.__all__ if n != '__version__']\n"
        "values = [getattr(hg, n) for n in names]\n"
        "try:\n"
        "    hg.Grpah\n"
        "except AttributeError as exc:\n"
        "    missing = str(exc)\n"
        "print(light, len(names), all(v is not None for v in values), hg.Graph.__module__)\n"
        "print(missing, sorted(set(hg.__all__) - set(dir(hg))))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert res.stdout.splitlines() == [
        f"True {len(hg.__all__) - 1} True hipdnn_graph.graph",
        "module 'hipdnn_graph' has no attribute 'Grpah' []",
    ]
