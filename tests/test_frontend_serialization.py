"""hipdnn_graph.frontend: to_json/from_json and to_binary/from_binary of SDPA graphs.

Ported from hipDNN's wheel tests: a restored graph re-serializes identically through both
formats, loaders fill *this* graph and return an Error. The bytes and the JSON text themselves
are the core's (hipDNN's wire format) and are not inspected here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from frontend_cases import build_all, sdpa_backward_graph, sdpa_graph

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn


def _seq_len(b: int = 2) -> hipdnn.Tensor:
    return hipdnn.Tensor.create([b, 1, 1, 1], hipdnn.DataType.INT32)


def _forward_cases() -> dict[str, Callable[[], Any]]:
    def scale_tensor() -> Any:
        scale = hipdnn.Graph.tensor_like(__import__("numpy").array([0.125], "float32"), "scale")
        return hipdnn.SdpaAttributes().set_generate_stats(True).set_attn_scale(scale)

    return {
        "plain": lambda: hipdnn.SdpaAttributes().set_generate_stats(True),
        "inference": lambda: hipdnn.SdpaAttributes(),
        "causal_scale": lambda: (
            hipdnn.SdpaAttributes()
            .set_generate_stats(True)
            .set_causal_mask(True)
            .set_attn_scale(0.125)
        ),
        "bottom_right_band": lambda: (
            hipdnn.SdpaAttributes()
            .set_causal_mask_bottom_right(True)
            .set_diagonal_band_left_bound(4)
            .set_name("banded")
        ),
        "padding": lambda: (
            hipdnn.SdpaAttributes()
            .set_padding_mask(True)
            .set_seq_len_q(_seq_len())
            .set_seq_len_kv(_seq_len())
        ),
        "dropout": lambda: hipdnn.SdpaAttributes().set_dropout(
            0.1,
            hipdnn.Tensor.create([1, 1, 1, 1], hipdnn.DataType.INT64),
            hipdnn.Tensor.create([1, 1, 1, 1], hipdnn.DataType.INT64),
        ),
        "scale_tensor": scale_tensor,
        "bias": lambda: hipdnn.SdpaAttributes().set_bias(
            hipdnn.Tensor.create([1, 1, 16, 32], hipdnn.DataType.FLOAT)
        ),
    }


def _backward_cases() -> dict[str, Callable[[], Any]]:
    return {
        "plain": lambda: hipdnn.SdpaBackwardAttributes(),
        "causal_scale": lambda: (
            hipdnn.SdpaBackwardAttributes()
            .set_causal_mask(True)
            .set_attn_scale(0.125)
            .set_name("bwd")
        ),
        "alibi_alignment": lambda: (
            hipdnn.SdpaBackwardAttributes()
            .set_alibi_mask(True)
            .set_diagonal_alignment(hipdnn.DiagonalAlignment.BOTTOM_RIGHT)
            .set_diagonal_band_right_bound(2)
        ),
        "bias_dbias": lambda: (
            hipdnn.SdpaBackwardAttributes()
            .set_bias(hipdnn.Tensor.create([1, 8, 16, 32], hipdnn.DataType.FLOAT))
            .set_dbias(hipdnn.Tensor.create([1, 8, 16, 32], hipdnn.DataType.FLOAT).set_output(True))
        ),
    }


CASES = [
    ("fwd_" + n, lambda f=f: sdpa_graph(attributes=f())[0]) for n, f in _forward_cases().items()
]
CASES += [
    ("bwd_" + n, lambda f=f: sdpa_backward_graph(attributes=f())[0])
    for n, f in _backward_cases().items()
]


@pytest.mark.parametrize(("name", "build"), CASES, ids=[n for n, _ in CASES])
class TestRoundTrips:
    def test_json_round_trip(self, name: str, build: Callable[[], hipdnn.Graph]) -> None:
        graph = build()
        assert graph.validate().is_good(), graph.validate().get_message()
        text = graph.to_json()
        assert isinstance(text, str) and text
        restored = hipdnn.Graph()
        error = restored.from_json(text)
        assert isinstance(error, hipdnn.Error) and error.is_good(), error.get_message()
        assert restored.to_json() == text
        assert restored.to_binary() == graph.to_binary()
        assert restored.get_name() == graph.get_name()
        assert restored.get_io_data_type() == hipdnn.DataType.FLOAT

    def test_binary_round_trip(self, name: str, build: Callable[[], hipdnn.Graph]) -> None:
        graph = build()
        assert graph.validate().is_good()
        data = graph.to_binary()
        assert isinstance(data, bytes) and data
        restored = hipdnn.Graph()
        assert restored.from_binary(data).is_good()
        assert restored.to_binary() == data
        assert restored.to_json() == graph.to_json()


class TestLoaders:
    def test_loaded_graph_has_the_same_nodes_and_tensor_handles(self) -> None:
        graph, q, k, v, o, stats = sdpa_graph(
            attributes=hipdnn.SdpaAttributes().set_generate_stats(True).set_causal_mask(True)
        )
        restored = hipdnn.Graph()
        assert restored.from_binary(graph.to_binary()).is_good()
        (node,) = restored.core_graph.nodes
        assert node.attributes.causal_mask is True
        loaded = {t.get_uid(): t for t in restored.core_graph.tensors}
        assert all(isinstance(t, hipdnn.Tensor) for t in loaded.values())
        for tensor in (q, k, v, o, stats):
            twin = loaded[tensor.get_uid()]
            assert twin.get_dim() == tensor.get_dim() and twin.get_name() == tensor.get_name()

    def test_loader_fills_this_graph_replacing_its_content(self) -> None:
        source = sdpa_backward_graph()[0]
        target, *_ = sdpa_graph()
        assert target.from_json(source.to_json()).is_good()
        assert [n.get_node_type() for n in target.core_graph.nodes] == [hg.NodeType.SDPA_BWD]

    @pytest.mark.parametrize("loader", ["from_json", "from_binary"])
    def test_undecodable_input_returns_an_error_and_keeps_the_graph(self, loader: str) -> None:
        graph, *_ = sdpa_graph()
        before = graph.to_binary()
        bad: Any = "{not json" if loader == "from_json" else b"\x00\x01 not a graph"
        error = getattr(graph, loader)(bad)
        assert error.is_bad()
        assert error.get_code() == hipdnn.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert graph.to_binary() == before

    @pytest.mark.parametrize("loader", ["from_json", "from_binary"])
    def test_with_a_handle_the_graph_is_ready_for_plans(self, loader: str) -> None:
        graph, *_ = sdpa_graph()
        data = graph.to_json() if loader == "from_json" else graph.to_binary()
        restored = hipdnn.Graph()
        assert getattr(restored, loader)(hipdnn.create_handle(), data).is_good()
        assert restored.create_execution_plans().is_good()
        assert restored.check_support().is_good()
        assert restored.build_plans().is_good()

    def test_loader_argument_count(self) -> None:
        with pytest.raises(TypeError):
            hipdnn.Graph().from_json()
        with pytest.raises(TypeError):
            hipdnn.Graph().from_binary(1, 2, 3)

    def test_a_destroyed_handle_raises(self) -> None:
        handle = hipdnn.create_handle()
        hipdnn.destroy_handle(handle)
        graph, *_ = sdpa_graph()
        with pytest.raises(RuntimeError, match="Handle has been destroyed"):
            hipdnn.Graph().from_json(handle, graph.to_json())

    def test_serializing_an_invalid_graph_raises_runtime_error(self) -> None:
        graph, q, *_ = sdpa_graph()
        q.set_dim([2, 8, 16]).set_stride([128, 16, 1])
        for method in (graph.to_json, graph.to_binary):
            with pytest.raises(RuntimeError) as caught:
                method()
            assert isinstance(caught.value, hg.HipdnnError)
            assert caught.value.code == hg.ErrorCode.INVALID_VALUE
            assert "rank-4" in caught.value.message

    def test_restored_graph_executes_like_the_original(self) -> None:
        import numpy as np

        graph, q, k, v, o, stats = sdpa_graph(dims=(1, 2, 16))
        restored = hipdnn.Graph()
        assert restored.from_binary(graph.to_binary()).is_good()
        rng = np.random.default_rng(3)
        inputs = {
            t.get_uid(): rng.standard_normal(t.get_dim()).astype(np.float32) for t in (q, k, v)
        }
        results = []
        for g in (graph, restored):
            handle = build_all(g)
            outs = {t.get_uid(): np.zeros(t.get_dim(), np.float32) for t in (o, stats)}
            assert g.execute(handle, {**inputs, **outs}).is_good()
            results.append(outs)
        for uid in results[0]:
            np.testing.assert_array_equal(results[0][uid], results[1][uid])
