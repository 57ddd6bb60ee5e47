"""The pointwise reference against torch in float64, for every ``PointwiseMode`` member, in every
tested (io, compute) type pair, with its parameters and hipDNN's broadcasting; executed through
``Graph.execute`` on ``NUMPY_REFERENCE_ENGINE``. Backward modes are checked against torch
autograd of the forward function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from family_reference_cases import TYPE_IDS, TYPE_PAIRS, assert_close, graph, run, stored

import hipdnn_graph as hg
from hipdnn_graph.nodes.pointwise import BINARY_MODES, TERNARY_MODES, UNARY_MODES

torch = pytest.importorskip("torch")
F = torch.nn.functional
M = hg.PointwiseMode
T = Any  # a float64 torch tensor


def _grad(f: Callable[[T], T]) -> Callable[[T, T], T]:
    """``(dy, x) -> dy * f'(x)`` by torch autograd."""

    def backward(dy: T, x: T) -> T:
        x = torch.broadcast_to(x, dy.shape).clone().requires_grad_(True)
        (dx,) = torch.autograd.grad(f(x), x, dy)
        return dx

    return backward


def _relu_clip(lower: float, upper: float, slope: float) -> Callable[[T], T]:
    def f(x: T) -> T:
        return torch.where(x <= lower, slope * (x - lower) + lower, torch.clamp(x, max=upper))

    return f


#: mode -> (torch float64 reference, input domain); ``"pos"`` draws from [0.1, 3], ``"int"``
#: small integers (so that comparisons see equal values), ``"tan"`` (-1.2, 1.2), ``"nz"``
#: values at least 0.25 away from zero, otherwise standard normal
REFERENCES: dict[hg.PointwiseMode, tuple[Callable[..., T], str]] = {
    M.ABS: (torch.abs, ""),
    M.CEIL: (torch.ceil, ""),
    M.ELU_FWD: (F.elu, ""),
    M.ERF: (torch.erf, ""),
    M.EXP: (torch.exp, ""),
    M.FLOOR: (torch.floor, ""),
    M.GELU_APPROX_TANH_FWD: (lambda x: F.gelu(x, approximate="tanh"), ""),
    M.GELU_FWD: (F.gelu, ""),
    M.IDENTITY: (lambda x: x, ""),
    M.LOG: (torch.log, "pos"),
    M.LOGICAL_NOT: (torch.logical_not, "int"),
    M.NEG: (torch.neg, ""),
    M.RECIPROCAL: (torch.reciprocal, "nz"),
    M.RELU_FWD: (F.relu, ""),
    M.RSQRT: (torch.rsqrt, "pos"),
    M.SIGMOID_FWD: (torch.sigmoid, ""),
    M.SIN: (torch.sin, ""),
    M.SOFTPLUS_FWD: (F.softplus, ""),
    M.SQRT: (torch.sqrt, "pos"),
    M.SWISH_FWD: (F.silu, ""),
    M.TAN: (torch.tan, "tan"),
    M.TANH_FWD: (torch.tanh, ""),
    M.ADD: (torch.add, ""),
    M.ADD_SQUARE: (lambda x, b: x + b * b, ""),
    M.CMP_EQ: (torch.eq, "int"),
    M.CMP_GE: (torch.ge, "int"),
    M.CMP_GT: (torch.gt, "int"),
    M.CMP_LE: (torch.le, "int"),
    M.CMP_LT: (torch.lt, "int"),
    M.CMP_NEQ: (torch.ne, "int"),
    M.DIV: (torch.div, "nz"),
    M.ELU_BWD: (_grad(F.elu), ""),
    M.GELU_APPROX_TANH_BWD: (_grad(lambda x: F.gelu(x, approximate="tanh")), ""),
    M.GELU_BWD: (_grad(F.gelu), ""),
    M.LOGICAL_AND: (torch.logical_and, "int"),
    M.LOGICAL_OR: (torch.logical_or, "int"),
    M.MAX: (torch.maximum, ""),
    M.MIN: (torch.minimum, ""),
    M.MUL: (torch.mul, ""),
    M.RELU_BWD: (_grad(F.relu), ""),
    M.SIGMOID_BWD: (_grad(torch.sigmoid), ""),
    M.SOFTPLUS_BWD: (_grad(F.softplus), ""),
    M.SUB: (torch.sub, ""),
    M.SWISH_BWD: (_grad(F.silu), ""),
    M.TANH_BWD: (_grad(torch.tanh), ""),
    M.BINARY_SELECT: (lambda a, b, mask: torch.where(mask != 0, a, b), ""),
}
_VALUE_MODES = sorted((UNARY_MODES | BINARY_MODES | TERNARY_MODES) - {M.GEN_INDEX})
_BOOLEAN_RESULTS = {m for m in REFERENCES if m.name.startswith(("CMP_", "LOGICAL_"))}


