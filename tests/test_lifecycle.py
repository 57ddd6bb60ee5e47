"""The graph lifecycle after validation: engine ranking, check_support, plans, execute."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import Support, engine_id, isolated_registry, register_backend
from hipdnn_graph_numpy_reference import create_backend as create_numpy_backend

NUMPY = "NUMPY_REFERENCE_ENGINE"
NO_PLAN = "Graph has no compiled execution plan. Call build() or from_compiled_plan_binary() first."
B, H, S, D = 1, 2, 8, 4


def _numpy_engine() -> Any:
    return create_numpy_backend().engines()[0]


@dataclass
class RecordingPlan:
    engine_name: str
    workspace_size: int
    inner: Any
    fail: bool
    calls: list[str]

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        self.calls.append(self.engine_name)
        if self.fail:
            raise RuntimeError("kernel exploded")
        self.inner.execute(variant_pack, workspace)


@dataclass
class FakeEngine:
    """Delegates the math to the NumPy reference; configurable refusals and failures."""

    name: str
    priority: int = 0
    refuse: str | None = None
    check_raises: bool = False
    workspace: int = 0
    fail_build: bool = False
    fail_execute: bool = False
    calls: list[str] = field(default_factory=list)
    array_kind: str = "numpy"

    def check(self, graph: hg.Graph) -> Support:
        if self.check_raises:
            raise RuntimeError("check blew up")
        if self.refuse is not None:
            return Support.no(self.refuse)
        return _numpy_engine().check(graph)  # type: ignore[no-any-return]

    def workspace_size(self, graph: hg.Graph) -> int:
        return self.workspace

    def build_plan(self, graph: hg.Graph) -> RecordingPlan:
        if self.fail_build:
            raise RuntimeError("no plan for you")
        inner = _numpy_engine().build_plan(graph)
        return RecordingPlan(self.name, self.workspace, inner, self.fail_execute, self.calls)


@dataclass
class FakeBackend:
    name: str
    engine_list: list[FakeEngine]

    def engines(self) -> list[FakeEngine]:
        return self.engine_list


def bwd_graph(name: str = "g", **keywords: Any) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name=name,
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    t = {n: g.tensor(name=n, dim=[B, H, S, D]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[B, H, S, 1])
    dq, dk, dv = g.sdpa_backward(
        t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", **keywords
    )
    for grad, n in ((dq, "dQ"), (dk, "dK"), (dv, "dV")):
        grad.set_output(True)
        t[n] = grad
    return g, t


def pack_for(t: Mapping[str, hg.TensorAttributes], seed: int = 0) -> dict[Any, Any]:
    rng = np.random.default_rng(seed)
    pack: dict[Any, Any] = {}
    for n, tensor in t.items():
        if n.startswith("d") and n != "dO":
            pack[tensor] = np.full(tensor.get_dim(), np.nan, np.float32)
        elif n == "Stats":
            pack[tensor] = np.abs(rng.standard_normal(tensor.get_dim())).astype(np.float32) + 2
        else:
            pack[tensor] = rng.standard_normal(tensor.get_dim()).astype(np.float32)
    return pack


def philox_graph(seed_type: hg.DataType = hg.DataType.FLOAT) -> hg.Graph:
    """Philox dropout whose Seed is FLOAT by default: no engine reads a float seed."""
    g = hg.Graph(
        name="philox",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v, o, do = (g.tensor(name=n, dim=[B, H, S, D]) for n in ("Q", "K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[B, H, S, 1])
    seed = g.tensor(name="Seed", dim=[1], data_type=seed_type)
    offset = g.tensor(name="Offset", dim=[1], data_type=hg.DataType.INT64)
    for grad in g.sdpa_backward(q, k, v, o, do, stats, name="bwd", dropout=(0.25, seed, offset)):
        grad.set_output(True)
    return g


# ----- engine ranking and the preferred engine -----
def test_engines_rank_by_priority_then_registration() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        register_backend(FakeBackend("fake", [FakeEngine("SLOW", 50), FakeEngine("FAST", 5)]))
        g, _ = bwd_graph()
        g.build()
        assert g.get_engine_names() == ["FAST", "SLOW", NUMPY]
        assert g.get_execution_plan_count() == 3
        assert g.get_plan_name() == "FAST"


@pytest.mark.parametrize("how", ["name", "id"])
def test_preferred_engine_goes_first_when_it_applies(how: str) -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        register_backend(FakeBackend("fake", [FakeEngine("FAST", 0)]))
        g, t = bwd_graph()
        g.set_preferred_engine_id_ext(NUMPY if how == "name" else engine_id(NUMPY))
        assert g.get_preferred_engine_id_ext() == engine_id(NUMPY)
        g.build()
        assert g.get_engine_names() == [NUMPY, "FAST"]
        assert g.get_plan_name() == NUMPY
        g.execute(pack_for(t))


@pytest.mark.parametrize("preferred", ["REFUSER", engine_id("NO_SUCH_ENGINE"), None])
def test_preferred_engine_is_ignored_when_it_does_not_apply(preferred: Any) -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        register_backend(FakeBackend("fake", [FakeEngine("REFUSER", 0, refuse="not today")]))
        g, t = bwd_graph()
        g.set_preferred_engine_id_ext(preferred).build()
        assert g.get_engine_names() == [NUMPY]
        assert g.get_plan_name() == NUMPY
        assert g.get_engine_refusals() == {"REFUSER": "not today"}
        g.execute(pack_for(t))


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, True, b"NUMPY"])
def test_preferred_engine_must_be_a_name_or_64_bit_id(bad: Any) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph().set_preferred_engine_id_ext(bad)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


def test_changing_the_preferred_engine_drops_built_plans(only_numpy: None) -> None:
    g, t = bwd_graph()
    g.build()
    g.set_preferred_engine_id_ext(NUMPY)
    with pytest.raises(hg.HipdnnError, match="no compiled execution plan"):
        g.execute(pack_for(t))
    g.build()
    g.execute(pack_for(t))


# ----- check_support -----
def test_check_support_lists_every_engine_and_reason() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        register_backend(
            FakeBackend(
                "fake",
                [
                    FakeEngine("PICKY", refuse="only Tuesdays"),
                    FakeEngine("FLAKY", check_raises=True),
                ],
            )
        )
        g = philox_graph()
        g.build_operation_graph()
        g.create_execution_plans([hg.HeuristicMode.FALLBACK])
        assert g.get_execution_plan_count() == 0
        with pytest.raises(hg.NotSupportedError) as info:
            g.check_support()
    err = info.value
    assert isinstance(err, hg.HipdnnError)
    assert err.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert str(err) == (
        "No engine supports graph 'philox':\n"
        "  NUMPY_REFERENCE_ENGINE: node 'bwd': philox dropout reads Seed as an INT64 or INT32 "
        "integer, got FLOAT\n"
        "  PICKY: only Tuesdays\n"
        "  FLAKY: check() raised RuntimeError: check blew up"
    )


def test_philox_dropout_with_a_float_seed_is_refused_during_build(only_numpy: None) -> None:
    g = philox_graph()
    with pytest.raises(hg.NotSupportedError, match="NUMPY_REFERENCE_ENGINE: node 'bwd': philox"):
        g.build()
    assert "philox dropout" in g.get_engine_refusals()[NUMPY]


def test_philox_dropout_builds_and_runs_on_the_numpy_engine(only_numpy: None) -> None:
    g = philox_graph(hg.DataType.INT64)
    g.build()
    assert g.get_plan_name() == NUMPY
    rng = np.random.default_rng(0)
    grads = list(g.nodes[0].outputs())
    pack: dict[Any, Any] = {}
    for tensor in g.graph_tensors():
        if tensor.name in ("Seed", "Offset"):
            pack[tensor] = np.array([5], dtype=np.int64)
        elif any(tensor is grad for grad in grads):
            pack[tensor] = np.full(tensor.get_dim(), np.nan, np.float32)
        else:
            pack[tensor] = rng.standard_normal(tensor.get_dim()).astype(np.float32) + 2
    g.execute(pack)
    assert all(np.isfinite(pack[grad]).all() for grad in grads)


def test_check_support_with_no_backend_registered() -> None:
    with isolated_registry(load_entry_points=False):
        g, _ = bwd_graph(name="lonely")
        with pytest.raises(hg.NotSupportedError) as info:
            g.build()
    assert str(info.value) == "No engine supports graph 'lonely': no backend is registered"


def test_check_support_names_unnamed_graphs() -> None:
    with isolated_registry(load_entry_points=False):
        g, _ = bwd_graph(name="")
        with pytest.raises(hg.NotSupportedError, match="graph '<unnamed>'"):
            g.check_support()  # runs lowering and ranking first


def test_check_support_passes_and_chains(only_numpy: None) -> None:
    g, _ = bwd_graph()
    assert g.check_support() is g
    assert g.get_engine_names() == [NUMPY]


# ----- build_plans -----
def _three_engines() -> list[FakeEngine]:
    return [FakeEngine("E0", 0), FakeEngine("E1", 1), FakeEngine("E2", 2)]


def test_heuristics_choice_builds_one_plan() -> None:
    engines = _three_engines()
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", engines))
        g, t = bwd_graph()
        g.build(policy=hg.BuildPlanPolicy.HEURISTICS_CHOICE)
        assert g.get_execution_plan_count() == 3
        g.execute(pack_for(t))
        assert engines[0].calls == ["E0"]
        with pytest.raises(
            hg.HipdnnError,
            match=r"^Plan index 1 is out of bounds \(the graph has 1 execution plans\)$",
        ):
            g.execute_plan_at_index(pack_for(t), None, 1)


def test_build_policy_all_builds_every_candidate() -> None:
    engines = _three_engines()
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", engines))
        g, t = bwd_graph()
        g.validate()
        g.build_operation_graph().create_execution_plans().check_support()
        g.build_plans(hg.BuildPlanPolicy.ALL)
        assert g.get_plan_name() == "E0"
        outputs: list[np.ndarray[Any, Any]] = []
        for index in (2, 1, 0):
            pack = pack_for(t)
            g.execute_plan_at_index(pack, None, index)
            outputs.append(pack[t["dQ"]])
        assert [e.calls for e in engines] == [["E0"], ["E1"], ["E2"]]
        np.testing.assert_array_equal(outputs[0], outputs[2])
        with pytest.raises(hg.HipdnnError) as info:
            g.execute_plan_at_index(pack_for(t), None, 3)
        assert info.value.code == hg.ErrorCode.INVALID_VALUE


def test_a_plan_that_fails_to_build_falls_through_to_the_next() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", [FakeEngine("BROKEN", 0, fail_build=True)]))
        register_backend(create_numpy_backend())
        g, t = bwd_graph()
        g.build()
        assert g.get_plan_name() == NUMPY
        g.build_plans(hg.BuildPlanPolicy.ALL)
        assert g.get_plan_name() == NUMPY  # the broken one is not among the built plans
        with pytest.raises(hg.HipdnnError, match="out of bounds"):
            g.execute_plan_at_index(pack_for(t), None, 1)


def test_no_buildable_plan_is_plan_creation_failed() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", [FakeEngine("BROKEN", 0, fail_build=True)]))
        g, _ = bwd_graph()
        with pytest.raises(hg.HipdnnError) as info:
            g.build()
    assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED
    assert str(info.value) == (
        "No execution plan could be built:\n  BROKEN: RuntimeError: no plan for you"
    )


# ----- workspace, plan name, plan count -----
def test_workspace_size_plan_name_and_count() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", [FakeEngine("WS", 0, workspace=64)]))
        register_backend(create_numpy_backend())
        g, t = bwd_graph()
        g.build()
        assert (g.get_plan_name(), g.get_workspace_size(), g.get_execution_plan_count()) == (
            "WS",
            64,
            2,
        )
        g.execute(pack_for(t), np.empty(64, np.uint8))
        g.execute(pack_for(t), bytearray(100))
        with pytest.raises(hg.HipdnnError) as info:
            g.execute(pack_for(t), np.empty(8, np.uint8))
        assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
        assert str(info.value) == "The workspace has 8 bytes, but the plan needs 64"
        with pytest.raises(hg.HipdnnError) as info:
            g.execute(pack_for(t))
        assert str(info.value) == "The plan needs a workspace of 64 bytes, but none was given"


def test_workspace_as_torch_tensor() -> None:
    torch = pytest.importorskip("torch")
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", [FakeEngine("WS", 0, workspace=64)]))
        g, t = bwd_graph()
        g.build()
        g.execute(pack_for(t), torch.empty(16, dtype=torch.float32))
        with pytest.raises(hg.HipdnnError, match="The workspace has 60 bytes"):
            g.execute(pack_for(t), torch.empty(15, dtype=torch.float32))


def test_numpy_engine_needs_no_workspace(only_numpy: None) -> None:
    g, t = bwd_graph()
    g.build()
    assert g.get_workspace_size() == 0
    g.execute(pack_for(t), None)


# ----- execute before plans, failures -----
@pytest.mark.parametrize("stage", ["fresh", "validated", "lowered", "ranked", "changed"])
def test_execute_before_plans_raises_hipdnn_message(only_numpy: None, stage: str) -> None:
    g, t = bwd_graph()
    if stage != "fresh":
        g.validate()
    if stage in ("lowered", "ranked"):
        g.build_operation_graph()
    if stage == "ranked":
        g.create_execution_plans().check_support()
    if stage == "changed":
        g.build()
        g.set_name("renamed")  # any change drops the plans
    for call in (
        lambda: g.execute(pack_for(t)),
        lambda: g.execute_plan_at_index(pack_for(t), None, 0),
        g.get_plan_name,
        g.get_workspace_size,
    ):
        with pytest.raises(hg.HipdnnError) as info:
            call()
        assert info.value.code == hg.ErrorCode.INVALID_VALUE
        assert str(info.value) == NO_PLAN


def test_engine_failure_during_execute_is_graph_execution_failed() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(FakeBackend("fake", [FakeEngine("BOOM", 0, fail_execute=True)]))
        g, t = bwd_graph()
        g.build()
        with pytest.raises(hg.HipdnnError) as info:
            g.execute(pack_for(t))
    assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
    assert str(info.value) == "BOOM failed during execute: RuntimeError: kernel exploded"
    assert isinstance(info.value.__cause__, RuntimeError)


def test_build_validates_first(only_numpy: None) -> None:
    g, t = bwd_graph()
    t["K"].set_dim([B, H, S, D + 1])
    with pytest.raises(hg.HipdnnError, match="head_dim mismatch between Q and K"):
        g.build()


def test_build_accepts_modes_as_ints_and_enums(only_numpy: None) -> None:
    g, t = bwd_graph()
    g.build([hg.HeuristicMode.A, int(hg.HeuristicMode.FALLBACK)], int(hg.BuildPlanPolicy.ALL))
    assert g.get_plan_name() == NUMPY
    g.execute(pack_for(t))


def test_uids_are_assigned_in_declaration_order_skipping_taken_ones(only_numpy: None) -> None:
    g, t = bwd_graph()
    t["V"].set_uid(1)
    g.build()
    uids = {n: t[n].get_uid() for n in ("Q", "K", "V", "O", "dO", "Stats", "dQ", "dK", "dV")}
    assert uids == {"Q": 2, "K": 3, "V": 1, "O": 4, "dO": 5, "Stats": 6, "dQ": 7, "dK": 8, "dV": 9}


def test_executing_twice_gives_identical_results(only_numpy: None) -> None:
    g, t = bwd_graph()
    g.build()
    first = pack_for(t)
    g.execute(first)
    second = pack_for(t)
    g.execute(second)
    for n in ("dQ", "dK", "dV"):
        assert not np.isnan(first[t[n]]).any()
        np.testing.assert_array_equal(first[t[n]], second[t[n]])


def test_a_torch_caller_gets_torch_results_from_the_numpy_reference() -> None:
    """Graph.run hands back the caller's kind of array whichever engine ran: torch tensors in,
    torch tensors out on the NumPy reference too (outputs the caller gave are its own)."""
    torch = pytest.importorskip("torch")
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4])
    y = g.pointwise(x, mode=hg.PointwiseMode.EXP).set_output(True)
    z = g.pointwise(y, mode=hg.PointwiseMode.NEG).set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    g.build()
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    given = torch.full((4,), float("nan"))
    out = g.run({x: torch.arange(4.0), z: given})
    assert isinstance(out[y], torch.Tensor) and out[z] is given
    assert torch.allclose(out[y], torch.arange(4.0).exp())
    assert torch.allclose(given, -torch.arange(4.0).exp())
    assert isinstance(g.run({x: np.arange(4.0, dtype=np.float32)})[y], np.ndarray)
