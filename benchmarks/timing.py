"""Wall-clock sampling shared by the CPU benchmarks (run them from any folder: Python puts a
script's own folder on the import path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def samples_us(fn: Callable[[], Any], runs: int, warmup: int) -> list[float]:
    """``runs`` wall times of ``fn()`` in µs, after ``warmup`` untimed calls.

    Example:
        >>> len(samples_us(lambda: None, runs=5, warmup=1))
        5
    """
    for _ in range(warmup):
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(runs):
        start = clock()
        fn()
        samples.append((clock() - start) / 1000.0)
    return samples
