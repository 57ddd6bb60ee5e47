"""The backend registry: lazy entry-point loading, broken plugins, register_backend, isolation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import (
    ENTRY_POINT_GROUP,
    Backend,
    Engine,
    Registry,
    Support,
    current_registry,
    engine_id,
    isolated_registry,
    register_backend,
)
from hipdnn_graph.backend import registry as registry_module


@dataclass
class FakeEngine:
    name: str
    priority: int = 10
    array_kind: str = "numpy"

    def check(self, graph: hg.Graph) -> Support:
        return Support.no("fake")

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> Any:
        raise NotImplementedError


@dataclass
class FakeBackend:
    name: str
    engine_names: list[str] = field(default_factory=lambda: ["FAKE_ENGINE"])

    def engines(self) -> list[FakeEngine]:
        return [FakeEngine(n) for n in self.engine_names]


@dataclass
class FakeEntryPoint:
    """Quacks like ``importlib.metadata.EntryPoint`` (name, value, load)."""

    name: str
    value: str
    loader: Callable[[], Any]
    loads: int = 0

    def load(self) -> Any:
        self.loads += 1
        return self.loader()


def _import_missing() -> Any:
    import hipdnn_no_such_plugin_module  # type: ignore[import-not-found]  # noqa: F401

    raise AssertionError("unreachable")


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeEntryPoint]]:
    """Replace the installed entry points of the group with a list the test fills."""
    points: list[FakeEntryPoint] = []

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        assert group == ENTRY_POINT_GROUP
        return list(points)

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    yield points


# ----- the installed plugins -----
def test_numpy_backend_is_installed_through_its_entry_point() -> None:
    infos = {info.name: info for info in hg.list_backends()}
    assert "numpy" in infos
    numpy_info = infos["numpy"]
    assert numpy_info.loaded and numpy_info.error is None
    assert numpy_info.engines == ["NUMPY_REFERENCE_ENGINE"]
    assert numpy_info.source == "hipdnn_graph_numpy_reference:create_backend"
    engine = current_registry().find_engine("NUMPY_REFERENCE_ENGINE")
    assert engine is not None and isinstance(engine, Engine)
    assert current_registry().find_engine("NO_SUCH_ENGINE") is None


def test_backend_objects_satisfy_the_protocols() -> None:
    backend = next(b for b in current_registry().backends() if b.name == "numpy")
    assert isinstance(backend, Backend)
    for engine in backend.engines():
        assert isinstance(engine, Engine)
        assert engine.array_kind in ("numpy", "torch")


def test_engine_id_is_fnv1a_64() -> None:
    assert engine_id("") == 0xCBF29CE484222325
    assert engine_id("a") == 0xAF63DC4C8601EC8C  # published FNV-1a 64 test vector
    assert engine_id("NUMPY_REFERENCE_ENGINE") == 0xE722795AD5156F59
    assert 0 <= engine_id("x" * 1000) < 2**64


# ----- lazy loading and broken plugins -----
def test_entry_points_are_loaded_lazily_and_once(fake_entry_points: list[FakeEntryPoint]) -> None:
    point = FakeEntryPoint("lazy", "lazy_mod:create", lambda: lambda: FakeBackend("lazy"))
    fake_entry_points.append(point)
    registry = Registry()
    assert point.loads == 0  # creating a registry imports nothing
    assert [b.name for b in registry.backends()] == ["lazy"]
    assert point.loads == 1
    registry.engines()
    registry.infos()
    assert point.loads == 1  # loaded once per registry


def test_entry_point_may_name_a_backend_object(fake_entry_points: list[FakeEntryPoint]) -> None:
    backend = FakeBackend("object", ["OBJECT_ENGINE"])
    fake_entry_points.append(FakeEntryPoint("object", "mod:BACKEND", lambda: backend))
    registry = Registry()
    assert registry.backends() == [backend]
    assert registry.infos()[0].engines == ["OBJECT_ENGINE"]


def test_entry_point_may_name_a_backend_class(fake_entry_points: list[FakeEntryPoint]) -> None:
    class ClassBackend:
        name = "class"

        def engines(self) -> list[FakeEngine]:
            return [FakeEngine("CLASS_ENGINE")]

    fake_entry_points.append(FakeEntryPoint("class", "mod:ClassBackend", lambda: ClassBackend))
    registry = Registry()
    (backend,) = registry.backends()
    assert isinstance(backend, ClassBackend)
    assert registry.infos()[0].engines == ["CLASS_ENGINE"]


def test_plugin_that_fails_to_import_is_skipped_with_a_warning(
    fake_entry_points: list[FakeEntryPoint],
) -> None:
    fake_entry_points.append(FakeEntryPoint("a_broken", "hipdnn_no_such:create", _import_missing))
    fake_entry_points.append(FakeEntryPoint("good", "good:create", lambda: FakeBackend("good")))
    with isolated_registry() as registry:
        with pytest.warns(RuntimeWarning, match=r"'a_broken' \(hipdnn_no_such:create\) failed"):
            names = [b.name for b in registry.backends()]
        assert names == ["good"]  # the broken one does not take the others down
        infos = {info.name: info for info in hg.list_backends()}
    broken = infos["a_broken"]
    assert not broken.loaded
    assert broken.source == "hipdnn_no_such:create"
    assert broken.error is not None
    assert broken.error.startswith("ModuleNotFoundError: ")
    assert "hipdnn_no_such_plugin_module" in broken.error
    assert broken.engines == []
    assert infos["good"].loaded and infos["good"].engines == ["FAKE_ENGINE"]


@pytest.mark.parametrize(
    ("loader", "error"),
    [
        (lambda: 42, "TypeError: bad:create did not produce a Backend (got int)"),
        (lambda: lambda: object(), "TypeError: bad:create did not produce a Backend (got object)"),
        (lambda: lambda: 1 / 0, "ZeroDivisionError: division by zero"),
    ],
    ids=["not-callable", "factory-returns-junk", "factory-raises"],
)
def test_plugin_that_does_not_produce_a_backend_is_listed_with_its_error(
    fake_entry_points: list[FakeEntryPoint], loader: Callable[[], Any], error: str
) -> None:
    fake_entry_points.append(FakeEntryPoint("bad", "bad:create", loader))
    registry = Registry()
    with pytest.warns(RuntimeWarning, match="failed to load and is skipped"):
        assert registry.backends() == []
    (info,) = registry.infos()
    assert (info.name, info.error, info.loaded) == ("bad", error, False)


def test_registry_without_entry_points_is_empty(fake_entry_points: list[FakeEntryPoint]) -> None:
    fake_entry_points.append(FakeEntryPoint("x", "x:y", lambda: FakeBackend("x")))
    with isolated_registry(load_entry_points=False) as registry:
        assert registry.backends() == []
        assert registry.engines() == []
        assert hg.list_backends() == []


# ----- register_backend -----
def test_register_backend_adds_engines_and_reports_runtime_source() -> None:
    with isolated_registry(load_entry_points=False) as registry:
        backend = FakeBackend("mine", ["MINE_A", "MINE_B"])
        assert hg.register_backend(backend) is backend
        assert [e.name for e in registry.engines()] == ["MINE_A", "MINE_B"]
        (info,) = hg.list_backends()
        assert (info.name, info.engines, info.source, info.error) == (
            "mine",
            ["MINE_A", "MINE_B"],
            "runtime",
            None,
        )


def test_register_backend_refuses_duplicates_unless_replacing() -> None:
    with isolated_registry(load_entry_points=False) as registry:
        register_backend(FakeBackend("dup", ["OLD"]))
        with pytest.raises(hg.HipdnnError) as info:
            register_backend(FakeBackend("dup", ["NEW"]))
        assert info.value.code == hg.ErrorCode.INVALID_VALUE
        assert str(info.value) == "A backend named 'dup' is already registered (pass replace=True)"
        assert [e.name for e in registry.engines()] == ["OLD"]
        register_backend(FakeBackend("dup", ["NEW"]), replace=True)
        assert [e.name for e in registry.engines()] == ["NEW"]
        assert len(registry.backends()) == 1


def test_register_backend_duplicates_an_entry_point_backend() -> None:
    with (
        isolated_registry(),
        pytest.raises(hg.HipdnnError, match="'numpy' is already registered"),
    ):
        register_backend(FakeBackend("numpy"))


@pytest.mark.parametrize("junk", [object(), "numpy", 3], ids=["object", "str", "int"])
def test_register_backend_refuses_non_backends(junk: Any) -> None:
    with isolated_registry(load_entry_points=False), pytest.raises(hg.HipdnnError) as info:
        register_backend(junk)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert str(info.value).startswith("register_backend() expects a Backend (name and engines()")


def test_unregister_removes_a_backend_and_tolerates_absent_names() -> None:
    with isolated_registry(load_entry_points=False) as registry:
        register_backend(FakeBackend("gone"))
        registry.unregister("gone")
        registry.unregister("never-there")
        assert registry.backends() == [] and registry.infos() == []


# ----- isolation -----
def test_isolated_registries_do_not_leak_and_nest() -> None:
    outer_before = [info.name for info in hg.list_backends()]
    with isolated_registry(load_entry_points=False) as outer:
        register_backend(FakeBackend("outer"))
        with isolated_registry(load_entry_points=False) as inner:
            assert current_registry() is inner
            assert hg.list_backends() == []
            register_backend(FakeBackend("inner"))
            assert [b.name for b in inner.backends()] == ["inner"]
        assert current_registry() is outer
        assert [b.name for b in outer.backends()] == ["outer"]
    assert [info.name for info in hg.list_backends()] == outer_before


def test_isolated_registry_is_restored_after_an_exception() -> None:
    before = current_registry()
    with pytest.raises(KeyError), isolated_registry(load_entry_points=False):
        raise KeyError("boom")
    assert current_registry() is before


def test_isolated_registry_with_entry_points_loads_installed_plugins() -> None:
    with isolated_registry() as registry:
        assert registry.find_engine("NUMPY_REFERENCE_ENGINE") is not None
        assert [i.name for i in registry.infos()] == [
            i.name for i in registry_module._default.infos()
        ]


def test_a_backends_folder_in_the_working_directory_hides_no_engine(tmp_path: Any) -> None:
    """The built-in plugins install under names of their own, so a user's ``backends`` package
    in the working directory (first on ``sys.path``) cannot shadow them."""
    import subprocess
    import sys

    shadow = tmp_path / "backends"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the user package named backends')\n")
    script = (
        "import hipdnn_graph as hg\n"
        "print(sorted(i.name for i in hg.list_backends() if i.loaded and i.engines))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.strip()
    assert "'numpy'" in loaded and "'torch'" in loaded, loaded
