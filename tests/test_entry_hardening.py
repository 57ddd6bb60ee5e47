"""Entry points that must answer bad input with a HipdnnError, never another exception, a crash
or a write into memory the caller did not offer (issue 11, items 1, 7 and 13)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.testing import make_inputs

torch = pytest.importorskip("torch")

ENGINES = ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
DIMS = (1, 2, 8, 4)


def _forward(engine: str | None = None, **tensor: Any) -> tuple[hg.Graph, dict[str, Any]]:
    g = hg.Graph(
        name="fwd",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=list(DIMS), **tensor)
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    o, _ = g.sdpa(q, k, v, name="sdpa", generate_stats=False, attn_scale=0.5)
    o.set_output(True)
    if engine is not None:
        g.set_preferred_engine_id_ext(engine)
    g.build()
    if engine is not None:
        assert g.get_plan_name() == engine
    return g, {"Q": q, "K": k, "V": v, "O": o}


def _inputs(t: dict[str, Any], seed: int = 0) -> dict[Any, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return {t[n]: rng.standard_normal(DIMS).astype(np.float32) for n in ("Q", "K", "V")}


def _reference(pack: dict[Any, Any], t: dict[str, Any]) -> np.ndarray[Any, Any]:
    """torch's own SDPA, in float64, as the independent answer."""
    q, k, v = (torch.from_numpy(np.asarray(pack[t[n]], np.float64)) for n in ("Q", "K", "V"))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.5)
    return o.numpy()


# ----- item 1: read-only outputs, for every engine -----
@pytest.mark.parametrize("engine", ENGINES)
def test_output_over_immutable_bytes_is_refused_and_left_unchanged(engine: str) -> None:
    g, t = _forward(engine)
    blob = bytes(4 * math.prod(DIMS))
    out = np.frombuffer(blob, np.float32).reshape(DIMS)
    pack = {**_inputs(t), t["O"]: out}
    with pytest.raises(hg.HipdnnError) as info:
        g.execute(pack)
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert str(info.value) == "Variant pack output 'sdpa::O' (uid 4) is read-only"
    assert blob == bytes(len(blob))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["numpy", "torch_frombuffer", "torch_from_numpy", "dlpack"])
