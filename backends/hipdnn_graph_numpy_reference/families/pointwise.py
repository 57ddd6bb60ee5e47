"""The pointwise reference: ``OUT_0 = mode(IN_0[, IN_1[, IN_2]])`` for every ``PointwiseMode``.

Operands are cast to the node's compute type, broadcast to OUT_0's dims and combined there; the
engine rounds the result to OUT_0's data type. The backward modes take the upstream gradient in
IN_0 and the forward input ``x`` in IN_1 (``dx = dy * f'(x)``); ``BINARY_SELECT`` takes IN_0
where the mask IN_2 is non-zero, IN_1 elsewhere; comparisons and logical modes give booleans
(logical modes read non-zero as true); ``GEN_INDEX`` gives each element's index along ``axis``.

Broadcasting is hipDNN's: an input broadcasts to OUT_0 when its dims, compared **from the
right**, equal OUT_0's or are 1 (:func:`hipdnn_graph.nodes.pointwise.broadcast_compatible`).
When OUT_0's dims were inferred, hipDNN computed them from the inputs' dims aligned **from the
left** (:func:`~hipdnn_graph.nodes.pointwise.common_shape`), so an input of lower rank that only
fits that way (``[4]`` beside ``[4, 1]``, giving ``[4, 1]``) is aligned from the left: its
missing trailing dims are 1.

Parameters, as the attributes carry them (hipDNN's defaults when unset): ``RELU_FWD`` /
``RELU_BWD`` ``relu_lower_clip`` (0), ``relu_upper_clip`` (the compute type's largest value),
``relu_lower_clip_slope`` (0); ``ELU_*`` ``elu_alpha`` (1); ``SOFTPLUS_*`` ``softplus_beta``
(1); ``SWISH_*`` ``swish_beta`` (1); ``GEN_INDEX`` ``axis`` (required).

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> y = g.pointwise(g.tensor(name="x", dim=[3]), mode=hg.PointwiseMode.RELU_FWD,
    ...                 relu_lower_clip_slope=0.5, name="leaky")
    >>> g.validate()
    >>> run_pointwise(g.nodes[0], {"IN_0": np.array([-2.0, 0.5, 3.0])})["OUT_0"].tolist()
    [-1.0, 0.5, 3.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.nodes.pointwise import broadcast_compatible

from ._common import ReferenceFamily, as_compute, compute_dtype, not_supported, raise_refusal

__all__ = ["FAMILIES", "pointwise_refusal", "run_pointwise"]

_M = hg.PointwiseMode
_SLOTS = ("IN_0", "IN_1", "IN_2")
Array = np.ndarray[Any, Any]
#: a mode's math: (attributes, compute dtype, operands broadcast to OUT_0) -> result
Rule = Callable[[Any, np.dtype[Any], Sequence[Array]], Array]

_erf = np.frompyfunc(math.erf, 1, 1)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


def _param(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def erf(x: Array) -> Array:
    """The error function, element-wise, in ``x``'s dtype (exact to double precision)."""
    values: Array = np.asarray(_erf(x.astype(np.float64)), dtype=np.float64)
    return values.astype(x.dtype)


