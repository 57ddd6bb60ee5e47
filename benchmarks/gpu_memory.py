"""GPU memory of one benchmark configuration, shared by the GPU benchmarks that run several.

:func:`config_memory` brackets one configuration: it releases what earlier ones left (garbage
collection, then torch's cached blocks back to the driver), resets the peak counter, and when
the configuration is done (its objects gone) releases again and prints one line:

``# bias_dbias_16k: GPU memory before 0.00 GiB, peak 41.27 GiB, after 0.00 GiB, ...``

*before* and *after* are ``torch.cuda.memory_allocated()`` (tensors alive), *peak*
``torch.cuda.max_memory_allocated()`` in between, *reserved* what torch's caching allocator
still holds from the driver afterwards. An *after* above *before* is memory that outlives its
configuration (a cache, a captured CUDA graph's pool, a tensor kept by a global).

Run the configuration's code inside the ``with`` block and catch its errors there, so that a
failure's traceback (which keeps the configuration's tensors alive) is gone before *after*.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

GIB = 2**30


def release(torch: Any) -> None:
    """Free what nothing references any more: unreachable cycles, then torch's cached blocks."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


@contextmanager
def config_memory(
    name: str, torch: Any, report: Callable[[str], None] = print
) -> Iterator[dict[str, float]]:
    """Measure the configuration run in the block; yields the dict it fills (GiB) on exit.

    Example:
        ``with config_memory("padding75_4k", torch) as mem: r = row("padding75_4k")``, then
        ``r.update(mem)`` (``mem_before_gib``, ``mem_peak_gib``, ``mem_after_gib``,
        ``mem_reserved_gib``).
    """
    release(torch)
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    figures: dict[str, float] = {}
    try:
        yield figures
    finally:
        peak = torch.cuda.max_memory_allocated()
        release(torch)
        after = torch.cuda.memory_allocated()
        reserved = torch.cuda.memory_reserved()
        figures.update(
            mem_before_gib=before / GIB,
            mem_peak_gib=peak / GIB,
            mem_after_gib=after / GIB,
            mem_reserved_gib=reserved / GIB,
        )
        report(
            f"# {name}: GPU memory before {before / GIB:.2f} GiB, peak {peak / GIB:.2f} GiB, "
            f"after {after / GIB:.2f} GiB (reserved {reserved / GIB:.2f} GiB)"
        )
