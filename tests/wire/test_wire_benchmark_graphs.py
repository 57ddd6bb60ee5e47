"""hipDNN's own benchmark graph files (issue 40): each loads (or is refused naming the feature
this version does not model), validates (or is refused with hipDNN's own message, where hipDNN's
node refuses it too), reads as what the file says, round-trips JSON -> bytes -> JSON, writes bytes
hipDNN's Verifier accepts and flatc's generated code reads as the graph, and shows in the CLI.

The files and the expected refusals are in ``tests/benchmark_graph_corpus.py``; the numbers of
the small ones are checked in ``tests/test_benchmark_graphs_numerics.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import benchmark_graph_corpus as corpus
import pytest
from cpp_oracle import CppOracle
from wire_model import expected_description, normalized

import hipdnn_graph as hg
from hipdnn_graph.cli import main

LOADABLE = [f for f in corpus.FILES if f not in corpus.REFUSED_ON_READ]
VALID = [f for f in LOADABLE if f not in corpus.REFUSED_ON_VALIDATE]


def test_the_folder_is_hipdnns_with_its_provenance() -> None:
    """76 files in hipDNN's sub-folders; the README names each with its commit and length; the
    expectation tables name files of the folder."""
    assert len(corpus.FILES) == 76
    folders = {str(Path(f).parent) for f in corpus.FILES}
    assert folders == {
        ".",
        "aotriton_test",
        "ckdsl_sdpa_extracted",
        "ckdsl_sdpa_extracted/common_llm_workloads",
    }
    readme = (corpus.ROOT / "README.md").read_text()
    row = r"^\| `([^`]+)` \| `([0-9a-f]{40})` \| (\d+) \|$"
    rows = {path: (commit, int(n)) for path, commit, n in re.findall(row, readme, re.M)}
    assert sorted(rows) == corpus.FILES
    for path, (_, chars) in rows.items():
        assert len(corpus.text(path)) == chars, path
    assert set(corpus.REFUSED_ON_READ) | set(corpus.REFUSED_ON_VALIDATE) <= set(corpus.FILES)


@pytest.mark.parametrize("rel", sorted(corpus.REFUSED_ON_READ))
def test_varlen_paged_and_sink_files_are_refused_by_name(rel: str) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_json(corpus.text(rel))
    assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert info.value.message == corpus.REFUSED_ON_READ[rel]


@pytest.mark.parametrize("rel", LOADABLE)
def test_loads_as_what_the_file_says(rel: str) -> None:
    """Tensors (uid, name, type, dims, strides, virtual flag, value) and nodes (kind, name,
    compute type, every tensor uid) as the file gives them, read back from what is written."""
    file = corpus.doc(rel)
    g = hg.Graph.from_json(corpus.text(rel))
    written = json.loads(g.to_json())
    for key in ("name", "io_data_type", "intermediate_data_type", "compute_data_type"):
        assert written[key] == file[key], key
    assert len(written["tensors"]) == len(file["tensors"])
    for mine, theirs in zip(written["tensors"], file["tensors"], strict=True):
        for key in ("uid", "name", "data_type", "dims", "strides", "virtual"):
            assert mine[key] == theirs[key], (theirs["uid"], key)
        assert mine["is_runtime_pass_by_value"] is theirs.get("is_runtime_pass_by_value", False)
        assert mine.get("value") == theirs.get("value")
    assert len(written["nodes"]) == len(file["nodes"])
    for mine, theirs in zip(written["nodes"], file["nodes"], strict=True):
        for key in ("type", "name", "compute_data_type"):
            assert mine[key] == theirs[key], key
        assert corpus.node_uids(mine) == corpus.node_uids(theirs)


@pytest.mark.parametrize("rel", LOADABLE)
def test_validates_or_is_refused_with_hipdnns_message(rel: str) -> None:
    g = hg.Graph.from_json(corpus.text(rel))
    if rel not in corpus.REFUSED_ON_VALIDATE:
        g.validate()
        assert g.is_validated
        return
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert (info.value.code, info.value.message) == (
        hg.ErrorCode.INVALID_VALUE,
        corpus.REFUSED_ON_VALIDATE[rel],
    )


@pytest.mark.parametrize("rel", LOADABLE)
def test_round_trips_json_bytes_json(rel: str) -> None:
    g = hg.Graph.from_json(corpus.text(rel))
    text = g.to_json()
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).to_json() == text
    assert hg.Graph.from_json(text).to_json() == text
    assert hg.Graph.deserialize(blob).serialize() == blob


@pytest.mark.parametrize("rel", LOADABLE)
def test_bytes_are_read_by_hipdnns_verifier_and_flatc_code_as_the_graph(
    cpp: CppOracle, rel: str
) -> None:
    """The bytes pass hipDNN's Verifier, read (flatc's C++ code) as the graph's own description
    and are canonical (what hipDNN's ``Graph::Pack`` writes for that content)."""
    g = hg.Graph.from_json(corpus.text(rel))
    blob = g.serialize()
    read = cpp.read(blob)
    assert read.pop("verified") is True
    assert normalized(read) == normalized(expected_description(g))
    assert cpp.pack(read) == blob


@pytest.mark.parametrize("rel", corpus.FILES)
def test_the_cli_shows_each_file_and_fails_on_refused_ones(
    rel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["show", str(corpus.ROOT / rel)])
    out, err = capsys.readouterr()
    if rel in corpus.REFUSED_ON_READ:
        assert (status, out) == (1, "")
        assert err == f"UNSUPPORTED_GRAPH_FORMAT: {corpus.REFUSED_ON_READ[rel]}\n"
        return
    for node in corpus.doc(rel)["nodes"]:
        assert f"{node['name']}  " in out
    if rel in corpus.REFUSED_ON_VALIDATE:  # shown, then the error, and a failing status
        assert (status, err) == (1, f"INVALID_VALUE: {corpus.REFUSED_ON_VALIDATE[rel]}\n")
    else:
        assert (status, err) == (0, "")


_REFUSED = [sorted(corpus.REFUSED_ON_READ)[0], sorted(corpus.REFUSED_ON_VALIDATE)[0]]


@pytest.mark.parametrize("rel", _REFUSED)
@pytest.mark.parametrize(
    "command",
    [["validate"], ["show"], ["show", "--dot"], ["show", "--mermaid"], ["run"]],
    ids=" ".join,
)
def test_every_file_subcommand_exits_1_on_a_refused_graph(
    command: list[str], rel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, str(corpus.ROOT / rel)]) == 1
    assert capsys.readouterr().err.endswith(
        (corpus.REFUSED_ON_READ | corpus.REFUSED_ON_VALIDATE)[rel] + "\n"
    )


