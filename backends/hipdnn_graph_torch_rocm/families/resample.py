"""The resample lowerings: pooling forward (``Y``, and ``INDEX`` for ``MAXPOOL``) and its
gradient (``DX``), as the NumPy reference (``hipdnn_graph_numpy_reference.families.resample``)
defines them, in 1-3 (or more) spatial dims.

Output ``o``'s window reads input position ``p = o * stride + k - pre_padding`` for each window
offset ``k`` (scanned row-major); positions outside the input are padding. The lowering pads X
explicitly to exactly the span Y's windows read (so any pre padding, Y dims the formula does not
give, and windows of padding alone work alike) and takes the windows as strided views
(``Tensor.unfold``):

* ``MAXPOOL``: padding competes as 0 with ``ZERO_PAD`` and not at all with ``NEG_INF_PAD`` (it
  is padded with NaN, which never competes). Y is the first maximum in scan order of what beats
  the compute type's lowest finite value (the lowest value when nothing does: NaNs, ``-inf``,
  padding alone); INDEX the winner's flattened spatial position in X, ``-1`` for a zero of the
  padding or no winner. ``F.max_pool*d`` is not used: it propagates NaN, returns ``-inf`` and
  documents no tie order, and its padding is at most half the window.
* averages: the window sum (padding adds 0) over the number of real elements
  (``AVGPOOL_EXCLUDE_PADDING``, 1 when none) or the window size (``AVGPOOL_INCLUDE_PADDING``).
* backward: each ``DY[o]`` goes, for ``MAXPOOL``, to every real position of its window whose
  flattened index, cast to INDEX's integer type, equals ``INDEX[o]``; for the averages, divided
  by the forward's divisor, to every real position of its window. The contributions are
  accumulated one window offset at a time (deterministic, no atomics) into the padded span, then
  cropped to DX.

Everything computes in the node's compute type; layouts (channels-last too) are the buffers'
own. ``BILINEAR``, ``NEAREST`` and ``EDGE_VAL_PAD`` are refused: hipDNN defines no math for
them (they have no number in its schema), as the NumPy reference says.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> y, index = g.resample(g.tensor(name="x", dim=[1, 1, 4]), generate_index=True,
    ...     resample_mode=hg.ResampleMode.MAXPOOL, padding_mode=hg.PaddingMode.NEG_INF_PAD,
    ...     window=[2], stride=[2], pre_padding=[1], post_padding=[1])
    >>> g.validate()
    >>> out = prepare_resample(g.nodes[0])({"X": torch.tensor([[[1.0, 5.0, 2.0, 0.0]]])})
    >>> out["Y"].tolist(), out["INDEX"].tolist()
    ([[[1.0, 5.0, 0.0]]], [[[0, 1, 3]]])
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.nodes.resample_spec import PADDING_MODE, RESAMPLE_MODE

from ._common import FLOATING, Prepared, TorchFamily, compute_dtype, dtype_refusal, tensor_dtype

__all__ = [
    "FAMILIES",
    "prepare_resample",
    "prepare_resample_bwd",
    "resample_bwd_refusal",
    "resample_refusal",
]

_M, _P = hg.ResampleMode, hg.PaddingMode
#: the most window offsets the lowering takes where the window holds more offsets than the
#: input has positions (most of them then read padding alone, and the padded input and the
#: work grow with the window, not with the data)
_MOST_OFFSETS = 65_536
#: the types an INDEX tensor may have (hipDNN's rule)
_INDEX_TYPES = frozenset({hg.DataType.INT8, hg.DataType.INT32})


@dataclass(frozen=True)
class _Geometry:
    """What a resample node fixes: the spatial dims of the pooled side (X, DX) and of the
    pooled result (Y, DY), and the members the math reads (post padding only sizes Y)."""

    inner: tuple[int, ...]
    outer: tuple[int, ...]
    pre: tuple[int, ...]
    stride: tuple[int, ...]
    window: tuple[int, ...]

    @property
    def spatial(self) -> int:
        return len(self.inner)

    @property
    def size(self) -> int:
        """Elements per window."""
        return math.prod(self.window)

    @property
    def span(self) -> tuple[int, ...]:
        """The padded extent Y's windows read along each dim: ``(out - 1) * stride + window``
        (padded coordinate ``c`` is input position ``c - pre``)."""
        return tuple(
            (o - 1) * s + w for o, s, w in zip(self.outer, self.stride, self.window, strict=True)
        )

    def visible(self, i: int) -> tuple[int, int]:
        """The padded coordinates ``[a, b)`` of dim ``i`` that hold input (``a == b``: none)."""
        a = max(self.pre[i], 0)
        b = min(self.pre[i] + self.inner[i], self.span[i])
        return a, max(a, b)

    def pad_arg(self, ends: list[tuple[int, int]]) -> list[int]:
        """``F.pad``'s argument from (before, after) pairs per dim: last dim first."""
        return [v for before, after in reversed(ends) for v in (before, after)]


