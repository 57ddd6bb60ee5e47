"""The matmul reference against torch in float64: plain and batched products, hipDNN's batch
broadcasting (dims of 1 and proper divisors, whose batches repeat), every tested (io, compute)
type pair; executed through ``Graph.execute`` on ``NUMPY_REFERENCE_ENGINE``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from family_reference_cases import TYPE_IDS, TYPE_PAIRS, assert_close, graph, run, stored

import hipdnn_graph as hg

torch = pytest.importorskip("torch")

SHAPES = [
    ([5, 7], [7, 3]),
    ([2, 5, 7], [2, 7, 3]),
    ([1, 5, 7], [4, 7, 3]),  # A broadcast along the batch
    ([2, 1, 5, 7], [1, 3, 7, 3]),  # each operand broadcast along one batch dim
    ([2, 5, 7], [4, 7, 3]),  # a proper divisor: A's two batches repeat (i // 2)
    ([6, 4, 5, 7], [3, 2, 7, 3]),
]


def _torch_reference(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> Any:
    batch = [max(x, y) for x, y in zip(a.shape[:-2], b.shape[:-2], strict=True)]
    ta, tb = (torch.from_numpy(v.astype(np.float64)) for v in (a, b))
    # hipDNN's CPU reference: batch i of C reads batch i // (c / d) of an operand of batch dim d
    for axis, c in enumerate(batch):
        ta = ta.repeat_interleave(c // a.shape[axis], dim=axis)
        tb = tb.repeat_interleave(c // b.shape[axis], dim=axis)
    return (ta @ tb).numpy()


@pytest.mark.parametrize(("io", "compute"), TYPE_PAIRS, ids=TYPE_IDS)
@pytest.mark.parametrize(("a_dims", "b_dims"), SHAPES, ids=str)
def test_matmul_matches_torch(
    a_dims: list[int], b_dims: list[int], io: hg.DataType, compute: hg.DataType
) -> None:
    rng = np.random.default_rng(len(a_dims) * 10 + a_dims[0])
    g = graph(io, compute)
    a, b = g.tensor(name="a", dim=a_dims), g.tensor(name="b", dim=b_dims)
    c = g.matmul(a, b, name="mm")
    c.set_output(True)
    g.validate()
    pack = {t: stored(rng.standard_normal(t.dim), t) for t in (a, b)}
    got = run(g, pack)[c]
    want = _torch_reference(pack[a], pack[b])
    assert got.shape == want.shape
    assert_close(got, want, io, compute, terms=a_dims[-1])


def test_a_proper_divisor_repeats_each_batch_as_hipdnns_reference() -> None:
    """hipDNN's ``CpuFpReferenceMatmul`` reads batch ``i // (4 / 2)`` of A for batch i of C."""
    g = graph(hg.DataType.DOUBLE, hg.DataType.DOUBLE)
    a, b = g.tensor(name="a", dim=[2, 1, 1]), g.tensor(name="b", dim=[4, 1, 1])
    c = g.matmul(a, b, name="mm")
    c.set_output(True)
    g.validate()
    got = run(g, {a: stored([[[2.0]], [[3.0]]], a), b: stored(np.ones([4, 1, 1]), b)})[c]
    assert got.reshape(-1).tolist() == [2.0, 2.0, 3.0, 3.0]


def test_compute_type_double_keeps_what_float_loses() -> None:
    # 1 + 2**-30 is a DOUBLE, not a FLOAT: computing in FLOAT rounds it to 1
    results = {}
    for compute in (hg.DataType.DOUBLE, hg.DataType.FLOAT):
        g = graph(hg.DataType.DOUBLE, compute)
        a, b = g.tensor(name="a", dim=[1, 3]), g.tensor(name="b", dim=[3, 1])
        c = g.matmul(a, b, name="mm")
        c.set_output(True)
        g.validate()
        pack = {a: stored([[1 + 2**-30, 0.0, 0.0]], a), b: stored(np.ones([3, 1]), b)}
        results[compute] = float(run(g, pack)[c][0, 0])
    assert results == {hg.DataType.DOUBLE: 1 + 2**-30, hg.DataType.FLOAT: 1.0}