def test_every_mode_has_a_reference_here() -> None:
    assert set(REFERENCES) | {M.GEN_INDEX, M.NOT_SET} == set(M)


def _draw(rng: np.random.Generator, domain: str, dims: list[int]) -> np.ndarray[Any, Any]:
    if domain == "pos":
        return rng.uniform(0.1, 3.0, dims)
    if domain == "int":
        return rng.integers(-2, 3, dims).astype(np.float64)
    if domain == "tan":
        return rng.uniform(-1.2, 1.2, dims)
    if domain == "nz":
        magnitude = rng.uniform(0.25, 3.0, dims)
        return np.where(rng.random(dims) < 0.5, -magnitude, magnitude)
    return 2.0 * rng.standard_normal(dims)


def _arity(mode: hg.PointwiseMode) -> int:
    return 1 if mode in UNARY_MODES else 2 if mode in BINARY_MODES else 3


def _torch(array: np.ndarray[Any, Any]) -> T:
    return torch.from_numpy(array.astype(np.float64))


@pytest.mark.parametrize(("io", "compute"), TYPE_PAIRS, ids=TYPE_IDS)
@pytest.mark.parametrize("mode", _VALUE_MODES, ids=lambda m: m.name)
def test_mode_matches_torch(mode: hg.PointwiseMode, io: hg.DataType, compute: hg.DataType) -> None:
    rng = np.random.default_rng(int(mode))
    reference, domain = REFERENCES[mode]
    g = graph(io, compute)
    dims = [[3, 4, 5], [3, 1, 5], [1, 4, 1]][: _arity(mode)]  # broadcasting on every input
    ins = [g.tensor(name=f"x{i}", dim=d) for i, d in enumerate(dims)]
    y = g.pointwise(*ins, mode=mode, name="op")
    y.set_output(True).set_dim([3, 4, 5]).set_stride([20, 5, 1])
    if mode in _BOOLEAN_RESULTS:
        y.set_data_type(hg.DataType.BOOLEAN)
    g.validate()
    pack = {t: stored(_draw(rng, domain, t.dim), t) for t in ins}
    got = run(g, pack)[y]
    want = reference(*(_torch(pack[t]) for t in ins)).numpy()
    if mode in _BOOLEAN_RESULTS:
        assert got.dtype == np.bool_ and np.array_equal(got, want)
    else:
        assert_close(got, want, io, compute)


def f32(value: float) -> float:
    """A parameter as the attributes store it (rounded to float32, as hipDNN stores them)."""
    return float(np.float32(value))


