"""What every family's reference shares: the record a family declares itself by
(:class:`ReferenceFamily`), the compute dtype of a node, operands cast to it, and the error a
reference raises for what it does not define.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> y = g.pointwise(g.tensor(name="x", dim=[2]), mode=hg.PointwiseMode.EXP, name="e")
    >>> g.validate()
    >>> compute_dtype(g.nodes[0]).name
    'float32'
    >>> as_compute(np.array([1, 2], np.float16), np.dtype(np.float32)).dtype.name
    'float32'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import hipdnn_graph as hg

__all__ = [
    "COMPUTE_DTYPES",
    "ReferenceFamily",
    "Refusal",
    "Runner",
    "as_compute",
    "compute_dtype",
    "not_supported",
    "raise_refusal",
]

#: ``run_<family>(node, inputs) -> {output slot: array}``
Runner = Callable[[Any, Mapping[str, Any]], dict[str, np.ndarray[Any, Any]]]
#: ``<family>_refusal(node) -> why the reference refuses it, or None``
Refusal = Callable[[Any], str | None]

#: the compute data types the reference computes in, and their NumPy dtypes
COMPUTE_DTYPES: dict[hg.DataType, np.dtype[Any]] = {
    hg.DataType.FLOAT: np.dtype(np.float32),
    hg.DataType.DOUBLE: np.dtype(np.float64),
}


@dataclass(frozen=True)
class ReferenceFamily:
    """How the reference runs the nodes of one :class:`~hipdnn_graph.NodeType`: declared once,
    in the family's own module (its ``FAMILIES``), and only collected by the package.

    Example:
        >>> from hipdnn_graph_numpy_reference.families.matmul import FAMILIES
        >>> [(f.node_type.name, f.run.__name__) for f in FAMILIES]
        [('MATMUL', 'run_matmul')]
    """

    #: the node type this record runs
    node_type: hg.NodeType
    #: the runner: the node's set input slots in, every set output slot out
    run: Runner
    #: why the reference refuses a node when the plan is chosen (``None``: it runs it); without
    #: one, a node is refused only for its data and compute types
    refusal: Refusal | None = None
    #: the id of a family that is not hipDNN's (its node class's ``family_id``; ``node_type``
    #: is then ``CUSTOM_OP``), whose module registers the record (``families.register_family``);
    #: ``""`` for hipDNN's families
    family_id: str = ""


def not_supported(node: Any, feature: str) -> hg.HipdnnError:
    """The error a reference raises for what it does not run: ``GRAPH_NOT_SUPPORTED`` naming
    the node and the feature."""
    return hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node.name}': {feature}")


def raise_refusal(reason: str | None) -> None:
    """Raise a family's refusal, ``reason`` as the whole message, when it names one: a runner
    calls it with ``<family>_refusal(node)`` before computing.

    Example:
        >>> raise_refusal(None)  # the reference runs the node
        >>> try:
        ...     raise_refusal("node 'm': FLOAT or DOUBLE only")
        ... except hg.HipdnnError as err:
        ...     print(err.code.name, err.message)
        GRAPH_NOT_SUPPORTED node 'm': FLOAT or DOUBLE only

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` with ``reason``.
    """
    if reason is not None:
        raise hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, reason)


def compute_dtype(node: Any) -> np.dtype[Any]:
    """The NumPy dtype of the node's compute data type.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE.
    """
    data_type = hg.DataType(node.attributes.compute_data_type)
    try:
        return COMPUTE_DTYPES[data_type]
    except KeyError:
        raise not_supported(node, f"compute type {data_type.name} (FLOAT or DOUBLE only)") from None


def as_compute(value: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``value`` (an array of any storage type, or a pass-by-value number) in the compute dtype
    (the array itself when it already is; the engine hands references read-only views)."""
    return np.asarray(value, dtype=dtype)
