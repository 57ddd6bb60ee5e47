"""Context-parallel attention on two GPUs over NCCL (skipped with fewer than two devices).

Two processes (``context_parallel_worker.py … cuda``), one per GPU, NVLink multicast off, run
bf16 and float16, both layouts, causal and not, GQA, ``[B, S, H, D]`` slices of 512 tokens per
rank: outputs and gradients against torch's SDPA on the whole sequence in float64 (on the CPU)
within twice the op's own error on the whole sequence in the same dtype plus one 16-bit step at
2, in the inputs' dtype and dimension order, the inputs untouched.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from context_parallel_launch import check_16_bit, session_run, two_gpu_marks  # noqa: E402
from context_parallel_worker import gpu_value_cases  # noqa: E402

pytestmark = two_gpu_marks()

CASES = sorted(gpu_value_cases())


@pytest.fixture
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return session_run(2, tmp_path_factory, "cuda")


@pytest.mark.parametrize("case", CASES)
def test_two_gpus_within_the_ops_own_error(ranks: list[dict[str, Any]], case: str) -> None:
    check_16_bit(ranks, case, "torch.bfloat16" if case.startswith("bf16") else "torch.float16")
    assert all(res[f"value/{case}"]["shape"] == [1, 4, 512, 16] for res in ranks)
