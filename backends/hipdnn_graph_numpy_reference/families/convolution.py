"""The convolution references: forward (``Y`` from ``X``, ``W``), data gradient (``DX`` from
``DY``, ``W``) and weight gradient (``DW`` from ``DY``, ``X``), in the node's compute type.

The math is :mod:`.convolution_math`'s, with the node's ``pre_padding``, ``post_padding``,
``stride`` and ``dilation`` per spatial dim and the group count hipDNN infers from the channel
counts (``C / W's C``; for the gradients, the output tensor's channels give ``C``).
``CROSS_CORRELATION`` (hipDNN's default) reads the filter as stored; ``CONVOLUTION`` flips it
along every spatial dim (the data gradient uses the flipped filter, the weight gradient is
flipped back into the stored order). A node whose mode is ``NOT_SET`` is refused: hipDNN gives
it no meaning.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[1, 1, 4], stride=[4, 4, 1])
    >>> w = g.tensor(name="w", dim=[1, 1, 2], stride=[2, 2, 1])
    >>> y = g.conv_fprop(x, w, pre_padding=[0], post_padding=[0], stride=[1], dilation=[1])
    >>> _ = y.set_output(True)
    >>> g.validate()
    >>> inputs = {"X": np.array([[[1.0, 2.0, 3.0, 4.0]]]), "W": np.array([[[1.0, -1.0]]])}
    >>> run_conv_fprop(g.nodes[0], inputs)["Y"].tolist()
    [[[-1.0, -1.0, -1.0]]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype, not_supported, raise_refusal
from .convolution_math import (
    Geometry,
    correlate,
    correlate_data_gradient,
    correlate_weight_gradient,
)

__all__ = ["FAMILIES", "convolution_refusal", "run_conv_dgrad", "run_conv_fprop", "run_conv_wgrad"]

Array = np.ndarray[Any, Any]
ConvolutionNode = hg.ConvolutionFpropNode | hg.ConvolutionDgradNode | hg.ConvolutionWgradNode


def convolution_refusal(node: ConvolutionNode) -> str | None:
    """Why the reference cannot run this convolution node (a ``NOT_SET`` mode), or ``None``."""
    mode = node.attributes.convolution_mode
    if mode == hg.ConvolutionMode.NOT_SET:
        return f"node '{node.name}': convolution mode NOT_SET has no defined math"
    return None


def _operands(
    node: ConvolutionNode, inputs: Mapping[str, Any], first: str, second: str
) -> tuple[Array, Array]:
    """The node's two input slots ``first`` and ``second`` in its compute dtype, once the
    reference has checked it runs the node."""
    raise_refusal(convolution_refusal(node))
    dtype = compute_dtype(node)
    return as_compute(inputs[first], dtype), as_compute(inputs[second], dtype)


def _flipped(node: ConvolutionNode, w: Array) -> Array:
    """``w`` as cross-correlation reads it: flipped along every spatial dim in ``CONVOLUTION``
    mode (a view)."""
    if node.attributes.convolution_mode != hg.ConvolutionMode.CONVOLUTION:
        return w
    return w[(slice(None), slice(None), *(slice(None, None, -1),) * (w.ndim - 2))]


def _geometry(node: ConvolutionNode, size: Sequence[int], kernel: Sequence[int]) -> Geometry:
    """The node's geometry for inputs of ``size`` and a filter of ``kernel``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` when the members do not fit the sizes (a node that
            was not validated).
    """
    a = node.attributes
    try:
        return Geometry.of(
            size, kernel, pre=a.pre_padding, post=a.post_padding, stride=a.stride,
            dilation=a.dilation,
        )  # fmt: skip
    except ValueError:
        raise not_supported(
            node,
            f"padding {a.pre_padding}/{a.post_padding}, stride {a.stride} and dilation "
            f"{a.dilation} do not fit inputs {list(size)} and kernel {list(kernel)}",
        ) from None


def _expect(node: ConvolutionNode, what: str, got: Sequence[int], want: Sequence[int]) -> None:
    if tuple(got) != tuple(want):
        raise not_supported(
            node, f"{what} has spatial dims {list(got)}, the geometry gives {list(want)}"
        )


def run_conv_fprop(node: hg.ConvolutionFpropNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """``Y [N, K, *out]`` of ``X [N, C, *in]`` and ``W [K, C/G, *kernel]``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a ``NOT_SET`` mode, a compute type other than
            FLOAT or DOUBLE, or arrays the node's members do not fit.
    """
    x, w = _operands(node, inputs, "X", "W")
    g = _geometry(node, x.shape[2:], w.shape[2:])
    return {"Y": correlate(x, _flipped(node, w), g)}


def run_conv_dgrad(node: hg.ConvolutionDgradNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """``DX [N, C, *in]`` (C and the input sizes are DX's dims) from ``DY [N, K, *out]`` and
    ``W [K, C/G, *kernel]``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a ``NOT_SET`` mode, a compute type other than
            FLOAT or DOUBLE, or arrays the node's members do not fit.
    """
    dy, w = _operands(node, inputs, "DY", "W")
    dx = node.attributes.get_dx()
    assert dx is not None  # a validated node has its output
    g = _geometry(node, dx.dim[2:], w.shape[2:])
    _expect(node, "DY", dy.shape[2:], g.out)
    return {"DX": correlate_data_gradient(dy, _flipped(node, w), g, dx.dim[1])}


def run_conv_wgrad(node: hg.ConvolutionWgradNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """``DW [K, C/G, *kernel]`` (its dims are DW's) from ``DY [N, K, *out]`` and
    ``X [N, C, *in]``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a ``NOT_SET`` mode, a compute type other than
            FLOAT or DOUBLE, or arrays the node's members do not fit.
    """
    dy, x = _operands(node, inputs, "DY", "X")
    dw = node.attributes.get_dw()
    assert dw is not None  # a validated node has its output
    g = _geometry(node, x.shape[2:], dw.dim[2:])
    _expect(node, "DY", dy.shape[2:], g.out)
    return {"DW": _flipped(node, correlate_weight_gradient(dy, x, g, dw.dim[1]))}


#: the node types this module runs, as the package collects them
FAMILIES = (
    ReferenceFamily(hg.NodeType.CONVOLUTION_FPROP, run_conv_fprop, convolution_refusal),
    ReferenceFamily(hg.NodeType.CONVOLUTION_DGRAD, run_conv_dgrad, convolution_refusal),
    ReferenceFamily(hg.NodeType.CONVOLUTION_WGRAD, run_conv_wgrad, convolution_refusal),
)
