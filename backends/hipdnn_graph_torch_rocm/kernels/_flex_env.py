"""Where the flex engine may run, decided without importing FlexAttention.

:mod:`.flex` imports torch's FlexAttention, inductor's lowering and the block-mask kernels
(about a second on a CPU); ``TORCH_SDPA_FLEX_ENGINE.check()`` reads these first, so that a
machine where the engine refuses (no GPU, ``HIPDNN_GRAPH_TORCH_FLEX_CPU`` unset) never pays for
that import. A leaf: imports nothing of the package.
"""

from __future__ import annotations

import os

__all__ = ["CPU_ENV", "cpu_allowed"]

#: Environment variable that lets the flex engine run on CPU (FlexAttention's reference path).
CPU_ENV = "HIPDNN_GRAPH_TORCH_FLEX_CPU"


def cpu_allowed() -> bool:
    """Whether ``HIPDNN_GRAPH_TORCH_FLEX_CPU`` is set to 1 (the engine then accepts CPU)."""
    return os.environ.get(CPU_ENV, "").strip() == "1"
