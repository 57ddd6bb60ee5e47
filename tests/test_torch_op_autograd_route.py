"""The torch op's autograd route (issue 22 item 3): the decision logic, on the CPU.

Where a cached forward graph's launcher and the backward graph's launcher offer autograd forms
that pair (:class:`hipdnn_graph.backend.AutogradForm`; on the GPU aten's cuDNN attention called
directly, ``tests/gpu/test_torch_op_hot_path_gpu.py``), the op learns it in the backward of the
first call that hit both graphs, and later calls run the forward's differentiable call under
torch's autograd. On the CPU the math engine's plans of plain problems offer the forms of
torch's fused CPU kernel (``aten._scaled_dot_product_flash_attention_for_cpu``), checked here
end to end; the decision logic is checked with stand-in forms on the cached launchers (a
differentiable torch function whose autograd is the reference).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.backend import AutogradForm  # noqa: E402
from hipdnn_graph.torch import graph_cache, scaled_dot_product_attention  # noqa: E402
from hipdnn_graph.torch._cached import Entry  # noqa: E402

F = torch.nn.functional


def _qkv(s: int = 6, dtype: Any = torch.float64) -> list[Any]:
    g = torch.Generator().manual_seed(7)
    return [torch.randn(1, 2, s, 4, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)]


def _entries() -> tuple[Entry, Entry]:
    forward = backward = None
    for entry in graph_cache().values():
        if "dO" in entry.slots:
            backward = entry
        else:
            forward = entry
    assert forward is not None and backward is not None
    return forward, backward


def _built() -> tuple[Any, Any, Any, Any, Any]:
    """Q, K, V and the op's two cached graphs (whose launchers exist), after a first call."""
    graph_cache().clear()
    q, k, v = _qkv()
    _step(q, k, v)
    forward, backward = _entries()
    assert forward.launch is not None and backward.launch is not None
    return q, k, v, forward, backward


def _give_forms(
    forward_pair: Any, backward_pair: Any, calls: list[int], layout: str = "same"
) -> Entry:
    """Stand-in forms on the cached launchers; the forward's call is F.sdpa (counted)."""
    forward, backward = _entries()

    def differentiable(q: Any, k: Any, v: Any) -> Any:
        calls.append(1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if layout == "transposed":  # the op lays O out unlike the graph's declaration
            o = o.transpose(1, 2).contiguous().transpose(1, 2)
        return o

    assert forward.launch is not None and backward.launch is not None
    forward.launch.autograd = lambda: AutogradForm(forward_pair, differentiable)
    backward.launch.autograd = lambda: AutogradForm(backward_pair, None)
    return forward


def _step(q: Any, k: Any, v: Any) -> tuple[Any, ...]:
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    grads = torch.autograd.grad(out.square().sum(), [q, k, v])
    return (out, *grads)


def test_paired_forms_route_later_calls_through_torchs_autograd() -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    first = _step(q, k, v)  # a miss: builds both graphs
    calls: list[int] = []
    forward = _give_forms(("op", True), ("op", True), calls)
    assert forward.autograd is None
    second = _step(q, k, v)  # a hit of both graphs: its backward learns the route
    assert callable(forward.autograd) and calls == []
    hits = graph_cache().info().hits
    third = _step(q, k, v)  # the route: the stand-in's autograd computes the gradients
    assert calls == [1]
    assert graph_cache().info().hits == hits + 1  # the forward graph alone is looked up
    ref_out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = (ref_out, *torch.autograd.grad(ref_out.square().sum(), [q, k, v]))
    for got, want in zip(third, ref, strict=True):
        assert torch.equal(got, want)
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for a, b in zip(first, third, strict=True):  # the graphs and the route agree
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("forward_pair", "backward_pair"), [(("op", True), ("op", False)), (("op",), ("other",))]
)
def test_unpaired_forms_keep_the_graphs(forward_pair: Any, backward_pair: Any) -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    _step(q, k, v)
    calls: list[int] = []
    forward = _give_forms(forward_pair, backward_pair, calls)
    _step(q, k, v)
    assert forward.autograd is False  # learnt once: no route
    _step(q, k, v)
    assert calls == []


def test_a_backward_form_with_a_call_is_no_route() -> None:
    q, k, v, forward, backward = _built()
    forward.launch.autograd = lambda: AutogradForm("p", lambda *a: None)
    backward.launch.autograd = lambda: AutogradForm("p", lambda *a: None)
    _step(q, k, v)
    assert forward.autograd is False


def test_a_form_not_known_yet_is_asked_again_then_given_up() -> None:
    q, k, v, forward, backward = _built()
    answers: list[Any] = [None, AutogradForm("p", None)]  # the backward binds on a later call
    backward.launch.autograd = lambda: answers[0]
    calls: list[int] = []
    forward.launch.autograd = lambda: AutogradForm("p", lambda *a: calls.append(1))
    _step(q, k, v)
    assert forward.autograd is None and forward.route_tries == 1
    answers.pop(0)
    _step(q, k, v)
    assert callable(forward.autograd)
    q, k, v, forward, backward = _built()
    forward.launch.autograd = lambda: AutogradForm("p", lambda *a: None)
    backward.launch.autograd = lambda: None  # a form never known: asked three times
    for tries in (1, 2):
        _step(q, k, v)
        assert forward.autograd is None and forward.route_tries == tries
    _step(q, k, v)
    assert forward.autograd is False and calls == []


