"""``benchmarks/gpu_memory.py``: the per-configuration memory line of the GPU benchmarks, on CPU
with a stand-in for ``torch.cuda`` (its figures on a GPU come from the benchmarks' own runs)."""

from __future__ import annotations

import gc
import importlib.util
import types
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_memory.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_memory", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_memory = _load()
GIB = gpu_memory.GIB
config_memory = gpu_memory.config_memory


class _Cuda:
    """Counts what a caching allocator would: tensors alive, the peak, blocks kept."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.allocated = 0
        self.peak = 0
        self.reserved = 0

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.reserved = max(self.reserved, self.allocated)
        self.peak = max(self.peak, self.allocated)

    def memory_allocated(self) -> int:
        return self.allocated

    def max_memory_allocated(self) -> int:
        return self.peak

    def memory_reserved(self) -> int:
        return self.reserved

    def reset_peak_memory_stats(self) -> None:
        self.log.append("reset")
        self.peak = self.allocated

    def synchronize(self) -> None:
        self.log.append("sync")

    def empty_cache(self) -> None:
        self.log.append("empty")
        self.reserved = self.allocated


def _torch(log: list[str]) -> Any:
    return types.SimpleNamespace(cuda=_Cuda(log))


def test_one_line_per_configuration_with_before_peak_and_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda: log.append("gc") or 0)  # the module's gc
    torch = _torch(log)
    torch.cuda.alloc(GIB)  # left by an earlier configuration
    lines: list[str] = []
    with config_memory("bias_dbias_16k", torch, lines.append) as mem:
        assert log == ["gc", "sync", "empty", "reset"]  # released before it starts
        torch.cuda.alloc(40 * GIB)
        torch.cuda.alloc(-39 * GIB)  # the configuration's own tensors freed; 1 GiB kept
    assert log[4:] == ["gc", "sync", "empty"]  # released again before "after" is read
    assert lines == [
        "# bias_dbias_16k: GPU memory before 1.00 GiB, peak 41.00 GiB, after 2.00 GiB "
        "(reserved 2.00 GiB)"
    ]
    assert mem == {
        "mem_before_gib": 1.0,
        "mem_peak_gib": 41.0,
        "mem_after_gib": 2.0,
        "mem_reserved_gib": 2.0,
    }


def test_a_failing_configuration_still_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = _torch([])
    lines: list[str] = []
    with (
        pytest.raises(RuntimeError, match="CUDA out of memory"),
        config_memory("x", torch, lines.append) as mem,
    ):
        torch.cuda.alloc(3 * GIB)
        raise RuntimeError("CUDA out of memory")
    assert mem["mem_peak_gib"] == 3.0
    assert lines[0].startswith("# x: GPU memory before 0.00 GiB, peak 3.00 GiB")