def _sigmoid(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


def _phi(x: Array) -> Array:
    """The standard normal CDF Φ(x)."""
    return 0.5 * (1 + erf(x / math.sqrt(2.0)))


def _gelu_tanh_inner(x: Array) -> Array:
    return _SQRT_2_OVER_PI * (x + _GELU_TANH_CUBIC * x**3)


def _relu_fwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    x = ops[0]
    lower = ct.type(_param(a.relu_lower_clip, 0.0))
    upper = ct.type(_param(a.relu_upper_clip, float(np.finfo(ct).max)))
    slope = ct.type(_param(a.relu_lower_clip_slope, 0.0))
    # without a slope the clipped value is ``lower`` itself: 0 * (x - lower) would be NaN where
    # x - lower overflows float32 (x = -3e38, lower = 3e38)
    below = lower if slope == 0 else slope * (x - lower) + lower
    return np.where(x <= lower, below, np.where(x >= upper, upper, x))


def _relu_bwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    dy, x = ops
    lower = ct.type(_param(a.relu_lower_clip, 0.0))
    upper = ct.type(_param(a.relu_upper_clip, float(np.finfo(ct).max)))
    slope = ct.type(_param(a.relu_lower_clip_slope, 0.0))
    return np.asarray(dy * np.where(x <= lower, slope, np.where(x > upper, 0, 1)).astype(ct))


def _elu_fwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    alpha = ct.type(_param(a.elu_alpha, 1.0))
    x = ops[0]
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _elu_bwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    alpha = ct.type(_param(a.elu_alpha, 1.0))
    dy, x = ops
    return np.asarray(dy * np.where(x > 0, 1, alpha * np.exp(np.minimum(x, 0))).astype(ct))


def _softplus_fwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    beta = ct.type(_param(a.softplus_beta, 1.0))
    return np.asarray(np.logaddexp(ct.type(0), beta * ops[0]) / beta)


def _softplus_bwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    beta = ct.type(_param(a.softplus_beta, 1.0))
    dy, x = ops
    return dy * _sigmoid(beta * x)


def _swish_fwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    beta = ct.type(_param(a.swish_beta, 1.0))
    return ops[0] * _sigmoid(beta * ops[0])


def _swish_bwd(a: Any, ct: np.dtype[Any], ops: Sequence[Array]) -> Array:
    beta = ct.type(_param(a.swish_beta, 1.0))
    dy, x = ops
    s = _sigmoid(beta * x)
    return np.asarray(dy * (s + beta * x * s * (1 - s)))


def _gelu_tanh_fwd(x: Array) -> Array:
    return np.asarray(0.5 * x * (1 + np.tanh(_gelu_tanh_inner(x))))


def _gelu_tanh_bwd(dy: Array, x: Array) -> Array:
    t = np.tanh(_gelu_tanh_inner(x))
    inner_grad = _SQRT_2_OVER_PI * (1 + 3 * _GELU_TANH_CUBIC * x**2)
    return np.asarray(dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * inner_grad))


def _gelu_bwd(dy: Array, x: Array) -> Array:
    density = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return dy * (_phi(x) + x * density)


def _unary(f: Callable[[Array], Array]) -> Rule:
    return lambda a, ct, ops: f(ops[0])


def _binary(f: Callable[[Array, Array], Array]) -> Rule:
    return lambda a, ct, ops: f(ops[0], ops[1])


#: every mode but GEN_INDEX (which reads no values): its math on the broadcast operands
_RULES: dict[hg.PointwiseMode, Rule] = {
    _M.ABS: _unary(np.abs),
    _M.CEIL: _unary(np.ceil),
    _M.ELU_FWD: _elu_fwd,
    _M.ERF: _unary(erf),
    _M.EXP: _unary(np.exp),
    _M.FLOOR: _unary(np.floor),
    _M.GELU_APPROX_TANH_FWD: _unary(_gelu_tanh_fwd),
    _M.GELU_FWD: _unary(lambda x: x * _phi(x)),
    _M.IDENTITY: _unary(lambda x: x),
    _M.LOG: _unary(np.log),
    _M.LOGICAL_NOT: _unary(lambda x: x == 0),
    _M.NEG: _unary(np.negative),
    _M.RECIPROCAL: _unary(lambda x: 1 / x),
    _M.RELU_FWD: _relu_fwd,
    _M.RSQRT: _unary(lambda x: 1 / np.sqrt(x)),
    _M.SIGMOID_FWD: _unary(_sigmoid),
    _M.SIN: _unary(np.sin),
    _M.SOFTPLUS_FWD: _softplus_fwd,
    _M.SQRT: _unary(np.sqrt),
    _M.SWISH_FWD: _swish_fwd,
    _M.TAN: _unary(np.tan),
    _M.TANH_FWD: _unary(np.tanh),
    _M.ADD: _binary(np.add),
    _M.ADD_SQUARE: _binary(lambda x, b: x + b * b),
    _M.CMP_EQ: _binary(np.equal),
    _M.CMP_GE: _binary(np.greater_equal),
    _M.CMP_GT: _binary(np.greater),
    _M.CMP_LE: _binary(np.less_equal),
    _M.CMP_LT: _binary(np.less),
    _M.CMP_NEQ: _binary(np.not_equal),
    _M.DIV: _binary(np.divide),
    _M.ELU_BWD: _elu_bwd,
    _M.GELU_APPROX_TANH_BWD: _binary(_gelu_tanh_bwd),
    _M.GELU_BWD: _binary(_gelu_bwd),
    _M.LOGICAL_AND: _binary(lambda x, b: (x != 0) & (b != 0)),
    _M.LOGICAL_OR: _binary(lambda x, b: (x != 0) | (b != 0)),
    _M.MAX: _binary(np.maximum),
    _M.MIN: _binary(np.minimum),
    _M.MUL: _binary(np.multiply),
    _M.RELU_BWD: _relu_bwd,
    _M.SIGMOID_BWD: _binary(lambda dy, x: dy * _sigmoid(x) * (1 - _sigmoid(x))),
    _M.SOFTPLUS_BWD: _softplus_bwd,
    _M.SUB: _binary(np.subtract),
    _M.SWISH_BWD: _swish_bwd,
    _M.TANH_BWD: _binary(lambda dy, x: dy * (1 - np.tanh(x) ** 2)),
    _M.BINARY_SELECT: lambda a, ct, ops: np.where(ops[2] != 0, ops[0], ops[1]),
}

