"""The convolution lowerings: forward (``Y``), data gradient (``DX``) and weight gradient
(``DW``) in 1-3 spatial dims, with pre/post padding, stride, dilation, groups (X's channels over
W's) and both :class:`~hipdnn_graph.ConvolutionMode` members.

``CROSS_CORRELATION`` is what ``torch.nn.functional.conv{1,2,3}d`` computes; ``CONVOLUTION``
flips the kernel's spatial axes first (and the weight gradient back). Unequal pre and post
padding pads X explicitly (and crops DX); the gradients are ``aten.convolution_backward``.
When X, W and the result share a 16-bit type and the node computes in FLOAT, the 16-bit
kernels run as they are (they accumulate in float32); otherwise the operands are cast to the
compute type first. Layouts (channels-last included) are the buffers' own.

Given the caller's Y, a forward convolution that torch runs on cuDNN has cuDNN write it there
(:func:`prepare_conv_fprop_writer`): the kernel ``F.conv2d`` runs, without the copy after it.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> x, w = g.tensor(name="x", dim=[1, 1, 3]), g.tensor(name="w", dim=[1, 1, 2])
    >>> y = g.conv_fprop(x, w, pre_padding=[0], post_padding=[0], stride=[1], dilation=[1])
    >>> g.validate()
    >>> prepare_conv_fprop(g.nodes[0])({"X": torch.tensor([[[1., 2., 3.]]]),
    ...                               "W": torch.tensor([[[1., 10.]]])})["Y"].tolist()
    [[[21.0, 32.0]]]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import hipdnn_graph as hg

from ._common import (
    FLOATING,
    Prepared,
    TorchFamily,
    Writer,
    compute_dtype,
    dtype_refusal,
    tensor_dtype,
)
from .matmul import native_low_precision

__all__ = [
    "FAMILIES",
    "conv_refusal",
    "prepare_conv_dgrad",
    "prepare_conv_fprop",
    "prepare_conv_fprop_writer",
    "prepare_conv_wgrad",
]


@dataclass(frozen=True)
class _Geometry:
    """What a convolution node fixes: spatial rank, padding, stride, dilation, groups, flip."""

    spatial: int
    pre: tuple[int, ...]
    post: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    flip: bool

    @property
    def symmetric(self) -> bool:
        return self.pre == self.post

    @property
    def flip_axes(self) -> tuple[int, ...]:
        return tuple(range(2, 2 + self.spatial))

    def pad_arg(self) -> list[int]:
        """``F.pad``'s argument: (pre, post) pairs from the last spatial axis back."""
        out: list[int] = []
        for p, q in zip(reversed(self.pre), reversed(self.post), strict=True):
            out += [p, q]
        return out


def _geometry(node: Any, x_slot: str, w_slot: str) -> _Geometry:
    a = node.attributes
    t = a.tensors_by_slot()
    x_dims, w_dims = list(t[x_slot].dim), list(t[w_slot].dim)
    spatial = len(x_dims) - 2
    return _Geometry(
        spatial=spatial,
        pre=tuple(a.pre_padding or [0] * spatial),
        post=tuple(a.post_padding or [0] * spatial),
        stride=tuple(a.stride or [1] * spatial),
        dilation=tuple(a.dilation or [1] * spatial),
        groups=max(1, x_dims[1] // max(1, w_dims[1])),
        flip=a.convolution_mode == hg.ConvolutionMode.CONVOLUTION,
    )


def conv_refusal(node: Any) -> str | None:
    """Why the lowering cannot run this convolution node, or None."""
    t = node.attributes.tensors_by_slot()
    x = t.get("X", t.get("DX"))
    name = f"node '{node.name}'"
    if x is not None and not 1 <= len(x.dim) - 2 <= 3:
        return f"{name}: {len(x.dim) - 2} spatial dims (1, 2 or 3 only)"
    a = node.attributes
    if any(p < 0 for p in (*a.pre_padding, *a.post_padding)):
        return f"{name}: negative padding"
    return dtype_refusal(node, FLOATING)


def _cast(node: Any, slots: tuple[str, ...], first: str) -> Any:
    if native_low_precision(node, slots):
        return tensor_dtype(node.attributes.tensors_by_slot()[first])
    return compute_dtype(node)


def _forward(torch: Any, g: _Geometry, x: Any, w: Any) -> Any:
    if g.flip:
        w = torch.flip(w, g.flip_axes)
    padding: Any = list(g.pre)
    if not g.symmetric:
        x = torch.nn.functional.pad(x, g.pad_arg())
        padding = [0] * g.spatial
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)
    return conv[g.spatial - 1](x, w, None, list(g.stride), padding, list(g.dilation), g.groups)


def _backward(torch: Any, g: _Geometry, dy: Any, x: Any, w: Any, mask: list[bool]) -> Any:
    """``aten.convolution_backward`` of the (padded) convolution; ``x`` is X (or its shape's
    stand-in for the data gradient)."""
    return torch.ops.aten.convolution_backward(
        dy, x, w, None, list(g.stride), [0] * g.spatial if not g.symmetric else list(g.pre),
        list(g.dilation), False, [0] * g.spatial, g.groups, mask,
    )  # fmt: skip


def prepare_conv_fprop(node: hg.ConvolutionFpropNode) -> Prepared:
    """Y of a forward convolution, its geometry read now."""
    import torch

    g = _geometry(node, "X", "W")
    cast = _cast(node, ("X", "W", "Y"), "X")

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"Y": _forward(torch, g, inputs["X"].to(cast), inputs["W"].to(cast))}

    return run


