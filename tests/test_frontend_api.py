"""hipdnn_graph.frontend: names, Error values, Tensor, Graph configuration, data types and other
op families, as hipDNN's Python bindings define them (ported from hipDNN's wheel tests)."""

from __future__ import annotations

from typing import Any

import pytest
from frontend_cases import float_graph, sdpa_backward_graph, sdpa_graph

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn

# hipDNN's Error.hpp, in order (the wheel's test parses the header; these are its names)
ERROR_CODES = [
    "OK",
    "INVALID_VALUE",
    "HIPDNN_BACKEND_ERROR",
    "ATTRIBUTE_NOT_SET",
    "GRAPH_NOT_SUPPORTED",
    "SHAPE_DEDUCTION_FAILED",
    "INVALID_TENSOR_NAME",
    "INVALID_VARIANT_PACK",
    "GRAPH_EXECUTION_PLAN_CREATION_FAILED",
    "GRAPH_EXECUTION_FAILED",
    "HEURISTIC_QUERY_FAILED",
    "UNSUPPORTED_GRAPH_FORMAT",
    "CUDA_API_FAILED",
    "CUDNN_BACKEND_API_FAILED",
    "INVALID_CUDA_DEVICE",
    "HANDLE_ERROR",
    "NVRTC_COMPILATION_FAILED",
]
# hipDNN's bound DataType members, in binding order
DATA_TYPES = [
    "NOT_SET",
    "FLOAT",
    "HALF",
    "BFLOAT16",
    "DOUBLE",
    "UINT8",
    "INT32",
    "INT8",
    "FP8_E4M3",
    "FP8_E5M2",
    "FP8_E8M0",
    "FP4_E2M1",
    "INT4",
    "FP6_E2M3",
    "FP6_E3M2",
    "INT64",
    "BOOLEAN",
    "FP8_E4M3_FNUZ",
    "FP8_E5M2_FNUZ",
]


class TestEnumsAndErrors:
    def test_error_codes_are_hipdnns_in_order_and_usable_by_error(self) -> None:
        for value, name in enumerate(ERROR_CODES):
            code = getattr(hipdnn.ErrorCode, name)
            assert code.value == value
            error = hipdnn.Error(code, "sentinel")
            assert error.get_code() == code and error.code == code
            assert error.get_message() == "sentinel" == error.err_msg
            assert error.is_good() is (name == "OK")
            assert error.is_bad() is (name != "OK")

    def test_default_error_is_ok(self) -> None:
        error = hipdnn.Error()
        assert error.is_good() and not error.is_bad()
        assert error.get_code() == hipdnn.ErrorCode.OK and error.get_message() == ""

    def test_error_fields_are_writable(self) -> None:
        error = hipdnn.Error()
        error.code = hipdnn.ErrorCode.HANDLE_ERROR
        error.err_msg = "x"
        assert error.is_bad() and error.get_message() == "x"

    def test_data_types_have_hipdnns_values(self) -> None:
        for value, name in enumerate(DATA_TYPES):
            assert getattr(hipdnn.DataType, name).value == value

    def test_binding_only_enums(self) -> None:
        assert [m.name for m in hipdnn.AttentionImplementation] == ["AUTO", "COMPOSITE", "UNIFIED"]
        assert [m.name for m in hipdnn.PluginLoadingMode] == ["ADDITIVE", "ABSOLUTE"]
        assert [m.name for m in hipdnn.TimingQuality] == ["INVALID", "DEVICE_ONLY", "UNSTALLED"]
        assert hipdnn.BehaviorNote.SUPPORTS_EXECUTION_PLAN_SERIALIZATION.value == 4
        assert hipdnn.DiagonalAlignment.BOTTOM_RIGHT.name == "BOTTOM_RIGHT"
        assert hipdnn.BuildPlanPolicy.ALL.value == 1
        assert hipdnn.HeuristicMode.FALLBACK.value == 0

    def test_submodule_holds_the_same_names(self) -> None:
        from hipdnn_graph.frontend import hipdnn_frontend_python as ext

        for name in ext.__all__:
            assert getattr(hipdnn, name) is getattr(ext, name)
        assert callable(ext._get_data_ptr)

    def test_raised_errors_are_both_hipdnn_errors_and_builtin_types(self) -> None:
        with pytest.raises(TypeError) as caught:
            hipdnn.Graph.tensor_like(object())
        assert isinstance(caught.value, hg.HipdnnError)
        assert caught.value.code == hg.ErrorCode.INVALID_VALUE


