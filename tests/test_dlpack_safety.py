"""DLPack values that used to abort the process, write into temporaries or resolve stale raw
addresses (issue 23, items 1 and 9), on the core API and hipDNN's API alike."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.backend.dlpack import export_capsule, layout_problem, read_capsule
from hipdnn_graph.frontend.hipdnn_frontend_python import _get_data_ptr

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (1, 1, 4, 8)


def run_script(source: str) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter (an abort there cannot take pytest down)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "backends"), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
    )
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


class Producer:
    """A DLPack producer that is neither NumPy nor torch (only ``__dlpack__``)."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


class CopiesUnlessAsked:
    """Exports a temporary copy unless the consumer passes ``copy=False`` (the array API lets a
    producer copy when ``copy`` is ``None``)."""

    def __init__(self, array: np.ndarray[Any, Any]) -> None:
        self.array = array

    def __dlpack__(self, *, copy: bool | None = None, **kwargs: Any) -> Any:
        source = self.array if copy is False else self.array.copy()
        return source.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


# ----- item 1: layouts torch cannot take are refused before torch sees them -----
NEGATIVE_CORE = """
    import numpy as np, hipdnn_graph as hg
    from test_dlpack_safety import Producer, core_graph
    for engine in ("TORCH_SDPA_MATH_ENGINE", "NUMPY_REFERENCE_ENGINE"):
        g, q, k, v, o = core_graph(engine)
        x = np.ones((1, 1, 4, 8), np.float32)
        backwards = np.ones((1, 1, 4, 8), np.float32)[:, :, ::-1]
        for value in (Producer(backwards), Producer(np.ones((8, 4), np.float32).T[::-1])):
            out = np.zeros_like(x)
            try:
                g.execute({q: value, k: x, v: x, o: out})
            except hg.HipdnnError as err:
                print(engine, err.code.name, "|", err)
            assert not out.any()
"""


def core_graph(engine: str) -> tuple[hg.Graph, Any, Any, Any, Any]:
    """A FLOAT SDPA forward graph built for ``engine``: ``(graph, q, k, v, o)``."""
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=list(SHAPE))
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    o, _ = g.sdpa(q, k, v, generate_stats=False)
    o.set_output(True)
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    return g, q, k, v, o


def test_negative_strides_no_longer_abort_the_core_api() -> None:
    pytest.importorskip("torch")
    done = run_script(NEGATIVE_CORE)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    torch_lines = [line for line in lines if line.startswith("TORCH_SDPA_MATH_ENGINE")]
    assert len(torch_lines) == 2 and len(lines) == 4, done.stdout
    assert all("INVALID_VARIANT_PACK" in line for line in lines)
    assert torch_lines[0].endswith(
        "Variant pack tensor 'Q' (uid 1) has negative strides (32, 32, -8, 1); torch cannot "
        "view memory backwards, so pass a copy (np.ascontiguousarray)"
    )


NEGATIVE_FRONTEND = """
    import numpy as np
    import hipdnn_graph.frontend as hipdnn
    from frontend_cases import sdpa_graph, build_all
    from test_dlpack_safety import Producer
    g, q, k, v, o, stats = sdpa_graph(4, 4, dims=(1, 1, 8))
    g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE")
    handle = build_all(g)
    x = np.ones((1, 1, 4, 8), np.float32)
    out, st = np.zeros_like(x), np.zeros((1, 1, 4, 1), np.float32)
    backwards = np.ones((1, 1, 4, 8), np.float32)[:, :, ::-1]
    error = g.execute(handle, {q: Producer(backwards), k: x, v: x, o: out, stats: st})
    print(g.get_plan_name(), error.get_code().name, "|", error.get_message())
    assert not out.any()
"""


