"""Context-parallel attention over packed batches on two GPUs over NCCL (skipped with fewer
than two devices).

Two processes (``context_parallel_packed_worker.py … cuda``), one per GPU, NVLink multicast off,
run bf16 and float16, both packed layouts (whole sequences balanced by causal work; a zigzag of
every sequence with the ring), causal and not, GQA, on a batch of 8 sequences of 64 to 1,024
tokens (3,072 in all): outputs and gradients against torch's SDPA on each whole sequence in
float64 (on the CPU) within twice the op's own error on the same sequences in the same dtype
plus one 16-bit step at 2, in the inputs' dtype, the inputs untouched.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from context_parallel_launch import check_16_bit, session_run, two_gpu_marks  # noqa: E402
from context_parallel_packed_worker import WORKER_PATH, gpu_value_cases  # noqa: E402

pytestmark = two_gpu_marks()

CASES = sorted(gpu_value_cases())


@pytest.fixture
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return session_run(2, tmp_path_factory, "cuda", worker=WORKER_PATH)


@pytest.mark.parametrize("case", CASES)
def test_two_gpus_within_the_ops_own_error(ranks: list[dict[str, Any]], case: str) -> None:
    check_16_bit(ranks, case, "torch.bfloat16" if case.startswith("bf16") else "torch.float16")
    tokens = [res[f"value/{case}"]["shape"][0] for res in ranks]
    assert sum(tokens) == 3072
    if "zigzag" in case:  # every rank half of every sequence
        assert tokens == [1536, 1536]
        assert all(res[f"value/{case}"]["sequences"] == list(range(8)) for res in ranks)
