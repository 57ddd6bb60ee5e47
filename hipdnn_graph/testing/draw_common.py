"""What the family generators share: a new graph of an io type, random dims, layouts, scalar
operands and marking outputs.

A *draw* (:data:`Draw`) is ``draw(rng, io, seed) -> (graph, features)``: it builds one random
graph of its family with io type ``io`` (not yet validated) and names what it drew.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.testing.draw_common import layout_strides
    >>> layout_strides([2, 3, 4, 5], channels_last=True)
    [60, 1, 15, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from ..graph import Graph
from ..tensor import TensorAttributes, generate_strides
from ..types import DataType

__all__ = [
    "Draw",
    "draw_dims",
    "layout_strides",
    "mark_output",
    "new_graph",
    "pick",
    "scalar_operand",
]

#: ``draw(rng, io, seed) -> (graph, features)``: one random graph of a family
Draw = Callable[[np.random.Generator, DataType, int], tuple[Graph, set[str]]]

_T = TypeVar("_T")


def new_graph(name: str, io: DataType) -> Graph:
    """An empty graph of io type ``io``; compute and intermediates DOUBLE for DOUBLE io, FLOAT
    otherwise."""
    compute = DataType.DOUBLE if io == DataType.DOUBLE else DataType.FLOAT
    return Graph(name=name, io_data_type=io, intermediate_data_type=compute,
                 compute_data_type=compute)  # fmt: skip


def draw_dims(rng: np.random.Generator, rank: int, high: int = 9, low: int = 1) -> list[int]:
    """``rank`` dims drawn from ``[low, high)``."""
    return [int(d) for d in rng.integers(low, high, size=rank)]


def pick(rng: np.random.Generator, choices: Sequence[_T]) -> _T:
    """One of ``choices``, uniformly."""
    return choices[int(rng.integers(len(choices)))]


def layout_strides(dims: Sequence[int], channels_last: bool) -> list[int]:
    """Packed strides of ``[N, C, spatial...]`` dims: row-major, or channels-last (C fastest,
    then the spatial dims, N slowest) when ``channels_last``."""
    if not channels_last or len(dims) < 3:
        return generate_strides(dims)
    order = [0, *range(2, len(dims)), 1]  # slowest to fastest
    packed = generate_strides([dims[i] for i in order])
    strides = [0] * len(dims)
    for position, axis in enumerate(order):
        strides[axis] = packed[position]
    return strides


def mark_output(t: TensorAttributes, dims: list[int], strides: list[int] | None = None) -> None:
    """Make ``t`` a graph output of ``dims`` (packed row-major strides unless given)."""
    t.set_output(True).set_dim(dims).set_stride(strides or generate_strides(dims))


def scalar_operand(
    g: Graph, rng: np.random.Generator, name: str, low: float, high: float
) -> TensorAttributes:
    """A one-element FLOAT operand (an epsilon, a momentum): half the time a compile-time
    constant drawn from ``[low, high)``, else a runtime pass-by-value parameter whose value
    the kit's input maker draws (:mod:`hipdnn_graph.testing.input_constraints`)."""
    scalar = TensorAttributes(name=name)
    if rng.random() < 0.5:
        scalar.set_value(float(rng.uniform(low, high)))
    else:
        scalar.set_as_runtime_parameter().set_data_type(DataType.FLOAT)
        scalar.set_dim([1]).set_stride([1])
    return g.tensor(scalar)
