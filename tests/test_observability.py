"""Which engine runs what (issue 22 item 5): the op's cache lists its graphs with their engines,
and the ``hipdnn_graph`` loggers report engine choices and refusals at DEBUG, at no cost when
DEBUG is off."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.graph import lifecycle


def _graph(causal: bool = False) -> hg.Graph:
    g = hg.Graph(
        name="observed",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    o, _ = g.sdpa(
        q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False,
        use_causal_mask=causal,
    )  # fmt: skip
    o.set_output(True)
    return g


def test_debug_log_names_every_refusal_the_ranking_and_the_chosen_engine(caplog: Any) -> None:
    g = _graph().set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    with caplog.at_level(logging.DEBUG, logger="hipdnn_graph"):
        g.build()
    records = [r for r in caplog.records if r.name == "hipdnn_graph.engines"]
    text = [r.getMessage() for r in records]
    assert all(r.levelno == logging.DEBUG for r in records)
    for engine, reason in g.get_engine_refusals().items():
        assert f"graph 'observed': engine {engine} refuses: {reason}" in text
    best_first = ", ".join(g.get_engine_names())
    assert f"graph 'observed': engines that apply, best first: {best_first}" in text
    assert text[-1] == "graph 'observed' runs on engine NUMPY_REFERENCE_ENGINE"


def test_nothing_is_logged_or_formatted_when_debug_is_off(monkeypatch: Any) -> None:
    def never(*args: Any, **kw: Any) -> None:
        raise AssertionError("formatted a debug message while DEBUG is off")

    monkeypatch.setattr(lifecycle._LOG, "debug", never)
    logging.getLogger("hipdnn_graph").setLevel(logging.INFO)
    try:
        _graph().build()
    finally:
        logging.getLogger("hipdnn_graph").setLevel(logging.NOTSET)


def test_a_plan_that_fails_to_build_is_logged_with_its_error(caplog: Any) -> None:
    class Broken:
        name = "BROKEN_ENGINE"
        priority = 0

        def check(self, graph: Any) -> Any:
            return hg.backend.Support.yes()

        def workspace_size(self, graph: Any) -> int:
            return 0

        def build_plan(self, graph: Any) -> Any:
            raise RuntimeError("no kernel today")

    class Backend:
        name = "broken"

        def engines(self) -> list[Any]:
            return [Broken()]

    from hipdnn_graph_numpy_reference import create_backend

    with hg.backend.isolated_registry(load_entry_points=False):
        hg.register_backend(Backend())
        hg.register_backend(create_backend())
        with caplog.at_level(logging.DEBUG, logger="hipdnn_graph"):
            g = _graph()
            g.build()
    text = [r.getMessage() for r in caplog.records]
    assert (
        "graph 'observed': engine BROKEN_ENGINE failed to build a plan: RuntimeError: "
        "no kernel today"
    ) in text
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    assert text[-1] == "graph 'observed' runs on engine NUMPY_REFERENCE_ENGINE"


def test_the_torch_ops_cache_lists_its_graphs_with_their_engines(caplog: Any) -> None:
    torch = pytest.importorskip("torch")
    from hipdnn_graph.torch import cached_graphs, graph_cache, scaled_dot_product_attention

    graph_cache().clear()
    q = torch.randn(2, 4, 6, 8, requires_grad=True)
    bias = torch.zeros(6, 6)
    with caplog.at_level(logging.DEBUG, logger="hipdnn_graph"):
        scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
        scaled_dot_product_attention(q, q, q, attn_mask=bias, engine="NUMPY_REFERENCE_ENGINE")
    listed = cached_graphs()
    assert [(c.kind, c.engine) for c in listed] == [
        ("forward", "TORCH_SDPA_MATH_ENGINE"),
        ("backward", "TORCH_SDPA_MATH_ENGINE"),
        ("forward", "NUMPY_REFERENCE_ENGINE"),
    ]
    fwd, bwd, forced = listed
    assert fwd.shapes == {"Q": (2, 4, 6, 8), "K": (2, 4, 6, 8), "V": (2, 4, 6, 8)}
    assert set(bwd.shapes) == {"Q", "K", "V", "O", "dO", "Stats"}
    assert forced.shapes["Bias"] == (1, 1, 6, 6)
    assert fwd.engine == fwd.graph.get_plan_name() and fwd.engine in fwd.ranked
    assert forced.ranked[0] == "NUMPY_REFERENCE_ENGINE"
    built = [r.getMessage() for r in caplog.records if r.name == "hipdnn_graph.torch"]
    first = "built graph 'hipdnn_torch_sdpa_fwd' on engine TORCH_SDPA_MATH_ENGINE for {'Q': "
    assert len(built) == 3 and built[0].startswith(first + "(2, 4, 6, 8)")
    graph_cache().clear()
    assert cached_graphs() == []


# ----- a preferred engine that is not used is said at INFO (issue 41 item 23) --------------------


class _Engine:
    priority, array_kind = 0, "numpy"

    def __init__(self, name: str, refuse: str | None = None, fail: str | None = None) -> None:
        self.name, self.refuse, self.fail = name, refuse, fail

    def check(self, graph: Any) -> Any:
        return hg.backend.Support.no(self.refuse) if self.refuse else hg.backend.Support.yes()

    def workspace_size(self, graph: Any) -> int:
        return 0

    def build_plan(self, graph: Any) -> Any:
        raise RuntimeError(self.fail)


def _build_with(engine: _Engine, preferred: str | int, caplog: Any) -> tuple[hg.Graph, list[str]]:
    from hipdnn_graph_numpy_reference import create_backend

    class Backend:
        name = "picky"

        def engines(self) -> list[Any]:
            return [engine]

    with hg.backend.isolated_registry(load_entry_points=False):
        hg.register_backend(Backend())
        hg.register_backend(create_backend())
        with caplog.at_level(logging.INFO, logger="hipdnn_graph"):
            g = _graph().set_preferred_engine_id_ext(preferred)
            g.build()
    return g, [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_a_preferred_engine_that_refuses_is_said_at_info(caplog: Any) -> None:
    engine = _Engine("PICKY_ENGINE", refuse="only likes other graphs")
    g, said = _build_with(engine, "PICKY_ENGINE", caplog)
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    assert said == [
        "graph 'observed': the preferred engine PICKY_ENGINE refuses it: only likes other "
        "graphs; the engine to run it is the best ranked, NUMPY_REFERENCE_ENGINE"
    ]


def test_an_unknown_preferred_engine_id_is_said_at_info(caplog: Any) -> None:
    g, said = _build_with(_Engine("PICKY_ENGINE", refuse="no"), 0x1234, caplog)
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    assert said == [
        "graph 'observed': no registered engine has the preferred engine id 0x0000000000001234; "
        "the engine to run it is the best ranked, NUMPY_REFERENCE_ENGINE"
    ]


def test_a_preferred_engine_that_fails_to_build_is_said_at_info(caplog: Any) -> None:
    g, said = _build_with(_Engine("FLAKY_ENGINE", fail="no kernel today"), "FLAKY_ENGINE", caplog)
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    assert said == [
        "graph 'observed': the preferred engine failed to build a plan (FLAKY_ENGINE: "
        "RuntimeError: no kernel today); it runs on NUMPY_REFERENCE_ENGINE"
    ]


def test_a_preferred_engine_that_runs_the_graph_says_nothing_at_info(caplog: Any) -> None:
    g, said = _build_with(_Engine("PICKY_ENGINE", refuse="no"), "NUMPY_REFERENCE_ENGINE", caplog)
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE" and said == []
