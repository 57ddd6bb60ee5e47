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