# clip bounds that no HALF or BFLOAT16 input equals (their gradients differ by convention there)
PARAMETERS = [
    (M.RELU_FWD, {"relu_lower_clip_slope": 0.25}, lambda x: F.leaky_relu(x, 0.25)),
    (M.RELU_FWD, {"relu_lower_clip": -0.55, "relu_upper_clip": 1.45},
     lambda x: torch.clamp(x, f32(-0.55), f32(1.45))),
    (M.RELU_FWD, {"relu_lower_clip": 0.5, "relu_upper_clip": 2.0, "relu_lower_clip_slope": 0.1},
     _relu_clip(0.5, 2.0, f32(0.1))),
    (M.ELU_FWD, {"elu_alpha": 0.5}, lambda x: F.elu(x, 0.5)),
    (M.SOFTPLUS_FWD, {"softplus_beta": 2.0}, lambda x: F.softplus(x, beta=2.0)),
    (M.SWISH_FWD, {"swish_beta": 1.5}, lambda x: x * torch.sigmoid(1.5 * x)),
    (M.RELU_BWD, {"relu_lower_clip_slope": 0.25}, _grad(lambda x: F.leaky_relu(x, 0.25))),
    (M.RELU_BWD, {"relu_lower_clip": -0.55, "relu_upper_clip": 1.45},
     _grad(lambda x: torch.clamp(x, f32(-0.55), f32(1.45)))),
    (M.ELU_BWD, {"elu_alpha": 0.3}, _grad(lambda x: F.elu(x, f32(0.3)))),
    (M.SOFTPLUS_BWD, {"softplus_beta": 2.0}, _grad(lambda x: F.softplus(x, beta=2.0))),
    (M.SWISH_BWD, {"swish_beta": 1.5}, _grad(lambda x: x * torch.sigmoid(1.5 * x))),
]  # fmt: skip


@pytest.mark.parametrize(("io", "compute"), TYPE_PAIRS, ids=TYPE_IDS)
@pytest.mark.parametrize(
    ("mode", "params", "reference"), PARAMETERS, ids=lambda p: getattr(p, "name", None)
)
def test_mode_parameters(
    mode: hg.PointwiseMode,
    params: dict[str, float],
    reference: Callable[..., T],
    io: hg.DataType,
    compute: hg.DataType,
) -> None:
    rng = np.random.default_rng(7)
    g = graph(io, compute)
    ins = [g.tensor(name=f"x{i}", dim=[6, 7]) for i in range(_arity(mode))]
    y = g.pointwise(*ins, mode=mode, name="op", **params)
    y.set_output(True)
    g.validate()
    pack = {t: stored(2.0 * rng.standard_normal(t.dim), t) for t in ins}
    got = run(g, pack)[y]
    assert_close(got, reference(*(_torch(pack[t]) for t in ins)).detach().numpy(), io, compute)


def test_relu_bwd_at_the_clip_bounds_follows_hipdnn() -> None:
    # hipDNN's convention: the lower bound takes the slope, the upper bound still passes
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    dy, x = g.tensor(name="dy", dim=[5]), g.tensor(name="x", dim=[5])
    dx = g.pointwise(dy, x, mode=M.RELU_BWD, relu_lower_clip=-1.0, relu_upper_clip=2.0,
                     relu_lower_clip_slope=0.25, name="drelu")  # fmt: skip
    dx.set_output(True)
    g.validate()
    xs = stored([-2.0, -1.0, 0.0, 2.0, 3.0], x)
    got = run(g, {dy: stored(np.full(5, 4.0), dy), x: xs})[dx]
    assert got.tolist() == [1.0, 1.0, 4.0, 4.0, 0.0]


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gen_index_along_its_axis(axis: int) -> None:
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4])
    y = g.pointwise(x, mode=M.GEN_INDEX, axis=axis, name="index")
    y.set_output(True).set_data_type(hg.DataType.INT32)
    g.validate()
    got = run(g, {x: stored(np.zeros([2, 3, 4]), x)})[y]
    want = torch.arange([2, 3, 4][axis]).reshape([-1 if i == axis else 1 for i in range(3)])
    assert got.dtype == np.int32
    assert np.array_equal(got, torch.broadcast_to(want, (2, 3, 4)).numpy())


