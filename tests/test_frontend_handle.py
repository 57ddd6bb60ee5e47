"""hipdnn_graph.frontend: handles, streams, engine metadata and plugin loading (ported from the
behaviours of hipDNN's wheel tests, on a host handle)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn

torch_cuda = False
try:
    import torch

    torch_cuda = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is a test dependency
    pass

NUMPY_ENGINE = "NUMPY_REFERENCE_ENGINE"


@pytest.mark.parametrize("factory", [hipdnn.Handle, hipdnn.create_handle])
class TestHandle:
    def test_valid_address(self, factory: Callable[..., Any]) -> None:
        handle = factory()
        assert int(handle) != 0 and handle.get() == int(handle)
        assert "hipdnn_frontend.Handle at" in repr(handle)

    def test_stream_zero(self, factory: Callable[..., Any]) -> None:
        assert factory(0).get_stream() == 0


class TestStreamsAndDestroy:
    @pytest.mark.parametrize(
        ("set_stream", "get_stream"),
        [
            (lambda h, s: h.set_stream(s), lambda h: h.get_stream()),
            (hipdnn.set_stream, hipdnn.get_stream),
        ],
        ids=["method", "module_fn"],
    )
    def test_set_and_get(self, set_stream: Any, get_stream: Any) -> None:
        handle = hipdnn.create_handle()
        set_stream(handle, 0)
        assert get_stream(handle) == 0

    @pytest.mark.skipif(torch_cuda, reason="a device gives real streams")
    def test_host_handle_has_only_stream_zero(self) -> None:
        handle = hipdnn.create_handle()
        with pytest.raises(RuntimeError, match="only stream is 0") as caught:
            handle.set_stream(0x1234)
        assert caught.value.code == hg.ErrorCode.HANDLE_ERROR  # type: ignore[attr-defined]
        assert handle.get_stream() == 0
        with pytest.raises(RuntimeError):
            hipdnn.Handle(5)

    def test_stream_type(self) -> None:
        with pytest.raises(RuntimeError, match="expected an int or a torch stream"):
            hipdnn.create_handle("0")
        with pytest.raises(RuntimeError, match="bool"):
            hipdnn.create_handle(True)

    @pytest.mark.parametrize(
        "use",
        [
            lambda h: h.get_stream(),
            lambda h: h.set_stream(0),
            lambda h: h.get(),
            lambda h: int(h),
            lambda h: h.get_engine_info(0),
            lambda h: h.get_loaded_engine_plugin_paths(),
            hipdnn.get_loaded_engine_plugin_paths,
            lambda h: h.engine_id_to_name(0),
        ],
    )
    def test_destroyed_handle_raises(self, use: Callable[[Any], Any]) -> None:
        handle = hipdnn.create_handle()
        hipdnn.destroy_handle(handle)
        assert "destroyed" in repr(handle)
        with pytest.raises(RuntimeError, match="Handle has been destroyed"):
            use(handle)


class TestEngines:
    def test_engine_info_for_a_loaded_engine(self) -> None:
        engine = (
            hipdnn.Graph().set_preferred_engine_id_ext(NUMPY_ENGINE).get_preferred_engine_id_ext()
        )
        assert engine is not None
        info = hipdnn.create_handle().get_engine_info(engine)
        assert isinstance(info, hipdnn.EngineInfo)
        assert (info.engine_id, info.engine_name) == (engine, NUMPY_ENGINE)
        backend = next(b for b in hg.list_backends() if NUMPY_ENGINE in b.engines)
        assert info.plugin_name == backend.name
        assert info.version and info.type == "HIPDNN_PLUGIN_TYPE_ENGINE"
        with pytest.raises(AttributeError):
            info.version = "overridden"  # type: ignore[misc]

    def test_unknown_engine(self) -> None:
        with pytest.raises(IndexError, match="Engine ID is not loaded") as caught:
            hipdnn.create_handle().get_engine_info(9223372036854775807)
        assert isinstance(caught.value, hg.HipdnnError)
        assert hipdnn.engine_id_to_name(9223372036854775807) == ""

    def test_handle_engine_id_to_name_raises_for_an_unknown_id(self) -> None:
        """hipDNN's Handle.engine_id_to_name raises where the module-level lookup gives ""."""
        with pytest.raises(IndexError, match=r"^Engine ID is not loaded$") as caught:
            hipdnn.create_handle().engine_id_to_name(9223372036854775807)
        assert isinstance(caught.value, hg.HipdnnError)
        engine = hg.backend.engine_id(NUMPY_ENGINE)
        handle = hipdnn.create_handle()
        assert handle.engine_id_to_name(engine) == NUMPY_ENGINE
        assert handle.engine_id_to_name(engine) == handle.get_engine_info(engine).engine_name
        assert handle.engine_id_to_name(engine) == hipdnn.engine_id_to_name(engine)

    def test_engine_id_to_name_inverts_the_id(self) -> None:
        for info in hg.list_backends():
            for name in info.engines:
                assert hipdnn.engine_id_to_name(hg.backend.engine_id(name)) == name

    @pytest.mark.parametrize(
        "get_paths",
        [lambda h: h.get_loaded_engine_plugin_paths(), hipdnn.get_loaded_engine_plugin_paths],
    )
    def test_loaded_plugin_paths(self, get_paths: Callable[[Any], Any]) -> None:
        paths = get_paths(hipdnn.create_handle())
        assert isinstance(paths, list) and all(isinstance(p, str) for p in paths)
        assert "hipdnn_graph_numpy_reference:create_backend" in paths

    def test_set_plugin_paths_absolute_then_additive(self) -> None:
        with hg.backend.isolated_registry():
            hipdnn.set_engine_plugin_paths(
                ["hipdnn_graph_numpy_reference:create_backend"], hipdnn.PluginLoadingMode.ABSOLUTE
            )
            names = [e for info in hg.list_backends() for e in info.engines]
            assert names == [NUMPY_ENGINE]
            hipdnn.set_engine_plugin_paths(["hipdnn_graph_torch_rocm:create_backend"])
            names = [e for info in hg.list_backends() for e in info.engines]
            assert NUMPY_ENGINE in names and "TORCH_SDPA_MATH_ENGINE" in names

    @pytest.mark.parametrize("path", ["no_such_module:factory", "hipdnn_graph:Graph", "json:dumps"])
    def test_set_plugin_paths_failure_leaves_the_registry(self, path: str) -> None:
        with hg.backend.isolated_registry():
            before = [info.name for info in hg.list_backends()]
            with pytest.raises(RuntimeError, match="Failed to set engine plugin paths"):
                hipdnn.set_engine_plugin_paths([path], hipdnn.PluginLoadingMode.ABSOLUTE)
            assert [info.name for info in hg.list_backends()] == before

    @pytest.mark.skipif(torch_cuda, reason="counts devices when there are some")
    def test_no_device(self) -> None:
        assert hipdnn.hip_get_device_count() == 0
        hipdnn.hip_stream_synchronize()
        hipdnn.hip_device_synchronize()