def _geometry(node: Any, inner_slot: str, outer_slot: str) -> _Geometry:
    a = node.attributes
    t = a.tensors_by_slot()
    return _Geometry(
        inner=tuple(t[inner_slot].dim[2:]),
        outer=tuple(t[outer_slot].dim[2:]),
        pre=tuple(a.pre_padding),
        stride=tuple(a.stride),
        window=tuple(a.window),
    )


def _refusal(node: Any, inner_slot: str, outer_slot: str) -> str | None:
    a = node.attributes
    name = f"node '{node.name}'"
    mode, padding = hg.ResampleMode(a.resample_mode), hg.PaddingMode(a.padding_mode)
    if mode == _M.NOT_SET or RESAMPLE_MODE.member(mode) is None:
        return (
            f"{name}: resample mode {mode.name}: hipDNN defines no resample math for it (only "
            "MAXPOOL, AVGPOOL_EXCLUDE_PADDING and AVGPOOL_INCLUDE_PADDING have a backend value)"
        )
    if padding == _P.NOT_SET or PADDING_MODE.member(padding) is None:
        return (
            f"{name}: padding mode {padding.name}: hipDNN defines no resample math for it (only "
            "NEG_INF_PAD and ZERO_PAD have a backend value)"
        )
    t = a.tensors_by_slot()
    inner, outer = list(t[inner_slot].dim), list(t[outer_slot].dim)
    spatial = len(inner) - 2
    if spatial < 1 or len(outer) != len(inner) or inner[:2] != outer[:2]:
        return (
            f"{name}: {inner_slot} {inner} and {outer_slot} {outer} are not [N, C, spatial...] "
            "alike"
        )
    members = (a.pre_padding, a.post_padding, a.stride, a.window)
    if any(len(m) != spatial for m in members) or min(a.stride) < 1 or min(a.window) < 1:
        return (
            f"{name}: needs one pre/post padding, stride >= 1 and window >= 1 per spatial dim "
            f"({spatial})"
        )
    if "INDEX" in t and mode != _M.MAXPOOL:
        return f"{name}: an INDEX tensor with resample mode {mode.name} (MAXPOOL only)"
    if math.prod(a.window) > max(math.prod(inner[2:]), _MOST_OFFSETS):
        return (
            f"{name}: a window of {math.prod(a.window)} offsets over {math.prod(inner[2:])} "
            "input positions: the lowering pads the input to every window's span and reads "
            "each offset (the NumPy reference scans the input's positions instead)"
        )
    return dtype_refusal(node, FLOATING, (inner_slot, outer_slot)) or dtype_refusal(
        node, _INDEX_TYPES, ("INDEX",)
    )


def resample_refusal(node: hg.ResampleFwdNode) -> str | None:
    """Why the lowering cannot run this resample forward node, or None."""
    return _refusal(node, "X", "Y")


def resample_bwd_refusal(node: hg.ResampleBwdNode) -> str | None:
    """Why the lowering cannot run this resample backward node, or None."""
    return _refusal(node, "DX", "DY")


def _windows(torch: Any, t: Any, g: _Geometry, fill: float) -> Any:
    """The windows of ``t`` (whose last ``g.spatial`` dims are the input's spatial dims) as a
    strided view ``[..., out..., window...]``, padding read as ``fill``."""
    lead = t.dim() - g.spatial
    ends = []
    for i in range(g.spatial):
        a, b = g.visible(i)
        t = t.narrow(lead + i, a - g.pre[i], b - a)
        ends.append((a, g.span[i] - b))
    t = torch.nn.functional.pad(t, g.pad_arg(ends), value=fill)
    for i in range(g.spatial):
        t = t.unfold(lead + i, g.window[i], g.stride[i])
    return t


def _flat_positions(torch: Any, g: _Geometry, device: Any) -> Any:
    """``[out..., window_size]``: the flattened spatial index in the input of each window
    position (row-major over the input's spatial dims), ``-1`` for padding."""
    flat = torch.arange(math.prod(g.inner), device=device).reshape(g.inner)
    return _windows(torch, flat, g, -1).reshape(*g.outer, g.size)


