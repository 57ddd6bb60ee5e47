"""The bound on what a graph may make an engine allocate, checked before anything is allocated.

A graph's dims decide how much memory running it takes: every tensor it names (inputs,
outputs and the virtual tensors between nodes) and the padded copy of an input a convolution or
pooling node may need (:meth:`~hipdnn_graph.nodes.base.Node.padded_elements`). A few bytes of
graph can ask for terabytes (a matmul output ``[1, 2**20, 2**20]``, a broadcast feeding a
reduction, a padding of ``2**31``), and an engine asked for that much fails late, inside
NumPy or torch, or takes the machine's memory. So ``build_plans()`` and
:func:`hipdnn_graph.testing.make_inputs` add those bytes up first and refuse a graph above the
limit with ``INVALID_VALUE``, before any engine builds a plan or any buffer exists.

The limit is :data:`DEFAULT_LIMIT` (64 GiB) unless the environment variable
``HIPDNN_GRAPH_MAX_ALLOCATION`` says otherwise: a number of bytes, optionally with a binary
unit (``KiB``, ``MiB``, ``GiB``, ``TiB``), read at each check. A fixed number, not a share of
the machine, so that one graph gets the same answer everywhere (a serialized graph must not
validate on one host and be refused on the next); 64 GiB is above the largest graph this
project's benchmarks and GPU tests build (SDPA backward with a ``[1, 16, 16384, 16384]`` bias
and float32 dBias: about 24 GiB) and within one accelerator's or host's memory.

Example:
    >>> import hipdnn_graph as hg
    >>> from hipdnn_graph.backend.allocation import graph_allocation_bytes, parse_limit
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> c = g.matmul(g.tensor(name="a", dim=[1, 4, 8]), g.tensor(name="b", dim=[1, 8, 2]))
    >>> g.validate(); graph_allocation_bytes(g)  # (32 + 16 + 8) float32 elements
    224
    >>> parse_limit("64GiB") == 64 * 2**30, parse_limit("1000")
    (True, 1000)
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING, Any

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
from .dtypes import numpy_dtype

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "DEFAULT_LIMIT",
    "LIMIT_VARIABLE",
    "allocation_limit",
    "check_allocation",
    "graph_allocation_bytes",
    "parse_limit",
    "tensor_bytes",
]

#: the environment variable that sets the limit
LIMIT_VARIABLE = "HIPDNN_GRAPH_MAX_ALLOCATION"
#: the limit when :data:`LIMIT_VARIABLE` is not set: 64 GiB
DEFAULT_LIMIT = 64 * 2**30

_UNITS = {"": 1, "B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_LIMIT_TEXT = re.compile(r"\s*(\d+)\s*([A-Za-z]*)\s*")


def parse_limit(text: str) -> int:
    """Bytes from ``"68719476736"``, ``"64GiB"``, ``"512 MiB"`` (binary units only).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    match = _LIMIT_TEXT.fullmatch(text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{LIMIT_VARIABLE}={text!r}: expected a number of bytes, optionally followed by "
            "KiB, MiB, GiB or TiB",
        )
    return int(match.group(1)) * _UNITS[unit]


def allocation_limit() -> int:
    """The limit in bytes: :data:`LIMIT_VARIABLE` when set, else :data:`DEFAULT_LIMIT`.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a variable that is not a size.
    """
    text = os.environ.get(LIMIT_VARIABLE)
    return DEFAULT_LIMIT if text is None or not text.strip() else parse_limit(text)


def _element_bytes(data_type: Any) -> int:
    """Bytes one element takes in memory (8 for a type NumPy cannot hold: an upper bound)."""
    try:
        return max(numpy_dtype(DataType(data_type)).itemsize, 1)
    except (HipdnnError, ValueError):
        return 8


def tensor_bytes(tensor: TensorAttributes) -> int:
    """Bytes a buffer of ``tensor`` spans: its elements, or the span its strides address when
    that is larger; 0 for a tensor without dims or with a zero dim, and for a constant.

    Example:
        >>> from hipdnn_graph import DataType, TensorAttributes
        >>> tensor_bytes(TensorAttributes(dim=[2, 3], stride=[3, 1], data_type=DataType.HALF))
        12
        >>> tensor_bytes(TensorAttributes(dim=[2, 3], stride=[100, 1], data_type=DataType.HALF))
        206
    """
    dims = tensor.dim
    if not dims or tensor.value is not None or min(dims) <= 0:
        return 0
    elements = math.prod(dims)
    if tensor.stride and len(tensor.stride) == len(dims):
        span = 1 + sum((d - 1) * abs(s) for d, s in zip(dims, tensor.stride, strict=True))
        elements = max(elements, span)
    return elements * _element_bytes(tensor.data_type)


def _parts(graph: Graph) -> list[tuple[int, str]]:
    """(bytes, what) of every tensor of the graph and every padded copy its nodes imply."""
    parts = [(tensor_bytes(t), f"tensor '{t.name}' {t.dim}") for t in graph.graph_tensors()]
    for node in graph.nodes:
        elements = node.padded_elements()
        if elements:
            element = max(
                _element_bytes(node.attributes.compute_data_type),
                _element_bytes(node.attributes.tensors_by_slot()[node.padded_slot].data_type),
            )
            parts.append((elements * element, f"the padded {node.padded_slot} of '{node.name}'"))
    return parts


def graph_allocation_bytes(graph: Graph) -> int:
    """The bytes running ``graph`` may allocate: every tensor (:func:`tensor_bytes`) and every
    padded copy its nodes imply, each once. The graph must be validated (dims inferred)."""
    return sum(size for size, _ in _parts(graph))


def _size(n: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_allocation(graph: Graph, purpose: str) -> None:
    """Refuse ``graph`` when running it may allocate more than :func:`allocation_limit`.

    Args:
        graph: a validated graph.
        purpose: what would allocate, for the message (``"Running graph 'g'"``).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the total, the largest part and the variable that
            raises the limit.
    """
    parts = _parts(graph)
    total = sum(size for size, _ in parts)
    limit = allocation_limit()
    if total <= limit:
        return
    size, what = max(parts)
    raise HipdnnError(
        ErrorCode.INVALID_VALUE,
        f"{purpose} may allocate {_size(total)} ({total} bytes; the largest part is {what}, "
        f"{_size(size)}), more than the limit of {_size(limit)}; set {LIMIT_VARIABLE} (bytes, "
        "or e.g. 256GiB) to raise it",
    )
