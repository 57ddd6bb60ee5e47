"""``hipdnn-graph show-export`` and ``run-export``: an export directory shown, run on the best or
a named engine with random, given or the saved example inputs, and checked against the model's
saved outputs (issue 38, item 2); bad directories and manifests exit non-zero with the CLI's
conventions (1: content refused, ``CODE: message``; 2: usage and unreadable files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compile_models import Block, make_mlp  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.cli import main  # noqa: E402
from hipdnn_graph.cli.exported_run import compare  # noqa: E402

Capsys = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A transformer block (JSON graphs) and an MLP (hipDNN bytes), exported once."""
    root = tmp_path_factory.mktemp("exports")
    torch.manual_seed(0)
    hgt.export(Block(), (torch.randn(2, 6, 16),), root / "block")
    hgt.export(make_mlp(), (torch.randn(4, 8),), root / "mlp", graph_format="bin")
    return {"block": root / "block", "mlp": root / "mlp"}


def _copy(src: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(src, tmp_path / src.name))


def _run(argv: list[str], capsys: Capsys) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


# ----- show-export -----------------------------------------------------------------------------


def test_show_export_lists_graphs_connections_and_the_aten_census(
    exports: dict[str, Path], capsys: Capsys
) -> None:
    status, out, err = _run(["show-export", str(exports["block"])], capsys)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert (
        lines[0]
        == f"export '{exports['block']}': 5 hipDNN graph(s), 14 aten step(s), graph format json"
    )
    manifest = json.loads((exports["block"] / "manifest.json").read_text())
    first_input = manifest["inputs"][0]["ref"]
    assert lines[1:3] == ["inputs:", f"  input 0  {first_input}  [2,6,16]  float32"]
    assert lines[3] == "weights: 6 in weights.pt"
    graphs = [line for line in lines if line.startswith("graph ")]
    assert [g.split(" node(s): ")[1] for g in graphs] == [
        "native_layer_norm (LAYER_NORM)",
        "addmm (MATMUL), addmm_bias (POINTWISE)",
        "_scaled_dot_product_flash_attention_for_cpu (SDPA_FWD)",
        "addmm_1 (MATMUL), addmm_1_bias (POINTWISE)",
        "gelu (POINTWISE), add (POINTWISE)",
    ]
    assert [g.split(", ")[0] for g in graphs] == [
        f"graph {k}: {k}.json 'Block_{k}'" for k in range(5)
    ]
    # where each input comes from and what reads each output
    assert any(line.startswith("  in ") and line.endswith("<- input 0") for line in lines[5:10])
    assert any(line.endswith("<- weight ln.weight") for line in lines)
    assert any(line.endswith("<- aten step 8 (getitem)") for line in lines)
    assert any("float32 -> aten step 1 (aten.view.default)" in line for line in lines)
    assert any(line.endswith("float32 -> output 0") for line in lines)
    at = lines.index("outputs:")
    assert lines[at + 1] == "  output 0  [2,6,16]  float32  <- graph 4 output 0"
    census = lines[lines.index("outside hipDNN: 14 aten step(s)") + 1 : -1]
    assert sorted(census) == sorted(
        [
            "  aten.view.default     6",
            "  aten.t.default        2",
            "  aten.permute.default  1",
            "  aten.unbind.int       1",
            "  getitem               3",
            "  aten.transpose.int    1",
        ]
    )
    assert lines[-1].startswith("reference: reference.npz (the example inputs and the model's")


def test_show_export_takes_the_manifest_file_too(exports: dict[str, Path], capsys: Capsys) -> None:
    _, by_dir, _ = _run(["show-export", str(exports["mlp"])], capsys)
    status, by_file, err = _run(["show-export", str(exports["mlp"] / "manifest.json")], capsys)
    assert (status, err, by_file) == (0, "", by_dir)
    assert "graph 0: 0.bin " in by_file
    assert "5 node(s): addmm (MATMUL), addmm_bias (POINTWISE), gelu (POINTWISE)," in by_file


