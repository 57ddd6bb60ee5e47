"""Every test under ``tests/gpu`` needs a CUDA or ROCm device. Without one they all skip for one
reason, :data:`NO_DEVICE`, whatever more a file needs (two devices, CUDA's cuDNN), so that the
skip summary of a machine without a GPU is one line; with a device, each file's own conditions
say what else is missing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
#: the one skip reason of every GPU test on a machine without a GPU
NO_DEVICE = "needs a CUDA or ROCm device"


def _has_device() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the no-device skip before every other condition of the tests under this folder."""
    if _has_device():
        return
    first = pytest.mark.skipif(True, reason=NO_DEVICE)
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(first, append=False)