#: the modes the reference defines (every PointwiseMode member but NOT_SET)
MODES = frozenset({*_RULES, _M.GEN_INDEX})


def aligned_dims(dims: Sequence[int], out: Sequence[int]) -> tuple[int, ...] | None:
    """The dims an input is read with to broadcast to ``out`` (see the module docstring), or
    ``None`` when it broadcasts neither from the right nor from the left.

    Example:
        >>> aligned_dims([8], [2, 8]), aligned_dims([4], [4, 1]), aligned_dims([3], [2, 4])
        ((8,), (4, 1), None)
    """
    dims, out = list(dims), list(out)
    if broadcast_compatible(dims, out):
        return tuple(dims)
    if len(dims) < len(out):
        left = dims + [1] * (len(out) - len(dims))
        if all(d in (o, 1) for d, o in zip(left, out, strict=True)):
            return tuple(left)
    return None


def pointwise_refusal(node: hg.PointwiseNode) -> str | None:
    """Why the reference cannot run this pointwise node, or ``None``."""
    a = node.attributes
    where = f"node '{node.name}'"
    if a.mode not in MODES:
        return f"{where}: pointwise mode {hg.PointwiseMode(a.mode).name} has no reference"
    out = a.get_output_0()
    if out is None:
        return f"{where}: no OUT_0 tensor"
    for slot, tensor in a.tensors_by_slot().items():
        if slot != "OUT_0" and aligned_dims(tensor.dim, out.dim) is None:
            return (
                f"{where}: input {slot} '{tensor.name}' of dims {tensor.dim} does not broadcast "
                f"to OUT_0's dims {out.dim}"
            )
    return None


def _operand(value: Any, dims: Sequence[int], out: tuple[int, ...], ct: np.dtype[Any]) -> Array:
    array = as_compute(value, ct)
    if array.ndim == 0:  # a pass-by-value scalar
        return array
    shape = aligned_dims(dims, out)
    assert shape is not None  # pointwise_refusal checked it
    return np.broadcast_to(array.reshape(shape), out)


def run_pointwise(node: hg.PointwiseNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """The pointwise node's OUT_0 from its inputs, in the compute type (see the module
    docstring for the math of each mode).

    Args:
        node: a validated pointwise node.
        inputs: ``IN_0`` (and ``IN_1``, ``IN_2`` as the mode takes) as arrays of the tensors'
            dims, or numbers for pass-by-value scalars.

    Returns:
        ``{"OUT_0": array of OUT_0's dims}``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for what :func:`pointwise_refusal` names or a
            compute type the reference does not compute in.
    """
    raise_refusal(pointwise_refusal(node))
    a = node.attributes
    ct = compute_dtype(node)
    out = a.get_output_0()
    assert out is not None  # pointwise_refusal checked it
    dims = tuple(out.dim)
    if a.mode == _M.GEN_INDEX:
        assert a.axis is not None
        shape = [1] * len(dims)
        shape[a.axis] = dims[a.axis]
        index = np.arange(dims[a.axis], dtype=np.int64).reshape(shape)
        return {"OUT_0": np.broadcast_to(index, dims)}
    tensors = a.tensors_by_slot()
    operands = [
        _operand(inputs[slot], tensors[slot].dim, dims, ct) for slot in _SLOTS if slot in tensors
    ]
    if not operands:
        raise not_supported(node, "no input")
    with np.errstate(all="ignore"):  # inf and NaN are the math's own answers (log(-1), 1/0)
        result = np.asarray(_RULES[hg.PointwiseMode(a.mode)](a, ct, operands))
    if result.dtype != np.bool_:
        result = result.astype(ct, copy=False)
    return {"OUT_0": np.broadcast_to(result, dims)}


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.POINTWISE, run_pointwise, pointwise_refusal),)
