"""The NumPy block-scale references (``families/block_scale.py``) against an independent
computation: per element and per block in Python, the scale found by searching every value of
the scale type (torch's ``nextafter`` for FLOAT scales), the quotient rounded by torch's own
casts (FP8, half, bfloat16, integers) or by searching every value of the FP4/FP6 types (nearest,
ties to the even bit pattern); dequantize with torch in the compute type. What hipDNN leaves
undefined is refused naming why."""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend.dtypes import numpy_dtype

torch = pytest.importorskip("torch")
families = pytest.importorskip("hipdnn_graph_numpy_reference.families.block_scale")
run_quantize = families.run_block_scale_quantize
run_dequantize = families.run_block_scale_dequantize

T = hg.DataType
_TORCH = {
    T.FLOAT: torch.float32,
    T.DOUBLE: torch.float64,
    T.HALF: torch.float16,
    T.BFLOAT16: torch.bfloat16,
    T.FP8_E4M3: torch.float8_e4m3fn,
    T.FP8_E5M2: torch.float8_e5m2,
    T.FP8_E4M3_FNUZ: torch.float8_e4m3fnuz,
    T.FP8_E5M2_FNUZ: torch.float8_e5m2fnuz,
    T.INT8: torch.int8,
    T.UINT8: torch.uint8,
    T.INT32: torch.int32,
}


def _values(data_type: hg.DataType) -> tuple[list[float], list[int]]:
    """Every finite value of an 8- or 16-bit type and its bit pattern, sorted by value."""
    dtype = numpy_dtype(data_type)
    bits = np.arange(2 ** (8 * dtype.itemsize), dtype=np.uint64)
    raw = bits.astype(np.uint16 if dtype.itemsize == 2 else np.uint8)
    with np.errstate(invalid="ignore"):  # the NaN patterns
        values = raw.view(dtype).astype(np.float64)
    pairs = sorted(
        (float(v), int(b)) for v, b in zip(values, bits, strict=True) if math.isfinite(v)
    )
    return [v for v, _ in pairs], [b for _, b in pairs]


def _scale_of(value: float, data_type: hg.DataType) -> float:
    """The least value of the scale type not below ``value``, saturating."""
    if data_type is T.FLOAT:
        top = float(torch.finfo(torch.float32).max)
        v = torch.tensor(min(value, top), dtype=torch.float64)
        r = v.to(torch.float32)
        if r.double() < v:
            r = torch.nextafter(r, torch.tensor(math.inf, dtype=torch.float32))
        return float(r)
    values, _ = _values(data_type)
    at = bisect.bisect_left(values, min(value, values[-1]))
    return values[at]


def _nearest_even(value: float, data_type: hg.DataType) -> float:
    """``value`` (within range) rounded to the nearest FP4/FP6 value, ties to the even pattern."""
    values, bits = _values(data_type)
    best = min(abs(v - value) for v in values)
    ties = [(b, v) for v, b in zip(values, bits, strict=True) if abs(v - value) == best]
    return min(ties, key=lambda t: (t[0] % 2, t[0]))[1]


def _round_to(value: Any, data_type: hg.DataType, compute: Any) -> float:
    """A clamped quotient (a torch scalar of the compute type) in the Y type."""
    if data_type in (T.FP4_E2M1, T.FP6_E2M3, T.FP6_E3M2):
        return _nearest_even(float(value), data_type)
    target = _TORCH[data_type]
    if not target.is_floating_point:
        info = torch.iinfo(target)
        low, high = torch.tensor(info.min, dtype=compute), torch.tensor(info.max, dtype=compute)
        if value <= low:
            return float(info.min)
        if value >= high:
            return float(info.max)
        return float(torch.round(value))  # half to even
    return float(value.to(target).double())