# ----- run-export ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["block", "mlp"])
def test_run_export_check_reproduces_the_models_outputs(
    exports: dict[str, Path], model: str, capsys: Capsys
) -> None:
    argv = ["run-export", str(exports[model]), "--check", "--engine", "NUMPY_REFERENCE_ENGINE"]
    status, out, err = _run(argv, capsys)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"export '{exports[model]}': the example inputs of reference.npz, on cpu"
    graphs = [line for line in lines if line.startswith("graph ")]
    count = 5 if model == "block" else 1
    suffix = "json" if model == "block" else "bin"
    assert graphs == [
        f"graph {k} ({k}.{suffix}): engine NUMPY_REFERENCE_ENGINE" for k in range(count)
    ]
    row = lines[lines.index("check against the model's outputs in reference.npz:") + 1]
    assert row.startswith("  output 0  max|diff| ") and row.endswith(" (float32)  ok")
    assert lines[-1] == "every output is the model's within its dtype's tolerance"


def test_run_export_on_the_best_engines_checks_too(
    exports: dict[str, Path], capsys: Capsys
) -> None:
    status, out, err = _run(["run-export", str(exports["block"]), "--check"], capsys)
    assert (status, err) == (0, "")
    engines = [line.split("engine ")[1] for line in out.splitlines() if line.startswith("graph ")]
    assert len(engines) == 5 and all(engines)


