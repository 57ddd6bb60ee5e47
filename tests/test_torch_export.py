"""``hipdnn_graph.torch.export``: a model's hipDNN subgraphs as files, with a manifest, re-run
on the NumPy reference (docs/torch-compile.md, "Export")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compile_models import Block, make_mlp  # noqa: E402

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph import ErrorCode, Graph, HipdnnError  # noqa: E402
from hipdnn_graph.torch.compile import (  # noqa: E402
    FORMAT,
    load_graph,
    replay_export,
    run_export,
)


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
        {
            "ref": sub["outputs"][0]["ref"],
            "kind": "subgraph",
            "subgraph": 0,
            "output": 0,
            "shape": [4, 8],
            "dtype": "float32",
        }
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
    with pytest.raises(HipdnnError) as err:
        run_export(tmp_path, (torch.randn(2, 8),))
    assert err.value.message == "manifest: format must be 'hipdnn-graph-export', got \"other\""


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


def test_the_export_saves_the_example_inputs_and_the_models_outputs(tmp_path: Path) -> None:
    torch.manual_seed(1)
    block, x = Block(), torch.randn(2, 6, 16)
    manifest = hgt.export(block, (x,), tmp_path)
    assert manifest["reference"] == {"file": "reference.npz"}
    with np.load(tmp_path / "reference.npz", allow_pickle=False) as saved:
        assert sorted(saved.files) == ["input_0", "output_0"]
        np.testing.assert_array_equal(saved["input_0"], x.numpy())
        with torch.no_grad():
            np.testing.assert_array_equal(saved["output_0"], block(x).numpy())


def test_bfloat16_references_are_saved_as_float32_and_outputs_keep_their_type(
    tmp_path: Path,
) -> None:
    mlp, x = make_mlp().to(torch.bfloat16), torch.randn(2, 8, dtype=torch.bfloat16)
    manifest = hgt.export(mlp, (x,), tmp_path)
    assert manifest["inputs"][0]["dtype"] == manifest["outputs"][0]["dtype"] == "bfloat16"
    with np.load(tmp_path / "reference.npz", allow_pickle=False) as saved:
        assert saved["input_0"].dtype == np.float32
        np.testing.assert_array_equal(saved["input_0"], x.float().numpy())
    (got,) = run_export(tmp_path, (x,))
    assert got.dtype == torch.bfloat16
    with torch.no_grad():
        torch.testing.assert_close(got, mlp(x), rtol=3e-2, atol=8e-2)


def test_replay_reports_the_engine_of_each_graph_and_every_value(tmp_path: Path) -> None:
    torch.manual_seed(2)
    block, x = Block(), torch.randn(2, 6, 16)
    manifest = hgt.export(block, (x,), tmp_path)
    done = replay_export(tmp_path, (x,), engine="NUMPY_REFERENCE_ENGINE", require_engine=True)
    assert done.engines == dict.fromkeys(range(5), "NUMPY_REFERENCE_ENGINE")
    for step in manifest["steps"]:
        for o in step.get("outputs", []):
            assert list(done.values[o["ref"]].shape) == o["shape"]
    with torch.no_grad():
        torch.testing.assert_close(done.outputs[0], block(x), rtol=1e-4, atol=1e-4)
    best = replay_export(tmp_path, (x,), engine=None)
    assert sorted(best.engines) == list(range(5)) and all(best.engines.values())


def test_replay_with_a_required_engine_that_cannot_run_a_graph_is_refused(
    tmp_path: Path,
) -> None:
    hgt.export(make_mlp(), (torch.randn(2, 8),), tmp_path)
    with pytest.raises(HipdnnError) as err:
        replay_export(
            tmp_path, (torch.randn(2, 8),), engine="TORCH_SDPA_MATH_ENGINE", require_engine=True
        )
    assert err.value.code is ErrorCode.GRAPH_NOT_SUPPORTED
    assert err.value.message.startswith(
        "subgraph 0 (0.json): TORCH_SDPA_MATH_ENGINE cannot run it: "
    )


def _manifest(tmp_path: Path) -> dict:
    return hgt.export(make_mlp(), (torch.randn(2, 8),), tmp_path)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda m: m.update(version=2), "manifest: version must be 1, got 2"),
        (
            lambda m: m.update(graph_format="onnx"),
            "manifest: graph_format must be one of ['json', 'bin'], got \"onnx\"",
        ),
        (lambda m: m.pop("steps"), "manifest: the document has no 'steps'"),
        (
            lambda m: m["inputs"][0].update(shape="2x8"),
            'manifest: inputs[0].shape must be a list of integers, got "2x8"',
        ),
        (
            lambda m: m["steps"][2]["inputs"][0].update(uid=True),
            "manifest: steps[2].inputs[0].uid must be an integer, got true",
        ),
        (
            lambda m: m["steps"][2].update(file="../0.json"),
            "manifest: steps[2].file must name a file in the export directory, got '../0.json'",
        ),
        (
            lambda m: m["steps"][2].update(file="0.bin"),
            "manifest: steps[2].file must end with .json (the graph_format), got '0.bin'",
        ),
        (
            lambda m: m["steps"][2]["inputs"][0]["from"].update(ref="nowhere"),
            "manifest: steps[2].inputs[0].from reads 'nowhere', which no input, weight or "
            "earlier step makes",
        ),
        (
            lambda m: m["steps"].reverse(),
            "manifest: steps[0].inputs[1].from reads 't', which no input, weight or "
            "earlier step makes",
        ),
        (
            lambda m: m["steps"][0].update(kind="onnx"),
            "manifest: steps[0].kind must be 'hipdnn' or 'aten', got 'onnx'",
        ),
        (
            lambda m: m["steps"][0]["args"].append({"eval": "x"}),
            'manifest: steps[0].args[1] is no encoded argument: {"eval": "x"}',
        ),
        (
            lambda m: m["steps"][1].update(name=m["steps"][0]["name"]),
            "manifest: steps[1] makes 't' again",
        ),
        (lambda m: m.update(steps={}), "manifest: the document.steps must be a JSON list, got {}"),
    ],
)
def test_a_broken_manifest_is_refused_naming_the_place(
    tmp_path: Path, edit: object, message: str
) -> None:
    manifest = _manifest(tmp_path)
    edit(manifest)  # type: ignore[operator]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(HipdnnError) as err:
        run_export(tmp_path, (torch.randn(2, 8),))
    assert (err.value.code, err.value.message) == (ErrorCode.INVALID_VALUE, message)


def test_an_aten_step_outside_the_aten_namespace_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    manifest["steps"][0]["op"] = "os.system.default"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(HipdnnError) as err:
        run_export(tmp_path, (torch.randn(2, 8),))
    assert err.value.message == "manifest: 'os.system.default' is no aten op overload"


def test_missing_weights_are_refused_by_name(tmp_path: Path) -> None:
    _manifest(tmp_path)
    torch.save({"0.weight": torch.zeros(32, 8)}, tmp_path / "weights.pt")
    with pytest.raises(HipdnnError) as err:
        run_export(tmp_path, (torch.randn(2, 8),))
    assert err.value.code is ErrorCode.INVALID_VALUE
    assert err.value.message.endswith(
        "weights.pt lacks the tensors ['0.bias', '2.bias', '2.weight']"
    )


def test_manifest_dims_and_arguments_that_do_not_fit_the_values_are_refused(
    tmp_path: Path,
) -> None:
    """A manifest whose refs are in order but whose dims, shapes or aten arguments do not fit
    the values is refused with INVALID_VALUE naming the place, never torch's own error."""
    x = torch.randn(2, 8)
    original = _manifest(tmp_path)
    hipdnn = next(k for k, s in enumerate(original["steps"]) if s["kind"] == "hipdnn")
    i0 = original["steps"][hipdnn]["inputs"][0]["tensor"]
    o0 = original["steps"][hipdnn]["outputs"][0]
    cases = [
        (
            lambda m: m["steps"][hipdnn]["inputs"][0].update(dims=[3, 8]),
            f"manifest: the input '{i0}' (uid 1) of 0.json: its value failed: ",
        ),
        (
            lambda m: m["steps"][hipdnn]["inputs"][0].update(uid=99),
            f"manifest: the input '{i0}' (uid 99) of 0.json is not in the graph",
        ),
        (
            lambda m: m["steps"][hipdnn]["outputs"][0].update(shape=[5, 5]),
            f"manifest: the output '{o0['tensor']}' (uid {o0['uid']}) of 0.json failed: ",
        ),
        (
            lambda m: m["steps"][hipdnn]["outputs"][0].update(uid=1),
            f"manifest: the output '{o0['tensor']}' (uid 1) of 0.json is no graph output",
        ),
        (
            lambda m: m["steps"][0]["args"].append(7),
            "manifest: aten step 0 (aten.t.default) failed: ",
        ),
        (
            lambda m: m["outputs"][0].pop("dtype"),
            "manifest: outputs[0] has no 'dtype'",
        ),
    ]
    for edit, message in cases:
        manifest = json.loads(json.dumps(original))
        edit(manifest)
        (tmp_path / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(HipdnnError) as err:
            run_export(tmp_path, (x,))
        assert err.value.code is ErrorCode.INVALID_VALUE
        assert err.value.message.startswith(message), (message, err.value.message)