class TestTensor:
    def test_create_packs_strides_row_major(self) -> None:
        t = hipdnn.Tensor.create([2, 8, 16, 64], hipdnn.DataType.HALF)
        assert t.get_dim() == [2, 8, 16, 64]
        assert t.get_stride() == [8192, 1024, 64, 1]
        assert t.get_data_type() == hipdnn.DataType.HALF
        assert t.get_volume() == 2 * 8 * 16 * 64
        assert not t.has_uid() and not t.get_is_virtual()

    def test_empty_tensor(self) -> None:
        t = hipdnn.Tensor()
        assert t.get_dim() == [] and t.get_data_type() == hipdnn.DataType.NOT_SET
        assert t.get_uid() == 0 and not t.has_uid()

    def test_every_setter_returns_the_same_object(self) -> None:
        t = hipdnn.Tensor()
        calls = [
            ("set_uid", 7),
            ("set_name", "x"),
            ("set_data_type", hipdnn.DataType.FLOAT),
            ("set_dim", [2, 3]),
            ("set_stride", [3, 1]),
            ("set_is_virtual", False),
            ("set_output", True),
            ("set_is_pass_by_value", False),
        ]
        for setter, arg in calls:
            assert getattr(t, setter)(arg) is t
        assert t.clear_uid() is t and not t.has_uid()
        assert (t.get_name(), t.get_dim(), t.get_stride()) == ("x", [2, 3], [3, 1])

    def test_tensors_compare_by_identity(self) -> None:
        a = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        b = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        assert a == a and a != b

    @pytest.mark.parametrize(
        ("value", "data_type", "stored"),
        [
            (True, hipdnn.DataType.BOOLEAN, True),
            (3, hipdnn.DataType.INT64, 3),
            (2**40, hipdnn.DataType.INT64, 2**40),
            (0.5, hipdnn.DataType.FLOAT, 0.5),
        ],
    )
    def test_set_value_infers_the_type(
        self, value: object, data_type: hg.DataType, stored: object
    ) -> None:
        t = hipdnn.Tensor().set_value(value)  # type: ignore[arg-type]
        assert t.get_data_type() == data_type
        assert t.get_value() == stored and type(t.get_value()) is type(stored)
        assert t.get_dim() == [1] and t.get_stride() == [1]
        assert t.get_is_pass_by_value() and not t.get_is_runtime_pass_by_value()

    @pytest.mark.parametrize(
        ("value", "data_type", "stored"),
        [
            (0.1, hipdnn.DataType.DOUBLE, 0.1),
            (0.1, hipdnn.DataType.HALF, 0.0999755859375),
            (0.1, hipdnn.DataType.BFLOAT16, 0.10009765625),
            (0.1, hipdnn.DataType.FLOAT, float(0.1 + 1.4901161193847656e-09)),
            (7, hipdnn.DataType.INT32, 7),
            (255, hipdnn.DataType.UINT8, 255),
            (2.0, hipdnn.DataType.INT64, 2),
            (1, hipdnn.DataType.BOOLEAN, True),
        ],
    )
    def test_set_value_with_a_data_type(
        self, value: object, data_type: hg.DataType, stored: object
    ) -> None:
        t = hipdnn.Tensor().set_value(value, data_type)  # type: ignore[arg-type]
        assert t.get_data_type() == data_type
        assert t.get_value() == stored

    @pytest.mark.parametrize(
        ("value", "data_type", "error"),
        [
            ("1", None, TypeError),
            (None, None, TypeError),
            (1.0, hipdnn.DataType.INT8, ValueError),
            (1.0, hipdnn.DataType.FP8_E4M3, ValueError),
            (256, hipdnn.DataType.UINT8, ValueError),
            (2**31, hipdnn.DataType.INT32, ValueError),
            (2.5, hipdnn.DataType.INT32, ValueError),
            (1.0, 99, ValueError),
        ],
    )
    def test_set_value_rejects(self, value: object, data_type: object, error: type) -> None:
        t = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        with pytest.raises(error) as caught:
            t.set_value(value, data_type)  # type: ignore[arg-type]
        assert isinstance(caught.value, hg.HipdnnError)
        assert t.get_value() is None and t.get_data_type() == hipdnn.DataType.FLOAT

    def test_set_value_needs_a_single_element(self) -> None:
        t = hipdnn.Tensor.create([2, 2], hipdnn.DataType.FLOAT)
        with pytest.raises(ValueError, match="single-element"):
            t.set_value(1.0)
        assert t.get_dim() == [2, 2] and t.get_value() is None
        assert hipdnn.Tensor.create([1, 1], hipdnn.DataType.FLOAT).set_value(1.0).get_dim() == [1]

    def test_validate_returns_an_error(self) -> None:
        assert hipdnn.Tensor.create([2, 3], hipdnn.DataType.FLOAT).validate().is_good()
        error = hipdnn.Tensor().set_name("a").validate()
        assert error.get_code() == hipdnn.ErrorCode.ATTRIBUTE_NOT_SET
        assert error.get_message() == "Tensor a does not have a data type set"
        error = hipdnn.Tensor.create([2, 0], hipdnn.DataType.FLOAT).set_name("b").validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == "Tensor b must have only positive dimensions"

    def test_node_outputs_are_tensors(self) -> None:
        graph, *_, o, stats = sdpa_graph()
        assert isinstance(o, hipdnn.Tensor) and isinstance(stats, hipdnn.Tensor)
        assert o.validate().get_code() == hipdnn.ErrorCode.ATTRIBUTE_NOT_SET  # not inferred yet
        assert graph.validate().is_good()
        assert o.validate().is_good() and o.get_dim() == [2, 8, 16, 64]


