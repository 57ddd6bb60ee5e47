"""hipDNN's own Python tests of engine configurations and knobs (``test_autotune.py``, the
``probes/knob_settings.py`` and ``probes/constraints.py`` probes), written here for the facade:
the parts that need no AMD runtime, on the NumPy reference and the example plugin's engines."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from frontend_cases import sdpa_graph

import hipdnn_graph.frontend as hipdnn

NUMPY = "NUMPY_REFERENCE_ENGINE"
CUSTOM = "CUSTOM_NUMPY_SDPA_FWD_ENGINE"


class _NullHandle:
    def get(self) -> int:
        return 0


def _built() -> tuple[Any, Any, tuple[Any, ...]]:
    graph, q, k, v, o, stats = sdpa_graph(sq=16, skv=16, dims=(1, 2, 8))
    assert graph.validate().is_good()
    handle = hipdnn.create_handle()
    assert graph.build_operation_graph(handle).is_good()
    return graph, handle, (q, k, v, o, stats)


def _pack(tensors: tuple[Any, ...]) -> dict[Any, Any]:
    rng = np.random.default_rng(0)
    pack = {t: rng.standard_normal(t.get_dim()).astype(np.float32) for t in tensors[:3]}
    pack.update({t: np.zeros(t.get_dim(), np.float32) for t in tensors[3:]})
    return pack


# ----- the CPU tier of test_autotune.py ----------------------------------------------------------


def test_knob_setting_roundtrip() -> None:
    setting = hipdnn.KnobSetting("tile.size", 64)
    assert setting.knob_id == "tile.size" and setting.value == 64
    assert hipdnn.KnobSetting("alpha", 0.5).value == pytest.approx(0.5)
    assert hipdnn.KnobSetting("layout", "nhwc").value == "nhwc"
    assert setting == hipdnn.KnobSetting("tile.size", 64)
    assert setting != hipdnn.KnobSetting("tile.size", 128)
    assert setting != hipdnn.KnobSetting("other.knob", 64)
    assert "tile.size" in repr(setting)


def test_knob_value_type_enum() -> None:
    for name in ("NOT_SET", "INT64", "FLOAT64", "STRING"):
        assert getattr(hipdnn.KnobValueType, name).name == name


def test_engine_config_info_defaults_and_assignment() -> None:
    cfg = hipdnn.EngineConfigInfo()
    assert (cfg.engine_id, cfg.engine_name, cfg.knobs) == (-1, "", [])
    assert cfg.supports_exhaustive is False and cfg.estimated_workspace_size == 0
    cfg.engine_id, cfg.engine_name = 7, "SOME_ENGINE"
    cfg.supports_exhaustive, cfg.estimated_workspace_size = True, 4096
    assert (cfg.engine_id, cfg.engine_name, cfg.estimated_workspace_size) == (
        7,
        "SOME_ENGINE",
        4096,
    )
    with pytest.raises(TypeError):
        hipdnn.Knob()


def test_engine_variant_fields() -> None:
    variant = hipdnn.EngineVariant()
    assert variant.engine_id == -1 and variant.knob_settings == {}
    variant.engine_id, variant.knob_settings = 3, {"a": 1, "b": 2.5, "c": "x"}
    assert variant.engine_id == 3 and variant.knob_settings == {"a": 1, "b": 2.5, "c": "x"}


def test_discovery_requires_built_graph() -> None:
    graph = hipdnn.Graph()
    for query in (
        graph.get_engine_configs,
        lambda: graph.get_knobs_for_engine(0),
        lambda: graph.get_knob_lookup_for_engine(0),
        graph.get_estimated_max_workspace_size,
    ):
        with pytest.raises(RuntimeError) as caught:
            query()
        assert str(caught.value)
    with pytest.raises(RuntimeError) as caught:
        graph.get_knobs_for_engine(0)
    assert str(caught.value) == (
        "Graph has not been built, build the operation graph first. Cannot get knobs for engine."
    )


def test_add_engine_family_reports_errors_without_built_graph() -> None:
    graph = hipdnn.Graph()
    errors = {
        "add_engine": graph.add_engine(0),
        "add_engine_configs": graph.add_engine_configs([]),
        "add_engine_variants": graph.add_engine_variants([]),
        "add_engines": graph.add_engines([]),
        "add_all_engines": graph.add_all_engines(),
    }
    for name, error in errors.items():
        assert error.is_bad(), name
        assert error.get_message(), name
    assert "build_operation_graph" in errors["add_engine"].get_message()
    assert errors["add_engines"].get_message() == "add_engines() requires at least one engine ID."


def test_plan_index_primitives_on_empty_plan_list() -> None:
    graph = hipdnn.Graph()
    assert graph.get_execution_plan_count() == 0
    for accessor in (graph.get_plan_name_at_index, graph.get_workspace_size_plan_at_index):
        with pytest.raises(RuntimeError) as caught:
            accessor(0)
        assert "out of bounds" in str(caught.value)
    build = graph.build_plan_at_index(0)
    assert build.is_bad() and "out of bounds" in build.get_message()
    executed = graph.execute_plan_at_index(_NullHandle(), {1: 1}, 0, 0)
    assert executed.is_bad() and "out of bounds" in executed.get_message()


def test_plan_name_without_compiled_plans() -> None:
    with pytest.raises(RuntimeError) as caught:
        hipdnn.Graph().get_plan_name()
    assert "out of bounds" in str(caught.value)


def test_engine_name_accessors_take_an_optional_handle() -> None:
    graph = hipdnn.Graph()
    with pytest.raises(RuntimeError):
        graph.get_plan_name(handle=None)
    with pytest.raises(RuntimeError):
        graph.get_plan_name_at_index(0, handle=None)
    with pytest.raises(RuntimeError):
        graph.get_engine_configs(handle=None)


def test_create_execution_plan_ext_takes_knob_settings() -> None:
    graph = hipdnn.Graph()
    assert graph.create_execution_plan_ext(0).is_bad()
    error = graph.create_execution_plan_ext(0, [hipdnn.KnobSetting("tile.size", 64)])
    assert error.is_bad()
    assert error.get_message() == (
        "Graph has not been built, build the operation graph first. Cannot create execution plan."
    )


# ----- the device tier of test_autotune.py, on engines that run on any machine ------------------


def test_engine_discovery_and_knobs() -> None:
    graph, _, _ = _built()
    configs = graph.get_engine_configs()
    assert configs
    names = [c.engine_name for c in configs]
    assert NUMPY in names
    for cfg in configs:
        assert isinstance(cfg, hipdnn.EngineConfigInfo)
        assert (
            cfg.engine_id != -1
            and cfg.engine_id
            == hipdnn.Graph()
            .set_preferred_engine_id_ext(cfg.engine_name)
            .get_preferred_engine_id_ext()
        )
        assert cfg.estimated_workspace_size >= 0
        knobs = graph.get_knobs_for_engine(cfg.engine_id)
        assert len(cfg.knobs) == len(knobs)
        for knob in knobs:
            assert isinstance(knob.knob_id, str) and knob.knob_id
            assert isinstance(knob.value_type, hipdnn.KnobValueType)
            assert isinstance(knob.default_value, int | float | str)
            assert isinstance(knob.is_deprecated, bool)
            assert knob.validate(hipdnn.KnobSetting(knob.knob_id, knob.default_value)).is_good()


def test_add_engines_and_variants() -> None:
    graph, _, _ = _built()
    first_id = graph.get_engine_configs()[0].engine_id
    assert graph.add_engines([first_id]).is_good()

    variant_graph, _, _ = _built()
    variant = hipdnn.EngineVariant()
    variant.engine_id = first_id
    assert variant_graph.add_engine_variants([variant]).is_good()

    all_graph, _, _ = _built()
    assert all_graph.add_all_engines().is_good()
    assert all_graph.get_estimated_max_workspace_size() >= 0
    # the two paths exclude each other
    error = all_graph.create_execution_plan_ext(first_id)
    assert error.get_message() == (
        "Cannot call create_execution_plan_ext() after add_engine_*(). "
        "The plan-spec path and compiled-plan path are mutually exclusive."
    )


def test_knob_introspection_feeds_create_execution_plan_ext() -> None:
    graph, handle, tensors = _built()
    engine_id = next(c.engine_id for c in graph.get_engine_configs() if c.engine_name == NUMPY)
    lookup = graph.get_knob_lookup_for_engine(engine_id)
    knobs = graph.get_knobs_for_engine(engine_id)
    assert set(lookup) == {knob.knob_id for knob in knobs}
    settings = [hipdnn.KnobSetting(knob.knob_id, knob.default_value) for knob in knobs]
    assert graph.create_execution_plan_ext(engine_id, settings).is_good()
    assert graph.build_plans().is_good()
    assert graph.get_execution_plan_engine_id() == engine_id
    assert graph.execute(handle, _pack(tensors), 0).is_good()
    # unlike add_engine(), plan creation ignores knobs the engine does not expose
    ignored = graph.create_execution_plan_ext(engine_id, [hipdnn.KnobSetting("no.such.knob", 1)])
    assert ignored.is_good(), ignored.get_message()


def test_unknown_engine_is_not_valid_for_the_graph() -> None:
    graph, _, _ = _built()
    error = graph.add_engine(12345)
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
    assert error.get_message() == (
        "Engine ID 12345 is not valid for this graph: Failed to finalize engine descriptor "
        "Backend error: no loaded engine has the id 12345"
    )
    with pytest.raises(RuntimeError) as caught:
        graph.get_knobs_for_engine(12345)
    assert caught.value.code == hipdnn.ErrorCode.HIPDNN_BACKEND_ERROR  # type: ignore[attr-defined]


# ----- probes/knob_settings.py and probes/constraints.py, on the example plugin -----------------


@pytest.mark.usefixtures("example_plugin")
def test_knob_settings_probe() -> None:
    graph, _, _ = _built()
    engines = {
        c.engine_id: [k.knob_id for k in graph.get_knobs_for_engine(c.engine_id)]
        for c in graph.get_engine_configs()
    }
    target = None
    for engine_id in sorted(engines):
        for knob in graph.get_knobs_for_engine(engine_id):
            constraint = knob.constraint
            if isinstance(constraint, hipdnn.IntConstraint) and constraint.valid_values:
                target = (engine_id, knob.knob_id, sorted(constraint.valid_values))
    assert target is not None, engines
    engine_id, knob_id, values = target
    assert knob_id == "custom.row_block" and values == [0, 16, 64, 256]
    chosen, other = values[0], values[-2]

    assert graph.add_engine(engine_id, [hipdnn.KnobSetting(knob_id, chosen)]).is_good()
    rejected = graph.add_engine(engine_id, [hipdnn.KnobSetting(knob_id, max(values) + 1000)])
    assert rejected.is_bad()
    assert rejected.get_message() == (
        f"Knob 'custom.row_block' has invalid value for engine {engine_id}: "
        "Value 1256 is not in the list of valid values: [0, 16, 64, 256]"
    )
    wrong_type = graph.add_engine(engine_id, [hipdnn.KnobSetting(knob_id, "text")])
    assert wrong_type.get_message() == (
        f"Knob 'custom.row_block' has invalid value for engine {engine_id}: "
        "KnobSetting does not contain an integer value"
    )
    unknown = graph.add_engine(engine_id, [hipdnn.KnobSetting("no.such.knob", 1)])
    assert unknown.get_message() == f"Knob 'no.such.knob' is not available for engine {engine_id}"

    variants = []
    for value in (chosen, other):
        variant = hipdnn.EngineVariant()
        variant.engine_id, variant.knob_settings = engine_id, {knob_id: value}
        variants.append(variant)
    tuned, _, _ = _built()
    assert tuned.add_engine_variants(variants).is_good()
    specs = tuned.core_graph.get_plan_specs()
    assert [dict(s.knob_values) for s in specs] == [{knob_id: chosen}, {knob_id: other}]

    planned, handle, tensors = _built()
    created = planned.create_execution_plan_ext(engine_id, [hipdnn.KnobSetting(knob_id, other)])
    assert created.is_good(), created.get_message()
    assert planned.build_plans().is_good()
    pack = _pack(tensors)
    assert planned.execute(handle, pack, 0).is_good()
    assert planned.get_execution_plan_engine_id() == engine_id
    assert planned.get_plan_name() == CUSTOM
    assert planned.core_graph.get_execution_plan_knobs() == {knob_id: other}


@pytest.mark.usefixtures("example_plugin")
def test_constraints_probe() -> None:
    graph, _, _ = _built()
    seen = {}
    for config in graph.get_engine_configs():
        for knob in graph.get_knobs_for_engine(config.engine_id):
            constraint = knob.constraint
            assert knob.validate(hipdnn.KnobSetting(knob.knob_id, knob.default_value)).is_good()
            if isinstance(constraint, hipdnn.IntConstraint):
                over = knob.validate(hipdnn.KnobSetting(knob.knob_id, constraint.max_value + 1000))
                assert over.is_bad()
                assert over.get_code() == hipdnn.ErrorCode.INVALID_VALUE
            seen[knob.knob_id] = str(constraint)
    assert seen["custom.row_block"] == (
        "IntConstraint{min=0, max=256, step=1, validValues=[0, 16, 64, 256]}"
    )
    assert seen["numpy_reference.sdpa_block_q"] == "IntConstraint{min=0, max=1048576, step=1}"
