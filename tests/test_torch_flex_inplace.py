"""The flex backward's in-place gradient stores (``kernels/_flex_inplace.py``), on the CPU.

The lowering itself only runs where inductor compiles flex's backward (GPUs; the GPU suite
checks that every gradient is stored in place there). Here: which gradients the wrapper
picks (an FX graph walked with a stand-in for inductor's graph), what the wrapped lowering hands
out (a stand-in lowering that allocates as inductor's does), that the context restores
inductor's lowering and caches, and the build's decision: keep the storing body only where it
agrees with the copying body within that body's own run-to-run variation (stand-in bodies with
and without it), else keep the copies and say why.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph_torch_rocm.kernels import _flex_compiled, _flex_kernel, flex  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import _flex_inplace as inplace  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

copy_ = torch.ops.aten.copy_.default


def _hop(*args: Any) -> Any:  # stands in for flex's backward operator in the graphs below
    raise AssertionError("never called")


class _Box:
    """Stands in for an inductor TensorBox: size, stride, dtype, device."""

    def __init__(self, size: list[int], stride: list[int], dtype: Any = torch.bfloat16) -> None:
        self.size, self.stride, self.dtype = size, stride, dtype

    def get_size(self) -> list[int]:
        return self.size

    def get_stride(self) -> list[int]:
        return self.stride

    def get_dtype(self) -> Any:
        return self.dtype

    def get_device(self) -> Any:
        return torch.device("cuda", 0)


def _destinations(build: Any) -> dict[int, str]:
    """Run ``_destinations`` on the graph ``build(graph, hop_node)`` makes; index → input name."""
    from torch._inductor.virtualized import V
    from torch.fx import Graph

    g = Graph()
    q = g.placeholder("q")
    outs = [g.placeholder(f"out{i}") for i in range(4)]
    node = g.call_function(_hop, (q,))
    build(g, node, outs)
    boxes = {f"out{i}": f"out{i}" for i in range(4)}
    handler = type("G", (), {"current_node": node, "graph_inputs": boxes})()
    with V.set_graph_handler(handler):  # type: ignore[arg-type]
        return inplace._destinations()


def _plain(g: Any, node: Any, outs: list[Any], indices: tuple[int, ...] = (0, 1, 2)) -> None:
    for i in indices:
        item = g.call_function(operator.getitem, (node, i))
        g.call_function(copy_, (outs[i], item))


def test_each_gradient_copied_into_an_input_is_picked() -> None:
    assert _destinations(_plain) == {0: "out0", 1: "out1", 2: "out2"}


def test_a_gradient_with_another_use_is_left_to_inductor() -> None:
    def build(g: Any, node: Any, outs: list[Any]) -> None:
        _plain(g, node, outs, (0, 2))
        dk = g.call_function(operator.getitem, (node, 1))
        g.call_function(copy_, (outs[1], dk))
        g.call_function(torch.ops.aten.sum.default, (dk,))  # dK is also read

    assert _destinations(build) == {0: "out0", 2: "out2"}


def test_an_input_that_is_also_read_is_not_written_early() -> None:
    def build(g: Any, node: Any, outs: list[Any]) -> None:
        _plain(g, node, outs)
        g.call_function(torch.ops.aten.sum.default, (outs[2],))  # the dV buffer is read

    assert _destinations(build) == {0: "out0", 1: "out1"}


def test_a_converted_or_reshaped_gradient_is_left_to_inductor() -> None:
    def build(g: Any, node: Any, outs: list[Any]) -> None:
        dq = g.call_function(operator.getitem, (node, 0))
        g.call_function(copy_, (outs[0], g.call_function(torch.ops.aten.view.default, (dq,))))
        dk = g.call_function(operator.getitem, (node, 1))
        g.call_function(copy_, (outs[1], dk, True))  # non_blocking: not the plain copy
        dv = g.call_function(operator.getitem, (node, 2))
        g.call_function(copy_, (outs[2], dv))

    assert _destinations(build) == {2: "out2"}


def test_the_captured_gradients_are_never_picked() -> None:
    def build(g: Any, node: Any, outs: list[Any]) -> None:
        grads = g.call_function(operator.getitem, (node, 3))
        g.call_function(copy_, (outs[3], g.call_function(operator.getitem, (grads, 0))))

    assert _destinations(build) == {}


@pytest.mark.parametrize(
    ("box", "fits"),
    [
        (_Box([2, 4, 8, 16], [512, 128, 16, 1]), True),
        (_Box([2, 4, 8, 16], [512, 16, 64, 1]), False),  # other strides
        (_Box([2, 4, 8, 8], [256, 64, 8, 1]), False),  # other size
        (_Box([2, 4, 8, 16], [512, 128, 16, 1], torch.float32), False),  # other dtype
    ],
)
def test_only_a_destination_of_the_very_same_layout_is_used(box: _Box, fits: bool) -> None:
    got = inplace._same_layout(box, [2, 4, 8, 16], [512, 128, 16, 1], torch.bfloat16,
                               torch.device("cuda", 0))  # fmt: skip
    assert got is fits


def test_the_context_restores_the_lowering_and_the_caches_even_on_error() -> None:
    from torch._functorch import config as functorch_config
    from torch._higher_order_ops.flex_attention import flex_attention_backward as hop
    from torch._inductor import config as inductor_config
    from torch._inductor.lowering import lowerings

    original, cache = lowerings[hop], inductor_config.fx_graph_cache
    aot_cache = functorch_config.enable_autograd_cache
    with pytest.raises(RuntimeError, match="boom"), inplace.stores_into_destinations() as stored:
        assert lowerings[hop] is not original
        assert inductor_config.fx_graph_cache is False
        assert functorch_config.enable_autograd_cache is False
        assert stored == []
        raise RuntimeError("boom")
    assert lowerings[hop] is original
    assert inductor_config.fx_graph_cache == cache
    assert functorch_config.enable_autograd_cache == aot_cache


_allocated: list[str] = []  # what the stand-in lowering below got from empty_strided


def empty_strided(size: list[int], stride: Any = None, **kw: Any) -> Any:
    """The stand-in lowering's allocator (the wrapper swaps this global while it runs)."""
    _allocated.append("own")
    return _Box(size, stride, kw["dtype"])