def test_output_over_read_only_mmap_is_refused_without_crashing(engine: str, kind: str) -> None:
    # before: SIGSEGV (the torch engine wrote through a view of read-only pages)
    code = textwrap.dedent(
        f"""
        import mmap, sys, tempfile, warnings
        import numpy as np, torch
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from test_entry_hardening import _forward, _inputs, DIMS
        import hipdnn_graph as hg
        warnings.simplefilter("ignore")
        g, t = _forward({engine!r})
        f = tempfile.TemporaryFile()
        f.write(b"\\0" * 4 * int(np.prod(DIMS)))
        f.flush()
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        kind = {kind!r}
        if kind == "numpy":
            out = np.frombuffer(m, np.float32).reshape(DIMS)
        elif kind == "torch_frombuffer":
            out = torch.frombuffer(m, dtype=torch.float32).reshape(DIMS)
        elif kind == "torch_from_numpy":
            out = torch.from_numpy(np.frombuffer(m, np.float32).reshape(DIMS))
        else:
            class Producer:  # a DLPack producer that does not say it is read-only
                def __init__(self, t): self.t = t
                def __dlpack__(self, **kw): return self.t.__dlpack__()
                def __dlpack_device__(self): return self.t.__dlpack_device__()
            out = Producer(torch.frombuffer(m, dtype=torch.float32).reshape(DIMS))
        try:
            g.execute({{**_inputs(t), t["O"]: out}})
            print("written")
        except hg.HipdnnError as exc:
            print(exc.code.name, exc)
        print(m[:].count(0) == len(m))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "INVALID_VARIANT_PACK Variant pack output 'sdpa::O' (uid 4) is read-only",
        "True",
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_writable_mmap_output_is_accepted_and_written(engine: str) -> None:
    import mmap

    g, t = _forward(engine)
    m = mmap.mmap(-1, 4 * math.prod(DIMS))
    out = np.frombuffer(m, np.float32).reshape(DIMS)
    pack = {**_inputs(t), t["O"]: out}
    g.execute(pack)
    np.testing.assert_allclose(out, _reference(pack, t), rtol=1e-5, atol=1e-6)


# ----- item 7: torch tensors the NumPy engine cannot view, workspace, arguments -----
@pytest.mark.parametrize("engine", ENGINES)
def test_inputs_that_require_grad_or_carry_the_negative_bit_are_read_correctly(
    engine: str,
) -> None:
    g, t = _forward(engine)
    pack = _inputs(t)
    q = torch.from_numpy(-pack[t["Q"]]).requires_grad_(True)
    k = torch.from_numpy(-pack[t["K"]])._neg_view()  # values of K, negative bit set
    run_pack = {t["Q"]: q, t["K"]: k, t["V"]: torch.from_numpy(pack[t["V"]])}
    out = np.full(DIMS, np.nan, np.float32)
    g.execute({**run_pack, t["O"]: torch.from_numpy(out)})
    expected = _reference({**pack, t["Q"]: -pack[t["Q"]]}, t)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert q.grad is None


@pytest.mark.parametrize("engine", ENGINES)
def test_outputs_that_require_grad_are_refused(engine: str) -> None:
    g, t = _forward(engine)
    out = torch.zeros(DIMS, requires_grad=True)
    with pytest.raises(hg.HipdnnError) as info:
        g.execute({**_inputs(t), t["O"]: out})
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert "output 'sdpa::O' (uid 4) requires grad" in str(info.value)
    assert not out.detach().any()


def test_numpy_engine_refuses_an_output_with_the_negative_bit() -> None:
    g, t = _forward("NUMPY_REFERENCE_ENGINE")
    out = torch.zeros(DIMS)._neg_view()
    with pytest.raises(hg.HipdnnError, match="negative or conjugate bit") as info:
        g.execute({**_inputs(t), t["O"]: out})
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("slot", ["Q", "O"])
def test_sparse_tensors_are_refused(engine: str, slot: str) -> None:
    g, t = _forward(engine)
    pack: dict[Any, Any] = {**_inputs(t), t["O"]: np.zeros(DIMS, np.float32)}
    pack[t[slot]] = torch.zeros(DIMS).to_sparse()
    with pytest.raises(hg.HipdnnError) as info:
        g.execute(pack)
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert f"'sdpa::{slot}'" in str(info.value) or f"'{slot}'" in str(info.value)
    assert "layout torch.sparse_coo; pass a dense (strided) tensor" in str(info.value)


@pytest.mark.parametrize("workspace", [64, 3.5, "64", object()])
def test_a_workspace_that_is_no_buffer_is_refused(workspace: Any) -> None:
    class Engine:
        name, priority, array_kind = "WS_ENGINE", 0, "numpy"

        def check(self, graph: hg.Graph) -> hg.backend.Support:
            return hg.backend.Support.yes()

        def workspace_size(self, graph: hg.Graph) -> int:
            return 16

        def build_plan(self, graph: hg.Graph) -> Any:
            class Plan:
                engine_name, workspace_size = "WS_ENGINE", 16

                def execute(self, variant_pack: Any, ws: Any) -> None:
                    raise AssertionError("must not run")

            return Plan()

    class Backend:
        name = "ws"

        def engines(self) -> list[Any]:
            return [Engine()]

    with hg.backend.isolated_registry(load_entry_points=False):
        hg.backend.register_backend(Backend())
        g, t = _forward()
        pack = {**_inputs(t), t["O"]: np.zeros(DIMS, np.float32)}
        with pytest.raises(hg.HipdnnError) as info:
            g.execute(pack, workspace)
        assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
        assert str(info.value) == (
            f"The workspace is a {type(workspace).__name__}; pass a buffer (a NumPy array, a "
            "torch tensor, a bytearray) of at least 16 bytes"
        )
        with pytest.raises(hg.HipdnnError, match="has 8 bytes, but the plan needs 16"):
            g.execute(pack, bytearray(8))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g: g.build(modes=[99]), "A heuristic mode must be one of"),
        (lambda g: g.build(modes=[True]), "A heuristic mode must be one of"),
        (lambda g: g.build(modes="FALLBACK"), "Heuristic modes must be a list"),
        (lambda g: g.build(policy=99), "The build plan policy must be one of"),
        (lambda g: g.create_execution_plans([None]), "A heuristic mode must be one of"),
        (lambda g: g.build_plans(policy="ALL"), "The build plan policy must be one of"),
    ],
)
def test_build_arguments_are_checked(call: Any, message: str) -> None:
    g, _ = _forward()
    fresh = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = fresh.tensor(name="Q", dim=list(DIMS))
    fresh.sdpa(q, fresh.tensor_like(q, "K"), fresh.tensor_like(q, "V"), generate_stats=False)
    for graph in (g, fresh):
        with pytest.raises(hg.HipdnnError, match=message) as info:
            call(graph)
        assert info.value.code == hg.ErrorCode.INVALID_VALUE


@pytest.mark.parametrize("index", ["0", 0.0, None, True])
def test_plan_index_must_be_an_integer(index: Any) -> None:
    g, t = _forward()
    pack = {**_inputs(t), t["O"]: np.zeros(DIMS, np.float32)}
    with pytest.raises(hg.HipdnnError, match="The plan index must be an integer") as info:
        g.execute_plan_at_index(pack, None, index)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    g.execute_plan_at_index(pack, None, 0)
    np.testing.assert_allclose(pack[t["O"]], _reference(pack, t), rtol=1e-5, atol=1e-6)


def test_make_inputs_honours_negative_strides_without_crashing() -> None:
    # before: make_inputs wrote before the start of its buffer (SIGSEGV or heap corruption),
    # so this runs in a fresh process
    code = textwrap.dedent(
        """
        import numpy as np, hipdnn_graph as hg
        from hipdnn_graph.testing import make_inputs
        g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                     compute_data_type=hg.DataType.FLOAT)
        q = g.tensor(name="Q", dim=[2, 3, 256, 16], stride=[-16 * 256 * 3, 16 * 256, -16, 1])
        o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
        o.set_output(True)
        g.validate()
        for seed in range(20):
            pack = make_inputs(g, np.random.default_rng(seed))
        a = pack[q]
        print(a.strides, np.isfinite(a).all(), a.shape)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(-49152, 16384, -64, 4) True (2, 3, 256, 16)"