def test_broadcasting_from_the_right_with_an_output_of_given_dims() -> None:
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x, b = g.tensor(name="x", dim=[2, 3, 4]), g.tensor(name="b", dim=[4])
    y = g.pointwise(x, b, mode=M.SUB, name="sub")
    y.set_output(True).set_dim([2, 3, 4]).set_stride([12, 4, 1])
    g.validate()
    rng = np.random.default_rng(0)
    pack = {x: stored(rng.standard_normal([2, 3, 4]), x), b: stored(rng.standard_normal(4), b)}
    got = run(g, pack)[y]
    assert np.array_equal(got, pack[x] - pack[b][None, None, :])


def test_left_aligned_common_shape_reads_the_lower_rank_input_from_the_left() -> None:
    # hipDNN infers OUT_0 = [4, 3] from [4, 3] and [4] compared from the left; [4] does not
    # broadcast to [4, 3] from the right, so it is read as [4, 1]
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x, b = g.tensor(name="x", dim=[4, 3]), g.tensor(name="b", dim=[4])
    y = g.pointwise(x, b, mode=M.ADD, name="add")
    y.set_output(True)
    g.validate()
    rng = np.random.default_rng(1)
    pack = {x: stored(rng.standard_normal([4, 3]), x), b: stored(rng.standard_normal(4), b)}
    got = run(g, pack)[y]
    assert y.dim == [4, 3]
    assert np.array_equal(got, pack[x] + pack[b][:, None])


def test_pass_by_value_scalars_constant_and_runtime() -> None:
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3])
    half = g.tensor(hg.TensorAttributes(name="half").set_value(0.5))
    shift = g.tensor(
        hg.TensorAttributes(name="shift").set_as_runtime_parameter().set_dim([1]).set_stride([1])
    )
    shift.set_data_type(hg.DataType.FLOAT)
    scaled = g.pointwise(x, half, mode=M.MUL, name="scale")
    y = g.pointwise(scaled, shift, mode=M.ADD, name="shift_add")
    y.set_output(True)
    g.validate()
    xs = stored(np.arange(6.0).reshape(2, 3), x)
    got = run(g, {x: xs, shift: 2.0})[y]
    assert np.array_equal(got, xs * 0.5 + 2.0)


def test_compute_type_is_honoured() -> None:
    # 1 + 1e-10 survives a DOUBLE computation and rounds to 1 in a FLOAT one
    values = np.array([1 + 1e-10, -3 - 1e-10])
    results = {}
    for compute in (hg.DataType.DOUBLE, hg.DataType.FLOAT):
        g = graph(hg.DataType.DOUBLE, compute)
        x = g.tensor(name="x", dim=[2])
        y = g.pointwise(x, mode=M.IDENTITY, name="id")
        y.set_output(True)
        g.validate()
        results[compute] = run(g, {x: stored(values, x)})[y]
    assert np.array_equal(results[hg.DataType.DOUBLE], values)
    assert np.array_equal(results[hg.DataType.FLOAT], [1.0, -3.0])


def _refusal(g: hg.Graph) -> str:
    from hipdnn_graph_numpy_reference.engine import NumpyReferenceEngine

    g.validate()
    support = NumpyReferenceEngine().check(g)
    assert not support
    return support.reason


def test_refusals_name_the_node_and_the_feature() -> None:
    # (a GEN_INDEX without an axis in range is refused by validate(): test_harden_round_four)
    g = graph(hg.DataType.HALF, hg.DataType.HALF)
    g.pointwise(g.tensor(name="x", dim=[2]), mode=M.EXP, name="e").set_output(True)
    assert _refusal(g) == "node 'e': compute type HALF (FLOAT or DOUBLE only)"
    g = graph(hg.DataType.FLOAT, hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2], data_type=hg.DataType.INT4)
    g.pointwise(x, mode=M.EXP, name="e").set_output(True)
    assert _refusal(g) == "node 'e': IN_0 'x' has data type INT4 (no NumPy type)"
