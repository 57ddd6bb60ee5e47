"""The NumPy reference of the resample families: pooling forward (``run_resample_fwd``) and its
gradient (``run_resample_bwd``), as hipDNN's kernels define them.

For output position ``o`` and window offset ``k`` of each spatial dim, the window reads input
position ``p = o * stride + k - pre_padding`` (``0 <= p < in`` is a real element, anything else
padding), windows scanned in row-major order of ``k``:

* ``MAXPOOL``: the largest value; a padding position takes part as 0 with ``ZERO_PAD`` and not
  at all with ``NEG_INF_PAD``. The first maximum in scan order wins; a window where nothing
  beats the compute type's lowest finite value (all padding with ``NEG_INF_PAD``, or NaNs) gives
  that value. ``INDEX`` is the winner's flattened spatial position in X (``h * W + w``,
  ``d * H * W + h * W + w``), ``-1`` for a zero of the padding, cast to INDEX's integer type.
* ``AVGPOOL_EXCLUDE_PADDING``: the sum of the real elements over their count (1 when none);
  ``AVGPOOL_INCLUDE_PADDING``: that sum over the window's size (padding adds 0 either way).
* backward: each ``DY[o]`` goes, for ``MAXPOOL``, to every position ``p`` of its window whose
  flattened index (cast to INDEX's type) equals ``INDEX[o]``; for the averages, ``DY[o]`` over
  the forward's divisor to every real position of its window.

Sums run in the compute type with IEEE's answers and no NumPy warning: a sum past the type's
range is ±inf, ``inf + -inf`` and NaN inputs give NaN (as the pointwise and reduction references
do).

``BILINEAR``, ``NEAREST`` and ``EDGE_VAL_PAD`` are hipDNN's cuDNN-compatibility members: hipDNN
defines no math for them (its packers refuse them and its schema has no number for them), so
the reference refuses them, as it does ``NOT_SET``.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.DOUBLE, compute_data_type=hg.DataType.DOUBLE,
    ...              intermediate_data_type=hg.DataType.DOUBLE)
    >>> x = g.tensor(name="x", dim=[1, 1, 2, 4])
    >>> y, index = g.resample(x, resample_mode=hg.ResampleMode.MAXPOOL,
    ...     padding_mode=hg.PaddingMode.NEG_INF_PAD, window=[2, 2], stride=[2, 2],
    ...     pre_padding=[0, 0], post_padding=[0, 0], generate_index=True)
    >>> g.validate()
    >>> out = run_resample_fwd(g.nodes[0], {"X": np.array([[[[1., 5, 2, 0], [3, 4, 7, 6]]]])})
    >>> out["Y"].tolist(), out["INDEX"].tolist()
    ([[[[5.0, 7.0]]]], [[[[1, 6]]]])
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend.dtypes import numpy_dtype

from ._common import (
    COMPUTE_DTYPES,
    ReferenceFamily,
    Runner,
    as_compute,
    compute_dtype,
    raise_refusal,
)

__all__ = [
    "FAMILIES",
    "resample_bwd_refusal",
    "resample_fwd_refusal",
    "run_resample_bwd",
    "run_resample_fwd",
]

_M, _P = hg.ResampleMode, hg.PaddingMode
_MODES = (_M.MAXPOOL, _M.AVGPOOL_EXCLUDE_PADDING, _M.AVGPOOL_INCLUDE_PADDING)
_PADDINGS = (_P.NEG_INF_PAD, _P.ZERO_PAD)


def _refusal(node: Any) -> str | None:
    a = node.attributes
    mode, padding = hg.ResampleMode(a.resample_mode), hg.PaddingMode(a.padding_mode)
    if mode not in _MODES:
        return (
            f"node '{node.name}': resample mode {mode.name}: hipDNN defines no resample math for "
            "it (only MAXPOOL, AVGPOOL_EXCLUDE_PADDING and AVGPOOL_INCLUDE_PADDING have a "
            "backend value)"
        )
    if padding not in _PADDINGS:
        return (
            f"node '{node.name}': padding mode {padding.name}: hipDNN defines no resample math "
            "for it (only NEG_INF_PAD and ZERO_PAD have a backend value)"
        )
    compute = hg.DataType(a.compute_data_type)
    if compute not in COMPUTE_DTYPES:
        return f"node '{node.name}': compute type {compute.name} (FLOAT or DOUBLE only)"
    return None


def resample_fwd_refusal(node: Any) -> str | None:
    """Why the reference does not run this resample forward node (``None`` when it does)."""
    return _refusal(node)


def resample_bwd_refusal(node: Any) -> str | None:
    """Why the reference does not run this resample backward node (``None`` when it does)."""
    return _refusal(node)


class _Geometry:
    """The spatial sizes and members of a node, checked against the arrays it is given."""

    def __init__(self, node: Any, inner: Sequence[int], outer: Sequence[int]) -> None:
        a = node.attributes
        spatial = len(inner) - 2
        if len(outer) != len(inner) or spatial < 1 or list(inner[:2]) != list(outer[:2]):
            raise _invalid(
                node, f"tensors {list(inner)} and {list(outer)} are not [N, C, spatial...] alike"
            )
        members = (a.pre_padding, a.post_padding, a.stride, a.window)
        if any(len(m) != spatial for m in members) or min(a.stride) < 1 or min(a.window) < 1:
            raise _invalid(node, "needs one pre/post padding, stride >= 1 and window >= 1 per dim")
        self.inner = [int(d) for d in inner[2:]]  # X's (DX's) spatial dims
        self.outer = [int(d) for d in outer[2:]]  # Y's (DY's) spatial dims
        self.pre, self.stride, self.window = list(a.pre_padding), list(a.stride), list(a.window)
        self.rows = int(inner[0]) * int(inner[1])

    @property
    def by_position(self) -> bool:
        """Whether to scan the input's positions rather than the window's offsets: the window
        holds more offsets than the input has positions (a window far larger than the input,
        balanced by padding), so most offsets read padding alone."""
        return bool(math.prod(self.window) > math.prod(self.inner))

    def reads(self) -> Iterator[tuple[list[np.ndarray[Any, Any]], np.ndarray[Any, Any]]]:
        """What :meth:`offsets` or :meth:`positions` yields, whichever takes fewer steps."""
        return self.positions() if self.by_position else self.offsets()

    def positions(self) -> Iterator[tuple[list[np.ndarray[Any, Any]], np.ndarray[Any, Any]]]:
        """For each input position ``p`` in row-major order (so, for each output, in the scan
        order of the offsets that read it): ``p`` shaped to broadcast over the outputs, and
        which outputs' windows hold it."""
        for p in itertools.product(*(range(n) for n in self.inner)):
            positions, valid = [], np.ones(self.outer, dtype=bool)
            for i, (step, start, w, pi) in enumerate(
                zip(self.stride, self.pre, self.window, p, strict=True)
            ):
                k = pi - np.arange(self.outer[i]) * step + start  # the offset reading p
                shape = [1] * len(self.outer)
                shape[i] = self.outer[i]
                valid &= ((k >= 0) & (k < w)).reshape(shape)
                positions.append(np.full(shape, pi))
            yield positions, valid

    def scan_index(self, positions: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """The row-major index, among the window's offsets, of the offset reading
        ``positions`` for each output."""
        flat = np.zeros(self.outer, dtype=np.int64)
        for i, (position, step, start, w) in enumerate(
            zip(positions, self.stride, self.pre, self.window, strict=True)
        ):
            shape = [1] * len(self.outer)
            shape[i] = self.outer[i]
            k = position - (np.arange(self.outer[i]) * step).reshape(shape) + start
            flat = flat * w + k
        return flat

    def first_padding(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """For each output: whether its window holds padding, and the row-major index of the
        first offset that reads padding (every later one reads the same zero of the padding,
        so only the first can win a strict maximum)."""
        lowest_outside = np.zeros(self.outer, dtype=bool)  # some dim's first offset is padding
        any_high = np.zeros(self.outer, dtype=bool)
        first = np.zeros(self.outer, dtype=np.int64)
        tail = math.prod(self.window)
        for i, (size, step, start, w) in enumerate(
            zip(self.inner, self.stride, self.pre, self.window, strict=True)
        ):
            tail //= w
            shape = [1] * len(self.outer)
            shape[i] = self.outer[i]
            lo = np.clip(start - np.arange(self.outer[i]) * step, 0, w).reshape(shape)
            hi = np.clip(start - np.arange(self.outer[i]) * step + size, 0, w).reshape(shape)
            lowest_outside |= (lo > 0) | (hi <= lo)
            high = np.broadcast_to(hi < w, self.outer)
            any_high |= high
            first = np.where(high, hi * tail, first)  # the last such dim gives the smallest
        has_padding = lowest_outside | any_high
        return has_padding, np.where(lowest_outside, 0, first)

    def offsets(self) -> Iterator[tuple[list[np.ndarray[Any, Any]], np.ndarray[Any, Any]]]:
        """For each window offset ``k`` in scan order: the input position of every output along
        each dim (clipped into range, shaped to broadcast over the outputs) and where it is
        real."""
        for k in itertools.product(*(range(w) for w in self.window)):
            positions, valid = [], np.ones(self.outer, dtype=bool)
            for i, (size, step, start, ki) in enumerate(
                zip(self.inner, self.stride, self.pre, k, strict=True)
            ):
                p = np.arange(self.outer[i]) * step + ki - start
                shape = [1] * len(self.outer)
                shape[i] = self.outer[i]
                valid &= ((p >= 0) & (p < size)).reshape(shape)
                positions.append(np.clip(p, 0, size - 1).reshape(shape))
            yield positions, valid

    def flat(self, positions: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """The flattened spatial index of each position (row-major over X's spatial dims)."""
        flat = np.zeros(self.outer, dtype=np.int64)
        for position, size in zip(positions, self.inner, strict=True):
            flat = flat * size + position
        return flat

    def valid_counts(self) -> np.ndarray[Any, Any]:
        """How many real elements each output's window holds."""
        count = np.ones(self.outer, dtype=np.int64)
        for i, (size, step, start, w) in enumerate(
            zip(self.inner, self.stride, self.pre, self.window, strict=True)
        ):
            first = np.arange(self.outer[i]) * step - start
            per_dim = np.clip(np.minimum(first + w, size) - np.maximum(first, 0), 0, None)
            shape = [1] * len(self.outer)
            shape[i] = self.outer[i]
            count = count * per_dim.reshape(shape)
        return count


def _invalid(node: Any, what: str) -> hg.HipdnnError:
    return hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, f"node '{node.name}': {what}")


def _prepare(node: Any) -> np.dtype[Any]:
    raise_refusal(_refusal(node))
    return compute_dtype(node)


def _input(node: Any, inputs: Mapping[str, Any], slot: str, dtype: Any) -> np.ndarray[Any, Any]:
    """The array of input ``slot`` (its tensor's dims) in ``dtype``."""
    tensor = node.attributes.tensors_by_slot()[slot]
    if slot not in inputs:
        raise _invalid(node, f"input {slot} was not given")
    array = np.asarray(inputs[slot])
    if list(array.shape) != list(tensor.dim):
        raise _invalid(node, f"input {slot} has shape {list(array.shape)}, not {tensor.dim}")
    return as_compute(array, dtype)


def _gather(
    rows: np.ndarray[Any, Any], positions: Sequence[np.ndarray[Any, Any]]
) -> np.ndarray[Any, Any]:
    """``rows[:, p0, p1, ...]``: each row's elements at the broadcast positions."""
    where: tuple[Any, ...] = (slice(None), *positions)
    picked: np.ndarray[Any, Any] = rows[where]
    return picked


def _index_dtype(node: Any) -> np.dtype[Any]:
    return numpy_dtype(node.attributes.tensors_by_slot()["INDEX"].data_type)


def _maxpool_by_position(
    g: _Geometry, rows: np.ndarray[Any, Any], dtype: np.dtype[Any], zero_pad: bool
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``MAXPOOL``'s Y and winners scanning the input's positions (see
    :attr:`_Geometry.by_position`): the first maximum among the real elements in scan order,
    then the zero of the padding (``ZERO_PAD``) where it beats that or ties it from an earlier
    offset, exactly as the scan of every offset decides."""
    out_shape = (g.rows, *g.outer)
    lowest = np.finfo(dtype).min
    best = np.full(out_shape, lowest, dtype=dtype)
    chosen = np.full(out_shape, -1, dtype=np.int64)
    order = np.full(out_shape, np.iinfo(np.int64).max, dtype=np.int64)
    for positions, valid in g.positions():
        value = np.broadcast_to(_gather(rows, positions), out_shape).astype(dtype)
        better = valid & (value > best)
        best = np.where(better, value, best)
        chosen = np.where(better, g.flat(positions), chosen)
        order = np.where(better, g.scan_index(positions), order)
    if zero_pad:
        has_padding, first = g.first_padding()
        zero = dtype.type(0)
        wins = has_padding & ((zero > best) | ((zero == best) & (first < order)))
        best = np.where(wins, zero, best)
        chosen = np.where(wins, -1, chosen)
    return best, chosen


def _ieee_answers(run: Runner) -> Runner:
    """``run`` with NumPy's overflow and invalid-operation warnings off: the infinities and NaNs
    it computes are IEEE's own answers, not faults."""

    @functools.wraps(run)
    def quiet(node: Any, inputs: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
        with np.errstate(over="ignore", invalid="ignore"):
            return run(node, inputs)

    return quiet


def _maxpool_outputs(
    node: Any, best: np.ndarray[Any, Any], chosen: np.ndarray[Any, Any]
) -> dict[str, np.ndarray[Any, Any]]:
    """A ``MAXPOOL`` forward's outputs: Y holds ``best``; INDEX, when the node has one, the
    ``chosen`` flat positions in its index type."""
    slots = node.attributes.tensors_by_slot()
    out = {"Y": best.reshape(slots["Y"].dim)}
    if "INDEX" in slots:
        out["INDEX"] = chosen.astype(_index_dtype(node)).reshape(slots["INDEX"].dim)
    return out


@_ieee_answers
def run_resample_fwd(node: Any, inputs: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """Y (and INDEX when the node has one) of a resample forward node from X (see the module
    doc for the math).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a mode or compute type the reference does not
            define; ``INVALID_VALUE`` for an input of the wrong shape or members that do not fit.
    """
    dtype = _prepare(node)
    slots = node.attributes.tensors_by_slot()
    x = _input(node, inputs, "X", dtype)
    y_dims = slots["Y"].dim
    g = _Geometry(node, x.shape, y_dims)
    rows = x.reshape(g.rows, *g.inner)
    mode = hg.ResampleMode(node.attributes.resample_mode)
    zero_pad = hg.PaddingMode(node.attributes.padding_mode) == _P.ZERO_PAD
    lowest = np.finfo(dtype).min
    out_shape = (g.rows, *g.outer)
    if mode == _M.MAXPOOL and g.by_position:
        best, chosen = _maxpool_by_position(g, rows, dtype, zero_pad)
        return _maxpool_outputs(node, best, chosen)
    if mode == _M.MAXPOOL:
        best = np.full(out_shape, lowest, dtype=dtype)
        chosen = np.full(out_shape, -1, dtype=np.int64)
        for positions, valid in g.offsets():
            value = np.where(valid, _gather(rows, positions), 0).astype(dtype)
            flat = np.where(valid, g.flat(positions), -1)
            counts = valid | zero_pad  # a zero of the padding competes only with ZERO_PAD
            better = counts & (value > best)  # strict: the first maximum in scan order wins
            best = np.where(better, value, best)
            chosen = np.where(better, flat, chosen)
        return _maxpool_outputs(node, best, chosen)
    total = np.zeros(out_shape, dtype=dtype)
    for positions, valid in g.reads():
        total += np.where(valid, _gather(rows, positions), 0).astype(dtype)
    if mode == _M.AVGPOOL_EXCLUDE_PADDING:
        divisor = np.maximum(g.valid_counts(), 1).astype(dtype)
    else:
        divisor = np.asarray(np.prod(g.window), dtype=dtype)
    return {"Y": (total / divisor).astype(dtype).reshape(y_dims)}


@_ieee_answers
def run_resample_bwd(node: Any, inputs: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """DX of a resample backward node from DY (and, for ``MAXPOOL``, the forward's INDEX; see
    the module doc for the math).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a mode or compute type the reference does not
            define; ``INVALID_VALUE`` for an input of the wrong shape, a ``MAXPOOL`` node without
            INDEX, or members that do not fit.
    """
    dtype = _prepare(node)
    slots = node.attributes.tensors_by_slot()
    dy = _input(node, inputs, "DY", dtype)
    dx_dims = slots["DX"].dim
    g = _Geometry(node, dx_dims, dy.shape)
    grads = dy.reshape(g.rows, *g.outer)
    dx = np.zeros((g.rows, *g.inner), dtype=dtype)
    row = np.arange(g.rows).reshape(-1, *([1] * len(g.outer)))
    mode = hg.ResampleMode(node.attributes.resample_mode)
    if mode == _M.MAXPOOL:
        if "INDEX" not in slots:
            raise _invalid(node, "MAXPOOL backward needs the forward's INDEX")
        index_type = _index_dtype(node)
        index = _input(node, inputs, "INDEX", index_type).reshape(g.rows, *g.outer)
        for positions, valid in g.reads():
            hit = valid & (index == g.flat(positions).astype(index_type))
            share = np.where(hit, grads, 0)
            np.add.at(dx, (row, *positions), share)
        return {"DX": dx.reshape(dx_dims)}
    if mode == _M.AVGPOOL_EXCLUDE_PADDING:
        divisor = np.maximum(g.valid_counts(), 1).astype(dtype)
    else:
        divisor = np.asarray(np.prod(g.window), dtype=dtype)
    share_all = (grads / divisor).astype(dtype)
    for positions, valid in g.reads():
        np.add.at(dx, (row, *positions), np.where(valid, share_all, 0))
    return {"DX": dx.reshape(dx_dims)}


#: the node types this module runs, as the package collects them
FAMILIES = (
    ReferenceFamily(hg.NodeType.RESAMPLE_FWD, run_resample_fwd, resample_fwd_refusal),
    ReferenceFamily(hg.NodeType.RESAMPLE_BWD, run_resample_bwd, resample_bwd_refusal),
)
