"""The torch engines' knobs: CUDA-graph replay (every engine) and the flex kernels' tile
sizes and warps (``TORCH_SDPA_FLEX_ENGINE``).

:data:`REPLAY_KNOB` sets how many captured CUDA graphs a plan keeps (:mod:`.replay`): 0 runs
every ``execute`` eagerly, -1 leaves it to ``HIPDNN_GRAPH_CUDA_GRAPHS`` (default 4).

FlexAttention compiles one Triton kernel per node; these knobs fix its ``kernel_options``
instead of flex's own choice (0 keeps flex's choice, and the smaller-tile fallbacks the kernel
tries where its defaults do not fit). The forward takes ``BLOCK_M`` (query rows per program),
``BLOCK_N`` (keys per inner step) and ``num_warps``; the backward takes ``num_warps`` (its four
block sizes are paired by flex's rules, so they stay flex's).

Example:
    >>> flex_tiles({"flex.block_m": 64, "flex.block_n": 0, "flex.num_warps": 4}, forward=True)
    (('BLOCK_M', 64), ('num_warps', 4))
    >>> flex_tiles({"flex.block_m": 64, "flex.num_warps": 4}, forward=False)
    (('num_warps', 4),)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hipdnn_graph.backend import IntConstraint, Knob

from .replay import CudaGraphReplay

__all__ = [
    "FLEX_BLOCK_M",
    "FLEX_BLOCK_N",
    "FLEX_KNOBS",
    "FLEX_NUM_WARPS",
    "REPLAY_KNOB",
    "apply_replay_knob",
    "flex_tiles",
]

#: graphs a plan keeps for replaying repeated executes (0: off; -1: the environment's setting)
REPLAY_KNOB = Knob(
    "torch.cuda_graphs",
    -1,
    "CUDA graphs a plan keeps for replaying repeated executes (0: off; -1: "
    "HIPDNN_GRAPH_CUDA_GRAPHS, default 4)",
    IntConstraint(-1, 64),
)

_BLOCKS = IntConstraint(0, 128, valid_values=(0, 16, 32, 64, 128))

FLEX_BLOCK_M = Knob(
    "flex.block_m", 0, "forward query rows per program (BLOCK_M; 0: flex's choice)", _BLOCKS
)
FLEX_BLOCK_N = Knob(
    "flex.block_n", 0, "forward keys per inner step (BLOCK_N; 0: flex's choice)", _BLOCKS
)
FLEX_NUM_WARPS = Knob(
    "flex.num_warps",
    0,
    "warps per program, forward and backward (0: flex's choice)",
    IntConstraint(0, 8, valid_values=(0, 2, 4, 8)),
)
FLEX_KNOBS = (FLEX_BLOCK_M, FLEX_BLOCK_N, FLEX_NUM_WARPS)

_FORWARD = (("BLOCK_M", FLEX_BLOCK_M), ("BLOCK_N", FLEX_BLOCK_N), ("num_warps", FLEX_NUM_WARPS))


def flex_tiles(knobs: Mapping[str, Any] | None, *, forward: bool) -> tuple[tuple[str, int], ...]:
    """The flex ``kernel_options`` the knob values fix for a forward or backward node."""
    chosen = knobs or {}
    pairs = _FORWARD if forward else (("num_warps", FLEX_NUM_WARPS),)
    return tuple(
        (option, int(chosen[knob.knob_id])) for option, knob in pairs if chosen.get(knob.knob_id)
    )


def apply_replay_knob(replay: CudaGraphReplay, knobs: Mapping[str, Any] | None) -> None:
    """Set ``replay``'s capacity from the plan's :data:`REPLAY_KNOB` value (-1 or absent: as
    the environment says; a plan that refused replay keeps it off).

    Example:
        >>> replay = CudaGraphReplay(frozenset())
        >>> apply_replay_knob(replay, {"torch.cuda_graphs": 0}); replay.capacity
        0
    """
    value = int((knobs or {}).get(REPLAY_KNOB.knob_id, -1))
    if value >= 0 and replay.refusal is None:
        replay.capacity = value
        while len(replay.graphs) > value:
            replay.graphs.popitem(last=False)