@pytest.mark.parametrize("to", ["json", "binary"])
def test_convert_exits_1_on_a_file_it_cannot_read(
    tmp_path: Path, to: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = _REFUSED[0]
    out = tmp_path / "out"
    assert main(["convert", str(corpus.ROOT / rel), "--to", to, "-o", str(out)]) == 1
    assert not out.exists() and corpus.REFUSED_ON_READ[rel] in capsys.readouterr().err


def test_the_installed_command_exits_non_zero() -> None:
    """The exit status the shell sees (``python -m hipdnn_graph`` runs the same ``main``)."""
    done = subprocess.run(
        [sys.executable, "-m", "hipdnn_graph", "show", str(corpus.ROOT / _REFUSED[1])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"INVALID_VALUE: {corpus.REFUSED_ON_VALIDATE[_REFUSED[1]]}\n"


def test_the_nested_layout_reads_each_field_where_the_file_puts_it() -> None:
    """hipDNN's sample files nest the uids in inputs/outputs and the other fields under
    "attributes", with the schema's enum names, for families whose JSON helpers write them on
    the node: each field reads as written there (and is written back in the helpers' layout)."""

    def node(rel: str) -> Any:
        return hg.Graph.from_json(corpus.text(rel)).nodes[0].attributes

    ln = node("sample_layernorm.json")
    assert (ln.normalized_dim_count, ln.forward_phase) == (1, hg.NormFwdPhase.TRAINING)
    lnb = node("sample_layernorm_backward.json")
    assert lnb.normalized_dim_count == 1 and lnb.get_epsilon() is None  # its key left out
    rms = node("sample_rmsnorm.json")
    assert rms.forward_phase is hg.NormFwdPhase.TRAINING and rms.get_bias().uid == 4
    red = node("sample_reduction.json")
    assert (red.mode, red.get_is_deterministic()) == (hg.ReductionMode.ADD, True)
    pool = node("sample_resample_fwd.json")
    assert (pool.pre_padding, pool.post_padding, pool.stride, pool.window) == (
        [1, 0],
        [0, 1],
        [2, 2],
        [2, 2],
    )
    assert (pool.resample_mode, pool.padding_mode) == (
        hg.ResampleMode.AVGPOOL_EXCLUDE_PADDING,
        hg.PaddingMode.ZERO_PAD,
    )
    written = json.loads(hg.Graph.from_json(corpus.text("sample_reduction.json")).to_json())
    assert written["nodes"][0] == {
        "compute_data_type": "float",
        "in_tensor_uid": 1,
        "is_deterministic": True,
        "mode": "add",
        "name": "reduction_add_node",
        "out_tensor_uid": 2,
        "type": "ReductionAttributes",
    }
