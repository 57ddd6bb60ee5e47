"""``CUDNN_FRONTEND_ENGINE``: hipDNN's SDPA graphs on NVIDIA's cudnn-frontend (CUDA builds of
torch with the ``nvidia-cudnn-frontend`` package, the extra ``hipdnn-graph[cudnn]``).

:mod:`.rules` decides what maps onto cuDNN without torch or a device; :mod:`.node_graph` declares
one node to cuDNN; :mod:`.engine` is the engine and its plan; :mod:`.handles` keeps one cuDNN
handle per device; :mod:`.lifetime` releases cudnn-frontend's objects at interpreter exit (so
nanobind reports no leaks). Nothing here imports torch or cudnn until a graph is checked.

Example:
    >>> from hipdnn_graph_torch_rocm.cudnn_fe import rules
    >>> rules.ENGINE_NAME, rules.PRIORITY
    ('CUDNN_FRONTEND_ENGINE', 5)
"""

from __future__ import annotations

__all__: list[str] = []