def _divisor(torch: Any, g: _Geometry, exclude: bool, like: Any) -> Any:
    """The averages' divisor per output: its window's real elements (at least 1), or the
    window's size."""
    if not exclude:
        return float(g.size)
    ones = like.new_ones(g.inner)
    return _windows(torch, ones, g, 0.0).sum(dim=_window_axes(g)).clamp_min(1)


def _window_axes(g: _Geometry) -> tuple[int, ...]:
    return tuple(range(-g.spatial, 0))


def prepare_resample(node: hg.ResampleFwdNode) -> Prepared:
    """Y (and INDEX) of a resample forward node, its geometry read now."""
    import torch

    g = _geometry(node, "X", "Y")
    a = node.attributes
    mode = hg.ResampleMode(a.resample_mode)
    zero_pad = hg.PaddingMode(a.padding_mode) == _P.ZERO_PAD
    want_index = "INDEX" in a.tensors_by_slot()
    compute = compute_dtype(node)
    lowest = torch.finfo(compute).min

    def maxpool(x: Any) -> dict[str, Any]:
        lead = tuple(x.shape[:2])
        values = _windows(torch, x, g, 0.0 if zero_pad else math.nan)
        values = values.reshape(*lead, *g.outer, g.size)
        peak = torch.where(torch.isnan(values), lowest, values).amax(-1, keepdim=True)
        wins = (values == peak) & (peak > lowest)  # NaN never equals; nothing beats lowest
        offsets = torch.arange(g.size, device=x.device)
        first = torch.where(wins, offsets, g.size).amin(-1, keepdim=True)  # first in scan order
        found = first < g.size
        pick = first.clamp_max(g.size - 1)
        out = {"Y": torch.where(found, values.gather(-1, pick), lowest).squeeze(-1)}
        if want_index:
            flat = _flat_positions(torch, g, x.device).expand(*lead, *g.outer, g.size)
            out["INDEX"] = torch.where(found, flat.gather(-1, pick), -1).squeeze(-1)
        return out

    def average(x: Any) -> dict[str, Any]:
        total = _windows(torch, x, g, 0.0).sum(dim=_window_axes(g))
        return {"Y": total / _divisor(torch, g, mode == _M.AVGPOOL_EXCLUDE_PADDING, x)}

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = inputs["X"].to(compute)
        return maxpool(x) if mode == _M.MAXPOOL else average(x)

    return run


def prepare_resample_bwd(node: hg.ResampleBwdNode) -> Prepared:
    """DX of a resample backward node, its geometry read now."""
    import torch

    g = _geometry(node, "DX", "DY")
    a = node.attributes
    mode = hg.ResampleMode(a.resample_mode)
    slots = a.tensors_by_slot()
    index_dtype = tensor_dtype(slots["INDEX"]) if mode == _M.MAXPOOL else None
    compute = compute_dtype(node)
    offsets = list(itertools.product(*(range(w) for w in g.window)))  # scan order

    def shares(dy: Any, inputs: Mapping[str, Any]) -> Any:
        """``[N, C, out..., window_size]``: what each window position receives."""
        if mode == _M.MAXPOOL:
            index = inputs["INDEX"].to(index_dtype).reshape(dy.shape).unsqueeze(-1)
            flat = _flat_positions(torch, g, dy.device)
            hits = (flat >= 0) & (flat.to(index_dtype) == index)
            return torch.where(hits, dy.unsqueeze(-1), 0.0)
        divisor = _divisor(torch, g, mode == _M.AVGPOOL_EXCLUDE_PADDING, dy)
        return (dy / divisor).unsqueeze(-1).expand(*dy.shape, g.size)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        dy = inputs["DY"].to(compute)
        share = shares(dy, inputs)
        span = dy.new_zeros(*dy.shape[:2], *g.span)
        for j, k in enumerate(offsets):
            where = tuple(
                slice(ki, ki + (o - 1) * s + 1, s)
                for ki, o, s in zip(k, g.outer, g.stride, strict=True)
            )
            span[(..., *where)] += share[..., j]
        ends = []
        for i in range(g.spatial):
            lo, hi = g.visible(i)
            span = span.narrow(2 + i, lo, hi - lo)
            ends.append((lo - g.pre[i], g.pre[i] + g.inner[i] - hi))
        return {"DX": torch.nn.functional.pad(span, g.pad_arg(ends))}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(hg.NodeType.RESAMPLE_FWD, prepare_resample, resample_refusal),
    TorchFamily(hg.NodeType.RESAMPLE_BWD, prepare_resample_bwd, resample_bwd_refusal),
)
