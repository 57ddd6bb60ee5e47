"""The kernel torch would pick (issue 35 item 2), on the CPU: the op asks torch's own selection
(``torch._fused_sdp_choice``, stood in for) for its GPU calls and prefers that backend's engine
for the forward and the backward graph; it asks again when a switch torch's selection reads
changes (``sdpa_kernel``, the enable flags), never for forced engines or hipDNN-only features.

CPU tensors stand in for GPU ones here (``_choice.DEVICE_TYPES`` widened): the fused engines
then refuse (no device) and ranking falls through, while the graphs still record the engine
they prefer. ``tests/gpu/test_torch_op_dropin_gpu.py`` checks the engine that runs on a GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.backend import engine_id  # noqa: E402
from hipdnn_graph.torch import _choice, graph_cache  # noqa: E402

MATH, EFFICIENT, FLASH, CUDNN = (
    "TORCH_SDPA_MATH_ENGINE",
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_CUDNN_ENGINE",
)
sdpa = hgt.scaled_dot_product_attention


@pytest.fixture
def torchs_choice(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """CPU calls decided as GPU calls, by a stand-in for torch's selection that picks the
    backend named by ``asked.backend`` (default: memory-efficient) and records each question."""
    asked: list[tuple[Any, ...]] = []
    monkeypatch.setattr(_choice, "DEVICE_TYPES", frozenset({"cpu", "cuda"}))

    def fake(q: Any, k: Any, v: Any, mask: Any, p: float, causal: bool, **kw: Any) -> int:
        asked.append((q.dtype, q.requires_grad, mask is not None, p, causal, kw))
        return int(getattr(fake, "backend", 2))

    monkeypatch.setattr(torch, "_fused_sdp_choice", fake)
    asked.append(("fake", fake))  # the first item: the stand-in itself, to set its backend
    _choice.clear_choices()
    graph_cache().clear()
    yield asked
    _choice.clear_choices()
    graph_cache().clear()


def _set_backend(asked: list[Any], backend: int) -> None:
    asked[0][1].backend = backend


def _qkv(dtype: Any = torch.float32) -> list[Any]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(1, 2, 8, 16, generator=g, dtype=dtype, requires_grad=True)
            for _ in range(3)]  # fmt: skip


def _preferred() -> dict[str, str]:
    """Each cached graph's kind -> the engine it prefers (by name)."""
    names = {engine_id(n): n for n in (MATH, EFFICIENT, FLASH, CUDNN)}
    return {
        g.kind: names.get(g.graph.get_preferred_engine_id_ext(), "other")
        for g in hgt.cached_graphs()
    }


@pytest.mark.parametrize(("backend", "engine"), [(2, EFFICIENT), (1, FLASH), (3, CUDNN), (0, MATH)])
def test_forward_and_backward_graphs_prefer_the_engine_of_torchs_choice(
    torchs_choice: list[Any], backend: int, engine: str
) -> None:
    _set_backend(torchs_choice, backend)
    q, k, v = _qkv()
    out = sdpa(q, k, v, is_causal=True)
    out.sum().backward()
    assert _preferred() == {"forward": engine, "backward": engine}
    dtype, requires_grad, masked, p, causal, kw = torchs_choice[1]
    assert (dtype, requires_grad, masked, p, causal) == (torch.float32, True, False, 0.0, True)
    assert kw == {"scale": None, "enable_gqa": False}
    # no engine but math runs CPU tensors: the preferred fused engines refused, ranking went on
    assert {g.engine for g in hgt.cached_graphs()} == {MATH}
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True))  # fmt: skip


def test_where_torch_picks_no_backend_the_default_ranking_decides(
    torchs_choice: list[Any],
) -> None:
    _set_backend(torchs_choice, -1)
    sdpa(*_qkv()).sum().backward()
    # the op's default preference for host tensors: the math engine computes where they are
    assert set(_preferred().values()) == {MATH}


def test_a_torch_that_raises_is_no_choice(
    torchs_choice: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_kernel(*args: Any, **kw: Any) -> int:
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(torch, "_fused_sdp_choice", no_kernel)
    assert _choice.choose_engine(*_qkv(), None, 0.0, False, None, False) is None


def test_the_choice_is_asked_once_per_signature_and_again_when_a_switch_changes(
    torchs_choice: list[Any],
) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = _qkv()
    for _ in range(3):
        sdpa(q, k, v).sum().backward()
    assert len(torchs_choice) == 2  # the stand-in, and one question
    with sdpa_kernel([SDPBackend.MATH]):  # switches torch's selection reads
        sdpa(q, k, v)
    assert len(torchs_choice) == 3
    with torch.no_grad():  # grad mode is read too
        sdpa(q, k, v)
    assert len(torchs_choice) == 4
    sdpa(q.detach(), k.detach(), v.detach())  # the inputs' gradient flags too
    assert len(torchs_choice) == 5 and torchs_choice[-1][1] is False
    sdpa(q, k, v)
    assert len(torchs_choice) == 5  # back to a remembered combination


def test_dropout_and_mask_calls_ask_with_their_arguments(torchs_choice: list[Any]) -> None:
    q, k, v = _qkv()
    mask = torch.zeros(1, 1, 8, 8)
    sdpa(q, k, v, attn_mask=mask).sum().backward()
    sdpa(q, k, v, dropout_p=0.25, is_causal=True).sum().backward()
    questions = [(masked, p, causal) for _, _, masked, p, causal, _ in torchs_choice[1:]]
    assert questions == [(True, 0.0, False), (False, 0.25, True)]
    kinds = [(g.kind, g.graph.get_preferred_engine_id_ext()) for g in hgt.cached_graphs()]
    # the mask's graphs and the dropout forward prefer the choice; the dropout backward is
    # pinned to the engine its forward ran on (forced: one mask)
    assert kinds[:3] == [(kind, engine_id(EFFICIENT)) for kind in ("forward", "backward",
                                                                  "forward")]  # fmt: skip
    assert kinds[3] == ("backward", engine_id(MATH))


@pytest.mark.parametrize(
    "kw",
    [
        {"engine": MATH},
        {"left_bound": 2, "right_bound": 0},
        {"alibi": True},
        {"seq_len_q": [8], "seq_len_kv": [6]},
        {"is_causal": True, "diagonal_alignment": "bottom_right"},
    ],
)
def test_forced_engines_and_hipdnn_only_features_do_not_ask(
    torchs_choice: list[Any], kw: dict[str, Any]
) -> None:
    q, k, v = _qkv()
    sdpa(q, k, v, **kw).sum().backward()
    assert len(torchs_choice) == 1  # torch's op lacks the feature: its choice means nothing
    assert EFFICIENT not in _preferred().values()


def test_cpu_calls_do_not_ask() -> None:
    _choice.clear_choices()
    asked: list[int] = []
    original = torch._fused_sdp_choice
    try:
        torch._fused_sdp_choice = lambda *a, **kw: asked.append(1) or original(*a, **kw)
        sdpa(*_qkv(), is_causal=True).sum().backward()
    finally:
        torch._fused_sdp_choice = original
    assert asked == []
