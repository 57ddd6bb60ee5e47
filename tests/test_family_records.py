"""One record per engine family (issue 39, item 2): each family module declares its node types
once (``FAMILIES``) and each package only collects them, with one lookup by node type that
names a missing rule."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from types import ModuleType
from typing import Any

import pytest

import hipdnn_graph as hg


def _declared(package: ModuleType) -> list[Any]:
    """Every record the package's modules declare in their ``FAMILIES``, module by module."""
    records: list[Any] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        records.extend(getattr(module, "FAMILIES", ()))
    return records


def _pointwise_graph() -> hg.Graph:
    f = hg.DataType.FLOAT
    g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    g.pointwise(g.tensor(name="x", dim=[2]), mode=hg.PointwiseMode.EXP, name="e")
    g.validate()
    return g


def test_the_reference_collects_every_record_its_modules_declare_once() -> None:
    from hipdnn_graph_numpy_reference import families

    declared = _declared(families)
    assert sorted(r.node_type.name for r in declared) == sorted(
        r.node_type.name for r in families.REFERENCE_FAMILIES
    )
    assert len({r.node_type for r in declared}) == len(declared) == 21
    assert {r.node_type: r for r in declared} == families.REFERENCE_FAMILY_OF


def test_a_reference_record_is_frozen_and_names_its_runner_and_refusal() -> None:
    from hipdnn_graph_numpy_reference.families import reference_family

    conv = reference_family(hg.NodeType.CONVOLUTION_WGRAD)
    assert (conv.run.__name__, getattr(conv.refusal, "__name__", None)) == (
        "run_conv_wgrad",
        "convolution_refusal",
    )
    assert reference_family(hg.NodeType.RMS_NORM).refusal is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        conv.refusal = None  # type: ignore[misc]


def test_the_reference_lookup_names_the_missing_rule() -> None:
    from hipdnn_graph_numpy_reference.families import reference_family

    with pytest.raises(hg.HipdnnError) as raised:
        reference_family(hg.NodeType.SDPA_FWD)
    assert raised.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert str(raised.value).endswith("reference rule for SDPA_FWD not found")


def test_a_reference_step_of_a_family_without_a_record_is_a_hipdnn_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hipdnn_graph_numpy_reference.families import REFERENCE_FAMILY_OF
    from hipdnn_graph_numpy_reference.family_step import FamilyStep, family_refusal

    g = _pointwise_graph()
    assert FamilyStep.of(g.nodes[0]).run.__name__ == "run_pointwise"
    monkeypatch.delitem(REFERENCE_FAMILY_OF, hg.NodeType.POINTWISE)
    assert family_refusal(g.nodes[0]) == "node 'e': POINTWISE nodes have no NumPy reference"
    with pytest.raises(hg.HipdnnError, match="reference rule for POINTWISE not found") as raised:
        FamilyStep.of(g.nodes[0])
    assert raised.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED


def test_the_torch_package_collects_every_record_its_modules_declare_once() -> None:
    from hipdnn_graph_torch_rocm import families

    declared = _declared(families)
    assert sorted(r.node_type.name for r in declared) == sorted(
        r.node_type.name for r in families.TORCH_FAMILIES
    )
    assert len({r.node_type for r in declared}) == len(declared) == 21
    assert {r.node_type: r for r in declared} == families.TORCH_FAMILY_OF


def test_torch_records_carry_the_writers_and_host_checks_they_had() -> None:
    from hipdnn_graph_torch_rocm.families import TORCH_FAMILY_OF, torch_family

    writers = {t.name: f.writer.__name__ for t, f in TORCH_FAMILY_OF.items() if f.writer}
    assert writers == {
        "MATMUL": "prepare_matmul_writer",
        "CONVOLUTION_FPROP": "prepare_conv_fprop_writer",
    }
    checked = {t.name for t, f in TORCH_FAMILY_OF.items() if f.host_checked}
    assert checked == {"BLOCK_SCALE_QUANTIZE", "MOE_GROUPED_MATMUL", "MOE_GROUPED_MATMUL_BWD"}
    conv = [torch_family(t) for t in (hg.NodeType.CONVOLUTION_DGRAD, hg.NodeType.CONVOLUTION_WGRAD)]
    assert [(f.prepare.__name__, f.refusal.__name__) for f in conv] == [
        ("prepare_conv_dgrad", "conv_refusal"),
        ("prepare_conv_wgrad", "conv_refusal"),
    ]


def test_the_torch_lookup_names_the_missing_rule_and_refusal_keeps_its_words() -> None:
    from hipdnn_graph_torch_rocm.families import lower, refusal, torch_family

    with pytest.raises(hg.HipdnnError) as raised:
        torch_family(hg.NodeType.SDPA_BWD)
    assert raised.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert str(raised.value).endswith("torch rule for SDPA_BWD not found")
    node = hg.SdpaFwdNode(hg.SdpaAttributes().set_name("attn"))
    assert refusal(node) == "no torch lowering for SDPA_FWD nodes (node 'attn')"
    with pytest.raises(hg.HipdnnError, match="torch rule for SDPA_FWD not found"):
        lower(node, {})


def test_preparing_a_custom_op_raises_its_refusal() -> None:
    from hipdnn_graph_torch_rocm.families import refusal, torch_family

    node = hg.CustomOpNode(hg.CustomOpAttributes().set_name("op").set_custom_op_id("example.rope"))
    family = torch_family(hg.NodeType.CUSTOM_OP)
    with pytest.raises(hg.HipdnnError) as raised:
        family.prepare(node)
    assert raised.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert str(raised.value).endswith(str(refusal(node)))
    assert refusal(node) == (
        "node 'op': custom op 'example.rope' is plugin-defined: hipDNN defines no math for it"
    )


def test_the_torch_program_builds_its_steps_from_the_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("torch")
    from hipdnn_graph_torch_rocm.families import TORCH_FAMILY_OF
    from hipdnn_graph_torch_rocm.family_program import FamilyProgram

    g = _pointwise_graph()
    assert FamilyProgram(g).host_checked is False
    monkeypatch.setitem(
        TORCH_FAMILY_OF,
        hg.NodeType.POINTWISE,
        dataclasses.replace(TORCH_FAMILY_OF[hg.NodeType.POINTWISE], host_checked=True),
    )
    assert FamilyProgram(g).host_checked is True
    monkeypatch.delitem(TORCH_FAMILY_OF, hg.NodeType.POINTWISE)
    with pytest.raises(hg.HipdnnError, match="torch rule for POINTWISE not found"):
        FamilyProgram(g)