def _expected_quantize(
    x: np.ndarray[Any, Any], block: int, axis: int, y_type: hg.DataType, s_type: hg.DataType,
    compute_type: hg.DataType,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:  # fmt: skip
    compute = _TORCH[compute_type]
    y_np = numpy_dtype(y_type)
    if np.issubdtype(y_np, np.integer):
        low, high = float(np.iinfo(y_np).min), float(np.iinfo(y_np).max)
    else:
        info = ml_dtypes.finfo(y_np)
        low, high = float(info.min), float(info.max)
    xt = torch.from_numpy(x).to(compute)
    n = x.shape[axis]
    count = math.ceil(n / block)
    s_shape = list(x.shape)
    s_shape[axis] = count
    y = np.zeros(x.shape)
    s = np.zeros(s_shape)
    for index in itertools.product(*(range(d) for d in s_shape)):
        members = []
        for k in range(index[axis] * block, min(n, index[axis] * block + block)):
            at = list(index)
            at[axis] = k
            members.append(tuple(at))
        amax = max(float(abs(xt[m])) for m in members)
        scale = _scale_of(amax / high, s_type)
        s[index] = scale
        sc = torch.tensor(scale, dtype=compute)
        for m in members:
            q = xt[m] / sc if scale != 0 else torch.tensor(0, dtype=compute)
            q = torch.clamp(q, torch.tensor(low, dtype=compute), torch.tensor(high, dtype=compute))
            y[m] = _round_to(q, y_type, compute)
    return y, s


def _quantize_node(
    dims: list[int], block: int, axis: int | None, y_type: hg.DataType, s_type: hg.DataType,
    compute: hg.DataType, transpose: bool = False,
) -> Any:  # fmt: skip
    g = hg.Graph(io_data_type=T.FLOAT, intermediate_data_type=T.FLOAT, compute_data_type=compute)
    keywords: dict[str, Any] = {"block_size": block, "transpose": transpose}
    if axis is not None:
        keywords["axis"] = axis
    y, s = g.block_scale_quantize(g.tensor(name="x", dim=dims), **keywords)
    y.set_data_type(y_type).set_output(True)
    s.set_data_type(s_type).set_output(True)
    g.validate()
    return g.nodes[0]


def _data(dims: list[int], seed: int) -> np.ndarray[Any, Any]:
    """Values over many magnitudes (block by block), a zero block and exact halfway points."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(dims) * np.exp2(rng.integers(-40, 40, size=[*dims[:-1], 1]))
    flat = x.reshape(-1)
    flat[:4] = 0.0
    flat[4:8] = [0.25, 0.75, 2.5, -5.0]  # halfway points of FP4 (ties) after a scale of 1
    return x.astype(np.float32)


CASES = [
    # dims, block, axis, Y type, scale type, compute, transpose
    ([3, 64], 32, None, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT, False),
    ([3, 64], 32, None, T.FP8_E5M2, T.FP8_E8M0, T.FLOAT, False),
    ([4, 32], 16, 1, T.FP4_E2M1, T.FP8_E8M0, T.FLOAT, False),
    ([64, 3], 32, 0, T.FP6_E2M3, T.FP8_E8M0, T.DOUBLE, True),
    ([2, 2, 16], 8, 2, T.FP6_E3M2, T.HALF, T.FLOAT, False),
    ([2, 16, 3], 4, 1, T.INT8, T.FLOAT, T.FLOAT, True),
    ([2, 32], 16, None, T.UINT8, T.FP8_E8M0, T.FLOAT, False),
    ([2, 32], 8, None, T.BFLOAT16, T.BFLOAT16, T.DOUBLE, False),
    ([2, 32], 32, None, T.FP8_E4M3_FNUZ, T.FLOAT, T.FLOAT, False),
    ([2, 16], 16, None, T.INT32, T.FP8_E8M0, T.FLOAT, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3].name}-{c[4].name}-{c[5].name}")
def test_quantize_matches_the_independent_computation(case: tuple[Any, ...]) -> None:
    dims, block, axis, y_type, s_type, compute, transpose = case
    node = _quantize_node(dims, block, axis, y_type, s_type, compute, transpose)
    x = _data(dims, seed=len(dims) * block)
    before = x.copy()
    out = run_quantize(node, {"X": x})
    assert np.array_equal(x, before)  # the input is untouched
    want_y, want_s = _expected_quantize(
        x, block, axis if axis is not None else len(dims) - 1, y_type, s_type, compute
    )
    assert out["Y"].dtype == numpy_dtype(y_type) and out["SCALE"].dtype == numpy_dtype(s_type)
    assert list(out["SCALE"].shape) == node.attributes.get_scale().get_dim()
    np.testing.assert_array_equal(out["SCALE"].astype(np.float64), want_s)
    np.testing.assert_array_equal(out["Y"].astype(np.float64), want_y)


def test_quantize_zero_blocks_saturation_and_the_mx_example() -> None:
    node = _quantize_node([3, 4], 4, None, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT)
    x = np.array(
        [[0.0, 0.0, 0.0, 0.0], [1.0, -2.0, 448.0, 0.5], [3e38, -1e38, 0.0, 1.0]], np.float32
    )
    out = run_quantize(node, {"X": x})
    scale = out["SCALE"].astype(np.float64)[:, 0]
    assert scale.tolist() == [2.0**-127, 1.0, 2.0**120]  # no zero in E8M0; 3e38/448 rounded up
    y = out["Y"].astype(np.float64)
    assert y[0].tolist() == [0.0] * 4 and y[1].tolist() == [1.0, -2.0, 448.0, 0.5]
    assert y[2].tolist() == [224.0, -72.0, 0.0, 0.0]  # 225.7, -75.2 to E4M3; 2^-120 is 0
    # a scale type too narrow for the block: the scale saturates and Y clamps
    half = _quantize_node([1, 4], 4, None, T.FP8_E4M3, T.HALF, T.FLOAT)
    out = run_quantize(half, {"X": np.array([[1e10, -1e10, 1.0, 0.0]], np.float32)})
    assert out["SCALE"].astype(np.float64).tolist() == [[65504.0]]
    assert out["Y"].astype(np.float64).tolist() == [[448.0, -448.0, 0.0, 0.0]]


def test_quantize_partial_last_block() -> None:
    # hipDNN's node refuses a block dim that is not a multiple, its reference takes it: built
    # here without the node's rules
    a = hg.BlockScaleQuantizeAttributes().set_block_size(4).set_compute_data_type(T.FLOAT)
    a.set_x(hg.TensorAttributes(dim=[1, 6])).set_y(hg.TensorAttributes(data_type=T.FP8_E4M3))
    a.set_scale(hg.TensorAttributes(dim=[1, 2], data_type=T.FP8_E8M0))
    node = hg.BlockScaleQuantizeNode(a, hg.GraphAttributes())
    x = np.array([[1.0, 2.0, 3.0, 4.0, 896.0, 1.0]], np.float32)
    out = run_quantize(node, {"X": x})
    want_y, want_s = _expected_quantize(x, 4, 1, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT)
    np.testing.assert_array_equal(out["SCALE"].astype(np.float64), want_s)
    np.testing.assert_array_equal(out["Y"].astype(np.float64), want_y)
    assert want_s.tolist() == [[2.0**-6, 2.0]]  # 4 / 448 rounded up; 896 / 448


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda n: n.attributes.set_compute_data_type(T.HALF), "compute data type HALF"),
        (lambda n: n.attributes.get_y().set_data_type(T.INT64), "Y data type INT64"),
        (lambda n: n.attributes.get_scale().set_data_type(T.FP8_E4M3), "SCALE data type FP8_E4M3"),
        (lambda n: n.attributes.get_scale().set_dim([2, 3]), "SCALE dims [2, 3] are not [2, 2]"),
    ],
)
def test_quantize_refuses_what_hipdnn_leaves_undefined(change: Any, words: str) -> None:
    node = _quantize_node([2, 64], 32, None, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT)
    change(node)
    with pytest.raises(hg.HipdnnError) as info:
        run_quantize(node, {"X": np.ones((2, 64), np.float32)})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED and words in info.value.message


def test_quantize_refuses_nan_and_wrong_inputs() -> None:
    node = _quantize_node([2, 64], 32, None, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT)
    x = np.ones((2, 64), np.float32)
    x[1, 3] = np.inf
    with pytest.raises(hg.HipdnnError, match="NaN or ±inf") as info:
        run_quantize(node, {"X": x})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    for inputs in ({}, {"X": np.ones((2, 32), np.float32)}):
        with pytest.raises(hg.HipdnnError) as info:
            run_quantize(node, inputs)
        assert info.value.code == hg.ErrorCode.INVALID_VALUE


# ----- dequantize -------------------------------------------------------------------------------
def _dequantize_node(
    x_dims: list[int], s_dims: list[int], blocks: list[int], compute: hg.DataType,
    negative: bool = False,
) -> Any:  # fmt: skip
    g = hg.Graph(io_data_type=T.FLOAT, intermediate_data_type=T.FLOAT, compute_data_type=compute)
    x = g.tensor(name="x", dim=x_dims, data_type=T.FP8_E4M3)
    s = g.tensor(name="s", dim=s_dims, data_type=T.FP8_E8M0)
    g.block_scale_dequantize(x, s, block_size=blocks, is_negative_scale=negative).set_output(True)
    g.validate()
    return g.nodes[0]


def _expected_dequantize(
    x: np.ndarray[Any, Any], s: np.ndarray[Any, Any], sizes: list[int], compute: Any,
    negative: bool,
) -> np.ndarray[Any, Any]:  # fmt: skip
    xt = torch.from_numpy(x.astype(np.float64)).to(compute)
    st = torch.from_numpy(s.astype(np.float64)).to(compute)
    y = torch.zeros(x.shape, dtype=compute)
    for index in itertools.product(*(range(d) for d in x.shape)):
        scale = st[tuple(i // b for i, b in zip(index, sizes, strict=True))]
        factor = torch.pow(torch.tensor(2.0, dtype=compute), -scale) if negative else scale
        y[index] = xt[index] * factor
    return y.double().numpy()


@pytest.mark.parametrize(
    ("x_dims", "s_dims", "blocks", "sizes", "compute", "negative"),
    [
        ([4, 64], [4, 2], [32], [1, 32], T.FLOAT, False),
        ([3, 4, 16], [3, 2, 2], [2, 8], [1, 2, 8], T.DOUBLE, False),
        ([2, 8], [2, 2], [4], [1, 4], T.FLOAT, True),
        ([6, 5], [2, 5], [3, 1], [3, 1], T.FLOAT, False),
    ],
)
def test_dequantize_matches_torch(
    x_dims: list[int], s_dims: list[int], blocks: list[int], sizes: list[int],
    compute: hg.DataType, negative: bool,
) -> None:  # fmt: skip
    node = _dequantize_node(x_dims, s_dims, blocks, compute, negative)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(x_dims) * 8).astype(ml_dtypes.float8_e4m3fn)
    exponents = rng.integers(-3, 4, size=s_dims) if negative else rng.integers(-20, 20, s_dims)
    s = (np.exp2(exponents) if not negative else exponents).astype(np.float32)
    before = (x.copy(), s.copy())
    out = run_dequantize(node, {"X": x, "SCALE": s})
    assert np.array_equal(x, before[0]) and np.array_equal(s, before[1])
    assert out["Y"].dtype == numpy_dtype(compute)
    want = _expected_dequantize(x, s, sizes, _TORCH[compute], negative)
    np.testing.assert_array_equal(out["Y"].astype(np.float64), want)


@pytest.mark.parametrize(
    ("x_dims", "s_dims", "blocks", "words"),
    [
        # hipDNN's binding-test graph: the trailing reading blocks dim 3, the shape reading dim 1
        ([2, 64, 32, 32], [2, 2, 32, 32], [32], "read block_size [32]"),
        ([4, 64], [4, 2], [1, 32], "the dims where X and SCALE differ: [1, 1]"),
        ([4, 64], [4, 4], [32], "SCALE dims [4, 4] are not [4, 2]"),
        ([4, 64], [4, 2, 1], [32], "SCALE has rank 3, X 2"),
    ],
)
def test_dequantize_refuses_what_hipdnn_leaves_undefined(
    x_dims: list[int], s_dims: list[int], blocks: list[int], words: str
) -> None:
    a = hg.BlockScaleDequantizeAttributes().set_block_size(blocks).set_compute_data_type(T.FLOAT)
    a.set_x(hg.TensorAttributes(dim=x_dims)).set_scale(hg.TensorAttributes(dim=s_dims))
    a.set_y(hg.TensorAttributes(dim=x_dims))
    node = hg.BlockScaleDequantizeNode(a, hg.GraphAttributes())
    inputs = {"X": np.ones(x_dims, np.float32), "SCALE": np.ones(s_dims, np.float32)}
    with pytest.raises(hg.HipdnnError) as info:
        run_dequantize(node, inputs)
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED and words in info.value.message
    node.attributes.set_compute_data_type(T.BFLOAT16)
    with pytest.raises(hg.HipdnnError, match="compute data type BFLOAT16"):
        run_dequantize(node, inputs)


def test_quantize_then_dequantize_stays_within_half_a_step() -> None:
    """MX round trip: each element comes back within half a quantization step of its block."""
    node = _quantize_node([8, 64], 32, None, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT)
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    q = run_quantize(node, {"X": x})
    back = _dequantize_node([8, 64], [8, 2], [32], T.FLOAT)
    y = run_dequantize(back, {"X": q["Y"], "SCALE": q["SCALE"]})["Y"]
    scale = np.repeat(q["SCALE"].astype(np.float32), 32, axis=1)
    # E4M3 keeps 3 mantissa bits: a relative step of 2^-3 of the element's binade (or of the
    # smallest normal's binade, 2^-6, for subnormals), times the block's scale
    step = np.exp2(np.floor(np.log2(np.maximum(np.abs(x / scale), 2.0**-6))) - 3) * scale
    assert np.all(np.abs(y - x) <= step / 2)


def test_refusals_are_known_before_any_data() -> None:
    """``block_scale_*_refusal(node)`` (for the engine's plan-time check) names what the runners
    refuse for the node itself, and ``None`` for what they run."""
    quantize = _quantize_node([2, 64], 32, None, T.FP8_E4M3, T.FP8_E8M0, T.FLOAT)
    assert families.block_scale_quantize_refusal(quantize) is None
    quantize.attributes.set_compute_data_type(T.HALF)
    reason = families.block_scale_quantize_refusal(quantize)
    assert reason is not None and reason.startswith(f"node '{quantize.name}': compute data type")
    dequantize = _dequantize_node([4, 64], [4, 2], [32], T.FLOAT)
    assert families.block_scale_dequantize_refusal(dequantize) is None
    dequantize.attributes.set_block_size([1, 32])
    reason = families.block_scale_dequantize_refusal(dequantize)
    assert reason is not None and "read block_size [1, 32]" in reason
