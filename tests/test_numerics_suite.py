"""Engine numerics suite: every SDPA feature, through the public graph API, on every engine.

The cases, the graph builder, the checks and the documented tolerances live in
``numerics_cases.py``. Each engine in :data:`ENGINES` that is registered runs every case in
three graph shapes (forward, backward, forward→backward) with FLOAT and DOUBLE io/compute; a
smaller set runs every io type (FLOAT, DOUBLE, HALF, BFLOAT16) with both compute types; and
hypothesis draws random small shapes and feature flags for the NumPy reference engine.

The NumPy reference must accept every case. Another engine that refuses a case (check_support
lists its reason) is skipped for that case, not failed: engines may support a subset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import numerics_cases as nc  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.backend import current_registry  # noqa: E402

REFERENCE_ENGINE = "NUMPY_REFERENCE_ENGINE"
#: engines under test; those not registered in this environment are skipped
ENGINES = [REFERENCE_ENGINE, "TORCH_SDPA_MATH_ENGINE"]
DT = hg.DataType
ALL_TYPES = [(io, compute) for io in nc.NP_TYPE for compute in (DT.FLOAT, DT.DOUBLE)]
TYPE_SWEEP_CASES = ["plain", "causal_bottom_right", "padding", "dropout", "everything"]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """The reference runs tiny tensors: torch's thread pool costs 10-50x more than the math
    (worse on a loaded 2-core machine), so run it on one thread and restore the setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run(case: nc.Case, mode: str, io: DT, compute: DT, engine: str) -> None:
    if current_registry().find_engine(engine) is None:
        pytest.skip(f"{engine} is not registered here")
    try:
        nc.run_case(case, mode, io, compute, engine)
    except hg.NotSupportedError as err:
        if engine == REFERENCE_ENGINE:
            raise
        pytest.skip(f"{engine} does not support this case: {err}")
    except hg.HipdnnError as err:
        # the preferred engine was not applicable, so another one was picked: a refusal
        if engine != REFERENCE_ENGINE and "refus" in str(err):
            pytest.skip(str(err))
        raise


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", nc.MODES)
@pytest.mark.parametrize(
    "types", [(DT.FLOAT, DT.FLOAT), (DT.DOUBLE, DT.DOUBLE)], ids=["fp32", "fp64"]
)
@pytest.mark.parametrize("case", nc.CASES, ids=[c.name for c in nc.CASES])
def test_feature(case: nc.Case, types: tuple[DT, DT], mode: str, engine: str) -> None:
    _run(case, mode, types[0], types[1], engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", nc.MODES)
@pytest.mark.parametrize(
    "types", ALL_TYPES, ids=[f"{io.name.lower()}-{c.name.lower()}" for io, c in ALL_TYPES]
)
@pytest.mark.parametrize("name", TYPE_SWEEP_CASES)
def test_io_and_compute_types(name: str, types: tuple[DT, DT], mode: str, engine: str) -> None:
    _run(nc.CASES_BY_NAME[name], mode, types[0], types[1], engine)


def test_cases_cover_the_spec_features() -> None:
    names = {c.name for c in nc.CASES}
    assert len(nc.CASES) >= 15
    for feature in ("plain", "gqa_hk_ne_hv", "mqa", "d_ne_dv", "sq_ne_skv", "bias_full",
                    "causal_top_left", "causal_bottom_right", "band_top_left", "sliding_window",
                    "padding", "dropout", "scale_tensor", "scale_runtime", "scale_default",
                    "alibi", "fully_masked_rows"):  # fmt: skip
        assert feature in names


@st.composite
def random_cases(draw: Any) -> tuple[nc.Case, str, DT]:
    b = draw(st.integers(1, 2))
    hk = draw(st.sampled_from([1, 2]))
    hv = draw(st.sampled_from([1, 2]))
    h = draw(st.sampled_from([2, 4]))
    sq, skv = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    d, dv = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    mask = draw(st.sampled_from(["none", "causal", "causal_br", "band", "band_br", "window"]))
    kw: dict[str, Any] = {}
    if mask == "causal":
        kw["causal"] = True
    elif mask == "causal_br":
        kw["causal_bottom_right"] = True
    elif mask in ("band", "band_br"):
        kw["left_bound"] = draw(st.integers(0, 6))
        kw["right_bound"] = draw(st.integers(0, 6))
        kw["bottom_right_band"] = mask == "band_br"
    elif mask == "window":
        kw["sliding_window"] = draw(st.integers(0, 6))
        kw["causal"] = True
    if draw(st.booleans()):
        full = (b, h, sq, skv)
        kw["bias"] = tuple(n if draw(st.booleans()) else 1 for n in full)
    if draw(st.booleans()):
        kw["seq_len_q"] = tuple(draw(st.integers(0, sq)) for _ in range(b))
        kw["seq_len_kv"] = tuple(draw(st.integers(0, skv)) for _ in range(b))
    if draw(st.booleans()):
        kw["dropout"] = (draw(st.sampled_from([1, b])), draw(st.sampled_from([1, h])), sq, skv)
    kw["alibi"] = draw(st.booleans())
    kw["scale"] = draw(st.sampled_from(["value", "tensor", "runtime", "default"]))
    kw["layout"] = draw(st.sampled_from(["bhsd", "bshd"]))
    case = nc.Case("random", b=b, h=h, hk=hk, hv=hv, sq=sq, skv=skv, d=d, dv=dv,
                   seed=draw(st.integers(0, 2**16)), **kw)  # fmt: skip
    return case, draw(st.sampled_from(nc.MODES)), draw(st.sampled_from([DT.FLOAT, DT.DOUBLE]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_cases())
def test_random_configurations_on_the_reference_engine(drawn: tuple[nc.Case, str, DT]) -> None:
    case, mode, io = drawn
    nc.run_case(case, mode, io, io, REFERENCE_ENGINE)