def test_negative_strides_run_on_the_numpy_engine_like_a_copy() -> None:
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=list(DIMS), stride=[64, 32, -4, 1])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    rng = np.random.default_rng(1)
    pack: dict[Any, Any] = {
        t: rng.standard_normal(DIMS).astype(np.float32)[:, :, ::-1] for t in g.graph_inputs()
    }
    assert pack[q].strides == (256, 128, -16, 4)
    results = g.run(pack)
    args = [torch.from_numpy(np.ascontiguousarray(pack[t], np.float64)) for t in g.graph_inputs()]
    expected = torch.nn.functional.scaled_dot_product_attention(*args, scale=0.5).numpy()
    np.testing.assert_allclose(results[o], expected, rtol=1e-5, atol=1e-6)


def test_numpy_empty_strided_with_negative_strides_stays_inside_its_buffer() -> None:
    code = textwrap.dedent(
        """
        import numpy as np, hipdnn_graph as hg
        from hipdnn_graph.backend.dtypes import numpy_empty_strided
        a = numpy_empty_strided([2, 3, 4], [-12, 1, -3], hg.DataType.FLOAT)
        a[...] = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        base = a
        while base.base is not None:
            base = base.base
        print(base.size, sorted(base.tolist()) == list(range(24)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "24 True"


@pytest.mark.parametrize("stride0", [2**46, 2**62])
@pytest.mark.parametrize("engine", ENGINES)
def test_huge_output_strides_give_a_hipdnn_error_from_run(
    stride0: int, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before: MemoryError or ValueError ("array is too big") from run(). 2**46 FLOAT elements are
    # 256 TiB, past a 47-bit user address space, so even a machine that overcommits memory (a
    # 16 TiB buffer was allocated lazily on the GPU machine) cannot map the buffer. Under the
    # allocation bound (issue 41 item 2) build() refuses it first; above a raised bound the
    # allocation itself still fails with a HipdnnError.
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[2, 1, 4, 8])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True).set_stride([stride0, 32, 8, 1])
    g.set_preferred_engine_id_ext(engine)
    with pytest.raises(hg.HipdnnError, match="the largest part is tensor 'SdpaFwd_0::O'") as info:
        g.build()
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    with pytest.raises(hg.HipdnnError, match="may allocate"):
        make_inputs(g, np.random.default_rng(0))
    monkeypatch.setenv("HIPDNN_GRAPH_MAX_ALLOCATION", str(2**70))
    g.build()
    with pytest.raises(hg.HipdnnError) as info:
        g.run({t: np.ones((2, 1, 4, 8), np.float32) for t in g.graph_inputs()})
    if engine == "NUMPY_REFERENCE_ENGINE":  # allocated by the frontend
        assert info.value.code == hg.ErrorCode.INVALID_VALUE
        assert str(info.value).startswith("Cannot allocate a FLOAT buffer of dims [2, 1, 4, 8]")
    else:  # the torch plan allocates its own results and fails inside execute
        assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
        assert "overflow" in str(info.value) or "allocate" in str(info.value)
    with pytest.raises(hg.HipdnnError, match="Cannot allocate") as info:
        make_inputs(g, np.random.default_rng(0))
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


# ----- item 13: a NumPy caller gets NumPy results, whatever is installed -----
def test_numpy_inputs_give_numpy_results_on_the_default_engine() -> None:
    g, t = _forward()
    assert g.get_plan_name() == "TORCH_SDPA_MATH_ENGINE"  # torch is installed here
    pack = _inputs(t)
    results = g.run(pack)
    assert type(results[t["O"]]) is np.ndarray
    assert results[t["O"]].dtype == np.float32
    np.testing.assert_allclose(results[t["O"]], _reference(pack, t), rtol=1e-5, atol=1e-6)
    # an output the caller passes comes back as the caller's own array, written in place
    out = np.zeros(DIMS, np.float32)
    assert g.run({**pack, t["O"]: out})[t["O"]] is out
    np.testing.assert_allclose(out, results[t["O"]])


def test_torch_inputs_still_give_torch_results() -> None:
    g, t = _forward()
    pack = {k: torch.from_numpy(v) for k, v in _inputs(t).items()}
    assert isinstance(g.run(pack)[t["O"]], torch.Tensor)


def test_numpy_bfloat16_inputs_give_numpy_bfloat16_results() -> None:
    g = hg.Graph(
        io_data_type=hg.DataType.BFLOAT16,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=list(DIMS))
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True)
    g.build()
    bf16 = hg.backend.dtypes.numpy_dtype(hg.DataType.BFLOAT16)
    rng = np.random.default_rng(0)
    results = g.run({x: rng.standard_normal(DIMS).astype(bf16) for x in g.graph_inputs()})
    assert type(results[o]) is np.ndarray and results[o].dtype == bf16


def test_read_only_inputs_run_on_the_torch_engine_without_a_warning() -> None:
    import warnings

    g, t = _forward("TORCH_SDPA_MATH_ENGINE")
    pack = _inputs(t)
    for array in pack.values():
        array.flags.writeable = False
    out = np.zeros(DIMS, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g.execute({**pack, t["O"]: out})
    np.testing.assert_allclose(out, _reference(pack, t), rtol=1e-5, atol=1e-6)
