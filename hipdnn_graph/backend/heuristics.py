"""What the heuristic modes mean: three documented rankings of the engines that apply.

``create_execution_plans(modes)`` ranks with each mode in the order given and keeps an engine
where it first appears (hipDNN's and cudnn-frontend's rule for a list of modes); every engine
that applies stays a candidate, after those the modes ranked. ``None`` (no list) is mode A.

- **A** -- the plugin authors' ranking: each engine's declared ``priority`` (lower first),
  registration order breaking ties. It is what hipdnn-graph always did.
- **B** -- the measured ranking: engines ordered by :data:`MEASURED` for the graph's problem
  class (:func:`problem_class`), fastest first; engines without a figure follow in A's order.
  A graph whose class has no row is ranked as A.
- **FALLBACK** -- the engines that always run first: those declaring ``fallback`` (an ``int``,
  lower first; the NumPy reference declares 1, it runs every graph on every machine, the torch
  math engine 2, for the SDPA graphs it covers), then the rest in A's order. Where a device is
  visible (``device_visible``), a fallback engine holding host arrays only (``array_kind`` of
  ``"numpy"``) keeps its place in A's order (the NumPy reference: last): hipDNN's own scripts
  ask for FALLBACK and hand the plan device memory, which the device engines read where it is.
- **OPENSOURCE** -- accepted and ranked as A (hipdnn-graph's engines are all open source).

Example:
    >>> class E:
    ...     def __init__(self, name, priority, fallback=None):
    ...         self.name, self.priority, self.fallback = name, priority, fallback
    >>> engines = [E("FAST", 10), E("REF", 1000, fallback=1)]
    >>> [e.name for e in rank_by_modes(engines, [HeuristicMode.FALLBACK], None)]
    ['REF', 'FAST']
    >>> [e.name for e in rank_by_modes(engines, [HeuristicMode.A], None)]
    ['FAST', 'REF']
    >>> engines.append(E("MATH", 50, fallback=2))
    >>> engines[1].array_kind = "numpy"
    >>> [e.name for e in rank_by_modes(engines, [HeuristicMode.FALLBACK], None)]
    ['REF', 'MATH', 'FAST']
    >>> [e.name for e in rank_by_modes(engines, [HeuristicMode.FALLBACK], None, True)]
    ['MATH', 'FAST', 'REF']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..types import HeuristicMode

__all__ = ["MEASURED", "Measurement", "problem_class", "rank_by_modes"]

_E = TypeVar("_E")


@dataclass(frozen=True)
class Measurement:
    """One row of :data:`MEASURED`: each engine's figure (higher is faster) and where it comes
    from."""

    figures: dict[str, float]
    unit: str
    provenance: str


#: The measured table mode B ranks by, one row per problem class (the one place these figures
#: live; the pages they come from cite the scripts that print them).
MEASURED: dict[str, Measurement] = {
    "sdpa_backward": Measurement(
        figures={
            # mean of the six shapes of the table (bf16, backward only, B·S = 16k tokens)
            "TORCH_SDPA_CUDNN_ENGINE": (368 + 446 + 412 + 519 + 539 + 522) / 6,
            "TORCH_SDPA_FLASH_ENGINE": (216 + 286 + 231 + 289 + 307 + 307) / 6,
            "TORCH_SDPA_EFFICIENT_ENGINE": (107 + 111 + 126 + 136 + 138 + 129) / 6,
            "TORCH_SDPA_MATH_ENGINE": (26 + 50 + 54) / 3,
        },
        unit="TFLOP/s",
        provenance=(
            "shared/MEASURED.md, 'Throughput of torch's fused SDPA backward ops': NVIDIA H200, "
            "torch 2.11, each engine's fused backward op; the math engine's figure is the "
            "plain-matmul row"
        ),
    ),
    "family_chain": Measurement(
        figures={
            # 1 / (mean milliseconds over the five graphs of the replayed run)
            "TORCH_FUSION_ENGINE": 5 / (0.384 + 0.112 + 0.196 + 0.049 + 0.299),
            "TORCH_EAGER_ENGINE": 5 / (0.797 + 0.223 + 0.271 + 0.069 + 0.368),
        },
        unit="graphs/ms",
        provenance=(
            "docs/performance.md, 'The node families: torch engines on the GPU' (replayed "
            "table): benchmarks/family_fusion.py --quick, NVIDIA H200, torch 2.11, bf16"
        ),
    ),
}


def problem_class(graph: Any) -> str | None:
    """The :data:`MEASURED` row for ``graph``: ``sdpa_backward`` for a graph with an SDPA
    backward node, ``family_chain`` for two or more nodes without SDPA, else ``None``."""
    kinds = [type(node).__name__ for node in getattr(graph, "nodes", ())]
    if "SdpaBwdNode" in kinds:
        return "sdpa_backward"
    if len(kinds) >= 2 and "SdpaFwdNode" not in kinds:
        return "family_chain"
    return None


def _rank_a(engines: Sequence[_E]) -> list[_E]:
    order = {id(e): i for i, e in enumerate(engines)}
    return sorted(engines, key=lambda e: (int(getattr(e, "priority", 100)), order[id(e)]))


def _declared(engine: object, attribute: str) -> Any:
    return getattr(engine, attribute, None)


def _rank(mode: HeuristicMode, engines: Sequence[_E], graph: Any, on_device: bool) -> list[_E]:
    by_a = _rank_a(engines)
    if mode == HeuristicMode.FALLBACK:
        fallbacks = [
            e
            for e in by_a
            if _declared(e, "fallback") is not None
            and not (on_device and _declared(e, "array_kind") == "numpy")
        ]
        fallbacks.sort(key=lambda e: int(_declared(e, "fallback")))
        return fallbacks
    if mode == HeuristicMode.B:
        row = MEASURED.get(problem_class(graph) or "")
        if row is None:
            return by_a
        measured = [e for e in by_a if _declared(e, "name") in row.figures]
        measured.sort(key=lambda e: -row.figures[str(_declared(e, "name"))])
        return measured
    return by_a


def rank_by_modes(
    engines: Sequence[_E], modes: Sequence[HeuristicMode], graph: Any, device_visible: bool = False
) -> list[_E]:
    """``engines`` (those that apply to ``graph``) ranked by ``modes`` in order, each engine
    where it first appears, then the engines no mode ranked, in A's order; ``device_visible``:
    a CUDA or ROCm device is visible (mode FALLBACK puts host-only engines after the others)."""
    ranked: list[_E] = []
    seen: set[int] = set()
    for mode in [*modes, HeuristicMode.A]:
        for engine in _rank(mode, engines, graph, device_visible):
            if id(engine) not in seen:
                seen.add(id(engine))
                ranked.append(engine)
    return ranked
