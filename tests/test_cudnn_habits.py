"""cuDNN-frontend habits on the core API, and hipDNN's tensor_like on the CPU (issue 23, items 17
and 18): torch and NumPy dtypes for DataType, tensor_like of arrays, execute(handle=...), dtype
names in variant-pack errors, and a clear ImportError for hipdnn_graph.torch without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (1, 2, 8, 16)

pytestmark = pytest.mark.usefixtures("only_numpy")  # tests/conftest.py


# ----- DataType from torch and NumPy dtypes -----
@pytest.mark.parametrize(
    ("dtype", "data_type"),
    [
        (np.float16, hg.DataType.HALF),
        (np.dtype("float32"), hg.DataType.FLOAT),
        (np.float64, hg.DataType.DOUBLE),
        (ml_dtypes.bfloat16, hg.DataType.BFLOAT16),
        (np.dtype(ml_dtypes.float8_e4m3fn), hg.DataType.FP8_E4M3),
        (np.int32, hg.DataType.INT32),
        (np.bool_, hg.DataType.BOOLEAN),
    ],
)
def test_numpy_dtypes_stand_for_data_types(dtype: Any, data_type: hg.DataType) -> None:
    g = hg.Graph(io_data_type=dtype, intermediate_data_type=dtype, compute_data_type=dtype)
    assert (g.get_io_data_type(), g.get_compute_data_type()) == (data_type, data_type)
    assert g.tensor(name="x", dim=[2], data_type=dtype).get_data_type() == data_type
    assert hg.TensorAttributes().set_data_type(dtype).get_data_type() == data_type


def test_torch_dtypes_stand_for_data_types() -> None:
    torch = pytest.importorskip("torch")
    g = hg.Graph(
        io_data_type=torch.float16,
        intermediate_data_type=torch.float32,
        compute_data_type=torch.float32,
    )
    assert g.get_io_data_type() == hg.DataType.HALF
    assert g.get_intermediate_data_type() == hg.DataType.FLOAT
    assert g.set_io_data_type(torch.bfloat16).get_io_data_type() == hg.DataType.BFLOAT16
    assert g.tensor(name="q", dim=[2], data_type=torch.float8_e5m2).data_type == (
        hg.DataType.FP8_E5M2
    )
    attributes = hg.SdpaAttributes().set_compute_data_type(torch.float32)
    assert attributes.get_compute_data_type() == hg.DataType.FLOAT
    assert hipdnn.Tensor.create([2], torch.float64).get_data_type() == hipdnn.DataType.DOUBLE
    with pytest.raises(hg.HipdnnError, match=r"torch\.uint16 \('uint16'\) has no hipDNN") as info:
        g.set_io_data_type(torch.uint16)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


@pytest.mark.parametrize("bad", ["half", 1.5, np.float16(1.0), True, object()])
def test_other_values_are_still_unknown_data_types(bad: Any) -> None:
    with pytest.raises(hg.HipdnnError, match="Unknown data type") as info:
        hg.Graph(io_data_type=bad)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


def test_the_core_does_not_import_torch_for_dtypes() -> None:
    source = """
        import sys, numpy as np, hipdnn_graph as hg
        g = hg.Graph(io_data_type=np.float16)
        g.tensor_like(np.zeros((2, 3), np.float32), "x")
        print("torch" in sys.modules)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# ----- Graph.tensor_like(array) -----
def test_tensor_like_of_numpy_arrays() -> None:
    g = hg.Graph()
    q = g.tensor_like(np.zeros((2, 8, 4), np.float16).transpose(1, 0, 2), "Q")
    assert (q.get_dim(), q.get_stride()) == ([8, 2, 4], [4, 32, 1])
    assert q.get_data_type() == hg.DataType.HALF and q.get_name() == "Q"
    assert not q.get_is_pass_by_value() and not q.get_is_virtual()
    assert g.tensor_like(np.zeros(3, ml_dtypes.bfloat16)).get_data_type() == hg.DataType.BFLOAT16
    scale = g.tensor_like(np.array([0.125], np.float32), "scale")
    assert scale.get_is_pass_by_value() and scale.get_dim() == [1]
    assert q in g.tensors and scale in g.tensors


def test_tensor_like_of_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    g = hg.Graph()
    q = g.tensor_like(torch.zeros(2, 4, 8, 16, dtype=torch.bfloat16).transpose(1, 2), "Q")
    assert (q.get_dim(), q.get_stride()) == ([2, 8, 4, 16], [512, 16, 128, 1])
    assert q.get_data_type() == hg.DataType.BFLOAT16 and not q.get_is_pass_by_value()
    meta = g.tensor_like(torch.empty(2, 3, device="meta"))  # shape only, no memory
    assert meta.get_dim() == [2, 3] and not meta.get_is_pass_by_value()
    assert g.tensor_like(torch.tensor(0.5)).get_is_pass_by_value()  # a CPU scalar
    grad = torch.zeros(2, 2, requires_grad=True)
    assert g.tensor_like(grad).get_dim() == [2, 2]


def test_tensor_like_of_other_dlpack_producers() -> None:
    class Producer:
        def __init__(self, array: Any) -> None:
            self.array = array

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.array.__dlpack__(**kwargs)

    t = hg.Graph().tensor_like(Producer(np.zeros((3, 5), np.int8)[:, ::2]))
    assert (t.get_dim(), t.get_stride(), t.get_data_type()) == ([3, 3], [5, 2], hg.DataType.INT8)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("Q", "expects a TensorAttributes, an array"),
        (np.zeros(2, np.uint16), "dtype uint16 has no hipDNN DataType"),
        (np.zeros(4, np.uint8).view("V2"), "has no hipDNN DataType"),
        (
            np.ndarray((3,), np.float32, buffer=np.zeros(16, np.uint8), strides=(5,)),
            r"byte strides \(5,\) are not whole elements",
        ),
    ],
)
def test_tensor_like_rejections(value: Any, match: str) -> None:
    with pytest.raises(hg.HipdnnError, match=match) as info:
        hg.Graph().tensor_like(value)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