def test_negative_strides_no_longer_abort_the_frontend() -> None:
    pytest.importorskip("torch")
    done = run_script(NEGATIVE_FRONTEND)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("TORCH_SDPA_MATH_ENGINE INVALID_VARIANT_PACK |"), done.stdout
    assert "has negative strides (32, 32, -8, 1)" in done.stdout


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _Type(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Managed(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _Type),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class StridedProducer:
    """Exports ``base`` (float32, on the CPU) with any dims and element strides."""

    def __init__(self, base: np.ndarray[Any, Any], dims: list[int], strides: list[int]) -> None:
        self.base, self.dims, self.strides = base, dims, strides
        self.keep: list[Any] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        dims = (ctypes.c_int64 * len(self.dims))(*self.dims)
        strides = (ctypes.c_int64 * len(self.strides))(*self.strides)
        managed = _Managed(
            data=self.base.ctypes.data,
            device=_Device(1, 0),
            ndim=len(self.dims),
            dtype=_Type(2, 32, 1),
            shape=dims,
            strides=strides,
        )
        self.keep += [dims, strides, managed]
        return _new_capsule(ctypes.addressof(managed), b"dltensor", None)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


OVERFLOW_CORE = """
    import numpy as np, hipdnn_graph as hg
    from hipdnn_graph.backend import as_torch
    from test_dlpack_safety import StridedProducer
    base = np.zeros(64, np.float32)
    for dims, strides in (([4, 2], [2**62, 1]), ([2**62, 4], [1, 1]), ([4, 2], [-2, 1])):
        try:
            as_torch(StridedProducer(base, dims, strides), "'X'")
        except hg.HipdnnError as err:
            print(err.code.name, "|", err)
"""


def test_layouts_torch_aborts_on_are_refused() -> None:
    pytest.importorskip("torch")
    done = run_script(OVERFLOW_CORE)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("INVALID_VARIANT_PACK |") for line in lines)
    assert "whose extent does not fit in 64 bits" in lines[0]
    assert "whose extent does not fit in 64 bits" in lines[1]
    assert "has negative strides (-2, 1)" in lines[2]


def test_layout_problem_rules() -> None:
    base = np.zeros(8, np.float32)
    backwards = read_capsule(export_capsule(base[::-1], copy=False))
    assert backwards is not None and backwards.strides == [-1]
    assert layout_problem(backwards, negative_strides=True) is None  # NumPy takes it
    assert layout_problem(backwards, negative_strides=False) == "has negative strides (-1,)"
    producers = [StridedProducer(base, [0, 2], [-2, 1]), StridedProducer(base, [-1], [1])]
    empty, negative_dim = (read_capsule(export_capsule(p, copy=False)) for p in producers)
    assert empty is not None and layout_problem(empty, negative_strides=False) is None
    assert negative_dim is not None
    assert layout_problem(negative_dim, negative_strides=True) == "has a negative dim in (-1,)"


