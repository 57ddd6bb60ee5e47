"""Shared by the per-family reference tests (``test_reference_<family>.py``): running a graph on
``NUMPY_REFERENCE_ENGINE`` through ``Graph.execute`` and the tolerances that follow the types.

The torch float64 references of those tests are evaluated on the inputs *after* rounding them to
their storage type, so a tolerance covers only what the engine does: computing in the compute
type and rounding once to the output's type.

| output type | compute | rtol (of the element) | atol (of the output's largest magnitude) |
|---|---|---|---|
| DOUBLE | DOUBLE | 1e-12 | 1e-12 |
| any | FLOAT | the output type's epsilon + 1e-5 | the same |
| HALF, BFLOAT16 | any | the output type's epsilon (one rounding) | the same |

Reductions and matmuls sum ``terms`` products; their absolute tolerance grows with
``sqrt(terms)`` times the compute type's epsilon.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend.dtypes import numpy_dtype
from hipdnn_graph.testing import empty_for, graph_outputs, poison

REFERENCE = "NUMPY_REFERENCE_ENGINE"

#: (io type, compute type) pairs every family is tested in
TYPE_PAIRS = [
    (hg.DataType.DOUBLE, hg.DataType.DOUBLE),
    (hg.DataType.FLOAT, hg.DataType.FLOAT),
    (hg.DataType.HALF, hg.DataType.FLOAT),
    (hg.DataType.BFLOAT16, hg.DataType.FLOAT),
]
TYPE_IDS = [f"{io.name}-{ct.name}" for io, ct in TYPE_PAIRS]


def eps(data_type: hg.DataType) -> float:
    """The machine epsilon of a floating data type."""
    dtype = numpy_dtype(data_type)
    if dtype == np.dtype(ml_dtypes.bfloat16):
        return float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    return float(np.finfo(dtype).eps)


def tolerance(out: hg.DataType, compute: hg.DataType, terms: int = 1) -> tuple[float, float]:
    """``(rtol, atol_scale)`` for an output of type ``out`` computed in ``compute``."""
    rtol = eps(out) + (1e-5 if compute == hg.DataType.FLOAT else 1e-12)
    return rtol, rtol + 4 * math.sqrt(terms) * eps(compute)


def graph(io: hg.DataType, compute: hg.DataType, name: str = "g") -> hg.Graph:
    """An empty graph with these types (intermediates in FLOAT, DOUBLE for DOUBLE io)."""
    inter = hg.DataType.DOUBLE if io == hg.DataType.DOUBLE else hg.DataType.FLOAT
    return hg.Graph(
        name=name, io_data_type=io, compute_data_type=compute, intermediate_data_type=inter
    )


def stored(values: Any, tensor: hg.TensorAttributes) -> np.ndarray[Any, Any]:
    """``values`` rounded to the tensor's storage type, in an array of its dims and strides."""
    array = empty_for(tensor)
    array[...] = np.asarray(values).astype(array.dtype)
    return array


def run(
    g: hg.Graph, inputs: Mapping[hg.TensorAttributes, Any]
) -> dict[hg.TensorAttributes, np.ndarray[Any, Any]]:
    """Build ``g`` on the NumPy reference, execute it on ``inputs`` (outputs poisoned first)
    and return every output; asserts that the inputs were not written."""
    g.set_preferred_engine_id_ext(REFERENCE)
    g.build()
    assert g.get_plan_name() == REFERENCE
    before = {t: np.array(v, copy=True) for t, v in inputs.items() if isinstance(v, np.ndarray)}
    pack: dict[hg.TensorAttributes, Any] = dict(inputs)
    outputs = {t: poison(empty_for(t)) for t in graph_outputs(g)}
    pack.update(outputs)
    g.execute(pack)
    for t, old in before.items():
        assert np.array_equal(np.asarray(inputs[t]), old, equal_nan=True), f"{t.name} written"
    return outputs


def assert_close(
    got: np.ndarray[Any, Any], want: Any, out: hg.DataType, compute: hg.DataType, terms: int = 1
) -> None:
    """``got`` (an output of type ``out``) against a float64 reference ``want``."""
    rtol, atol_scale = tolerance(out, compute, terms)
    want = np.asarray(want, dtype=np.float64)
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=1.0))
    np.testing.assert_allclose(
        got.astype(np.float64), want, rtol=rtol, atol=atol_scale * scale, equal_nan=True
    )