# ----- execute(..., handle=...), and dtype names in errors -----
def _built(io: Any = np.float32) -> tuple[hg.Graph, Any, Any, Any, Any]:
    x = np.zeros(SHAPE, io)
    g = hg.Graph(io_data_type=io, intermediate_data_type=np.float32, compute_data_type=np.float32)
    q, k, v = (g.tensor_like(x, n) for n in "QKV")
    o, _ = g.sdpa(q, k, v, generate_stats=False)
    o.set_output(True)
    handle = hipdnn.create_handle()
    g.build(handle=handle)
    return g, q, k, v, o


def test_execute_run_and_plan_index_take_a_handle() -> None:
    g, q, k, v, o = _built()
    handle = hipdnn.create_handle()
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    out = np.zeros_like(x)
    g.execute({q: x, k: x, v: x, o: out}, None, handle=handle)
    again = np.zeros_like(x)
    g.execute_plan_at_index({q: x, k: x, v: x, o: again}, None, 0, handle=handle)
    ran = g.run({q: x, k: x, v: x}, handle=handle)[o]
    assert out.any()
    np.testing.assert_array_equal(out, again)
    np.testing.assert_array_equal(out, ran)


def test_a_numpy_buffer_is_reported_with_numpy_s_dtype_name() -> None:
    torch = pytest.importorskip("torch")
    from hipdnn_graph.backend import TensorSpec, VariantPackBinder

    spec = TensorSpec(
        uid=1, name="Q", shape=(2, 3), strides=(3, 1), data_type=hg.DataType.FLOAT, is_output=False
    )
    binder = VariantPackBinder([spec], array_kind="torch")  # what torch engines bind with
    with pytest.raises(hg.HipdnnError) as info:
        binder.bind({1: np.zeros((2, 3))}, None)
    assert str(info.value) == (
        "Variant pack tensor 'Q' (uid 1) has dtype float64 but the graph declares FLOAT"
    )
    with pytest.raises(hg.HipdnnError) as info:
        binder.bind({1: torch.zeros(2, 3, dtype=torch.float64)}, None)
    assert "has dtype torch.float64 but" in str(info.value)


# ----- hipdnn_graph.torch without torch -----
def test_hipdnn_graph_torch_without_torch_says_what_to_install() -> None:
    source = """
        import sys

        class HideTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, HideTorch())
        import hipdnn_graph
        try:
            import hipdnn_graph.torch
        except ImportError as err:
            print(type(err).__name__, "|", err)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kind, message = done.stdout.strip().split(" | ", 1)
    assert kind == "ImportError"  # not the bare ModuleNotFoundError of a missing submodule
    assert "hipdnn_graph.torch needs PyTorch" in message
    assert "pip install 'hipdnn-graph[torch]'" in message


# ----- item 18, as issue 41 item 13 revised it: tensor_like of a host array is pass-by-value
# at any size, as in hipDNN's binding, so SDPA refuses such a Q; declared as data it runs -----
def test_host_tensor_like_qkv_is_pass_by_value_and_refused_by_sdpa() -> None:
    host = np.ones(SHAPE, np.float32)
    graph = hipdnn.Graph()
    graph.set_io_data_type(hipdnn.DataType.FLOAT)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    q, k, v = (hipdnn.Graph.tensor_like(host) for _ in range(3))
    assert q.get_is_pass_by_value()
    o, _ = graph.sdpa(q, k, v, hipdnn.SdpaAttributes().set_generate_stats(False))
    o.set_output(True)
    error = graph.validate()
    assert not error.is_good()
    assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
    assert "Q tensor" in error.get_message()
    assert "only the scalar slots (Attn_scale" in error.get_message()


def test_hipdnn_code_with_host_tensor_like_runs_on_the_cpu() -> None:
    rng = np.random.default_rng(2)
    q_h, k_h, v_h = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(3))
    scale_h = np.array([0.25], np.float32)
    graph = hipdnn.Graph()
    graph.set_io_data_type(hipdnn.DataType.FLOAT)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    q, k, v = (hipdnn.Graph.tensor_like(a).set_is_pass_by_value(False) for a in (q_h, k_h, v_h))
    scale = hipdnn.Graph.tensor_like(scale_h)
    assert scale.get_is_pass_by_value() and not q.get_is_pass_by_value()
    attributes = hipdnn.SdpaAttributes().set_generate_stats(False).set_attn_scale(scale)
    o, _ = graph.sdpa(q, k, v, attributes)
    o.set_output(True)
    handle = hipdnn.create_handle()
    for step in (
        graph.validate,
        lambda: graph.build_operation_graph(handle),
        graph.create_execution_plans,
        graph.check_support,
        graph.build_plans,
    ):
        error = step()
        assert error.is_good(), error.get_message()
    out = np.zeros_like(q_h)
    error = graph.execute(handle, {q: q_h, k: k_h, v: v_h, scale: scale_h, o: out})
    assert error.is_good(), error.get_message()
    logits = np.einsum("bhqd,bhkd->bhqk", q_h.astype(np.float64), k_h) * 0.25
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    want = np.einsum("bhqk,bhkd->bhqd", weights / weights.sum(-1, keepdims=True), v_h)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
