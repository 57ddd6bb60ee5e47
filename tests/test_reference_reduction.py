"""The reduction reference against torch in float64, for every ``ReductionMode`` member, over
one axis, several axes and all axes, in every tested (io, compute) type pair; executed through
``Graph.execute`` on ``NUMPY_REFERENCE_ENGINE``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from family_reference_cases import TYPE_IDS, TYPE_PAIRS, assert_close, graph, run, stored

import hipdnn_graph as hg
from hipdnn_graph import generate_strides

torch = pytest.importorskip("torch")
R = hg.ReductionMode


def _prod(x: Any, dims: tuple[int, ...]) -> Any:
    for d in dims:
        x = torch.prod(x, d, keepdim=True)
    return x


#: mode -> torch float64 reference over ``dims`` (kept)
REFERENCES: dict[hg.ReductionMode, Callable[[Any, tuple[int, ...]], Any]] = {
    R.ADD: lambda x, d: torch.sum(x, d, keepdim=True),
    R.MUL: lambda x, d: _prod(x, d),
    R.MIN: lambda x, d: torch.amin(x, d, keepdim=True),
    R.MAX: lambda x, d: torch.amax(x, d, keepdim=True),
    R.AMAX: lambda x, d: torch.amax(torch.abs(x), d, keepdim=True),
    R.AVG: lambda x, d: torch.mean(x, d, keepdim=True),
    R.NORM1: lambda x, d: torch.linalg.vector_norm(x, 1, d, keepdim=True),
    R.NORM2: lambda x, d: torch.linalg.vector_norm(x, 2, d, keepdim=True),
    R.MUL_NO_ZEROS: lambda x, d: _prod(torch.where(x == 0, 1.0, x), d),
}
AXES = [(1,), (0, 2), (0, 1, 2)]


def test_every_mode_has_a_reference_here() -> None:
    assert set(REFERENCES) | {R.NOT_SET} == set(R)


@pytest.mark.parametrize(("io", "compute"), TYPE_PAIRS, ids=TYPE_IDS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("mode", sorted(REFERENCES), ids=lambda m: m.name)
def test_reduction_matches_torch(
    mode: hg.ReductionMode, axes: tuple[int, ...], io: hg.DataType, compute: hg.DataType
) -> None:
    rng = np.random.default_rng(int(mode))
    dims = [3, 4, 5]
    y_dims = [1 if i in axes else d for i, d in enumerate(dims)]
    g = graph(io, compute)
    x = g.tensor(name="x", dim=dims)
    y = g.reduction(x, mode=mode, name="red")
    y.set_output(True).set_dim(y_dims).set_stride(generate_strides(y_dims))
    g.validate()
    values = rng.uniform(0.5, 1.5, dims) * np.where(rng.random(dims) < 0.5, -1, 1)
    if mode == R.MUL_NO_ZEROS:
        values[rng.random(dims) < 0.3] = 0.0
    pack = {x: stored(values, x)}
    got = run(g, pack)[y]
    want = REFERENCES[mode](torch.from_numpy(pack[x].astype(np.float64)), axes).numpy()
    terms = int(np.prod([dims[a] for a in axes]))
    assert got.shape == tuple(y_dims)
    assert_close(got, want, io, compute, terms=terms)


def test_mul_no_zeros_of_all_zeros_is_one() -> None:
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3])
    y = g.reduction(x, mode=R.MUL_NO_ZEROS, name="red")
    y.set_output(True).set_dim([2, 1]).set_stride([1, 1])
    g.validate()
    got = run(g, {x: stored([[0.0, 0.0, 0.0], [0.0, 2.0, -3.0]], x)})[y]
    assert got.reshape(-1).tolist() == [1.0, -6.0]