class TestGraphConfiguration:
    def test_setters_chain_and_getters_read_back(self) -> None:
        g = hipdnn.Graph()
        result = (
            g.set_name("chained")
            .set_io_data_type(hipdnn.DataType.HALF)
            .set_intermediate_data_type(hipdnn.DataType.FLOAT)
            .set_compute_data_type(hipdnn.DataType.DOUBLE)
        )
        assert result is g
        assert g.get_name() == "chained"
        assert g.get_io_data_type() == hipdnn.DataType.HALF
        assert g.get_intermediate_data_type() == hipdnn.DataType.FLOAT
        assert g.get_compute_data_type() == hipdnn.DataType.DOUBLE

    def test_preferred_engine_by_name_id_and_none(self) -> None:
        g = hipdnn.Graph()
        assert g.get_preferred_engine_id_ext() is None
        engine = g.set_preferred_engine_id_ext(
            "NUMPY_REFERENCE_ENGINE"
        ).get_preferred_engine_id_ext()
        assert engine == hg.backend.engine_id("NUMPY_REFERENCE_ENGINE")
        assert g.set_preferred_engine_id_ext(5).get_preferred_engine_id_ext() == 5
        assert g.set_preferred_engine_id_ext().get_preferred_engine_id_ext() is None

    def test_preferred_engine_takes_any_name_and_empty_clears(self) -> None:
        """hipDNN's binding hashes any name to its id (engines it has not loaded included) and
        clears the preference for ``""`` (its test_engine_id_overloads.py); the facade does the
        same where the core Graph refuses a name no registered engine has."""
        g = hipdnn.Graph()
        assert g.set_preferred_engine_id_ext("MIOPEN_ENGINE") is g
        assert g.get_preferred_engine_id_ext() == hg.backend.engine_id("MIOPEN_ENGINE")
        other = g.set_preferred_engine_id_ext("ENGINE_A").get_preferred_engine_id_ext()
        assert other == hg.backend.engine_id("ENGINE_A") != hg.backend.engine_id("MIOPEN_ENGINE")
        assert g.set_preferred_engine_id_ext("").get_preferred_engine_id_ext() is None
        with pytest.raises(hg.HipdnnError, match="Unknown engine name 'MIOPEN_ENGINE'"):
            hg.Graph().set_preferred_engine_id_ext("MIOPEN_ENGINE")

    def test_tensor_and_tensor_like_are_static(self) -> None:
        original = hipdnn.Tensor.create([4, 8, 16], hipdnn.DataType.FLOAT).set_uid(3).set_name("o")
        assert hipdnn.Graph.tensor(original) is original
        copy = hipdnn.Graph.tensor_like(original)
        assert isinstance(copy, hipdnn.Tensor) and copy is not original
        assert copy.get_dim() == [4, 8, 16] and copy.get_stride() == [128, 16, 1]
        assert copy.get_data_type() == hipdnn.DataType.FLOAT
        assert not copy.has_uid() and copy.get_name() == ""
        assert hipdnn.Graph().tensor_like(original, "named").get_name() == "named"
        with pytest.raises(TypeError):
            hipdnn.Graph.tensor([1, 2])  # type: ignore[arg-type]

    def test_node_methods_return_tuples_and_name_outputs(self) -> None:
        *_, o, stats = sdpa_graph()
        assert stats is not None
        assert o.get_name().endswith("::O") and stats.get_name().endswith("::Stats")
        *_, dq, dk, dv = sdpa_backward_graph()
        assert [t.get_name().split("::")[1] for t in (dq, dk, dv)] == ["dQ", "dK", "dV"]

    def test_stats_are_none_unless_generated(self) -> None:
        _, *_, stats = sdpa_graph(attributes=hipdnn.SdpaAttributes())
        assert stats is None
        _, *_, stats = sdpa_graph(attributes=hipdnn.SdpaAttributes().set_generate_stats(False))
        assert stats is None

    def test_sdpa_checks_the_attributes_type(self) -> None:
        q = hipdnn.Tensor.create([1, 1, 4, 8], hipdnn.DataType.FLOAT)
        with pytest.raises(TypeError):
            float_graph().sdpa(q, q, q, hipdnn.SdpaBackwardAttributes())  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            float_graph().sdpa_backward(q, q, q, q, q, q, hipdnn.SdpaAttributes())  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            float_graph().sdpa(q, "k", q, hipdnn.SdpaAttributes())  # type: ignore[arg-type]

    def test_the_caller_attributes_are_left_as_they_were(self) -> None:
        attributes = hipdnn.SdpaAttributes()
        sdpa_graph(attributes=attributes)
        assert attributes.get_q() is None and attributes.generate_stats is None