# ----- item 9: copy=False, so outputs are never written into a temporary -----
@pytest.mark.parametrize("engine", ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"])
def test_core_outputs_through_dlpack_are_written_in_place(engine: str) -> None:
    if engine.startswith("TORCH"):
        pytest.importorskip("torch")
    g, q, k, v, o = core_graph(engine)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    out = np.zeros_like(x)
    g.execute({q: CopiesUnlessAsked(x), k: x, v: x, o: CopiesUnlessAsked(out)})
    want = np.zeros_like(x)
    g.execute({q: x, k: x, v: x, o: want})
    assert out.any()
    np.testing.assert_array_equal(out, want)


def test_core_producer_errors_are_variant_pack_errors_with_their_cause() -> None:
    class Refuses:
        def __dlpack__(self, **kwargs: Any) -> Any:
            raise KeyError("no export today")

    g, q, k, v, o = core_graph("NUMPY_REFERENCE_ENGINE")
    x = np.ones(SHAPE, np.float32)
    with pytest.raises(hg.HipdnnError) as caught:
        g.execute({q: Refuses(), k: x, v: x, o: np.zeros_like(x)})
    assert caught.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert "cannot be read through DLPack" in str(caught.value)
    assert isinstance(caught.value.__cause__, KeyError)


def _frontend_graph() -> tuple[Any, ...]:
    from frontend_cases import build_all, sdpa_graph

    g, q, k, v, o, stats = sdpa_graph(4, 4, dims=(1, 1, 8))
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    return g, build_all(g), q, k, v, o, stats


def test_frontend_outputs_through_dlpack_are_written_in_place() -> None:
    g, handle, q, k, v, o, stats = _frontend_graph()
    x = np.ones(SHAPE, np.float32)
    out, st = np.zeros_like(x), np.zeros((1, 1, 4, 1), np.float32)
    pack = {q: x, k: x, v: x, o: CopiesUnlessAsked(out), stats: CopiesUnlessAsked(st)}
    error = g.execute(handle, pack)
    assert error.is_good(), error.get_message()
    np.testing.assert_array_equal(out, x)  # softmax rows sum to one, V is all ones
    assert st.any()


# ----- item 9: raw addresses follow the tensor's storage as it is now -----
def test_an_address_of_a_re_pointed_tensor_resolves_to_its_new_storage() -> None:
    torch = pytest.importorskip("torch")
    g, handle, q, k, v, o, stats = _frontend_graph()
    x = torch.ones(SHAPE)
    st = torch.zeros(1, 1, 4, 1)
    query = torch.zeros(SHAPE)
    old = _get_data_ptr(query)
    query.set_(torch.full(SHAPE, 3.0))
    value = torch.arange(32, dtype=torch.float32).reshape(SHAPE)
    out = torch.zeros(SHAPE)
    error = g.execute(handle, {q: query.data_ptr(), k: x, v: value, o: out, stats: st})
    assert error.is_good(), error.get_message()
    want = torch.nn.functional.scaled_dot_product_attention(torch.full(SHAPE, 3.0), x, value)
    torch.testing.assert_close(out, want)
    # the storage the old address pointed into is no longer the tensor's: refused, not misread
    error = g.execute(handle, {q: old, k: x, v: value, o: out, stats: st})
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
    assert "not inside memory hipdnn_graph.frontend knows" in error.get_message()


def test_an_address_into_a_freed_storage_is_a_variant_pack_error() -> None:
    torch = pytest.importorskip("torch")
    g, handle, q, k, v, o, stats = _frontend_graph()
    x = torch.ones(SHAPE)
    query = torch.ones(SHAPE)
    # the other buffers first: made after the free, one could take the freed address
    out, lse = torch.zeros(SHAPE), torch.zeros(1, 1, 4, 1)
    address = _get_data_ptr(query)
    query.untyped_storage().resize_(0)
    error = g.execute(handle, {q: address, k: x, v: x, o: out, stats: lse})
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
    assert f"raw address {address:#x}" in error.get_message()
    assert not out.any()


def test_a_tensor_whose_storage_was_freed_is_refused_not_read() -> None:
    torch = pytest.importorskip("torch")
    g, q, k, v, o = core_graph("NUMPY_REFERENCE_ENGINE")
    x = torch.ones(SHAPE)
    query = torch.ones(SHAPE)
    query.untyped_storage().resize_(0)  # the view now reaches memory it does not own
    out = torch.zeros(SHAPE)
    with pytest.raises(hg.HipdnnError) as caught:
        g.execute({q: query, k: x, v: x, o: out})
    assert caught.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert str(caught.value) == (
        "Variant pack tensor 'Q' (uid 1) reaches past the end of its storage (0 bytes: resized "
        "or freed under the view)"
    )
    assert not out.any()


def test_frontend_execute_lets_a_copy_only_producer_s_error_through() -> None:
    """As hipDNN's binding: the variant-pack conversion asks for copy=False, and the producer's
    own BufferError reaches the caller (it is no graph error); outputs stay untouched."""

    class CopyOnly:
        def __init__(self, array: Any) -> None:
            self.array = array

        def __dlpack__(self, *, copy: bool | None = None, **kwargs: Any) -> Any:
            if copy is False:
                raise BufferError("export requires a copy")
            return self.array.copy().__dlpack__(**kwargs)

    g, handle, q, k, v, o, stats = _frontend_graph()
    x = np.ones(SHAPE, np.float32)
    out, st = np.zeros_like(x), np.zeros((1, 1, 4, 1), np.float32)
    with pytest.raises(BufferError, match="export requires a copy"):
        g.execute(handle, {q: x, k: x, v: x, o: CopyOnly(out), stats: st})
    assert not out.any() and not st.any()


def test_a_re_pointed_view_resolves_to_its_new_storage() -> None:
    torch = pytest.importorskip("torch")
    g, handle, q, k, v, o, stats = _frontend_graph()
    x = torch.ones(SHAPE)
    base = torch.zeros(2, *SHAPE)
    query = base[1]  # a view: its own storage is its base's until set_() re-points it
    _get_data_ptr(query)
    query.set_(torch.full(SHAPE, 2.0))
    value = torch.arange(32, dtype=torch.float32).reshape(SHAPE)
    out = torch.zeros(SHAPE)
    pack = {q: query.data_ptr(), k: x, v: value, o: out, stats: torch.zeros(1, 1, 4, 1)}
    error = g.execute(handle, pack)
    assert error.is_good(), error.get_message()
    want = torch.nn.functional.scaled_dot_product_attention(torch.full(SHAPE, 2.0), x, value)
    torch.testing.assert_close(out, want)
