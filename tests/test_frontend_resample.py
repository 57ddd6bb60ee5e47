"""hipDNN's Python-binding tests of the resample family (``frontend_wheel_package/tests/
test_resample.py``), ported as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``;
hipDNN's GPU tests build the operation graph here and plan it on a family engine (torch eager, or
the NumPy reference without torch)."""

from __future__ import annotations

import importlib.util

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _resample_fwd_attributes() -> hipdnn.ResampleFwdAttributes:
    return (
        hipdnn.ResampleFwdAttributes()
        .set_resample_mode(hipdnn.ResampleMode.MAXPOOL)
        .set_padding_mode(hipdnn.PaddingMode.ZERO_PAD)
        .set_pre_padding([0, 0])
        .set_post_padding([0, 0])
        .set_stride([2, 2])
        .set_window([2, 2])
    )


def _resample_bwd_attributes() -> hipdnn.ResampleBwdAttributes:
    return (
        hipdnn.ResampleBwdAttributes()
        .set_resample_mode(hipdnn.ResampleMode.AVGPOOL_EXCLUDE_PADDING)
        .set_padding_mode(hipdnn.PaddingMode.ZERO_PAD)
        .set_pre_padding([1, 1])
        .set_post_padding([1, 1])
        .set_stride([2, 2])
        .set_window([3, 3])
    )


def _plans_on_a_family_engine(graph: hipdnn.Graph) -> None:
    """The operation graph builds and plans on the torch eager engine (the NumPy reference
    without torch)."""
    handle = hipdnn.create_handle()
    assert graph.validate().is_good()
    assert graph.build_operation_graph(handle).is_good()
    error = graph.create_execution_plans()
    if error.is_good():
        error = graph.check_support()
    assert error.is_good(), error.get_message()
    assert graph.build_plans().is_good()
    torch = importlib.util.find_spec("torch") is not None
    assert graph.get_plan_name() == ("TORCH_EAGER_ENGINE" if torch else "NUMPY_REFERENCE_ENGINE")


class TestResample:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU TestResample.test_execution_succeeds."""
        graph = float_graph()
        x = hipdnn.Tensor.create([1, 3, 4, 4], hipdnn.DataType.FLOAT)
        outputs = graph.resample(x, _resample_fwd_attributes())
        assert isinstance(outputs, tuple)
        assert len(outputs) == 2
        y, index = outputs
        assert index is None  # requires set_generate_index(True), not requested here
        y.set_output(True)
        assert isinstance(y, hipdnn.Tensor)
        _plans_on_a_family_engine(graph)
        assert y.get_dim() == [1, 3, 2, 2]

    def test_index_is_made_for_maxpool_when_asked(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([1, 3, 4, 4], hipdnn.DataType.FLOAT)
        y, index = graph.resample(x, _resample_fwd_attributes().set_generate_index(True))
        assert isinstance(index, hipdnn.Tensor)
        assert index.get_data_type() == hipdnn.DataType.INT32
        y.set_output(True)
        index.set_output(True)
        assert graph.validate().is_good()
        assert index.get_dim() == [1, 3, 2, 2]


class TestResampleFwd:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU TestResampleFwd.test_execution_succeeds."""
        graph = float_graph()
        x = hipdnn.Tensor.create([1, 3, 4, 4], hipdnn.DataType.FLOAT)
        y = graph.resample_fwd(x, _resample_fwd_attributes())
        y.set_output(True)
        y.set_data_type(hipdnn.DataType.FLOAT)
        _plans_on_a_family_engine(graph)


class TestResampleBwd:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU TestResampleBwd.test_execution_succeeds."""
        graph = float_graph()
        dy = hipdnn.Tensor.create([1, 3, 16, 16], hipdnn.DataType.FLOAT)
        dx = graph.resample_bwd(dy, _resample_bwd_attributes())
        dx.set_output(True)
        dx.set_data_type(hipdnn.DataType.FLOAT)
        _plans_on_a_family_engine(graph)
        assert dx.get_dim() == [1, 3, 31, 31]

    def test_builds_operation_graph_with_maxpool_index(self) -> None:
        """resample_bwd's optional ``index`` argument accepts a real index tensor."""
        graph = float_graph()
        attrs = (
            hipdnn.ResampleBwdAttributes()
            .set_resample_mode(hipdnn.ResampleMode.MAXPOOL)
            .set_padding_mode(hipdnn.PaddingMode.ZERO_PAD)
            .set_pre_padding([0, 0])
            .set_post_padding([0, 0])
            .set_stride([2, 2])
            .set_window([2, 2])
        )
        dy = hipdnn.Tensor.create([1, 3, 16, 16], hipdnn.DataType.FLOAT)
        index = hipdnn.Tensor.create([1, 3, 16, 16], hipdnn.DataType.INT32)
        dx = graph.resample_bwd(dy, attrs, index=index)
        dx.set_output(True)
        dx.set_data_type(hipdnn.DataType.FLOAT)
        _plans_on_a_family_engine(graph)
        assert dx.get_dim() == [1, 3, 32, 32]

    def test_maxpool_without_index_fails_validation(self) -> None:
        graph = float_graph()
        dy = hipdnn.Tensor.create([1, 3, 16, 16], hipdnn.DataType.FLOAT)
        attrs = _resample_bwd_attributes().set_resample_mode(hipdnn.ResampleMode.MAXPOOL)
        graph.resample_bwd(dy, attrs).set_output(True)
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.ATTRIBUTE_NOT_SET
        assert error.get_message() == (
            "ResampleBwdNode missing Index input for MAXPOOL pre-validation"
        )