def test_a_launcher_without_autograd_is_no_route_at_once() -> None:
    q, k, v, forward, backward = _built()
    forward.launch.autograd = lambda: AutogradForm("p", lambda *a: None)
    backward.launch.autograd = None  # a launcher that knows no form
    _step(q, k, v)
    assert forward.autograd is False and forward.route_tries == 0


def test_the_route_returns_o_in_the_declared_layout_with_its_gradient() -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    first = _step(q, k, v)
    calls: list[int] = []
    forward = _give_forms("p", "p", calls, layout="transposed")
    _step(q, k, v)
    third = _step(q, k, v)
    assert calls == [1]
    assert third[0].stride() == tuple(forward.outputs[0].stride) == first[0].stride()
    for a, b in zip(first, third, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_learning_is_logged_at_debug(caplog: Any) -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    _step(q, k, v)
    _give_forms("the pair", "the pair", [])
    with caplog.at_level(logging.DEBUG, logger="hipdnn_graph.torch"):
        _step(q, k, v)
    assert any("own autograd formula ('the pair')" in r.getMessage() for r in caplog.records)


def test_an_emptied_cache_forgets_the_route() -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    _step(q, k, v)
    calls: list[int] = []
    _give_forms("p", "p", calls)
    _step(q, k, v)
    _step(q, k, v)
    assert calls == [1]
    graph_cache().clear()
    _step(q, k, v)  # rebuilt: the new entries offer their own forms (the fused CPU kernel)
    _step(q, k, v)
    _step(q, k, v)
    assert calls == [1] and callable(_entries()[0].autograd)


def test_calls_with_a_mask_or_padding_never_take_the_route() -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    for _ in range(3):
        out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out.sum().backward()
    assert all(entry.autograd is None for entry in graph_cache().values())


# ----- the CPU route: torch's fused CPU kernel and its own backward -----
def _grad_fn_name(out: Any) -> str:
    return type(out.grad_fn).__name__


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_plain_cpu_calls_take_the_fused_cpu_kernels_route(dtype: Any, causal: bool) -> None:
    graph_cache().clear()
    q, k, v = _qkv(s=9, dtype=dtype)
    runs, names = [], []
    for _ in range(4):
        out = scaled_dot_product_attention(q, k, v, is_causal=causal)
        names.append(_grad_fn_name(out))
        runs.append((out, *torch.autograd.grad(out.square().sum(), [q, k, v])))
    assert "_SdpaFunction" in names[0] and "_SdpaFunction" in names[1]
    assert "ScaledDotProductFlashAttentionForCpu" in names[2] == names[3]
    assert [(c.kind, c.engine, c.autograd_route) for c in hgt.cached_graphs()] == [
        ("backward", "TORCH_SDPA_MATH_ENGINE", False),
        ("forward", "TORCH_SDPA_MATH_ENGINE", True),
    ]
    for graph_path, route in zip(runs[1], runs[3], strict=True):
        assert torch.equal(graph_path, route)  # one kernel pair on the same arguments
    assert runs[3][0].stride() == runs[1][0].stride()  # O as the forward graph declares it


def test_problems_the_fused_cpu_kernel_does_not_take_keep_the_graphs() -> None:
    graph_cache().clear()
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, 6, 8, generator=g, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(1, 2, 6, 8, generator=g, dtype=torch.float64, requires_grad=True)
    names = []
    for _ in range(5):  # grouped-query attention: the chunked kernels, no form
        out = scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        out.sum().backward()
        names.append(_grad_fn_name(out))
    assert all("_SdpaFunction" in n for n in names)
    forward, _ = _entries()
    assert forward.autograd is False  # its plan runs the chunked kernels: no form at all


def test_route_under_autocast_takes_the_cast_inputs() -> None:
    """Under autocast the op casts its inputs once (torch's rule for sdpa) and runs with autocast
    off for the device, so the learnt route runs the fused CPU op on the cast inputs: the result
    is the op's on bfloat16 inputs, bit for bit, in bfloat16 as F.sdpa gives it."""
    graph_cache().clear()
    q, k, v = _qkv(dtype=torch.float32)
    low = [t.detach().bfloat16().requires_grad_() for t in (q, k, v)]
    for _ in range(3):
        scaled_dot_product_attention(*low).sum().backward()
    assert hgt.cached_graphs()[-1].autograd_route
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = scaled_dot_product_attention(q, k, v)
    assert "_SdpaFunction" not in _grad_fn_name(out) and out.dtype == torch.bfloat16
    assert torch.equal(out, scaled_dot_product_attention(*low))
