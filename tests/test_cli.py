"""The hipdnn-graph command line: every subcommand, in-process through main(argv), and the
installed console script once through a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import ENTRY_POINT_GROUP, Support, isolated_registry
from hipdnn_graph.cli import detect_format, main
from hipdnn_graph.descriptors import json_schema

Capsys = pytest.CaptureFixture[str]


def _graph(name: str = "attn", *, features: bool = False) -> hg.Graph:
    g = hg.Graph(
        name=name,
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    b, h, s, d = 2, 2, 16, 16
    q = g.tensor(name="Q", dim=[b, h, s, d])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    kw: dict[str, object] = {"use_causal_mask": True}
    if features:
        kw["use_padding_mask"] = True
        kw["seq_len_q"] = g.tensor(name="sq", dim=[b, 1, 1, 1], data_type=hg.DataType.INT32)
        kw["seq_len_kv"] = g.tensor(name="skv", dim=[b, 1, 1, 1], data_type=hg.DataType.INT32)
        scale = hg.TensorAttributes(name="scale").set_as_runtime_parameter()
        kw["attn_scale"] = g.tensor(
            scale.set_data_type(hg.DataType.FLOAT).set_dim([1]).set_stride([1])
        )
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, **kw)  # type: ignore[arg-type]
    assert stats is not None
    mask = g.tensor(name="mask", dim=[b, h, s, s]) if features else None
    bwd_kw = dict(kw)
    if mask is not None:
        one = g.tensor(hg.TensorAttributes(name="one").set_value(1.0))
        bwd_kw["dropout"] = (mask, one, one)
    grads = g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO"), stats, name="bwd", **bwd_kw)  # type: ignore[arg-type]
    for t in grads:
        t.set_output(True)
    return g


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    g = _graph()
    paths = {"json": tmp_path / "g.json", "binary": tmp_path / "g.bin"}
    paths["json"].write_text(g.to_json())
    paths["binary"].write_bytes(g.serialize())
    rich = tmp_path / "rich.json"
    rich.write_text(_graph("rich", features=True).to_json())
    paths["rich"] = rich
    return paths


def test_detect_format() -> None:
    g = _graph()
    assert detect_format(g.serialize()) == "binary"
    assert detect_format(b"  \n" + g.to_json().encode()) == "json"
    assert detect_format(b"garbage") == "binary"


@pytest.mark.parametrize("kind", ["json", "binary"])
def test_validate_ok(files: dict[str, Path], kind: str, capsys: Capsys) -> None:
    assert main(["validate", str(files[kind])]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"OK: graph 'attn' ({kind}): 9 tensors, 2 node(s)")
    assert "fwd (SDPA_FWD) -> bwd (SDPA_BWD)" in out
    assert len(out.splitlines()) == 1


def test_validate_reports_the_error_code(tmp_path: Path, capsys: Capsys) -> None:
    bad = tmp_path / "bad.json"
    data = json.loads(_graph().to_json())
    data["tensors"][0]["dims"] = [2, 2, 16]  # Q becomes rank 3
    data["tensors"][0]["strides"] = [512, 256, 16]
    bad.write_text(json.dumps(data))
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "INVALID_VALUE: SdpaFwdNode: Query tensor Q must be rank-4, got rank=3"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"not a graph at all", "UNSUPPORTED_GRAPH_FORMAT: "),
        (b"{ this is not json", "UNSUPPORTED_GRAPH_FORMAT: "),
        (b'{"format_version": 99}', "UNSUPPORTED_GRAPH_FORMAT: "),
        (b'{"name": "g"}', "UNSUPPORTED_GRAPH_FORMAT: "),
        (
            b'{"compute_data_type":"float","intermediate_data_type":"float",'
            b'"io_data_type":"float","name":"","nodes":[],"tensors":['
            b'{"data_type":"float","dims":[1],"strides":[1],"is_runtime_pass_by_value":false,'
            b'"name":"a","uid":1,"virtual":false},'
            b'{"data_type":"float","dims":[1],"strides":[1],"is_runtime_pass_by_value":false,'
            b'"name":"b","uid":1,"virtual":false}]}',
            "INVALID_VALUE: ",
        ),
        (b"", "UNSUPPORTED_GRAPH_FORMAT: "),
    ],
)
def test_bad_files_exit_1_without_traceback(
    tmp_path: Path, content: bytes, expected: str, capsys: Capsys
) -> None:
    path = tmp_path / "bad"
    path.write_bytes(content)
    for command in (["validate"], ["show"], ["run"], ["convert", "--to", "json", "-o", "x"]):
        assert (
            main(
                [*command, str(path)]
                if command[0] != "convert"
                else ["convert", str(path), *command[1:]]
            )
            == 1
        )
        err = capsys.readouterr().err
        assert err.startswith(expected) and "Traceback" not in err


def test_missing_file_and_directory_exit_2(tmp_path: Path, capsys: Capsys) -> None:
    assert main(["validate", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["show", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["frobnicate"]) == 2


def test_show_table(files: dict[str, Path], capsys: Capsys) -> None:
    assert main(["show", str(files["binary"])]) == 0
    out = capsys.readouterr().out
    assert "io HALF, intermediate FLOAT, compute FLOAT" in out
    assert "uid  name" in out and "virtual" in out
    q_row = next(line for line in out.splitlines() if line.split()[:2] == ["1", "Q"])
    assert q_row.split()[2:6] == ["[2,2,16,16]", "[512,256,16,1]", "HALF", "no"]
    o_row = next(line for line in out.splitlines() if "fwd::O" in line and "[" in line)
    assert o_row.split()[4:6] == ["FLOAT", "yes"]
    assert "1. fwd  SDPA_FWD  compute FLOAT  [causal_mask, generate_stats=True]" in out
    assert "2. bwd  SDPA_BWD" in out
    assert "in:  Q=Q#1 K=K#2 V=V#3 O=fwd::O#4 dO=dO#6 Stats=fwd::Stats#5" in out


def test_show_dot_and_mermaid(files: dict[str, Path], capsys: Capsys) -> None:
    assert main(["show", str(files["json"]), "--dot"]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith('digraph "attn"') and dot.rstrip().endswith("}")
    assert main(["show", str(files["json"]), "--mermaid"]) == 0
    assert capsys.readouterr().out.startswith("flowchart LR")
    if shutil.which("dot"):
        rendered = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True)
        assert rendered.returncode == 0, rendered.stderr


def test_show_invalid_graph_still_shows_then_fails(tmp_path: Path, capsys: Capsys) -> None:
    data = json.loads(_graph().to_json())
    data["nodes"][0]["compute_data_type"] = "unset"
    data["compute_data_type"] = "unset"
    path = tmp_path / "nocompute.json"
    path.write_text(json.dumps(data))
    assert main(["show", str(path)]) == 1
    captured = capsys.readouterr()
    assert "tensors:" in captured.out
    assert captured.err.startswith("ATTRIBUTE_NOT_SET: Node fwd does not have a compute_data_type")


def test_run_default_engine(files: dict[str, Path], capsys: Capsys) -> None:
    assert main(["run", str(files["json"]), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "engine " in out and "median" in out and "over 1 run(s), seed 3" in out
    for name in ("bwd::dQ", "bwd::dK", "bwd::dV"):
        line = next(line for line in out.splitlines() if name in line)
        assert "sum=" in line and "abs_sum=" in line and "non_finite" not in line


def test_run_is_reproducible_and_handles_padding_dropout_scalars(
    files: dict[str, Path], capsys: Capsys
) -> None:
    args = ["run", str(files["rich"]), "--engine", "NUMPY_REFERENCE_ENGINE", "--seed", "5"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "engine NUMPY_REFERENCE_ENGINE" in first
    assert "non_finite" not in first
    assert main(args) == 0
    second = capsys.readouterr().out
    checksums = [line for line in first.splitlines() if "sum=" in line]
    assert checksums and checksums == [line for line in second.splitlines() if "sum=" in line]


def test_run_repeat_progress_bar(files: dict[str, Path], capsys: Capsys) -> None:
    args = ["run", str(files["binary"]), "--engine", "NUMPY_REFERENCE_ENGINE"]
    assert main([*args, "--repeat", "12", "--progress", "always"]) == 0
    captured = capsys.readouterr()
    assert "over 12 run(s)" in captured.out
    assert "[##############################] 12/12" in captured.err
    assert main([*args, "--repeat", "12", "--progress", "never"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*args, "--repeat", "0"]) == 2


def test_run_unknown_or_refusing_engine(files: dict[str, Path], capsys: Capsys) -> None:
    assert main(["run", str(files["json"]), "--engine", "NO_SUCH_ENGINE"]) == 2
    assert "no engine named 'NO_SUCH_ENGINE'; available:" in capsys.readouterr().err

    class Picky:
        name, priority, array_kind = "PICKY_ENGINE", 1, "numpy"

        def check(self, graph: hg.Graph) -> Support:
            return Support.no("only likes graphs named 'other'")

        def workspace_size(self, graph: hg.Graph) -> int:
            return 0

        def build_plan(self, graph: hg.Graph) -> None:
            raise AssertionError("never built")

    class PickyBackend:
        name = "picky"

        def engines(self) -> list[Picky]:
            return [Picky()]

    with isolated_registry() as registry:
        registry.register(PickyBackend())
        assert main(["run", str(files["json"]), "--engine", "PICKY_ENGINE"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("GRAPH_NOT_SUPPORTED: PICKY_ENGINE cannot run this graph")
        assert "only likes graphs named 'other'" in err


def test_backends_lists_engines_and_load_errors(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "numpy  (hipdnn_graph_numpy_reference:create_backend)  loaded" in out
    line = next(line for line in out.splitlines() if "NUMPY_REFERENCE_ENGINE" in line)
    assert "id 0xe722795ad5156f59" in line and "available for SDPA fwd+bwd, " in line

    real = metadata.entry_points(group=ENTRY_POINT_GROUP)
    broken = metadata.EntryPoint("broken", "no_such_plugin_module:create", ENTRY_POINT_GROUP)

    def entry_points(group: str) -> list[metadata.EntryPoint]:
        return [*real, broken] if group == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    with isolated_registry():
        assert main(["backends"]) == 1
    out = capsys.readouterr().out
    assert "broken  (no_such_plugin_module:create)  FAILED TO LOAD: ModuleNotFoundError" in out
    assert "NUMPY_REFERENCE_ENGINE" in out


@pytest.mark.parametrize("target", ["json", "binary"])
def test_convert_round_trips(
    files: dict[str, Path], tmp_path: Path, target: str, capsys: Capsys
) -> None:
    source = files["binary" if target == "json" else "json"]
    out_path = tmp_path / f"out.{target}"
    assert main(["convert", str(source), "--to", target, "-o", str(out_path)]) == 0
    assert f"wrote {out_path} ({target}" in capsys.readouterr().out
    original = hg.Graph.from_json(files["json"].read_text())
    converted = out_path.read_bytes()
    again = hg.Graph.from_json(converted) if target == "json" else hg.Graph.deserialize(converted)
    assert again.key() == original.key()


def test_convert_to_stdout_and_unwritable(
    files: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    assert main(["convert", str(files["binary"]), "--to", "json", "-o", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "attn"
    target = tmp_path / "no" / "such" / "dir.json"
    assert main(["convert", str(files["json"]), "--to", "json", "-o", str(target)]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_schema(capsys: Capsys) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == json_schema()
    assert "tensors" in schema["properties"] and "nodes" in schema["properties"]


def test_console_script_and_module(files: dict[str, Path]) -> None:
    script = Path(sys.executable).with_name("hipdnn-graph")
    assert script.exists(), "the hipdnn-graph console script is not installed"
    result = subprocess.run(
        [str(script), "validate", str(files["json"])], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK: graph 'attn' (json)")
    result = subprocess.run(
        [sys.executable, "-m", "hipdnn_graph", "validate", str(files["json"]) + ".missing"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_run_on_a_torch_device(files: dict[str, Path], capsys: Capsys) -> None:
    pytest.importorskip("torch")
    args = ["run", str(files["json"]), "--engine", "NUMPY_REFERENCE_ENGINE", "--seed", "2"]
    assert main(args) == 0
    numpy_sums = [line for line in capsys.readouterr().out.splitlines() if "sum=" in line]
    assert main([*args, "--device", "cpu"]) == 0
    torch_sums = [line for line in capsys.readouterr().out.splitlines() if "sum=" in line]
    assert numpy_sums == torch_sums  # same inputs, same engine, torch buffers this time
    assert main([*args, "--device", "no-such-device"]) == 2
    assert "bad --device" in capsys.readouterr().err


def test_backends_reports_one_direction_engines_and_double(capsys: Capsys) -> None:
    # An engine that runs only forward (or only backward) graphs is available for that
    # direction, not "unavailable"; DOUBLE is probed beside the 16- and 32-bit types.
    class OneWay:
        array_kind = "numpy"

        def __init__(self, name: str, node_type: hg.NodeType, types: set[hg.DataType]) -> None:
            self.name, self.priority = name, 1
            self.node_type, self.types = node_type, types

        def check(self, graph: hg.Graph) -> Support:
            kinds = {node.get_node_type() for node in graph.nodes}
            if kinds != {self.node_type}:
                return Support.no(f"runs graphs of {self.node_type.name} nodes only")
            if graph.get_io_data_type() not in self.types:
                return Support.no("wrong data type")
            return Support.yes()

        def workspace_size(self, graph: hg.Graph) -> int:
            return 0

        def build_plan(self, graph: hg.Graph) -> None:
            raise AssertionError("never built")

    class OneWayBackend:
        name = "oneway"

        def engines(self) -> list[OneWay]:
            return [
                OneWay("FWD_ONLY_ENGINE", hg.NodeType.SDPA_FWD, {hg.DataType.HALF}),
                OneWay("BWD_ONLY_ENGINE", hg.NodeType.SDPA_BWD, {hg.DataType.DOUBLE}),
            ]

    with isolated_registry() as registry:
        registry.register(OneWayBackend())
        assert main(["backends"]) == 0
    lines = capsys.readouterr().out.splitlines()
    fwd = next(line for line in lines if "FWD_ONLY_ENGINE" in line)
    assert fwd.endswith("available for SDPA fwd only in HALF")
    bwd = next(line for line in lines if "BWD_ONLY_ENGINE" in line)
    assert bwd.endswith("available for SDPA bwd only in DOUBLE")
    numpy = next(line for line in lines if "NUMPY_REFERENCE_ENGINE" in line)
    assert "available for SDPA fwd+bwd, CONVOLUTION_FPROP, " in numpy
    assert numpy.endswith(", RESAMPLE_BWD in FLOAT, HALF, BFLOAT16, DOUBLE")


def test_every_family_has_probes_that_build_in_every_probed_type() -> None:
    # a probe that failed to build would silently shrink what `backends` reports
    from hipdnn_graph.cli.backends import PROBE_TYPES, probe_graphs
    from hipdnn_graph.cli.probes import SDPA_PROBES, chained, probe_families

    families = probe_families()
    assert sorted([*families, "SDPA_FWD", "SDPA_BWD"]) == sorted(
        t.name for t in hg.NodeType if t != hg.NodeType.UNKNOWN
    )
    expected = [*SDPA_PROBES]
    for family in families:
        expected += [family, chained(family)]
    probes = probe_graphs()
    assert list(probes) == list(PROBE_TYPES)
    for io, graphs in probes.items():
        assert list(graphs) == expected, io
        for family in families:
            assert [n.get_node_type().name for n in graphs[family].nodes] == [family]
            chain = [n.get_node_type().name for n in graphs[chained(family)].nodes]
            assert chain == [family, "POINTWISE"]
            assert graphs[family].get_io_data_type() == io


def test_backends_probes_an_engine_with_the_families_it_declares(capsys: Capsys) -> None:
    # A user's layernorm plugin is asked about layernorm graphs only, and listed as available
    # for them (it was "unavailable" when every engine was probed with attention graphs).
    asked: list[set[str]] = []

    class LayernormEngine:
        name, priority, array_kind = "USER_LAYERNORM_ENGINE", 50, "numpy"
        node_types = frozenset({hg.NodeType.LAYER_NORM})

        def check(self, graph: hg.Graph) -> Support:
            asked.append({n.get_node_type().name for n in graph.nodes})
            if graph.get_io_data_type() == hg.DataType.DOUBLE:
                return Support.no("no DOUBLE kernel")
            return Support.yes()

        def workspace_size(self, graph: hg.Graph) -> int:
            return 0

        def build_plan(self, graph: hg.Graph) -> None:
            raise AssertionError("never built")

    class FusingEngine(LayernormEngine):
        # takes a matmul only when a pointwise node follows it, as the torch fusion engine does
        name = "USER_FUSING_ENGINE"
        node_types = frozenset({hg.NodeType.MATMUL, hg.NodeType.POINTWISE})

        def check(self, graph: hg.Graph) -> Support:
            if len(graph.nodes) < 2:
                return Support.no("a single node has nothing to fuse")
            return Support.yes()

    class UserBackend:
        name = "user"

        def engines(self) -> list[LayernormEngine]:
            return [LayernormEngine(), FusingEngine()]

    with isolated_registry() as registry:
        registry.register(UserBackend())
        assert main(["backends"]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = next(line for line in lines if "USER_LAYERNORM_ENGINE" in line)
    assert line.endswith("priority 50  available for LAYER_NORM in FLOAT, HALF, BFLOAT16")
    assert asked and all(kinds == {"LAYER_NORM"} for kinds in asked)
    fusing = next(line for line in lines if "USER_FUSING_ENGINE" in line)
    assert fusing.endswith(
        "available for POINTWISE+POINTWISE, MATMUL+POINTWISE in FLOAT, HALF, BFLOAT16, DOUBLE"
    )


def test_backends_says_why_an_engine_accepts_no_probe(capsys: Capsys) -> None:
    class NoneEngine:
        name, priority, array_kind = "NOTHING_ENGINE", 50, "numpy"
        node_types = frozenset({hg.NodeType.REDUCTION})

        def check(self, graph: hg.Graph) -> Support:
            return Support.no("reductions need a GPU here")

        def workspace_size(self, graph: hg.Graph) -> int:
            return 0

        def build_plan(self, graph: hg.Graph) -> None:
            raise AssertionError("never built")

    class NoneBackend:
        name = "none"

        def engines(self) -> list[NoneEngine]:
            return [NoneEngine()]

    with isolated_registry() as registry:
        registry.register(NoneBackend())
        assert main(["backends"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "NOTHING" in line)
    assert line.endswith("unavailable: reductions need a GPU here")


def test_backends_lists_the_torch_family_engines_as_available(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    # the fusion engine compiles on the CPU only when asked (autotune, or preferred by name)
    monkeypatch.setenv("HIPDNN_GRAPH_TORCH_FUSION_AUTOTUNE", "1")
    assert main(["backends"]) in (0, 1)  # 1 only for a plugin that failed to load
    lines = capsys.readouterr().out.splitlines()
    eager = next(line for line in lines if "TORCH_EAGER_ENGINE" in line)
    assert "available for CONVOLUTION_FPROP, " in eager and ", MATMUL, " in eager
    fusion = next(line for line in lines if "TORCH_FUSION_ENGINE" in line)
    assert "available for CONVOLUTION_FPROP+POINTWISE, " in fusion
    assert ", MATMUL+POINTWISE, " in fusion
    if not torch.cuda.is_available():  # by default it says why it leaves the CPU to eager
        monkeypatch.delenv("HIPDNN_GRAPH_TORCH_FUSION_AUTOTUNE")
        assert main(["backends"]) in (0, 1)
        lines = capsys.readouterr().out.splitlines()
        fusion = next(line for line in lines if "TORCH_FUSION_ENGINE" in line)
        assert "unavailable: " in fusion
        assert "on the CPU compiling does not pay by default" in fusion


def test_convert_escapes_the_paths_it_prints(
    files: dict[str, Path], tmp_path: Path, capsys: Capsys
) -> None:
    # A file name holding an escape sequence or a newline must not reach the terminal raw.
    hostile = tmp_path / "out\x1b[31mred\nforged.json"
    assert main(["convert", str(files["binary"]), "--to", "json", "-o", str(hostile)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.count("\n") == 1
    assert "out\\x1b[31mred\\nforged.json (json, " in out
    assert hostile.exists()
    blocked = tmp_path / "no\x1bdir" / "x.json"
    assert main(["convert", str(files["binary"]), "--to", "json", "-o", str(blocked)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "no\\x1bdir" in err
