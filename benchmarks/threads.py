"""The thread settings a CPU benchmark ran under, printed with its figures.

CPU timings of the NumPy engine and of torch depend on the thread pools in the process (OpenBLAS
behind NumPy, OpenMP behind torch), on how their idle workers wait, and on the machine's load;
a figure is only comparable with another measured under the same settings, so every CPU
benchmark prints them. threadpoolctl (in the ``dev`` extra) reports the pools; without it only
the environment and torch's own settings are printed.

Example:
    >>> lines = thread_settings()
    >>> lines[0].startswith("CPUs: ")
    True
"""

from __future__ import annotations

import os
import sys

__all__ = ["ENV_VARS", "limit_blas_threads", "thread_settings"]

#: environment variables that change thread pools or how their workers wait
ENV_VARS = (
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "OMP_PROC_BIND",
    "OPENBLAS_NUM_THREADS",
    # the kernels OpenBLAS runs (``Haswell``: AVX2 even on an AVX-512 CPU)
    "OPENBLAS_CORETYPE",
    "MKL_NUM_THREADS",
    "KMP_BLOCKTIME",
)


def thread_settings() -> list[str]:
    """Lines describing CPUs, load, environment and every thread pool of this process."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    env = ", ".join(f"{name}={os.environ.get(name, '-')}" for name in ENV_VARS)
    lines = [f"CPUs: {cpus} usable of {os.cpu_count()}, load average {load:.2f}", f"env: {env}"]
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        lines.append("thread pools: unknown (pip install threadpoolctl)")
    else:
        for pool in threadpool_info():
            layer = f", {pool['threading_layer']}" if pool.get("threading_layer") else ""
            kernels = f", {pool['architecture']} kernels" if pool.get("architecture") else ""
            lines.append(
                f"pool: {pool['internal_api']} ({pool['prefix']}{layer}) "
                f"{pool['num_threads']} threads, version {pool.get('version') or '?'}{kernels}"
            )
    torch = sys.modules.get("torch")
    if torch is not None:
        lines.append(
            f"torch {torch.__version__}: {torch.get_num_threads()} intra-op threads, "
            f"{torch.get_num_interop_threads()} inter-op threads"
        )
    return lines


def limit_blas_threads(count: int) -> object:
    """Keep BLAS libraries (OpenBLAS behind NumPy) to ``count`` threads for the process's life.

    Returns threadpoolctl's controller (keep it alive), or None when threadpoolctl is missing.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=count, user_api="blas")
