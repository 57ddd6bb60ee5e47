"""Diagonal-band bounds anywhere in int64 mean what the integers say, on every engine (issue 23,
item 4): ``j <= i + offset + right_bound`` and ``j >= i + offset - left_bound`` are evaluated
exactly, so a bound near the int64 limits acts like any other bound past the sequence lengths;
a bound outside int64 (which hipDNN cannot hold) is refused when set."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem

DT = hg.DataType
SQ, SKV = 5, 7
ENGINES = ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _stats(engine: str, **band: Any) -> np.ndarray[Any, Any]:
    """Stats of a forward graph with the given band keywords, run on ``engine``."""
    if engine.startswith("TORCH"):
        pytest.importorskip("torch")
    g = hg.Graph(io_data_type=DT.FLOAT, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, SQ, 8])
    k = g.tensor(name="K", dim=[1, 2, SKV, 8])
    v = g.tensor_like(k, "V")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, **band)
    assert stats is not None
    o.set_output(True)
    stats.set_output(True)
    g.set_preferred_engine_id_ext(engine)
    g.build()
    assert g.get_plan_name() == engine
    rng = np.random.default_rng(7)
    pack: dict[Any, Any] = {t: rng.standard_normal(t.dim).astype(np.float32) for t in (q, k, v)}
    pack[o] = np.zeros(o.dim, np.float32)
    pack[stats] = np.zeros(stats.dim, np.float32)
    g.execute(pack)
    result: np.ndarray[Any, Any] = pack[stats]
    return result


FAR = SQ + SKV + 3  # past every (query, key) distance: the same mask as any larger bound


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "alignment", [hg.DiagonalAlignment.TOP_LEFT, hg.DiagonalAlignment.BOTTOM_RIGHT]
)
@pytest.mark.parametrize(
    ("side", "extreme", "equivalent"),
    [
        ("right", sys.maxsize, FAR),
        ("right", INT64_MIN, -FAR),
        ("left", INT64_MAX, FAR),
        ("left", INT64_MIN, -FAR),
        ("left", INT64_MIN + 1, -FAR),
        ("right", INT64_MAX - 1, FAR),
    ],
)
def test_a_bound_near_the_int64_limits_acts_like_any_far_bound(
    engine: str, alignment: hg.DiagonalAlignment, side: str, extreme: int, equivalent: int
) -> None:
    key = f"diagonal_band_{side}_bound"
    other = "diagonal_band_left_bound" if side == "right" else "diagonal_band_right_bound"
    for partner in (None, 1):  # alone, and beside a moderate bound on the other side
        got = _stats(engine, diagonal_alignment=alignment, **{key: extreme, other: partner})
        want = _stats(engine, diagonal_alignment=alignment, **{key: equivalent, other: partner})
        np.testing.assert_array_equal(got, want)


def test_the_far_bounds_are_what_exact_integers_say() -> None:
    """The equivalents above, checked on the reference: a far right bound hides no key, a far
    negative one hides every key (each row sees nothing: Stats is +inf, by this library's
    convention for empty rows)."""
    engine = ENGINES[0]
    full = _stats(engine)
    np.testing.assert_array_equal(_stats(engine, diagonal_band_right_bound=FAR), full)
    np.testing.assert_array_equal(_stats(engine, diagonal_band_left_bound=FAR), full)
    assert np.isposinf(_stats(engine, diagonal_band_right_bound=-FAR)).all()
    assert np.isposinf(_stats(engine, diagonal_band_left_bound=-FAR)).all()


def test_engines_see_bounds_clamped_to_the_lengths() -> None:
    g = hg.Graph(io_data_type=DT.FLOAT, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, SQ, 8])
    k = g.tensor(name="K", dim=[1, 2, SKV, 8])
    g.sdpa(q, k, g.tensor_like(k, "V"), diagonal_band_left_bound=INT64_MIN,
           diagonal_band_right_bound=INT64_MAX)  # fmt: skip
    g.validate()
    window = SdpaProblem.from_node(g.nodes[0]).window
    span = SQ + SKV + 1
    assert (window.left_bound, window.right_bound) == (-span, span)
    assert g.nodes[0].attributes.left_bound == INT64_MIN  # the graph keeps what was set


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64])
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_bound_outside_int64_is_refused_when_set(side: str, value: int) -> None:
    what = f"diagonal_band_{side}_bound"
    expected = f"{what} must be a 64-bit integer (hipDNN's int64), got {value}"
    setter = getattr(hg.SdpaAttributes(), f"set_{what}")
    with pytest.raises(hg.HipdnnError) as info:
        setter(value)
    assert (info.value.code, info.value.message) == (hg.ErrorCode.INVALID_VALUE, expected)
    g = hg.Graph(io_data_type=DT.FLOAT, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, SQ, 8])
    with pytest.raises(hg.HipdnnError) as info:
        g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), **{what: value})
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert "64-bit integer" in info.value.message


def test_the_reference_math_called_directly_is_exact_too() -> None:
    from hipdnn_graph_numpy_reference.sdpa_math import sdpa_forward

    rng = np.random.default_rng(1)
    q = rng.standard_normal([1, 2, SQ, 8])
    k, v = rng.standard_normal([1, 2, SKV, 8]), rng.standard_normal([1, 2, SKV, 8])
    for extreme, equivalent in ((INT64_MIN, -FAR), (INT64_MAX, FAR)):
        for side in ("left_bound", "right_bound"):
            got = sdpa_forward(q, k, v, scale=0.3, bottom_right=True, **{side: extreme})
            want = sdpa_forward(q, k, v, scale=0.3, bottom_right=True, **{side: equivalent})
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)