def test_a_wrong_chain_fails_the_check(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    """The saved outputs moved by 1 % (beyond float32's tolerance): exit 1, the failure named."""
    folder = _copy(exports["mlp"], tmp_path)
    with np.load(folder / "reference.npz") as saved:
        arrays = dict(saved)
    arrays["output_0"] = arrays["output_0"] * 1.01 + 0.01
    np.savez(folder / "reference.npz", **arrays)
    status, out, err = _run(["run-export", str(folder), "--check"], capsys)
    assert status == 1
    assert out.splitlines()[-1].endswith("FAILED")
    assert err.startswith("check failed: output 0 differs by ") and "(limit " in err


def test_run_export_takes_inputs_and_saves_the_outputs(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    torch.manual_seed(0)
    block = Block()  # the exported weights (same seed)
    x = np.random.default_rng(3).standard_normal((2, 6, 16))  # float64, cast into float32
    np.savez(tmp_path / "in.npz", input_0=x)
    saved = tmp_path / "out.npz"
    argv = ["run-export", str(exports["block"]), "--inputs", str(tmp_path / "in.npz")]
    status, out, err = _run([*argv, "--save", str(saved)], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[0].endswith(f"inputs from {tmp_path / 'in.npz'}, on cpu")
    assert out.splitlines()[-1] == f"saved 1 output(s) to {saved}"
    with np.load(saved) as result, torch.no_grad():
        want = block(torch.from_numpy(x).float()).numpy()
        np.testing.assert_allclose(result["output_0"], want, rtol=1e-4, atol=1e-4)


def test_random_inputs_follow_the_seed(exports: dict[str, Path], capsys: Capsys) -> None:
    def sums(seed: str) -> list[str]:
        status, out, _ = _run(["run-export", str(exports["mlp"]), "--seed", seed], capsys)
        assert status == 0 and f"random inputs, seed {seed}, on cpu" in out
        return [line for line in out.splitlines() if "sum=" in line]

    assert sums("1") == sums("1") and sums("1") != sums("2")


def test_a_named_engine_that_cannot_run_a_graph_exits_1(
    exports: dict[str, Path], capsys: Capsys
) -> None:
    argv = ["run-export", str(exports["mlp"]), "--engine", "TORCH_SDPA_MATH_ENGINE"]
    status, out, err = _run(argv, capsys)
    assert (status, out) == (1, "")
    assert err.startswith(
        "GRAPH_NOT_SUPPORTED: subgraph 0 (0.bin): TORCH_SDPA_MATH_ENGINE cannot run it: "
    )


# ----- bad directories, manifests and inputs ---------------------------------------------------


def test_bad_paths_are_usage_errors(tmp_path: Path, capsys: Capsys) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text("{}")
    cases = {
        str(
            tmp_path / "nowhere"
        ): f"cannot read '{tmp_path / 'nowhere'}': No such file or directory",
        str(tmp_path / "empty"): f"'{tmp_path / 'empty'}' holds no manifest.json: not a directory "
        "hipdnn_graph.torch.export wrote",
        str(tmp_path / "other.json"): f"'{tmp_path / 'other.json'}' is neither an export "
        "directory nor its manifest.json",
    }
    for command in ("show-export", "run-export"):
        for path, message in cases.items():
            assert _run([command, path], capsys) == (2, "", f"hipdnn-graph: error: {message}\n")


def test_a_manifest_that_is_not_an_exports_exits_1(tmp_path: Path, capsys: Capsys) -> None:
    (tmp_path / "manifest.json").write_text("[1, 2")
    status, out, err = _run(["show-export", str(tmp_path)], capsys)
    assert (status, out) == (1, "")
    assert err.startswith(f"INVALID_VALUE: {tmp_path / 'manifest.json'} is not JSON: ")
    (tmp_path / "manifest.json").write_text('{"format": "onnx"}')
    for command in ("show-export", "run-export"):
        assert _run([command, str(tmp_path)], capsys) == (
            1,
            "",
            "INVALID_VALUE: manifest: format must be 'hipdnn-graph-export', got \"onnx\"\n",
        )


def test_a_broken_manifest_names_the_place(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    folder = _copy(exports["mlp"], tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["steps"][2]["inputs"][1]["from"]["ref"] = "nowhere"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    want = (
        "INVALID_VALUE: manifest: steps[2].inputs[1].from reads 'nowhere', which no input, "
        "weight or earlier step makes\n"
    )
    for command in ("show-export", "run-export"):
        assert _run([command, str(folder)], capsys) == (1, "", want)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        *parents, last = path
        entry = manifest
        for key in parents:
            entry = entry[key]
        entry[last] = value

    return change


_OVER = (
    "more than the limit of 68719476736; set HIPDNN_GRAPH_MAX_ALLOCATION (bytes, or e.g. "
    "256GiB) to raise it"
)
HOSTILE_MANIFESTS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("a huge input", _set(("inputs", 0, "shape"), [2**40, 8]),
     f"inputs[0] of shape [1099511627776, 8] takes the tensors replayed to 35184372088832 "
     f"bytes, {_OVER}"),
    ("an input past int64", _set(("inputs", 0, "shape"), [2**70]),
     f"inputs[0] of shape [1180591620717411303424] takes the tensors replayed to "
     f"4722366482869645213696 bytes, {_OVER}"),
    ("a negative input dim", _set(("inputs", 0, "shape"), [-4, 8]),
     "inputs[0].shape must not be negative, got [-4, 8]"),
    ("a huge graph output", _set(("steps", 2, "outputs", 0, "shape"), [2**33, 8]),
     f"steps[2].outputs[0] of shape [8589934592, 8] and stride [8, 1] takes the tensors "
     f"replayed to 274877907072 bytes, {_OVER}"),
    ("a graph output's huge stride", _set(("steps", 2, "outputs", 0, "stride"), [2**40, 1]),
     f"steps[2].outputs[0] of shape [4, 8] and stride [1099511627776, 1] takes the tensors "
     f"replayed to 13194139533472 bytes, {_OVER}"),
    ("a negative stride", _set(("steps", 2, "outputs", 0, "stride"), [-8, 1]),
     "steps[2].outputs[0].stride must not be negative, got [-8, 1]"),
    ("strides of another rank", _set(("steps", 2, "outputs", 0, "stride"), [1]),
     "steps[2].outputs[0].stride has 1 entries for 2 dims"),
    ("a negative graph input dim", _set(("steps", 2, "inputs", 0, "dims"), [4, -8]),
     "steps[2].inputs[0].dims must not be negative, got [4, -8]"),
    ("a negative model output dim", _set(("outputs", 0, "shape"), [-1]),
     "outputs[0].shape must not be negative, got [-1]"),
    ("a bad output dtype", _set(("outputs", 0, "dtype"), "Tensor"), "'Tensor' is no torch dtype"),
    ("version true", _set(("version",), True), "version must be 1, got true"),
    ("version 1.0", _set(("version",), 1.0), "version must be 1, got 1.0"),
    ("a subgraph number twice", lambda m: m["steps"].append(
        {**m["steps"][2], "outputs": [{**m["steps"][2]["outputs"][0], "ref": "again"}]}),
     "steps[3].subgraph 0 is steps[2]'s too"),
    ("deeply nested arguments", _set(("steps", 0, "args"), json.loads("[" * 900 + "]" * 900)),
     "steps[0].args" + "[0]" * 33 + " nests lists more than 32 deep"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "change", "message"), HOSTILE_MANIFESTS, ids=[h[0] for h in HOSTILE_MANIFESTS]
)
def test_hostile_shapes_and_nesting_are_refused_before_allocation(
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: Capsys,
    what: str,
    change: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    """Shapes a replay would allocate are checked against the allocation limit (and never
    negative), and aten arguments nest a bounded depth, before anything is allocated."""
    folder = _copy(exports["mlp"], tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    change(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for command in ("show-export", "run-export"):
        assert _run([command, str(folder)], capsys) == (
            1,
            "",
            f"INVALID_VALUE: manifest: {message}\n",
        )


def test_a_manifest_nested_past_the_json_decoder_is_not_json(
    tmp_path: Path, capsys: Capsys
) -> None:
    (tmp_path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    for command in ("show-export", "run-export"):
        status, out, err = _run([command, str(tmp_path)], capsys)
        assert (status, out) == (1, "")
        assert err.startswith(f"INVALID_VALUE: {tmp_path / 'manifest.json'} is not JSON: ")
    with pytest.raises(hg.HipdnnError) as exc:
        hgt.compile.read_manifest(tmp_path)
    assert exc.value.code == hg.ErrorCode.INVALID_VALUE
    assert exc.value.message.startswith(f"{tmp_path / 'manifest.json'} is not JSON: ")


def test_a_missing_graph_file_is_a_usage_error(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    folder = _copy(exports["mlp"], tmp_path)
    (folder / "0.bin").unlink()
    for command in ("show-export", "run-export"):
        status, _, err = _run([command, str(folder)], capsys)
        assert (status, err) == (
            2,
            f"hipdnn-graph: error: cannot read '{folder / '0.bin'}': No such file or directory\n",
        )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_files_that_are_devices_are_refused_unread(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    """A reference, inputs or graph file that is a device (or a pipe) has no end: it is refused,
    never read into memory."""
    folder = _copy(exports["mlp"], tmp_path)
    (folder / "reference.npz").unlink()
    (folder / "reference.npz").symlink_to("/dev/zero")
    got = _run(["run-export", str(folder), "--check"], capsys)
    assert got == (
        2,
        "",
        f"hipdnn-graph: error: cannot read the reference from '{folder / 'reference.npz'}': not "
        "a regular file\n",
    )
    got = _run(["run-export", str(folder), "--inputs", "/dev/zero"], capsys)
    assert got == (2, "", "hipdnn-graph: error: cannot read inputs from '/dev/zero': not a "
                   "regular file\n")  # fmt: skip
    (folder / "0.bin").unlink()
    (folder / "0.bin").symlink_to("/dev/zero")
    with pytest.raises(hg.HipdnnError) as err:
        hgt.compile.run_export(folder, (torch.randn(4, 8),))
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == f"cannot read {folder / '0.bin'}: not a regular file"


def test_replay_refuses_a_graph_file_past_the_size_limit(
    exports: dict[str, Path], tmp_path: Path
) -> None:
    from hipdnn_graph.descriptors import MAX_INPUT_BYTES

    folder = _copy(exports["mlp"], tmp_path)
    os.truncate(folder / "0.bin", MAX_INPUT_BYTES + 1)  # sparse: no disk taken
    with pytest.raises(hg.HipdnnError) as err:
        hgt.compile.run_export(folder, (torch.randn(4, 8),))
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == (
        f"{folder / '0.bin'} holds more than {MAX_INPUT_BYTES} bytes, the limit of a serialized "
        "graph"
    )


def test_a_corrupt_graph_file_exits_1(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    folder = _copy(exports["mlp"], tmp_path)
    (folder / "0.bin").write_bytes(b"\x04\0\0\0garbage")
    status, _, err = _run(["run-export", str(folder)], capsys)
    assert status == 1 and err.startswith(("INVALID_VALUE: ", "UNSUPPORTED_GRAPH_FORMAT: "))


@pytest.mark.parametrize(
    "arrays,status,message",
    [
        (
            {"x": np.zeros((4, 8))},
            1,
            "INVALID_TENSOR_NAME: 'x' in {npz} is none of input_0",
        ),
        (
            {"input_0": np.zeros((2, 8))},
            1,
            "INVALID_VARIANT_PACK: input_0 in {npz} is float64 of shape [2, 8]; the model's "
            "input 0 is float32 of shape [4, 8]",
        ),
        (
            {"input_0": np.zeros((4, 8), dtype=np.complex64)},
            1,
            "INVALID_VARIANT_PACK: input_0 in {npz} is complex64 of shape [4, 8]; the model's "
            "input 0 is float32 of shape [4, 8]",
        ),
        ({}, 1, "INVALID_VARIANT_PACK: {npz} holds no input_0"),
    ],
)
def test_bad_inputs_are_refused_by_name(
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: Capsys,
    arrays: dict[str, np.ndarray],
    status: int,
    message: str,
) -> None:
    npz = tmp_path / "in.npz"
    np.savez(npz, **arrays)
    got = _run(["run-export", str(exports["mlp"]), "--inputs", str(npz)], capsys)
    assert got == (status, "", message.format(npz=npz) + "\n")


def test_usage_errors_of_run_export(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    mlp = str(exports["mlp"])
    status, _, err = _run(["run-export", mlp, "--check", "--inputs", "x.npz"], capsys)
    assert status == 2 and "not allowed with argument" in err
    status, out, err = _run(["run-export", mlp, "--engine", "NOPE"], capsys)
    assert (status, out) == (2, "")
    assert err.startswith("hipdnn-graph: error: no engine named 'NOPE'; available: ")
    status, _, err = _run(["run-export", mlp, "--device", "meta"], capsys)
    assert (status, err) == (
        2,
        "hipdnn-graph: error: bad --device 'meta': use cpu, cuda or cuda:N\n",
    )
    status, _, err = _run(["run-export", mlp, "--inputs", str(tmp_path / "no.npz")], capsys)
    assert status == 2
    assert err.startswith(f"hipdnn-graph: error: cannot read inputs from '{tmp_path / 'no.npz'}'")


def test_check_without_a_reference_is_a_usage_error(
    exports: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    folder = _copy(exports["mlp"], tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["reference"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert _run(["run-export", str(folder), "--check"], capsys) == (
        2,
        "",
        f"hipdnn-graph: error: '{folder}' saved no reference outputs (its manifest names no "
        "reference file): --check has nothing to compare with\n",
    )
    assert _run(["run-export", str(folder)], capsys)[0] == 0  # a plain run needs none


def test_the_installed_command_checks_an_export(exports: dict[str, Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hipdnn_graph", "run-export", str(exports["mlp"]), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "every output is the model's within its dtype's tolerance"
    )


# ----- the comparison ------------------------------------------------------------------------


def test_compare_uses_each_dtypes_tolerance_and_treats_nans_and_integers_strictly() -> None:
    ref = np.array([1.0, -4.0, np.nan, np.inf])
    diff, limit = compare(ref + np.array([0.0, 1e-3, 0.0, 0.0]), ref, "bfloat16")
    assert diff == pytest.approx(1e-3) and limit == pytest.approx(8e-2 + 3e-2 * 4.0)
    assert compare(ref, ref, "float32") == (0.0, pytest.approx(1e-4 + 1e-4 * 4.0))
    assert compare(np.array([1.0, 2.0, 0.0, np.inf]), ref, "float32")[0] == float("inf")
    assert compare(np.array([1, 2]), np.array([1, 3]), "int64") == (1.0, 0.0)
    assert compare(np.zeros(3), np.zeros(4), "float32")[0] == float("inf")


def test_without_torch_the_export_commands_say_so(exports: dict[str, Path]) -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # import torch fails\n"
        "from hipdnn_graph.cli import main\n"
        f"sys.exit(main(['show-export', {str(exports['mlp'])!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "hipdnn-graph: error: export directories need torch (pip install 'hipdnn-graph[torch]')\n"
    )
