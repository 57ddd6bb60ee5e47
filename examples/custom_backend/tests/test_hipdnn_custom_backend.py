"""Tests of the example plugin, as its author would run them: ``pytest examples/custom_backend``.

They need the plugin installed (``pip install -e examples/custom_backend``), so that hipdnn-graph
finds it through its entry point like any third-party plugin.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hipdnn_custom_backend import ENGINE_NAME, SUPPORTED_FEATURES, SUPPORTED_KINDS, create_backend

import hipdnn_graph as hg
from hipdnn_graph.backend import engine_id, isolated_registry, register_backend
from hipdnn_graph.testing import assert_engine_conforms


def forward_graph(
    io: hg.DataType = hg.DataType.FLOAT, **keywords: Any
) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name="fwd",
        io_data_type=io,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[2, 4, 16, 8])
    k = g.tensor(name="K", dim=[2, 2, 20, 8])
    v = g.tensor(name="V", dim=[2, 1, 20, 12])
    o, stats = g.sdpa(q, k, v, name="attn", generate_stats=True, **keywords)
    assert stats is not None
    o.set_output(True)
    stats.set_output(True).set_data_type(hg.DataType.FLOAT)
    return g, {"Q": q, "K": k, "V": v, "O": o, "Stats": stats}


def run(engine: str, **keywords: Any) -> dict[str, np.ndarray[Any, Any]]:
    g, t = forward_graph(**keywords)
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    rng = np.random.default_rng(0)
    pack: dict[Any, Any] = {t[n]: rng.standard_normal(t[n].get_dim()).astype(np.float32)
                            for n in ("Q", "K", "V")}  # fmt: skip
    outputs = {n: np.full(t[n].get_dim(), np.nan, np.float32) for n in ("O", "Stats")}
    g.execute({**pack, **{t[n]: a for n, a in outputs.items()}})
    return outputs


def test_the_entry_point_registers_the_engine() -> None:
    infos = {info.name: info for info in hg.list_backends()}
    assert "custom" in infos, "install the plugin: pip install -e examples/custom_backend"
    assert infos["custom"].engines == [ENGINE_NAME]
    assert infos["custom"].source == "hipdnn_custom_backend:create_backend"
    assert infos["custom"].error is None
    assert engine_id(ENGINE_NAME) == engine_id("CUSTOM_NUMPY_SDPA_FWD_ENGINE")


@pytest.mark.parametrize(
    "keywords",
    [{}, {"use_causal_mask": True}, {"use_causal_mask_bottom_right": True}, {"attn_scale": 0.5}],
    ids=["plain", "causal", "causal-bottom-right", "scale"],
)
def test_matches_the_reference_engine(keywords: dict[str, Any]) -> None:
    mine, reference = run(ENGINE_NAME, **keywords), run("NUMPY_REFERENCE_ENGINE", **keywords)
    for name in ("O", "Stats"):
        np.testing.assert_allclose(mine[name], reference[name], rtol=1e-5, atol=1e-5)


def test_is_never_chosen_unless_preferred() -> None:
    g, _ = forward_graph()
    g.build()
    assert g.get_plan_name() != ENGINE_NAME
    assert ENGINE_NAME in g.get_engine_names()


@pytest.mark.parametrize(
    ("keywords", "reason"),
    [
        ({"use_alibi_mask": True}, "ALiBi is not implemented"),
        ({"diagonal_band_left_bound": 2}, "diagonal bands other than a causal mask"),
    ],
)
def test_refuses_what_it_cannot_do_with_a_reason(keywords: dict[str, Any], reason: str) -> None:
    g, _ = forward_graph(**keywords)
    g.set_preferred_engine_id_ext(ENGINE_NAME).build()
    assert g.get_plan_name() != ENGINE_NAME  # the preference is ignored
    assert reason in g.get_engine_refusals()[ENGINE_NAME]


def test_refuses_backward_graphs_alone() -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(create_backend())
        g = hg.Graph(name="bwd", io_data_type=hg.DataType.FLOAT,
                     intermediate_data_type=hg.DataType.FLOAT,
                     compute_data_type=hg.DataType.FLOAT)  # fmt: skip
        q, k, v, o, do = (g.tensor(name=n, dim=[1, 1, 4, 4]) for n in ("Q", "K", "V", "O", "dO"))
        stats = g.tensor(name="Stats", dim=[1, 1, 4, 1])
        for grad in g.sdpa_backward(q, k, v, o, do, stats):
            grad.set_output(True)
        with pytest.raises(hg.NotSupportedError) as info:
            g.build()
    assert str(info.value) == (
        "No engine supports graph 'bwd':\n"
        f"  {ENGINE_NAME}: runs graphs of exactly one SDPA forward node"
    )


def test_conforms_to_the_reference_on_random_graphs() -> None:
    report = assert_engine_conforms(
        ENGINE_NAME,
        cases=12,
        seed=3,
        kinds=SUPPORTED_KINDS,
        features=SUPPORTED_FEATURES,
        min_passed=6,
    )
    assert not report.failed


@pytest.mark.parametrize("row_block", [16, 64])
def test_the_row_block_knob_changes_the_steps_not_the_results(row_block: int) -> None:
    g, t = forward_graph(use_causal_mask=True)
    g.build_operation_graph()
    assert [k.knob_id for k in g.get_knobs_for_engine(ENGINE_NAME)] == ["custom.row_block"]
    g.create_execution_plan_ext(ENGINE_NAME, {"custom.row_block": row_block}).build_plans()
    assert g.get_execution_plan_knobs() == {"custom.row_block": row_block}
    plan: Any = g._state.active.plan  # type: ignore[union-attr]  # the engine's own plan
    assert plan.steps == [(r, min(r + row_block, 16)) for r in range(0, 16, row_block)]
    rng = np.random.default_rng(0)
    pack: dict[Any, Any] = {t[n]: rng.standard_normal(t[n].get_dim()).astype(np.float32)
                            for n in ("Q", "K", "V")}  # fmt: skip
    outputs = {n: np.full(t[n].get_dim(), np.nan, np.float32) for n in ("O", "Stats")}
    g.execute({**pack, **{t[n]: a for n, a in outputs.items()}})
    reference = run("NUMPY_REFERENCE_ENGINE", use_causal_mask=True)
    for name in ("O", "Stats"):
        np.testing.assert_allclose(outputs[name], reference[name], rtol=1e-5, atol=1e-5)


def test_a_row_block_off_the_list_is_refused() -> None:
    g, _ = forward_graph()
    g.build_operation_graph()
    with pytest.raises(hg.HipdnnError) as info:
        g.create_execution_plan_ext(ENGINE_NAME, {"custom.row_block": 32})
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert info.value.message == "Value 32 is not in the list of valid values: [0, 16, 64, 256]"
