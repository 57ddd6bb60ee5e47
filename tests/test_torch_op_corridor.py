"""One corridor (issue 35 item 3): a warm call of the torch op walks the modules of
``hipdnn_graph/torch`` in one pass, entering none twice, and checks its arguments once.

Each warm call (its graphs built by earlier calls) is traced with ``sys.setprofile``: the
Python functions it calls whose code lies under ``hipdnn_graph/torch`` give the sequence of
modules it enters (a module calling into itself counts once); forward and backward are traced
apart (autograd calls the backward later).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.torch import _choice, graph_cache  # noqa: E402

ROOT = Path(hgt.__file__).resolve().parent
sdpa = hgt.scaled_dot_product_attention

#: the functions that check or normalise an argument (each must run at most once per call)
CHECKS = frozenset(
    {"normalise", "check_qkv", "check_tensor", "checked_options", "as_mask", "seq_lens",
     "check_probability", "alignment_of", "cast"}
)  # fmt: skip


def _traced(fn: Callable[[], Any]) -> tuple[Any, list[str], list[str]]:
    """fn's result, the modules of hipdnn_graph/torch it enters in order (a module calling
    into itself counted once), and every function of those modules it calls."""
    modules: list[str] = []
    functions: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if ROOT not in path.parents:
            return
        module = str(path.relative_to(ROOT))
        functions.append(frame.f_code.co_name)
        if not modules or modules[-1] != module:
            modules.append(module)

    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
    return result, modules, functions


def _leaves(shape: tuple[int, ...] = (1, 2, 8, 16), dtype: Any = torch.float32) -> list[Any]:
    g = torch.Generator().manual_seed(2)
    return [torch.randn(*shape, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)]


def _mask(kind: str) -> Any:
    g = torch.Generator().manual_seed(4)
    if kind == "float":
        return torch.randn(1, 1, 8, 8, generator=g, requires_grad=True)
    keep = torch.rand(8, 8, generator=g) > 0.3
    keep[:, 0] = True
    return keep


CASES: dict[str, Callable[[], tuple[list[Any], dict[str, Any]]]] = {
    "plain (route learnt)": lambda: (_leaves(), {"is_causal": True}),
    "gqa float64 (the Function)": lambda: (
        [*_leaves((1, 4, 6, 8), torch.float64)[:1], *_leaves((1, 2, 6, 8), torch.float64)[1:]],
        {"enable_gqa": True},
    ),
    "dropout": lambda: (_leaves(), {"dropout_p": 0.2, "is_causal": True}),
    "float mask": lambda: (_leaves(), {"attn_mask": _mask("float")}),
    "bool mask": lambda: (_leaves(), {"attn_mask": _mask("bool")}),
    "padding": lambda: (_leaves(), {"seq_len_q": [6], "seq_len_kv": [5], "is_causal": True}),
    "float mask, dropout": lambda: (_leaves(), {"attn_mask": _mask("float"), "dropout_p": 0.2}),
    "padding, dropout": lambda: (_leaves(), {"seq_len_kv": [5], "dropout_p": 0.2}),
}


def _assert_one_pass(modules: list[str]) -> None:
    assert len(modules) == len(set(modules)), f"a module entered twice: {modules}"


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("autocast", [False, True])
def test_a_warm_call_enters_each_module_once_and_checks_once(case: str, autocast: bool) -> None:
    graph_cache().clear()
    leaves, kw = CASES[case]()

    def forward() -> Any:
        if not autocast:
            return sdpa(*leaves, **kw)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return sdpa(*leaves, **kw)

    for _ in range(4):  # warm: graphs built, the route learnt where there is one
        forward().float().sum().backward()
    out, modules, functions = _traced(forward)
    _assert_one_pass(modules)
    assert modules[0] == "_op.py"
    checks = [f for f in functions if f in CHECKS]
    assert len(checks) == len(set(checks)), checks  # each check runs once
    assert "check_qkv" in checks and "checked_options" in checks
    assert ("cast" in checks) == autocast
    if out.grad_fn is not None and "_SdpaFunction" in type(out.grad_fn).__name__:
        _, backward_modules, backward_functions = _traced(lambda: out.float().sum().backward())
        _assert_one_pass(backward_modules)
        assert backward_modules[0] == "_function.py"
        assert not [f for f in backward_functions if f in CHECKS]  # nothing is checked again


def test_the_plain_warm_call_is_the_corridor() -> None:
    """The documented path of a warm plain call: normalise, one key, one lookup, the route."""
    graph_cache().clear()
    q, k, v = _leaves()
    for _ in range(4):
        sdpa(q, k, v, is_causal=True).sum().backward()
    _, modules, _ = _traced(lambda: sdpa(q, k, v, is_causal=True))
    assert modules == ["_op.py", "_args.py", "_keys.py", "_cache.py", "_hot.py"]
    q, k, v = _leaves((1, 2, 5, 3), torch.float64)  # no fused CPU form: the Function launches
    for _ in range(4):
        sdpa(q, k, v, dropout_p=0.1).sum().backward()
    out, modules, _ = _traced(lambda: sdpa(q, k, v, dropout_p=0.1))
    assert modules == ["_op.py", "_args.py", "_keys.py", "_cache.py", "_function.py", "_hot.py",
                       "_dropout.py"]  # fmt: skip
    _, modules, _ = _traced(lambda: out.sum().backward())
    assert modules == ["_function.py", "_hot.py", "_keys.py", "_cache.py"]


def test_a_gpu_call_asks_torchs_choice_in_the_same_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU tensors decided as GPU ones (torch's selection stood in for): the choice is one more
    stop of the corridor, between the arguments and the key."""
    monkeypatch.setattr(_choice, "DEVICE_TYPES", frozenset({"cpu", "cuda"}))
    monkeypatch.setattr(torch, "_fused_sdp_choice", lambda *a, **kw: 0)  # math
    _choice.clear_choices()
    graph_cache().clear()
    q, k, v = _leaves()
    try:
        for _ in range(4):
            sdpa(q, k, v, is_causal=True).sum().backward()
        _, modules, _ = _traced(lambda: sdpa(q, k, v, is_causal=True))
    finally:
        _choice.clear_choices()
    assert modules == ["_op.py", "_args.py", "_choice.py", "_keys.py", "_cache.py", "_hot.py"]
