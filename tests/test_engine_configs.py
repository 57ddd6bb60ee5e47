"""Engine configurations on the core Graph: knobs reaching plans, hard selection, plan specs, and
the engine plugin API version (refusals, the stamp in hipDNN's bytes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import (
    IntConstraint,
    Knob,
    Support,
    engine_id,
    isolated_registry,
    register_backend,
)
from hipdnn_graph_numpy_reference import create_backend as create_numpy_backend
from hipdnn_graph_numpy_reference import sdpa_tiled

NUMPY = "NUMPY_REFERENCE_ENGINE"
BLOCK_Q = "numpy_reference.sdpa_block_q"


class _Plan:
    workspace_size = 0

    def __init__(self, name: str, knobs: Mapping[str, Any] | None) -> None:
        self.engine_name = name
        self.knobs = knobs

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        for array in variant_pack.values():
            if isinstance(array, np.ndarray) and array.flags.writeable:
                array[...] = 0


class _OldEngine:
    """A plugin engine written before knobs existed: ``build_plan(graph)`` only."""

    priority = 50
    api_version = "1.0.0"
    array_kind = "numpy"

    def __init__(self, name: str = "OLD_ENGINE") -> None:
        self.name = name
        self.built = 0

    def check(self, graph: hg.Graph) -> Support:
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 64

    def build_plan(self, graph: hg.Graph) -> _Plan:
        self.built += 1
        return _Plan(self.name, None)


class _KnobEngine(_OldEngine):
    api_version = "1.2.0"
    knobs = (
        Knob("k.rows", 32, "rows", IntConstraint(16, 64, 16)),
        Knob("k.mode", "fast"),
    )

    def build_plan(self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None) -> _Plan:
        self.built += 1
        return _Plan(self.name, knobs)


class _Backend:
    name = "test"

    def __init__(self, *engines: Any) -> None:
        self._engines = list(engines)

    def engines(self) -> list[Any]:
        return self._engines


def _pointwise(runtime_scalar: bool = False) -> tuple[hg.Graph, hg.TensorAttributes]:
    g = hg.Graph(name="pw", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4])
    if runtime_scalar:
        s = g.tensor(name="s", dim=[1], is_pass_by_value=True)
        y = g.pointwise(x, s, mode=hg.PointwiseMode.MUL, name="mul")
    else:
        y = g.pointwise(x, mode=hg.PointwiseMode.EXP, name="exp")
    y.set_output(True)
    return g, y


def _sdpa(sq: int = 64) -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    """An SDPA forward graph with stats, its operation graph not built (uids unassigned)."""
    f32 = hg.DataType.FLOAT
    g = hg.Graph(name="fwd", io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    q = g.tensor(name="Q", dim=[1, 2, sq, 8])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    o, stats = g.sdpa(q, k, v, name="attn", generate_stats=True)
    assert stats is not None
    o.set_output(True)
    stats.set_output(True)
    return g, [q, k, v, o, stats]


def _refused(call: Any, code: hg.ErrorCode, message: str) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    assert info.value.code == code
    assert info.value.message == message


# ----- knobs reach the plans ---------------------------------------------------------------------


def test_an_engine_declaring_no_version_keeps_its_graphs() -> None:
    class Undeclared(_OldEngine):
        api_version = None  # type: ignore[assignment]  # declares nothing: taken as 1.2.0

    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(Undeclared()))
        g, _ = _pointwise(runtime_scalar=True)
        assert g.build().get_plan_name() == "OLD_ENGINE"


def test_an_engine_without_knobs_keeps_working() -> None:
    old = _OldEngine()
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(old))
        g, _ = _pointwise()
        g.build()
        assert old.built == 1 and g.get_execution_plan_knobs() == {}
        g.create_execution_plan_ext("OLD_ENGINE", {"anything": 1}).build_plans()  # ignored
        assert old.built == 2 and g.get_knobs_for_engine(engine_id("OLD_ENGINE")) == []


def test_knob_values_reach_build_plan_with_the_defaults_filled_in() -> None:
    engine = _KnobEngine()
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(engine))
        g, _ = _pointwise()
        g.build()
        assert g.get_execution_plan_knobs() == {"k.rows": 32, "k.mode": "fast"}
        g.create_execution_plan_ext("OLD_ENGINE", [hg.backend.KnobSetting("k.rows", 48)])
        g.build_plans()
        assert g._state.active.plan.knobs == {"k.rows": 48, "k.mode": "fast"}  # type: ignore[union-attr]
        _refused(
            lambda: g.create_execution_plan_ext("OLD_ENGINE", {"k.rows": 40}),
            hg.ErrorCode.INVALID_VALUE,
            "Value 40 does not satisfy step constraint (step=16, min=16)",
        )
        g.build_operation_graph()  # create_execution_plans() starts over with the defaults
        g.create_execution_plans().build_plans()
        assert g.get_execution_plan_knobs() == {"k.rows": 32, "k.mode": "fast"}


def test_queries_need_the_operation_graph_and_an_applicable_engine(only_numpy: None) -> None:
    g, _ = _pointwise()
    _refused(
        g.get_engine_configs,
        hg.ErrorCode.INVALID_VALUE,
        "Graph has not been built. Call build_operation_graph() first.",
    )
    _refused(
        lambda: g.get_behavior_notes_for_engine(NUMPY),
        hg.ErrorCode.INVALID_VALUE,
        "Graph has not been built, build the operation graph first. Cannot get behavior notes "
        "for engine.",
    )
    g.build_operation_graph()
    _refused(
        lambda: g.get_knobs_for_engine("NO_SUCH_ENGINE"),
        hg.ErrorCode.HIPDNN_BACKEND_ERROR,
        "Failed to finalize engine descriptor Backend error: no loaded engine has the id "
        "'NO_SUCH_ENGINE'",
    )
    _refused(
        lambda: g.get_knobs_for_engine(True),
        hg.ErrorCode.INVALID_VALUE,
        "An engine is named by its id or its name; got True",
    )
    signed = engine_id(NUMPY) - (1 << 64)  # hipDNN's int64 form of the same id
    assert [k.knob_id for k in g.get_knobs_for_engine(signed)] == [BLOCK_Q]
    [config] = g.get_engine_configs()
    assert (config.engine_name, config.engine_id) == (NUMPY, engine_id(NUMPY))
    assert config.supports_exhaustive is False and config.estimated_workspace_size == 0


def test_plan_specs_and_the_exclusive_paths(only_numpy: None) -> None:
    g, _ = _pointwise()
    g.build_operation_graph()
    g.add_engine(NUMPY, {BLOCK_Q: 16}).add_engine(NUMPY, {BLOCK_Q: 16}).add_all_engines()
    specs = g.get_plan_specs()
    assert [dict(s.knob_values) for s in specs] == [{BLOCK_Q: 16}, {BLOCK_Q: 0}]
    assert g.get_estimated_max_workspace_size() == 0
    _refused(
        g.create_execution_plans,
        hg.ErrorCode.INVALID_VALUE,
        "Cannot call create_execution_plans() after add_engine_*(). "
        "The plan-spec path and compiled-plan path are mutually exclusive.",
    )
    other, _ = _pointwise()
    other.build()
    _refused(
        lambda: other.add_engine(NUMPY),
        hg.ErrorCode.INVALID_VALUE,
        "Cannot call add_engine() after create_execution_plans()/build(). "
        "The plan-spec path and compiled-plan path are mutually exclusive.",
    )
    fresh, _ = _pointwise()
    fresh.build_operation_graph()
    _refused(lambda: fresh.add_engine_variants([]), hg.ErrorCode.INVALID_VALUE,
             "Input list is empty")  # fmt: skip
    fresh.add_engine_variants([(12345, {}), (NUMPY, {BLOCK_Q: 8})])  # 12345: skipped
    assert [s.engine_name for s in fresh.get_plan_specs()] == [NUMPY]
    _refused(
        lambda: fresh.add_engine_variants([(NUMPY, {BLOCK_Q: -1})]),
        hg.ErrorCode.INVALID_VALUE,
        f"Engine {NUMPY} in add_engine_variants(): Knob '{BLOCK_Q}' has invalid value for "
        f"engine {NUMPY}: Value -1 is out of range [0, 1048576]",
    )


def test_engine_details_and_the_plans_engine_config_in_hipdnns_bytes(only_numpy: None) -> None:
    from hipdnn_graph.descriptors.engine_wire import (
        read_engine_config,
        read_engine_details,
        write_engine_config,
        write_engine_details,
    )

    g, _ = _pointwise()
    g.build_operation_graph()
    details = g.get_engine_details(NUMPY)
    assert details.engine_id == engine_id(NUMPY) - (1 << 64)  # hipDNN's int64
    assert (details.name, [k.knob_id for k in details.knobs]) == (NUMPY, [BLOCK_Q])
    assert read_engine_details(write_engine_details(details)) == details
    g.create_execution_plan_ext(NUMPY, {BLOCK_Q: 32}).build_plans()
    config = g.get_execution_plan_engine_config()
    assert config.knobs == (hg.backend.KnobSetting(BLOCK_Q, 32),)
    assert read_engine_config(write_engine_config(config)) == config


# ----- the NumPy reference's tile knob changes what runs -----------------------------------------


def test_the_numpy_tile_knob_takes_the_tiled_path(
    only_numpy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    tiled = sdpa_tiled.forward

    def spy(p: Any) -> Any:
        calls.append(p.block_q)
        return tiled(p)

    monkeypatch.setattr(sdpa_tiled, "forward", spy)
    results = {}
    for block_q in (0, 16):
        g, t = _sdpa()
        g.build_operation_graph()
        g.create_execution_plan_ext(NUMPY, {BLOCK_Q: block_q}).build_plans()
        rng = np.random.default_rng(1)
        pack: dict[Any, Any] = {x: rng.standard_normal(x.get_dim()).astype(np.float32)
                                for x in t[:3]}  # fmt: skip
        outs = [np.zeros(x.get_dim(), np.float32) for x in t[3:]]
        g.execute({**pack, t[3]: outs[0], t[4]: outs[1]})
        results[block_q] = outs
    assert calls == [16]  # the automatic tiling takes the untiled path at this size
    for a, b in zip(results[0], results[16], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ----- the engine plugin API version -------------------------------------------------------------


def test_an_engine_older_than_the_graph_requires_is_skipped_with_a_reason() -> None:
    old, new = _OldEngine("OLD_ENGINE"), _KnobEngine("NEW_ENGINE")
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(old, new))
        g, _ = _pointwise(runtime_scalar=True)
        g.build()
        assert g.get_plan_name() == "NEW_ENGINE"
        assert g.get_engine_refusals() == {
            "OLD_ENGINE": "implements engine plugin API 1.0.0; the graph requires at least 1.2.0"
        }
        plain, _ = _pointwise()
        assert plain.build().get_engine_names() == ["OLD_ENGINE", "NEW_ENGINE"]
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(old))
        g, _ = _pointwise(runtime_scalar=True)
        with pytest.raises(hg.NotSupportedError) as info:
            g.build()
        assert str(info.value) == (
            "No engine supports graph 'pw':\n  OLD_ENGINE: implements engine plugin API 1.0.0; "
            "the graph requires at least 1.2.0"
        )


def test_serialize_stamps_the_floor_above_the_baseline() -> None:
    plain, _ = _pointwise()
    assert plain.serialize() == hg.Graph.deserialize(plain.serialize()).serialize()
    assert (
        hg.Graph.deserialize(plain.serialize()).wire_metadata.min_required_engine_api_version
        is None
    )
    scalar, _ = _pointwise(runtime_scalar=True)
    back = hg.Graph.deserialize(scalar.serialize())
    assert back.wire_metadata.min_required_engine_api_version == (1, 2, 0)
    doc = json.loads(scalar.to_json())
    assert doc["min_required_engine_api_version"] == {"major": 1, "minor": 2, "patch": 0}
    assert "min_required_engine_api_version" not in json.loads(plain.to_json())
    # a graph read with a higher stamp keeps it, and engines below it are skipped
    back.wire_metadata.min_required_engine_api_version = (1, 3, 0)
    with isolated_registry(load_entry_points=False):
        register_backend(create_numpy_backend())
        with pytest.raises(hg.NotSupportedError) as info:
            back.build()
    assert "implements engine plugin API 1.2.0; the graph requires at least 1.3.0" in str(
        info.value
    )


def test_plans_at_override_shapes_keep_the_chosen_knobs(only_numpy: None) -> None:
    big, _ = _sdpa(sq=64)
    big.set_override_shape_enabled(True)
    big.build_operation_graph()
    big.create_execution_plan_ext(NUMPY, {BLOCK_Q: 16}).build_plans()
    small, s = _sdpa(sq=32)  # declared alike: the same uids
    small.build_operation_graph()
    uids = [x.get_uid() for x in s[:4]]
    shapes = [x.get_dim() for x in s[:4]]
    strides = [x.get_stride() for x in s[:4]]
    rng = np.random.default_rng(2)
    pack: dict[Any, Any] = {u: rng.standard_normal(d).astype(np.float32) for u, d in
                            zip(uids[:3], shapes[:3], strict=True)}  # fmt: skip
    pack[uids[3]] = np.zeros(shapes[3], np.float32)
    pack[s[4].get_uid()] = np.zeros(s[4].get_dim(), np.float32)
    uids.append(s[4].get_uid())
    shapes.append(s[4].get_dim())
    strides.append(s[4].get_stride())
    big.execute(pack, override_uids=uids, override_shapes=shapes, override_strides=strides)
    [variant] = [v.built for v in big._state.active.variants.values()]  # type: ignore[union-attr]
    assert dict(variant.knobs) == {BLOCK_Q: 16}
    assert variant.plan.steps[0].static["block_q"] == 16
    # the required engine plugin API version follows the override flag
    assert json.loads(big.to_json())["min_required_engine_api_version"] == {
        "major": 1,
        "minor": 1,
        "patch": 0,
    }