class TestOtherOpFamilies:
    @pytest.mark.parametrize(
        "name",
        [
            "checkNoDuplicateTensorIds",
            "topologicallySortGraph",
        ],
    )
    def test_graph_methods_name_the_op(self, name: str) -> None:
        graph = hipdnn.Graph()
        assert not hasattr(graph, name)
        with pytest.raises(hg.NotSupportedError, match=rf"Graph\.{name}\(\)") as caught:
            getattr(graph, name)
        assert caught.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED

    def test_module_names_of_hipdnns_bindings_are_bound(self) -> None:
        for name in ("HipEvent", "HipStallGate", "hip_can_use_stream_wait_value", "TuneMode",
                     "AutotuneConfig", "AutotuneResult", "EngineSweepSpec"):  # fmt: skip
            assert hasattr(hipdnn, name), name

    def test_sdpa_methods_exist(self) -> None:
        assert hasattr(hipdnn.Graph, "sdpa") and hasattr(hipdnn.Graph, "sdpa_backward")

    def test_every_op_family_of_hipdnns_bindings_is_bound(self) -> None:
        for name in ("resample", "resample_fwd", "resample_bwd", "block_scale_quantize",
                     "block_scale_dequantize", "custom_op", "moe_grouped_matmul"):  # fmt: skip
            assert hasattr(hipdnn.Graph, name), name
        for name in ("BlockScaleQuantizeAttributes", "ResampleMode", "PaddingMode"):
            assert hasattr(hipdnn, name), name

    def test_unknown_names_are_plain_attribute_errors(self) -> None:
        with pytest.raises(AttributeError) as caught:
            hipdnn.Graph().no_such_method  # noqa: B018
        assert not isinstance(caught.value, hg.HipdnnError)


@pytest.mark.parametrize("data_type", [hipdnn.DataType.HALF, hipdnn.DataType.BFLOAT16])
class TestNonFloatDataTypes:
    """An SDPA graph whose io type is HALF or BFLOAT16 (compute FLOAT) validates, infers its
    outputs' types from the graph, lowers and round-trips."""

    def _graph(self, data_type: hg.DataType) -> tuple[hipdnn.Graph, Any, Any]:
        graph = hipdnn.Graph().set_io_data_type(data_type)
        graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
        graph.set_compute_data_type(hipdnn.DataType.FLOAT)
        q = hipdnn.Tensor().set_dim([1, 2, 8, 16]).set_stride([256, 128, 16, 1])  # type unset
        o, stats = graph.sdpa(q, q, q, hipdnn.SdpaAttributes().set_generate_stats(True))
        o.set_output(True)
        return graph, q, (o, stats)

    def test_validates_and_fills_types(self, data_type: hg.DataType) -> None:
        graph, q, (o, stats) = self._graph(data_type)
        assert graph.validate().is_good()
        assert q.get_data_type() == data_type  # a graph input takes the io type
        assert o.get_data_type() == data_type  # a real output too
        assert stats.get_data_type() == hipdnn.DataType.FLOAT  # a virtual one the intermediate

    def test_builds_and_round_trips(self, data_type: hg.DataType) -> None:
        graph, *_ = self._graph(data_type)
        assert graph.build_operation_graph(hipdnn.create_handle()).is_good()
        restored = hipdnn.Graph()
        assert restored.from_binary(graph.to_binary()).is_good()
        assert restored.get_io_data_type() == data_type
        assert restored.to_json() == graph.to_json()
