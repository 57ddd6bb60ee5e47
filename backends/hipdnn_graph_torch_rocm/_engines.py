"""The torch engines: three fused-kernel engines and a general math engine.

Every engine runs whole SDPA forward/backward graphs, node by node in topological order.

| engine | kernels | devices |
|---|---|---|
| ``TORCH_SDPA_CUDNN_ENGINE`` | cuDNN attention (``aten._scaled_dot_product_cudnn_*``) | CUDA only |
| ``TORCH_SDPA_FLASH_ENGINE`` | FlashAttention-2 (CUDA) / AOTriton (ROCm) | GPU |
| ``TORCH_SDPA_EFFICIENT_ENGINE`` | memory-efficient kernels (AOTriton on ROCm) | GPU |
| ``TORCH_SDPA_FLEX_ENGINE`` | FlexAttention (Triton kernels compiled in ``build_plans``) | GPU |
| ``TORCH_SDPA_MATH_ENGINE`` | chunked matmuls, every feature of the node | any, CPU too |

The fused engines feed the graph's own O and Stats to torch's fused backward ops (the forward is
never recomputed; flex does so where its backward operator compiles, see
:mod:`.kernels.flex`). An engine is its ``check()`` (:mod:`._sdpa_support`: what it refuses or
defers, and why) and its ``build_plan()`` (:mod:`._sdpa_steps`, building the
:mod:`._sdpa_plan` that ``execute`` runs).

Example:
    >>> [e.name for e in create_engines()][:2]
    ['TORCH_SDPA_CUDNN_ENGINE', 'TORCH_SDPA_FLASH_ENGINE']
"""

from __future__ import annotations

import hipdnn_graph as hg
from hipdnn_graph.backend import ENGINE_API_VERSION

from ._ranking import ENGINES
from ._sdpa_plan import TorchSdpaPlan
from ._sdpa_steps import SdpaPlanning
from ._sdpa_support import FUSED_PACKED_OPS, SdpaSupport
from .engine_knobs import FLEX_KNOBS, REPLAY_KNOB

__all__ = [
    "ENGINES",
    "TorchSdpaBackend",
    "TorchSdpaEngine",
    "TorchSdpaPlan",
    "create_engines",
]


class TorchSdpaEngine(SdpaSupport, SdpaPlanning):
    """One torch engine; ``op`` is the kernel family (``"cudnn"``, ``"flash"``, ``"efficient"``,
    ``"flex"``) or ``None`` for the math engine.

    Knobs: every engine has :data:`~.replay.REPLAY_KNOB`; the flex engine also its tiles and
    warps (:data:`~.engine_knobs.FLEX_KNOBS`).
    """

    array_kind = "torch"
    api_version = ENGINE_API_VERSION
    #: the node families these engines run (others are refused by name before ``check``)
    node_types = frozenset({hg.NodeType.SDPA_FWD, hg.NodeType.SDPA_BWD})

    def __init__(self, name: str, op: str | None, priority: int) -> None:
        super().__init__(name, op)
        self.priority = priority
        self.knobs = (REPLAY_KNOB, *FLEX_KNOBS) if op == "flex" else (REPLAY_KNOB,)
        #: a plan per override shape is a cheap step list, except flex's (a compile per shape)
        self.supports_override_shapes = op != "flex"
        self.override_shapes_reason = (
            "FlexAttention compiles its Triton kernels and block masks for the graph's shapes "
            "in build_plans; every new override shape would compile again"
            if op == "flex"
            else None
        )
        #: heuristic mode FALLBACK ranks the math engine second (it runs every SDPA graph)
        self.fallback = 2 if op is None else None
        #: the math engine runs packed (ragged) graphs sequence by sequence
        #: (:mod:`._packed_plan`), flash and efficient through their variable-length kernels
        #: (:mod:`._packed_fused`); cuDNN's and flex's are not wired
        self.supports_ragged = op is None or op in FUSED_PACKED_OPS
        self.ragged_reason = (
            None
            if self.supports_ragged
            else f"the {op} kernels' variable-length path is not wired to graphs yet; "
            "TORCH_SDPA_FLASH_ENGINE, TORCH_SDPA_EFFICIENT_ENGINE and TORCH_SDPA_MATH_ENGINE "
            "run packed graphs"
        )

    def __repr__(self) -> str:
        return f"TorchSdpaEngine({self.name})"

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0


def create_engines() -> list[TorchSdpaEngine]:
    """The five engines, in priority order."""
    return [TorchSdpaEngine(name, op, priority) for name, op, priority in ENGINES]


class TorchSdpaBackend:
    """The five SDPA engines of :func:`create_engines` as a backend (the ``torch`` entry point
    serves :class:`._backend.TorchBackend`, which adds the cuDNN-frontend and family engines)."""

    name = "torch"

    def __init__(self) -> None:
        self._engines = create_engines()

    def engines(self) -> list[TorchSdpaEngine]:
        return self._engines
