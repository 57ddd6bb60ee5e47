"""check_qkv's all-at-once fast path lets through only what its named checks let through: each
bad argument still raises the message of the check that names it (issue 22 item 3)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph.errors import HipdnnError  # noqa: E402
from hipdnn_graph.torch._args import check_qkv  # noqa: E402

Q = torch.zeros(1, 4, 8, 16)


@pytest.mark.parametrize(
    ("q", "k", "v", "message"),
    [
        ([1.0], Q, Q, "query must be a torch.Tensor, got list"),
        (Q, Q[0], Q, r"key must be rank-4 \[B, H, S, D\], got shape \[4, 8, 16\]"),
        (Q.int(), Q.int(), Q.int(), "query dtype torch.int32 is not supported"),
        (Q, Q.double(), Q, "key dtype torch.float64 differs from query dtype torch.float32"),
        (Q, Q, Q.half(), "value dtype torch.float16 differs from query dtype torch.float32"),
        (Q, Q[:, :0], Q, r"key heads \(0\) must divide query heads \(4\)"),
        (Q, Q, Q[:, :3], r"value heads \(3\) must divide query heads \(4\)"),
        (Q, Q, Q.to_sparse(), "value must be a dense"),
        (Q, Q.to("meta"), Q, "key is on meta but query is on cpu"),
    ],
)
def test_each_bad_argument_is_named(q: Any, k: Any, v: Any, message: str) -> None:
    with pytest.raises(HipdnnError, match=message):
        check_qkv(q, k, v)


def test_good_arguments_pass() -> None:
    check_qkv(Q, Q[:, :2], Q[:, :1])  # GQA and MQA heads
    check_qkv(Q.bfloat16(), Q.bfloat16().transpose(1, 2).contiguous().transpose(1, 2), Q.bfloat16())