_OWN_ALLOCATOR = empty_strided


def _lowering(*args: Any) -> Any:
    """Allocates as inductor's flex backward lowering does: dQ, then dV; dK is its output."""
    cuda = torch.device("cuda", 0)
    dq = empty_strided([1, 4, 8, 16], stride=[512, 128, 16, 1], dtype=torch.bfloat16, device=cuda)
    dv = empty_strided([1, 2, 8, 16], stride=[256, 128, 16, 1], dtype=torch.bfloat16, device=cuda)
    return dq, "dk", dv, ()


@pytest.mark.parametrize(
    ("dv_box", "stored"),
    [
        (_Box([1, 2, 8, 16], [256, 128, 16, 1]), ["dq", "dv"]),
        (_Box([1, 2, 8, 16], [256, 16, 32, 1]), ["dq"]),  # [B, S, H, D] memory: not this layout
    ],
)
def test_the_wrapped_lowering_hands_out_the_destinations(
    dv_box: _Box, stored: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch._higher_order_ops.flex_attention import flex_attention_backward as hop
    from torch._inductor.lowering import lowerings
    from torch._inductor.virtualized import V
    from torch.fx import Graph

    g = Graph()
    outs = [g.placeholder(f"out{i}") for i in range(3)]
    node = g.call_function(_hop, ())
    _plain(g, node, outs)
    boxes = {"out0": _Box([1, 4, 8, 16], [512, 128, 16, 1]), "out1": "dK's", "out2": dv_box}
    handler = type("G", (), {"current_node": node, "graph_inputs": boxes})()
    monkeypatch.setitem(lowerings, hop, _lowering)
    _allocated.clear()
    with V.set_graph_handler(handler), inplace.stores_into_destinations() as got:  # type: ignore[arg-type]
        dq, dk, dv, _ = lowerings[hop]()
    assert got == stored
    assert dq is boxes["out0"] and dk == "dk"  # dK: not a template buffer here, left alone
    assert (dv is dv_box) == ("dv" in stored)
    assert _allocated == ([] if "dv" in stored else ["own"])
    assert globals()["empty_strided"] is _OWN_ALLOCATOR  # the wrapper put it back
    assert lowerings[hop] is _lowering


# ----------------------------------------------------------------------- the build's decision


def _kernel(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(flex.CPU_ENV, "1")
    s = flex.FlexSpec(b=1, h=4, hk=2, hv=2, sq=32, skv=32, d=16, dv=16, dtype=torch.float32,
                      device="cpu", forward=False, call=SdpaCall(0.25, right_bound=0))  # fmt: skip
    return flex.FlexKernel(s)


def _probe(kernel: Any, stored: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the build's in-place probe with ``stores_into_destinations`` replaced by a context
    that reports ``stored`` (on the CPU nothing is stored for real)."""

    @contextlib.contextmanager
    def reporting() -> Iterator[list[str]]:
        yield list(stored)

    monkeypatch.setattr(_flex_kernel, "stores_into_destinations", reporting)
    warm = kernel._warm_inputs()
    kernel._building = True  # as inside the build: compiling is allowed
    kernel._store_in_place(warm, {"scale": 0.25, "bias": warm[6]})
    kernel._building = False


def _grads(kernel: Any) -> list[Any]:
    q, k, v, o, do, stats, _ = kernel._warm_inputs()
    return list(kernel.backward(q, k, v, o, do, stats, scale=0.25)[:3])


def test_on_the_cpu_the_build_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(monkeypatch)
    assert kernel.backward_mode == "given" and kernel.stored_in_place == ()
    assert not any("copied" in n for n in kernel.notes)  # not tried: no inductor lowering


def test_the_storing_body_is_kept_when_its_bits_match(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(monkeypatch)
    before = _grads(kernel)
    _probe(kernel, ["dq", "dv", "dk"], monkeypatch)
    assert kernel.stored_in_place == ("dq", "dv", "dk")
    assert kernel._graphs == kernel._tag + "_stores"
    assert kernel._graphs in _flex_compiled.GRAPHS and kernel._tag not in _flex_compiled.GRAPHS
    for a, b in zip(_grads(kernel), before, strict=True):
        assert torch.equal(a, b)


def test_a_storing_body_with_other_bits_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(monkeypatch)
    before, copying = _grads(kernel), kernel._bwd
    real = _flex_compiled._backward_body

    def off_by_one(*args: Any) -> Any:
        out = real(*args)
        args[9][1].add_(1.0)  # dK one higher than the copying body's
        return out

    monkeypatch.setattr(_flex_kernel, "_backward_body", off_by_one)
    _probe(kernel, ["dq", "dv", "dk"], monkeypatch)
    assert kernel.stored_in_place == () and kernel._bwd is copying
    assert kernel._graphs == kernel._tag and kernel._tag in _flex_compiled.GRAPHS
    assert kernel._tag + "_stores" not in _flex_compiled.GRAPHS
    why = "dk differs from the copying body's by 1 (its own run-to-run variation 0, tolerance 0)"
    assert f"gradients copied after the kernel: {why}" in kernel.notes, kernel.notes
    for a, b in zip(_grads(kernel), before, strict=True):
        assert torch.equal(a, b)


def test_a_storing_body_that_stores_nothing_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(monkeypatch)
    copying = kernel._bwd
    _probe(kernel, [], monkeypatch)
    assert kernel.stored_in_place == () and kernel._bwd is copying
    assert "gradients copied after the kernel: no destination fits" in kernel.notes


def _jittery(kernel: Any, monkeypatch: pytest.MonkeyPatch, off: float) -> Any:
    """Make both bodies add to dK ``2^-12`` on every other call (a run-to-run variation, as
    atomic sums have), and the storing body (the 4th call on) ``off`` more; the copying body."""
    calls = iter(range(100))

    def jitter(body: Any) -> Any:
        def run(*args: Any) -> Any:
            out = body(*args)
            n = next(calls)
            args[9][1].add_(n % 2 * 2**-12 + (n >= 3) * off)
            return out

        return run

    real = flex.FlexKernel._compile_as
    monkeypatch.setattr(flex.FlexKernel, "_compile_as", lambda *a: jitter(real(*a)))
    kernel._bwd = jitter(kernel._bwd)
    return kernel._bwd


def test_a_storing_body_within_the_copying_bodys_own_variation_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """dK varies from run to run: the storing body differs from the copying one by as little
    as the copying one from itself, so it is kept."""
    kernel = _kernel(monkeypatch)
    _jittery(kernel, monkeypatch, 0.0)
    _probe(kernel, ["dq", "dv", "dk"], monkeypatch)
    assert kernel.stored_in_place == ("dq", "dv", "dk"), kernel.notes


def test_a_storing_body_beyond_the_copying_bodys_variation_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = _kernel(monkeypatch)
    copying = _jittery(kernel, monkeypatch, 2**-6)
    _probe(kernel, ["dq", "dv", "dk"], monkeypatch)
    assert kernel.stored_in_place == () and kernel._bwd is copying
    assert any("dk differs from the copying body's by 0.0" in n and "variation 0.000244" in n
               for n in kernel.notes), kernel.notes  # fmt: skip


# ------------------------------------------------------------ the agreement rule (stand-ins)
def _t(*values: float) -> Any:
    return torch.tensor(values, dtype=torch.float32)


@pytest.mark.parametrize(
    ("copying", "storing", "atomic", "why"),
    [
        ([[_t(1, 2)], [_t(1, 2)]], [[_t(1, 2)]], (), None),
        ([[_t(1, 2)], [_t(1, 2)]], [[_t(1, 2 + 2**-20)]], (), "its own run-to-run variation 0,"),
        # the copying body varies by 2^-20: the storing one may differ by up to twice that
        ([[_t(1, 2)], [_t(1, 2 + 2**-20)]], [[_t(1, 2 + 2**-19)]], (), None),
        ([[_t(1, 2)], [_t(1, 2 + 2**-20)]], [[_t(1, 2 + 2**-18)]], (), "differs"),
        # atomic sums: runs that happened to agree still leave a 16-bit step at the max
        ([[_t(1, 2)], [_t(1, 2)]], [[_t(1, 2 + 2**-10)]], ("x",), None),
        ([[_t(1, 2)], [_t(1, 2)]], [[_t(1, 2 + 2**-5)]], ("x",), "tolerance 0.0156"),
        # an element the storing body left as its buffer's fill value
        ([[_t(1, 2)], [_t(1, 2)]], [[_t(1, -3)]], ("x",), "differs"),
        ([[_t(1, math.nan)], [_t(1, math.nan)]], [[_t(1, math.nan)]], (), None),
        ([[_t(1, math.nan)], [_t(1, math.nan)]], [[_t(math.nan, 1)]], (), "by inf"),
        ([[_t(math.inf, 1)], [_t(math.inf, 1)]], [[_t(-math.inf, 1)]], ("x",), "by inf"),
        ([[_t(math.inf, 1)], [_t(math.inf, 1)]], [[_t(math.inf, 1)]], (), None),
        ([[None], [None]], [[None]], (), None),
        ([[None], [None]], [[_t(1)]], (), "x returned by one body only"),
    ],
)
def test_the_agreement_rule(copying: Any, storing: Any, atomic: Any, why: str | None) -> None:
    got = inplace.disagreement(copying, storing, ["x"], atomic)
    assert got == why if why is None else why in str(got), got


def test_every_storing_run_is_checked() -> None:
    same = [[_t(1.0)], [_t(1.0)]]
    assert inplace.disagreement(same, [[_t(1.0)], [_t(1.5)]], ["dq"]) is not None
    with pytest.raises(ValueError, match="two copying runs"):
        inplace.disagreement(same[:1], [[_t(1.0)]], ["dq"])


def _whole_spread(a: Any, b: Any) -> float:
    """The comparison done on whole tensors at once (what the chunks must reproduce)."""
    x, y = a.double(), b.double()
    if x.shape != y.shape or not torch.equal(torch.isnan(x), torch.isnan(y)):
        return math.inf
    x, y = x.nan_to_num(0.0), y.nan_to_num(0.0)
    finite = torch.isfinite(x)
    return float((x[finite] - y[finite]).abs().max()) if bool(finite.any()) else 0.0


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 24])
def test_spreads_and_magnitudes_chunk_by_chunk_equal_the_whole_tensors(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inplace, "CHUNK", chunk)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, 11, generator=g)
    b = a + 1e-3 * torch.randn(3, 5, 11, generator=g)
    b.view(-1)[150] += 0.25  # the largest difference, in a late chunk
    assert inplace._spread(a, b) == _whole_spread(a, b) == pytest.approx(0.25, abs=0.01)
    assert inplace._magnitude(a) == float(a.abs().max())
    a[2, 4, 10] = b[2, 4, 10] = math.inf  # same infinity in the last place: no difference
    assert inplace._spread(a, b) == _whole_spread(a, b)
    a[0, 0, 3], b[0, 0, 3] = math.nan, math.nan
    assert inplace._spread(a, b) == _whole_spread(a, b)
    assert inplace._magnitude(a) == float(a[torch.isfinite(a)].abs().max())
    c = b.clone()
    c[2, 4, 9] = math.nan  # a NaN where the other has none: inf, however late
    assert inplace._spread(a, c) == math.inf
    c = b.clone()
    c[2, 4, 10] = -math.inf  # an infinity of the other sign
    assert inplace._spread(a, c) == _whole_spread(a, c) == math.inf
    assert inplace._spread(a, b[:2]) == math.inf  # other shapes
    empty = torch.full((4,), math.nan)
    assert inplace._spread(empty, empty.clone()) == 0.0
    assert inplace._magnitude(empty) == 0.0


def test_spreads_convert_one_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float64 copies are of a chunk, never of the whole output."""
    monkeypatch.setattr(inplace, "CHUNK", 16)
    converted: list[int] = []
    double = torch.Tensor.double

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        converted.append(self.numel())
        return double(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "double", counting)
    a = torch.randn(100)
    inplace._spread(a, a + 1)
    inplace._magnitude(a)
    assert converted and max(converted) == 16
    assert sum(converted) == 300  # both tensors of the spread, then the magnitude's one
