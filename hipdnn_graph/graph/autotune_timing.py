"""How autotuning times a candidate plan: CUDA events on the current stream for device buffers,
the host clock otherwise, run until the strategy is satisfied; and the table of what was tried.

Example:
    >>> from hipdnn_graph.graph.autotune_types import AutotuneConfig
    >>> times, converged = measure(lambda: None, AutotuneConfig(), timer(on_device=False))
    >>> converged, all(t >= 0 for t in times)
    (True, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .autotune_types import AutotuneConfig, AutotuneResult, AutotuneStrategy

__all__ = ["autotune_table", "device_name", "measure", "on_device", "timer"]


def device_name(pack: Mapping[Any, Any]) -> str:
    for value in pack.values():
        device = getattr(value, "device", None)
        if getattr(device, "type", None) == "cuda":
            import torch

            return f"cuda:{torch.cuda.get_device_name(device)}"
    return "cpu"


def on_device(pack: Mapping[Any, Any]) -> bool:
    return device_name(pack) != "cpu"


def timer(on_device: bool) -> Callable[[Callable[[], None]], float]:
    """A function timing one call in milliseconds (CUDA events on torch's current stream for
    device buffers, the host clock otherwise)."""
    if not on_device:

        def host(call: Callable[[], None]) -> float:
            began = time.perf_counter()
            call()
            return (time.perf_counter() - began) * 1e3

        return host
    import torch

    def device(call: Callable[[], None]) -> float:
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        call()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))

    return device


def measure(
    call: Callable[[], None], config: AutotuneConfig, timer: Callable[[Callable[[], None]], float]
) -> tuple[list[float], bool]:
    """The timed runs' milliseconds and whether they converged (see
    :class:`~hipdnn_graph.graph.autotune_types.AutotuneStrategy`)."""
    for _ in range(config.warmup_iterations):
        timer(call)
    if config.strategy == AutotuneStrategy.FIXED_AVERAGE:
        return [timer(call) for _ in range(config.timed_iterations)], True
    times: list[float] = []
    while len(times) < config.max_iterations:
        times.append(timer(call))
        if len(times) >= config.window_size:
            window = times[-config.window_size :]
            mean = sum(window) / len(window)
            spread = math.sqrt(sum((t - mean) ** 2 for t in window) / len(window))
            if mean > 0 and spread / mean < config.stability_threshold:
                return times, True
    return times, False


def autotune_table(results: Sequence[AutotuneResult]) -> str:
    """What ``autotune`` tried, one row per candidate, fastest first.

    Example:
        >>> print(autotune_table([AutotuneResult(engine_name="E", min_time_ms=0.5,
        ...       avg_time_ms=0.6, iterations_run=3, rank=0, succeeded=True)]))
        rank  engine  knobs  min ms  avg ms  runs  note
        0     E       -      0.5000  0.6000  3
    """
    rows = [["rank", "engine", "knobs", "min ms", "avg ms", "runs", "note"]]
    for r in sorted(results, key=lambda r: (not r.succeeded, r.rank)):
        knobs = ", ".join(f"{s.knob_id}={s.value}" for s in r.knob_settings) or "-"
        note = "stored choice" if r.from_store else r.error_message
        if r.succeeded:
            rows.append([str(r.rank), r.engine_name, knobs, f"{r.min_time_ms:.4f}",
                         f"{r.avg_time_ms:.4f}", str(r.iterations_run), note])  # fmt: skip
        else:
            rows.append(["-", r.engine_name, knobs, "-", "-", "-", note])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)
