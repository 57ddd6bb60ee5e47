"""Timing shared by the torch benchmarks that compare whole steps (run them from any folder:
Python puts a script's own folder on the import path): interleaved rounds timed with CUDA
events on a device (``perf_counter`` on the CPU), and the memory one step adds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def interleaved_ms(
    steps: dict[str, Callable[[], None]], cuda: bool, rounds: int, calls: int = 10
) -> dict[str, float]:
    """Median ms of one call of each step, over ``rounds`` rounds of ``calls`` calls of each
    step in turn (interleaved, so a busy machine moves every contender alike).

    Example:
        >>> sorted(interleaved_ms({"a": lambda: None, "b": lambda: None}, False, 2))
        ['a', 'b']
    """
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            if cuda:
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start.record()
                for _ in range(calls):
                    step()
                end.record()
                end.synchronize()
                elapsed = start.elapsed_time(end)
                times[name].append(elapsed / calls)
            else:
                t0 = time.perf_counter()
                for _ in range(calls):
                    step()
                times[name].append((time.perf_counter() - t0) * 1000 / calls)
    return {name: statistics.median(ts) for name, ts in times.items()}


def peak_bytes(step: Callable[[], None], cuda: bool) -> int | None:
    """Memory one call of ``step`` adds above what is allocated before it (None on the CPU).

    Example:
        >>> peak_bytes(lambda: None, False) is None
        True
    """
    if not cuda:
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base
