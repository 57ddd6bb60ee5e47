"""Graphs of several nodes and families executed through ``Graph.execute`` on
``NUMPY_REFERENCE_ENGINE``, against torch in float64: pointwise chains, matmul + bias +
activation, reductions of a product, an attention output feeding pointwise nodes, and virtual
intermediates rounded to their declared type."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from family_reference_cases import assert_close, graph, run, stored

import hipdnn_graph as hg

torch = pytest.importorskip("torch")
F = torch.nn.functional
M = hg.PointwiseMode


def _t(array: np.ndarray[Any, Any]) -> Any:
    return torch.from_numpy(array.astype(np.float64))


def test_pointwise_chain() -> None:
    # y = tanh((x * s) + b) - x, four nodes, three virtual intermediates
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x, s, b = (g.tensor(name=n, dim=d) for n, d in (("x", [4, 6]), ("s", [1, 6]), ("b", [4, 1])))
    scaled = g.pointwise(x, s, mode=M.MUL, name="scale")
    shifted = g.pointwise(scaled, b, mode=M.ADD, name="shift")
    squashed = g.pointwise(shifted, mode=M.TANH_FWD, name="tanh")
    y = g.pointwise(squashed, x, mode=M.SUB, name="residual")
    y.set_output(True)
    g.validate()
    rng = np.random.default_rng(0)
    pack = {t: stored(rng.standard_normal(t.dim), t) for t in (x, s, b)}
    got = run(g, pack)[y]
    want = torch.tanh(_t(pack[x]) * _t(pack[s]) + _t(pack[b])) - _t(pack[x])
    assert_close(got, want.numpy(), hg.DataType.FLOAT, hg.DataType.FLOAT)


@pytest.mark.parametrize("io", [hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16])
def test_matmul_bias_gelu(io: hg.DataType) -> None:
    g = graph(io, hg.DataType.FLOAT)
    x, w, b = (g.tensor(name=n, dim=d) for n, d in (("x", [2, 8, 16]), ("w", [1, 16, 12]),
                                                     ("b", [1, 1, 12])))  # fmt: skip
    h = g.matmul(x, w, name="proj")
    h.set_data_type(hg.DataType.FLOAT)
    biased = g.pointwise(h, b, mode=M.ADD, name="bias")
    biased.set_data_type(hg.DataType.FLOAT)
    y = g.pointwise(biased, mode=M.GELU_FWD, name="gelu")
    y.set_output(True)
    g.validate()
    rng = np.random.default_rng(1)
    pack = {t: stored(rng.standard_normal(t.dim), t) for t in (x, w, b)}
    got = run(g, pack)[y]
    want = F.gelu(_t(pack[x]) @ _t(pack[w]) + _t(pack[b]))
    assert_close(got, want.numpy(), io, hg.DataType.FLOAT, terms=16)


def test_a_virtual_bfloat16_intermediate_is_rounded() -> None:
    # x * 1.001 rounded to bfloat16 (8 bits) is x again for many x; in FLOAT it is not
    values = np.array([1.0, 1.5, 3.0, -2.0, 0.1, 7.0])
    results = {}
    for inter in (hg.DataType.BFLOAT16, hg.DataType.FLOAT):
        g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
        x = g.tensor(name="x", dim=[6])
        k = g.tensor(hg.TensorAttributes(name="k").set_value(1.001))
        scaled = g.pointwise(x, k, mode=M.MUL, name="scale")
        scaled.set_data_type(inter)
        y = g.pointwise(scaled, x, mode=M.SUB, name="diff")
        y.set_output(True)
        g.validate()
        results[inter] = run(g, {x: stored(values, x)})[y]
    xs = values.astype(np.float32)
    product = xs * np.float32(1.001)
    rounded = product.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(results[hg.DataType.BFLOAT16], rounded - xs)
    assert np.array_equal(results[hg.DataType.FLOAT], product - xs)
    assert not np.array_equal(results[hg.DataType.BFLOAT16], results[hg.DataType.FLOAT])


def test_an_output_that_later_nodes_also_read() -> None:
    # h is both a graph output (in the io type, HALF) and the input of the reduction
    g = graph(hg.DataType.HALF, hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[3, 5])
    h = g.pointwise(x, mode=M.EXP, name="exp")
    h.set_output(True)
    total = g.reduction(h, mode=hg.ReductionMode.ADD, name="sum")
    total.set_output(True).set_dim([3, 1]).set_stride([1, 1])
    g.validate()
    rng = np.random.default_rng(2)
    pack = {x: stored(rng.standard_normal([3, 5]), x)}
    out = run(g, pack)
    want_h = torch.exp(_t(pack[x]))
    assert_close(out[h], want_h.numpy(), hg.DataType.HALF, hg.DataType.FLOAT)
    # the reduction reads h as stored: rounded to HALF
    want_sum = _t(out[h]).sum(1, keepdim=True)
    assert_close(out[total], want_sum.numpy(), hg.DataType.HALF, hg.DataType.FLOAT, terms=5)


def test_attention_output_feeds_pointwise_nodes() -> None:
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    q, k, v = (g.tensor(name=n, dim=[1, 2, 8, 16]) for n in "QKV")
    o, _ = g.sdpa(q, k, v, name="attn", generate_stats=False, attn_scale=0.25)
    r = g.tensor(name="R", dim=[1, 2, 8, 16])
    y = g.pointwise(g.pointwise(o, r, mode=M.ADD, name="residual"), mode=M.RELU_FWD, name="act")
    y.set_output(True)
    g.validate()
    rng = np.random.default_rng(3)
    pack = {t: stored(rng.standard_normal(t.dim), t) for t in (q, k, v, r)}
    got = run(g, pack)[y]
    attn = F.scaled_dot_product_attention(_t(pack[q]), _t(pack[k]), _t(pack[v]), scale=0.25)
    want = F.relu(attn + _t(pack[r]))
    assert_close(got, want.numpy(), hg.DataType.FLOAT, hg.DataType.FLOAT, terms=16)


def test_execution_is_repeatable_and_never_writes_inputs() -> None:
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    a, b = g.tensor(name="a", dim=[4, 4]), g.tensor(name="b", dim=[4, 4])
    c = g.pointwise(g.matmul(a, b, name="mm"), a, mode=M.ADD, name="add")
    c.set_output(True)
    g.validate()
    rng = np.random.default_rng(4)
    pack = {t: stored(rng.standard_normal(t.dim), t) for t in (a, b)}
    first = run(g, pack)[c].copy()
    second = run(g, pack)[c]  # run() also asserts the inputs were not written
    assert np.array_equal(first, second)


@pytest.mark.parametrize("module", ["_common", "pointwise", "matmul", "reduction", "__init__"])
def test_family_reference_doctests(module: str) -> None:
    import doctest
    import importlib

    name = "hipdnn_graph_numpy_reference.families"
    mod = importlib.import_module(name if module == "__init__" else f"{name}.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
