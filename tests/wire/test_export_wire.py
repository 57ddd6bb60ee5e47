"""What ``hipdnn_graph.torch.export`` writes, checked independently of the project's codec
(issue 38: "every exported graph reads back in hipDNN's format and re-runs to the model's
outputs"), for the small models of ``tests/compile_models.py``:

* every ``<n>.bin`` passes hipDNN's ``flatbuffers::Verifier`` in flatc's C++ code for hipDNN's
  schemas exactly as they are (``verbatim_checker``), which reads the tensors and nodes the
  manifest names; the C++ oracle finds it canonical (``Graph::Pack``'s bytes) and flatc's
  Python code reads the same fields;
* every ``<n>.json`` is hipDNN's JSON: read by the rules of HIPDNN_WIRE.md part B alone
  (``wire_model.description_from_hipdnn_json``) it is the text the independent writer
  (``hipdnn_json``) gives, and hipDNN's C++ packs it to the bytes of the binary export of the
  same subgraph;
* the chain re-runs to the model's outputs (``hipdnn-graph run-export --check``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import py_oracle
import pytest
from cpp_oracle import CppOracle, toolchains
from hipdnn_json import hipdnn_json
from verbatim_checker import build, read_files
from wire_model import description_from_hipdnn_json, normalized

torch = pytest.importorskip("torch")

from compile_models import Block, make_cnn, make_mlp  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.cli import main  # noqa: E402

MODELS = ["mlp", "block", "cnn"]
#: the node tables of each model's subgraphs, in execution order
FAMILIES = {
    "mlp": [["Matmul", "Pointwise", "Pointwise", "Matmul", "Pointwise"]],
    "block": [
        ["Layernorm"],
        ["Matmul", "Pointwise"],
        ["Sdpa"],
        ["Matmul", "Pointwise"],
        ["Pointwise", "Pointwise"],
    ],
    "cnn": [  # one graph: conv + bias + ReLU, the eval batch norm (eps add, rsqrt), conv + bias
        [
            "ConvolutionFwd",
            "Pointwise",
            "Pointwise",
            "Pointwise",
            "Pointwise",
            "BatchnormInference",
            "ConvolutionFwd",
            "Pointwise",
        ],
    ],
}


def _model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    if name == "mlp":
        return make_mlp(), (torch.randn(4, 8),)
    if name == "block":
        return Block(), (torch.randn(2, 6, 16),)
    cnn = make_cnn()
    with torch.no_grad():  # statistics that are not the identity
        cnn[2].running_mean.uniform_(-1, 1)
        cnn[2].running_var.uniform_(0.5, 2)
    return cnn, (torch.randn(2, 3, 9, 9),)


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Each model exported once as JSON and once as hipDNN bytes."""
    root = tmp_path_factory.mktemp("exports")
    made = {}
    for name in MODELS:
        model, inputs = _model(name)
        for fmt in ("json", "bin"):
            made[name, fmt] = root / f"{name}-{fmt}"
            hgt.export(model, inputs, made[name, fmt], graph_format=fmt)
    return made


@pytest.fixture(scope="module")
def verbatim(hipdnn_schemas: Path) -> Path:
    found, missing = toolchains()
    if not found:
        pytest.skip("no C++ toolchain for flatc's code: " + "; ".join(missing))
    return build(found[0])


def _steps(folder: Path) -> list[dict[str, Any]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return [s for s in manifest["steps"] if s["kind"] == "hipdnn"]


@pytest.mark.parametrize("model", MODELS)
def test_every_blob_verifies_with_flatcs_code_for_the_verbatim_schemas(
    exports: dict[tuple[str, str], Path], verbatim: Path, model: str
) -> None:
    folder = exports[model, "bin"]
    steps = _steps(folder)
    read = read_files(verbatim, [folder / s["file"] for s in steps])
    assert [r["verified"] for r in read] == [True] * len(steps)
    cls = "Sequential" if model != "block" else "Block"
    assert [r["name"] for r in read] == [f"{cls}_{k}" for k in range(len(steps))]
    tables = [[n["type"].removesuffix("Attributes") for n in r["nodes"]] for r in read]
    assert tables == FAMILIES[model]
    for step, graph in zip(steps, read, strict=True):
        tensors = {t["uid"]: t for t in graph["tensors"]}
        assert len(tensors) == len(graph["tensors"]), "uids are unique"
        for i in step["inputs"]:  # each input the manifest feeds: a real tensor of those dims
            t = tensors[i["uid"]]
            assert (t["name"], t["dims"], t["virtual"]) == (i["tensor"], i["dims"], False)
        for o in step["outputs"]:  # each output it reads: a real tensor of as many elements
            t = tensors[o["uid"]]
            assert (t["name"], t["virtual"], t["data_type"]) == (o["tensor"], False, 1)
            assert torch.Size(t["dims"]).numel() == torch.Size(o["shape"]).numel()


def test_the_verbatim_checker_refuses_a_broken_blob(
    exports: dict[tuple[str, str], Path], verbatim: Path, tmp_path: Path
) -> None:
    blob = (exports["mlp", "bin"] / "0.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(blob[: len(blob) // 2])
    (tmp_path / "offset.bin").write_bytes(b"\xff\xff\xff\x7f" + blob[4:])
    assert [r["verified"] for r in read_files(verbatim, sorted(tmp_path.iterdir()))] == [
        False,
        False,
    ]


@pytest.mark.parametrize("model", MODELS)
def test_every_blob_is_canonical_and_flatcs_python_code_reads_the_same(
    exports: dict[tuple[str, str], Path], cpp: CppOracle, model: str
) -> None:
    folder = exports[model, "bin"]
    for step in _steps(folder):
        blob = (folder / step["file"]).read_bytes()
        read = cpp.read(blob)
        assert read.pop("verified") is True, step["file"]
        assert cpp.pack(read) == blob, f"{step['file']} is not what Graph::Pack writes"
        assert py_oracle.read(blob) == read


@pytest.mark.parametrize("model", MODELS)
def test_every_json_graph_reads_by_hipdnns_json_rules_as_the_binary_export(
    exports: dict[tuple[str, str], Path], cpp: CppOracle, model: str
) -> None:
    as_json, as_bin = exports[model, "json"], exports[model, "bin"]
    for step, twin in zip(_steps(as_json), _steps(as_bin), strict=True):
        text = (as_json / step["file"]).read_text()
        desc = description_from_hipdnn_json(json.loads(text))
        assert hipdnn_json(desc) == text, f"{step['file']} is not hipDNN's JSON layout"
        assert cpp.pack(desc) == hg.Graph.from_json(text).serialize()
        blob = (as_bin / twin["file"]).read_bytes()
        read = cpp.read(blob)
        assert read.pop("verified") is True
        assert normalized(desc) == normalized(read)
        assert cpp.pack(desc) == blob


@pytest.mark.parametrize("fmt", ["json", "bin"])
@pytest.mark.parametrize("model", MODELS)
def test_the_exported_chain_reruns_to_the_models_outputs(
    exports: dict[tuple[str, str], Path], model: str, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(exports[model, fmt])
    assert main(["run-export", folder, "--check", "--engine", "NUMPY_REFERENCE_ENGINE"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "every output is the model's within its dtype's tolerance"