class TestResampleAttributeBindings:
    """Every resample attribute binding round-trips through its getter (no GPU required)."""

    def test_forward_methods_are_callable(self) -> None:
        x = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        y = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        index = hipdnn.Tensor.create([1], hipdnn.DataType.INT32)
        call_attribute_methods(
            hipdnn.ResampleFwdAttributes(),
            (
                ("set_name", ("resample_fwd",), "get_name", "resample_fwd"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_y", (y,), "get_y", y),
                ("set_index", (index,), "get_index", index),
                ("set_pre_padding", ([1],), "get_pre_padding", [1]),
                ("set_post_padding", ([2],), "get_post_padding", [2]),
                ("set_stride", ([3],), "get_stride", [3]),
                ("set_window", ([4],), "get_window", [4]),
                ("set_resample_mode", (hipdnn.ResampleMode.MAXPOOL,), "get_resample_mode",
                 hipdnn.ResampleMode.MAXPOOL),
                ("set_padding_mode", (hipdnn.PaddingMode.ZERO_PAD,), "get_padding_mode",
                 hipdnn.PaddingMode.ZERO_PAD),
                ("set_generate_index", (True,), "get_generate_index", True),
            ),
        )  # fmt: skip

    def test_backward_methods_are_callable(self) -> None:
        dy = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        index = hipdnn.Tensor.create([1], hipdnn.DataType.INT32)
        dx = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        call_attribute_methods(
            hipdnn.ResampleBwdAttributes(),
            (
                ("set_name", ("resample_bwd",), "get_name", "resample_bwd"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_dy", (dy,), "get_dy", dy),
                ("set_index", (index,), "get_index", index),
                ("set_dx", (dx,), "get_dx", dx),
                ("set_pre_padding", ([1],), "get_pre_padding", [1]),
                ("set_post_padding", ([2],), "get_post_padding", [2]),
                ("set_stride", ([3],), "get_stride", [3]),
                ("set_window", ([4],), "get_window", [4]),
                ("set_resample_mode", (hipdnn.ResampleMode.MAXPOOL,), "get_resample_mode",
                 hipdnn.ResampleMode.MAXPOOL),
                ("set_padding_mode", (hipdnn.PaddingMode.ZERO_PAD,), "get_padding_mode",
                 hipdnn.PaddingMode.ZERO_PAD),
            ),
        )  # fmt: skip

    def test_enum_members_in_binding_order(self) -> None:
        assert [m.name for m in hipdnn.ResampleMode] == [
            "NOT_SET", "MAXPOOL", "AVGPOOL_EXCLUDE_PADDING", "AVGPOOL_INCLUDE_PADDING",
            "BILINEAR", "NEAREST",
        ]  # fmt: skip
        assert [m.name for m in hipdnn.PaddingMode] == [
            "NOT_SET", "NEG_INF_PAD", "ZERO_PAD", "EDGE_VAL_PAD",
        ]  # fmt: skip


class TestResampleRoundTripAndTypes:
    def test_round_trip_and_type_errors(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([1, 3, 4, 4], hipdnn.DataType.FLOAT)
        y, index = graph.resample(x, _resample_fwd_attributes().set_generate_index(True))
        assert index is not None
        y.set_output(True)
        index.set_output(True)
        dy = hipdnn.Tensor.create([1, 3, 2, 2], hipdnn.DataType.FLOAT)
        back = _resample_bwd_attributes().set_resample_mode(hipdnn.ResampleMode.MAXPOOL)
        back.set_pre_padding([0, 0]).set_post_padding([0, 0]).set_window([2, 2])
        graph.resample_bwd(dy, back, index=index).set_output(True)
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        for call in (
            lambda: graph.resample(x, hipdnn.ResampleBwdAttributes()),
            lambda: graph.resample_fwd(x, "attrs"),
            lambda: graph.resample_bwd(dy, _resample_fwd_attributes()),
        ):
            try:
                call()
            except TypeError:
                continue
            raise AssertionError("a resample builder took attributes of the wrong type")
