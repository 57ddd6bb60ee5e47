"""``hipdnn_graph.torch.export``: a model's hipDNN subgraphs as files, with a manifest, re-run
on the NumPy reference (docs/torch-compile.md, "Export")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from compile_models import Block, make_mlp  # noqa: E402

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph import ErrorCode, Graph, HipdnnError  # noqa: E402
from hipdnn_graph.torch.compile import FORMAT, load_graph, run_export  # noqa: E402


def _check_manifest(out: Path, manifest: dict, graph_format: str) -> list[dict]:
    """The manifest on disk is the one returned, every reference points backwards, and each
    subgraph file reads back, validates and declares the tensors the manifest names."""
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert (manifest["format"], manifest["version"], manifest["graph_format"]) == (
        FORMAT,
        1,
        graph_format,
    )
    known = {i["ref"] for i in manifest["inputs"]} | set(manifest["weights"]["refs"])
    hipdnn = []
    for index, step in enumerate(manifest["steps"]):
        if step["kind"] == "aten":
            assert step["op"] == "getitem" or step["op"].startswith("aten.")
            known.add(step["name"])
            continue
        assert step["kind"] == "hipdnn"
        assert step["subgraph"] == len(hipdnn)
        assert step["file"] == f"{len(hipdnn)}.{graph_format}"
        data = (out / step["file"]).read_bytes()
        graph = Graph.deserialize(data) if graph_format == "bin" else Graph.from_json(data)
        graph.validate()
        uids = {t.get_uid(): t.get_name() for t in graph.tensors}
        for i in step["inputs"]:
            assert uids[i["uid"]] == i["tensor"]
            assert i["from"]["ref"] in known
            source = i["from"]
            if source["kind"] == "subgraph":
                assert source["subgraph"] < step["subgraph"]
            elif source["kind"] == "aten":
                assert manifest["steps"][source["step"]]["name"] == source["ref"]
                assert source["step"] < index
            elif source["kind"] == "weight":
                assert manifest["weights"]["refs"][source["ref"]] == source["weight"]
            else:
                assert manifest["inputs"][source["input"]]["ref"] == source["ref"]
        for o in step["outputs"]:
            assert uids[o["uid"]] == o["tensor"]
            known.add(o["ref"])
        hipdnn.append(step)
    assert all(o["ref"] in known for o in manifest["outputs"])
    return hipdnn


@pytest.mark.parametrize("graph_format", ["json", "bin"])
def test_mlp_exports_one_subgraph_that_reruns_to_the_output(
    tmp_path: Path, graph_format: str
) -> None:
    mlp, x = make_mlp(), torch.randn(4, 8)
    manifest = hgt.export(mlp, (x,), tmp_path, graph_format=graph_format)
    (sub,) = _check_manifest(tmp_path, manifest, graph_format)
    assert [s["op"] for s in manifest["steps"] if s["kind"] == "aten"] == ["aten.t.default"] * 2
    assert sorted(i["from"]["kind"] for i in sub["inputs"]) == [
        "aten",
        "aten",
        "input",
        "weight",
        "weight",
    ]
    assert set(manifest["weights"]["refs"].values()) == {
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
    }
    assert manifest["outputs"] == [
        {"ref": sub["outputs"][0]["ref"], "kind": "subgraph", "subgraph": 0, "output": 0}
    ]
    assert sub["outputs"][0]["shape"] == [4, 8]
    x2 = torch.randn(4, 8)  # other values of the traced shape
    (got,) = run_export(tmp_path, (x2,))
    with torch.no_grad():
        torch.testing.assert_close(got, mlp(x2), rtol=1e-5, atol=1e-5)


def test_transformer_block_reruns_in_manifest_order(tmp_path: Path) -> None:
    torch.manual_seed(0)
    block, x = Block(), torch.randn(2, 6, 16)
    manifest = hgt.export(block, (x,), tmp_path)
    hipdnn = _check_manifest(tmp_path, manifest, "json")
    families = [
        [
            n["type"].removesuffix("Attributes")
            for n in json.loads((tmp_path / s["file"]).read_text())["nodes"]
        ]
        for s in hipdnn
    ]
    assert families == [
        ["Layernorm"],
        ["Matmul", "Pointwise"],
        ["Sdpa"],
        ["Matmul", "Pointwise"],
        ["Pointwise", "Pointwise"],
    ]
    assert any(s["kind"] == "aten" and s["op"] == "aten.permute.default" for s in manifest["steps"])
    (got,) = run_export(tmp_path, (x,))
    with torch.no_grad():
        torch.testing.assert_close(got, block(x), rtol=1e-4, atol=1e-4)


def test_load_graph_reads_each_subgraph_file(tmp_path: Path) -> None:
    hgt.export(make_mlp(), (torch.randn(2, 8),), tmp_path, graph_format="bin")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    step = next(s for s in manifest["steps"] if s["kind"] == "hipdnn")
    graph = load_graph(tmp_path, step)
    assert graph.serialize() == (tmp_path / "0.bin").read_bytes()


def test_unknown_graph_format_is_invalid_value(tmp_path: Path) -> None:
    with pytest.raises(HipdnnError) as err:
        hgt.export(make_mlp(), (torch.randn(2, 8),), tmp_path, graph_format="onnx")
    assert err.value.code is ErrorCode.INVALID_VALUE
    assert "graph_format must be one of ['json', 'bin'], not 'onnx'" in str(err.value)
    assert not (tmp_path / "manifest.json").exists()


def test_run_export_refuses_a_directory_without_an_export(tmp_path: Path) -> None:
    with pytest.raises(HipdnnError) as err:
        run_export(tmp_path, (torch.randn(2, 8),))
    assert err.value.code is ErrorCode.INVALID_VALUE
    (tmp_path / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(HipdnnError, match="is not a hipdnn-graph-export"):
        run_export(tmp_path, (torch.randn(2, 8),))


def test_run_export_refuses_another_input_count(tmp_path: Path) -> None:
    hgt.export(make_mlp(), (torch.randn(2, 8),), tmp_path)
    with pytest.raises(HipdnnError, match="the model takes 1 inputs, got 2") as err:
        run_export(tmp_path, (torch.randn(2, 8), torch.randn(2, 8)))
    assert err.value.code is ErrorCode.INVALID_VALUE


def test_a_subgraph_that_fails_to_build_is_exported_as_its_aten_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hipdnn_graph.errors import NotSupportedError
    from hipdnn_graph.torch.compile import _partition

    def refuse(gm: object, prefer: object = None) -> object:
        raise NotSupportedError("refused for the test")

    monkeypatch.setattr(_partition, "lower", refuse)
    mlp, x = make_mlp(), torch.randn(4, 8)
    manifest = hgt.export(mlp, (x,), tmp_path)
    assert _check_manifest(tmp_path, manifest, "json") == []
    ops = [s["op"] for s in manifest["steps"]]
    assert ops.count("aten.addmm.default") == 2
    assert ops.count("aten.gelu.default") == 1
    assert manifest["outputs"][0]["kind"] == "aten"
    (got,) = run_export(tmp_path, (x,))
    with torch.no_grad():
        torch.testing.assert_close(got, mlp(x), rtol=1e-5, atol=1e-5)


def test_run_export_refuses_inputs_of_another_shape_or_type(tmp_path: Path) -> None:
    hgt.export(make_mlp(), (torch.randn(2, 8),), tmp_path)
    with pytest.raises(HipdnnError) as err:
        run_export(tmp_path, (torch.randn(3, 8),))
    assert err.value.code is ErrorCode.INVALID_VALUE
    assert "input 0 must be a float32 tensor of shape [2, 8] (the traced one), got [[3, 8]" in str(
        err.value
    )
    with pytest.raises(HipdnnError, match="got ndarray"):
        run_export(tmp_path, (torch.randn(2, 8).numpy(),))
    with pytest.raises(HipdnnError, match=r"got \[\[2, 8\], torch\.float64\]"):
        run_export(tmp_path, (torch.randn(2, 8, dtype=torch.float64),))


def test_export_refuses_non_tensor_inputs_and_untraceable_models(tmp_path: Path) -> None:
    with pytest.raises(HipdnnError, match=r"inputs must be tensors, got \['int'\]") as err:
        hgt.export(make_mlp(), (3,), tmp_path)
    assert err.value.code is ErrorCode.INVALID_VALUE

    class Branchy(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1 if x.sum() > 0 else x - 1  # data-dependent control flow

    with pytest.raises(HipdnnError, match="export: tracing the model failed: ") as err:
        hgt.export(Branchy(), (torch.randn(2),), tmp_path)
    assert err.value.code is ErrorCode.GRAPH_NOT_SUPPORTED
    assert not (tmp_path / "manifest.json").exists()


def test_export_is_imported_at_first_use() -> None:
    code = (
        "import sys, hipdnn_graph.torch as hgt\n"
        "before = 'hipdnn_graph.torch.compile' in sys.modules\n"
        "from hipdnn_graph.torch.compile import export\n"
        "print(before, hgt.export is export, hasattr(hgt, 'exports'))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["False", "True", "False"]