def prepare_conv_fprop_writer(node: hg.ConvolutionFpropNode) -> Writer | None:
    """Y written into the caller's buffer by cuDNN itself, or None where no call can be.

    ``aten.cudnn_convolution.out`` is the kernel ``F.conv2d`` reaches on cuDNN (same arguments,
    torch's cuDNN switches: benchmark, determinism, TF32), given the output buffer. The writer
    takes it where a call is exactly that: a cross-correlation with equal pre and post padding,
    X, W and Y in the type the product runs in, CUDA tensors that torch itself would convolve
    on cuDNN (``torch._C._select_conv_backend``: not a depthwise or ROCm kernel), and a Y laid
    out as torch's own result is. The first call of each signature (shapes, strides, types,
    device, switches) runs the returning lowering and compares its result's layout; any call
    that does not qualify has that result copied into Y.
    """
    import torch

    g = _geometry(node, "X", "W")
    cast = _cast(node, ("X", "W", "Y"), "X")
    t = node.attributes.tensors_by_slot()
    out_op = getattr(getattr(torch.ops.aten, "cudnn_convolution", None), "out", None)
    select = getattr(torch._C, "_select_conv_backend", None)
    cudnn = getattr(getattr(torch._C, "_ConvBackend", None), "Cudnn", None)
    if (
        g.flip
        or not g.symmetric
        or any(tensor_dtype(t[slot]) != cast for slot in ("X", "W", "Y"))
        or torch.version.hip
        or out_op is None
        or select is None
        or cudnn is None
    ):
        return None
    run = prepare_conv_fprop(node)
    padding, stride, dilation = list(g.pre), list(g.stride), list(g.dilation)
    no_output_padding = [0] * g.spatial
    c = torch._C
    enabled, benchmark, deterministic, tf32, deterministic_algorithms = (
        c._get_cudnn_enabled, c._get_cudnn_benchmark, c._get_cudnn_deterministic,
        c._get_cudnn_allow_tf32, c._get_deterministic_algorithms,
    )  # fmt: skip
    #: signature -> whether cuDNN writes Y directly
    direct: dict[tuple[Any, ...], bool] = {}

    def write(inputs: Mapping[str, Any], outs: Mapping[str, Any]) -> None:
        x, w, y = inputs["X"], inputs["W"], outs["Y"]
        if not x.is_cuda:
            y.copy_(run(inputs)["Y"])
            return
        flags = (enabled(), benchmark(), deterministic() or deterministic_algorithms(), tf32())
        key = (x.shape, x.stride(), x.dtype, x.device, w.shape, w.stride(), w.dtype, y.stride(),
               y.dtype, flags)  # fmt: skip
        known = direct.get(key)
        if known:
            out_op(x, w, padding, stride, dilation, g.groups, *flags[1:], out=y)
            return
        result = run(inputs)["Y"]
        if known is None and not torch.cuda.is_current_stream_capturing():
            direct[key] = (
                result.stride() == y.stride()
                and select(x, w, None, stride, padding, dilation, False, no_output_padding,
                           g.groups, None) == cudnn
            )  # fmt: skip
            if len(direct) > 64:
                direct.clear()
        y.copy_(result)

    return write


def prepare_conv_dgrad(node: hg.ConvolutionDgradNode) -> Prepared:
    """DX of a data-gradient convolution, its geometry read now."""
    import torch

    g = _geometry(node, "DX", "W")
    cast = _cast(node, ("DY", "W", "DX"), "DY")
    dx_dims = list(node.attributes.tensors_by_slot()["DX"].dim)
    padded = list(dx_dims)
    if not g.symmetric:
        for i in range(g.spatial):
            padded[2 + i] += g.pre[i] + g.post[i]

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        dy, w = inputs["DY"].to(cast), inputs["W"].to(cast)
        if g.flip:
            w = torch.flip(w, g.flip_axes)
        stand_in = dy.new_zeros(()).expand(padded)
        dx = _backward(torch, g, dy, stand_in, w, [True, False, False])[0]
        if not g.symmetric:
            for i in range(g.spatial):
                dx = dx.narrow(2 + i, g.pre[i], dx_dims[2 + i])
        return {"DX": dx}

    return run


def prepare_conv_wgrad(node: hg.ConvolutionWgradNode) -> Prepared:
    """DW of a weight-gradient convolution, its geometry read now."""
    import torch

    g = _geometry(node, "X", "DW")
    cast = _cast(node, ("DY", "X", "DW"), "X")
    dw_dims = list(node.attributes.tensors_by_slot()["DW"].dim)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        dy, x = inputs["DY"].to(cast), inputs["X"].to(cast)
        if not g.symmetric:
            x = torch.nn.functional.pad(x, g.pad_arg())
        stand_in = x.new_zeros(()).expand(dw_dims)
        dw = _backward(torch, g, dy, x, stand_in, [False, True, False])[1]
        if g.flip:
            dw = torch.flip(dw, g.flip_axes)
        return {"DW": dw}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(
        hg.NodeType.CONVOLUTION_FPROP,
        prepare_conv_fprop,
        conv_refusal,
        writer=prepare_conv_fprop_writer,
    ),
    TorchFamily(hg.NodeType.CONVOLUTION_DGRAD, prepare_conv_dgrad, conv_refusal),
    TorchFamily(hg.NodeType.CONVOLUTION_WGRAD, prepare_conv_wgrad, conv_refusal),
)
