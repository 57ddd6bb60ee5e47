"""The cuDNN op's Stats pass through untouched where they already have the op's layout (the hot
path of issue 22 item 3), and are converted exactly as before everywhere else. CPU only: the
aten op is replaced by a recorder, so what reaches it is compared directly."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph_torch_rocm.kernels import _fused_ops  # noqa: E402
from hipdnn_graph_torch_rocm.kernels._fused_rules import FusedOp, FusedSdpaCase, OpCaps  # noqa: E402

B, H, S, D = 2, 3, 5, 8


def _problem() -> FusedSdpaCase:
    q = torch.zeros(B, H, S, D)
    return FusedSdpaCase.from_tensors(q, q, q, forward=False)


def test_stats_out_passes_the_ops_own_layout_through() -> None:
    p = _problem()
    lse = torch.randn(B, H, S, 1)
    assert _fused_ops._stats_out(lse, p) is lse
    for other in (
        torch.randn(B, H, S),  # rank 3
        torch.randn(B, H, S + 3),  # padded rows
        torch.randn(B, H, S, 1, dtype=torch.float64),  # another dtype
    ):
        got = _fused_ops._stats_out(other, p)
        assert got.shape == (B, H, S, 1) and got.dtype == torch.float32
        assert torch.equal(got, other.reshape(B, H, -1)[:, :, :S].float().reshape(B, H, S, 1))


def _lse_seen(monkeypatch: pytest.MonkeyPatch, stats: torch.Tensor, lse_rank: int) -> Any:
    seen: list[torch.Tensor] = []

    def op(do: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, *args: Any, **kw: Any) -> Any:
        seen.append(lse)
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)

    monkeypatch.setattr(_fused_ops, "aten_op", lambda name: op)
    x = torch.zeros(B, H, S, D)
    caps = OpCaps(op=FusedOp.CUDNN, available=True, lse_rank=lse_rank)
    _fused_ops.cudnn_backward(_problem(), caps, x, x, x, x, x, stats, 1.0, None, None, None, None)
    return seen[0]


def test_cudnn_backward_takes_dense_fp32_stats_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stats = torch.randn(B, H, S, 1)
    assert _lse_seen(monkeypatch, stats, 4) is stats


@pytest.mark.parametrize(
    "stats",
    [
        torch.randn(B, H, S, 1, dtype=torch.float64),
        torch.randn(B, H, 2 * S, 1)[:, :, ::2],  # strided rows
        torch.randn(H, B, S, 1).transpose(0, 1),  # another order
    ],
    ids=["float64", "strided", "transposed"],
)
@pytest.mark.parametrize("lse_rank", [3, 4])
def test_cudnn_backward_converts_other_stats_as_before(
    monkeypatch: pytest.MonkeyPatch, stats: torch.Tensor, lse_rank: int
) -> None:
    lse = _lse_seen(monkeypatch, stats, lse_rank)
    want = stats.reshape(B, H, S).float().contiguous()
    want = want.unsqueeze(-1) if lse_rank == 4 else want
    assert lse is not stats and lse.shape == want.shape and lse.stride() == want.stride()
    assert torch.equal(lse, want)


def test_cudnn_backward_rank3_stats_are_reshaped(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = torch.randn(B, H, S, 1)
    lse = _lse_seen(monkeypatch, stats, 3)
    assert lse.shape == (B, H, S) and torch.equal(lse, stats.reshape(B, H, S))
