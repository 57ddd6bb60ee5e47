"""The binder's C++ pack guard: a pack like the last one binds in one call, and every pack binds
exactly as the Python checks alone would bind it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import pack_guard
from hipdnn_graph.backend.pack_guard import PackGuard
from hipdnn_graph.backend.variant_pack import TensorSpec, VariantPackBinder

torch = pytest.importorskip("torch")

needs_guards = pytest.mark.skipif(
    pack_guard._tensor_guards() is None, reason="this torch has no TensorGuards"
)


def _binder() -> VariantPackBinder:
    # uids 1 and 0: the two a bool key equals
    specs = [
        TensorSpec(1, "X", (2, 3), (3, 1), hg.DataType.FLOAT, is_output=False),
        TensorSpec(0, "Y", (2, 3), (3, 1), hg.DataType.FLOAT, is_output=True),
    ]
    return VariantPackBinder(specs, array_kind="torch")


def _good() -> dict[Any, Any]:
    return {1: torch.ones(2, 3), 0: torch.zeros(2, 3)}


def _outcome(binder: VariantPackBinder, pack: dict[Any, Any]) -> Any:
    """What binding gives: the bound tensors' uid, shape, dtype, gradient flag and address (or
    the scalar), or the error code and message."""
    try:
        bound = binder.bind(pack, None)
    except hg.HipdnnError as err:
        return err.code, err.message
    return sorted(
        (uid, tuple(v.shape), v.dtype, v.requires_grad, v.data_ptr()) for uid, v in bound.items()
    )


def _inference_tensor() -> Any:
    with torch.inference_mode():
        return torch.zeros(2, 3)


# each: the pack to bind, built after the guard exists
VARIANTS: dict[str, Callable[[], dict[Any, Any]]] = {
    "same kind, new tensors": _good,
    "keys in another order": lambda: {0: torch.zeros(2, 3), 1: torch.ones(2, 3)},
    "dtype": lambda: {1: torch.ones(2, 3, dtype=torch.float64), 0: torch.zeros(2, 3)},
    "shape": lambda: {1: torch.ones(3, 2), 0: torch.zeros(2, 3)},
    "strides": lambda: {1: torch.ones(3, 2).t(), 0: torch.zeros(2, 3)},
    "input requires grad": lambda: {1: torch.ones(2, 3, requires_grad=True), 0: torch.zeros(2, 3)},
    "output requires grad": lambda: {1: torch.ones(2, 3), 0: torch.zeros(2, 3).requires_grad_()},
    "True for uid 1": lambda: {True: torch.ones(2, 3), 0: torch.zeros(2, 3)},
    "False for uid 0": lambda: {1: torch.ones(2, 3), False: torch.zeros(2, 3)},
    "a NumPy input": lambda: {1: np.ones((2, 3), np.float32), 0: torch.zeros(2, 3)},
    "a parameter": lambda: {1: torch.nn.Parameter(torch.ones(2, 3), False), 0: torch.zeros(2, 3)},
    "an inference tensor": lambda: {1: _inference_tensor(), 0: torch.zeros(2, 3)},
    "output is the input": lambda: dict.fromkeys((1, 0), torch.ones(2, 3)),
    "a missing output": lambda: {1: torch.ones(2, 3)},
    "an extra key": lambda: {**_good(), 7: torch.ones(2, 3)},
}


@needs_guards
@pytest.mark.parametrize("grad", [True, False], ids=["grad-enabled", "no-grad"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_guarded_binder_binds_every_pack_as_a_fresh_one_does(variant: str, grad: bool) -> None:
    warm = _binder()
    warm.bind(_good(), None)  # the first complete pack makes the guard
    assert warm._guard is not None
    pack = VARIANTS[variant]()
    with torch.set_grad_enabled(grad):
        expected = _outcome(_binder(), pack)
        assert _outcome(warm, pack) == expected
    if variant == "same kind, new tensors":
        assert warm._guard[0].matches(pack) is not None
        assert expected == sorted(
            (uid, (2, 3), torch.float32, False, pack[uid].data_ptr()) for uid in (0, 1)
        )
    if variant in ("output requires grad", "True for uid 1", "output is the input"):
        assert expected[0] == hg.ErrorCode.INVALID_VARIANT_PACK


@needs_guards
@pytest.mark.parametrize(
    "variant",
    [v for v in VARIANTS if v not in ("same kind, new tensors", "a parameter")],
)
def test_the_guard_refuses_every_pack_unlike_its_own(variant: str) -> None:
    # a Parameter with requires_grad=False is a plain tensor to torch's check and to the binder
    guard = PackGuard.of(_good())
    assert guard is not None
    assert guard.matches(VARIANTS[variant]()) is None
    with torch.no_grad():  # torch's check ignores the flag here; the guard reads it itself
        assert guard.matches(VARIANTS["output requires grad"]()) is None


@needs_guards
def test_a_pack_keyed_by_numpy_integers_never_lets_a_bool_key_through() -> None:
    binder = _binder()
    numpy_keyed = {np.int64(1): torch.ones(2, 3), np.int64(0): torch.zeros(2, 3)}
    binder.bind(numpy_keyed, None)
    assert binder._guard is not None and binder._guard[0].matches(numpy_keyed) is not None
    variant = VARIANTS["True for uid 1"]()
    assert binder._guard[0].matches(variant) is None
    assert _outcome(binder, variant) == _outcome(_binder(), variant)


@needs_guards
def test_the_guard_keeps_no_tensor_alive() -> None:
    import weakref

    pack = _good()
    refs = [weakref.ref(v) for v in pack.values()]
    binder = _binder()
    binder.bind(pack, None)
    del pack
    assert all(ref() is None for ref in refs)
    assert binder._guard is not None


def test_without_torch_guards_the_python_checks_bind_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pack_guard, "_tensor_guards", lambda: None)
    binder = _binder()
    for _ in range(12):
        assert _outcome(binder, _good())[0][3] is False
    assert binder._guard is None
    assert binder._guards_left == 0  # a bounded number of attempts, then none
    assert _outcome(binder, VARIANTS["output requires grad"]())[0] == (
        hg.ErrorCode.INVALID_VARIANT_PACK
    )


@needs_guards
def test_a_guard_that_keeps_failing_stops_being_remade() -> None:
    # inference mode changes the dispatch keys torch's check compares: each switch fails the
    # guard, the Python checks accept, and a new guard is made, until the binder gives up
    binder = _binder()
    for call in range(12):
        with torch.inference_mode(call % 2 == 1):
            assert _outcome(binder, _good())[0][:4] == (0, (2, 3), torch.float32, False)
    assert binder._guards_left == 0
    assert _outcome(binder, VARIANTS["dtype"]()) == _outcome(_binder(), VARIANTS["dtype"]())


@needs_guards
def test_graph_execute_binds_its_second_pack_through_the_guard() -> None:
    # a node family's graph on the eager torch engine: the binder is every torch engine's
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    a, b = g.tensor(name="a", dim=[1, 1, 4, 8]), g.tensor(name="b", dim=[1, 1, 4, 8])
    o = g.pointwise(a, b, mode=hg.PointwiseMode.ADD, name="add")
    o.set_output(True)
    g.set_preferred_engine_id_ext("TORCH_EAGER_ENGINE").build()
    out = torch.empty(1, 1, 4, 8)
    pack = {a: torch.randn(1, 1, 4, 8), b: torch.randn(1, 1, 4, 8), o: out}
    g.execute(pack)
    binder = g._state.active.binder  # type: ignore[union-attr]
    assert binder._guard is not None and binder._guard[0].matches(pack) is not None
    assert torch.equal(out, pack[a] + pack[b])
    out.zero_()
    g.execute(pack)  # through the guard
    assert torch.equal(out, pack[a] + pack[b])
    with pytest.raises(hg.HipdnnError, match="requires grad"), torch.no_grad():
        g.execute({**pack, o: torch.empty(1, 1, 4, 8, requires_grad=True)})


def test_the_guard_reads_the_gradient_flag_itself_while_gradients_are_off() -> None:
    # some torch versions' check compares requires_grad only while gradients are enabled; the
    # guard must refuse a tensor that requires grad whatever torch's check answers
    pack = VARIANTS["output requires grad"]()
    guard = PackGuard(tuple(pack), check=lambda *values: True, grad_enabled=lambda: False)
    assert guard.matches(pack) is None
    assert guard.matches(_good()) is not None
    trusting = PackGuard(tuple(pack), check=lambda *values: True, grad_enabled=lambda: True)
    assert trusting.matches(pack) is not None  # with gradients on, torch's check decides
