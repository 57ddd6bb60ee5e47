"""``CUSTOM_NUMPY_SDPA_FWD_ENGINE``: a plain NumPy SDPA forward, as a plugin author writes one.

Only ``hipdnn_graph``'s public API is used: the graph and node classes, and from
``hipdnn_graph.backend`` the :class:`~hipdnn_graph.backend.Support` answer and the
:class:`~hipdnn_graph.backend.SdpaProblem` view of a node (shapes, mask window, where the scale
comes from, which slots are set).

The engine runs graphs made of exactly one SDPA forward node, with no mask or a causal mask
(top-left or bottom-right aligned), grouped-query attention and any scale form. Everything else
(bias, ALiBi, padding, dropout, diagonal bands, backward nodes) is refused in :meth:`check` with
a reason, so hipdnn-graph ranks another engine instead.

It declares one knob, ``custom.row_block`` (:data:`ROW_BLOCK_KNOB`): the query rows one step of
the math takes (0: all of them at once), so a caller can trade memory for fewer NumPy calls;
hipdnn-graph checks a caller's value against the listed choices and passes every knob's value
to :meth:`CustomSdpaForwardEngine.build_plan`. It implements engine plugin API 1.2.0 (runtime
pass-by-value scalars arrive as Python numbers), so graphs that need that version reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import IntConstraint, Knob, SdpaProblem, Support

__all__ = [
    "ENGINE_NAME",
    "ROW_BLOCK_KNOB",
    "SUPPORTED_FEATURES",
    "SUPPORTED_KINDS",
    "CustomBackend",
    "CustomSdpaForwardEngine",
    "CustomSdpaForwardPlan",
]

ENGINE_NAME = "CUSTOM_NUMPY_SDPA_FWD_ENGINE"
#: what the conformance kit should draw for this engine (``check_engine(kinds=...,
#: features=...)``): forward graphs with the features it runs (names of
#: ``hipdnn_graph.testing.FEATURES``); any other draw is refused in ``check`` and skipped
SUPPORTED_KINDS = ("fwd",)
SUPPORTED_FEATURES = ("gqa", "d_ne_dv", "sq_ne_skv", "causal", "causal_bottom_right",
                      "scale_value", "scale_tensor")  # fmt: skip

#: the engine's knob: query rows per step of the math (0: all rows in one step)
ROW_BLOCK_KNOB = Knob(
    "custom.row_block",
    0,
    "query rows per step of the math (0: all rows at once)",
    IntConstraint(0, 256, valid_values=(0, 16, 64, 256)),
)

_IO_TYPES = {hg.DataType.FLOAT, hg.DataType.DOUBLE, hg.DataType.HALF, hg.DataType.BFLOAT16}
_COMPUTE_TYPES = {hg.DataType.FLOAT: np.float32, hg.DataType.DOUBLE: np.float64}
#: optional slots this engine cannot honour, with the feature each one means
_UNSUPPORTED_SLOTS = {
    "Bias": "an additive bias",
    "SEQ_LEN_Q": "padding (seq_len_q)",
    "SEQ_LEN_KV": "padding (seq_len_kv)",
    "Dropout_mask": "dropout",
    "Seed": "philox dropout",
}


def why_not(problem: SdpaProblem) -> str | None:
    """The reason this engine cannot run the node exactly, or ``None`` when it can."""
    if problem.backward:
        return "only SDPA forward nodes are implemented"
    for slot, feature in _UNSUPPORTED_SLOTS.items():
        if problem.has(slot):
            return f"{feature} is not implemented"
    if problem.dropout_probability:
        return "dropout is not implemented"
    if problem.alibi:
        return "ALiBi is not implemented"
    if problem.padding:
        return "padding is not implemented"
    window = problem.window
    if window.left_bound is not None or window.right_bound not in (None, 0):
        return "diagonal bands other than a causal mask are not implemented"
    if problem.compute_data_type not in _COMPUTE_TYPES:
        return f"compute type {problem.compute_data_type.name} (FLOAT or DOUBLE only)"
    for slot in ("Q", "K", "V", "O"):
        data_type = problem.tensors[slot].data_type
        if data_type not in _IO_TYPES:
            return f"{slot} has data type {data_type.name}"
    return None


class CustomSdpaForwardPlan:
    """Executes one SDPA forward node: ``softmax(scale·Q·Kᵀ + mask)·V`` and its log-sum-exp."""

    engine_name = ENGINE_NAME
    workspace_size = 0

    def __init__(self, problem: SdpaProblem, row_block: int = 0) -> None:
        self.problem = problem
        self.compute = _COMPUTE_TYPES[problem.compute_data_type]
        #: the query rows of each step: ``[(start, stop), ...]`` (one step when the knob is 0)
        block = row_block or problem.seq_q
        self.steps = [(r, min(r + block, problem.seq_q)) for r in range(0, problem.seq_q, block)]

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        """Compute O (and Stats) from ``variant_pack`` (``{uid: numpy array}``)."""
        p = self.problem
        q = np.asarray(variant_pack[p.uid("Q")], dtype=self.compute)
        k = np.asarray(variant_pack[p.uid("K")], dtype=self.compute)
        v = np.asarray(variant_pack[p.uid("V")], dtype=self.compute)
        # grouped-query attention: query head h reads K head h // (H / Hk), V head h // (H / Hv)
        k = np.repeat(k, p.heads // p.heads_k, axis=1)
        v = np.repeat(v, p.heads // p.heads_v, axis=1)
        scale = p.scale.resolve(variant_pack)  # a constant, or a runtime pass-by-value scalar
        assert scale is not None

        steps = [self._rows(q[:, :, a:b], k, v, scale, a) for a, b in self.steps]
        out = np.concatenate([o for o, _ in steps], axis=2)
        stats = np.concatenate([st for _, st in steps], axis=2)

        self._store("O", out, variant_pack)
        self._store("Stats", stats, variant_pack)

    def _rows(self, q: Any, k: Any, v: Any, scale: float, first: int) -> tuple[Any, Any]:
        """``(O, Stats)`` of the query rows ``first, first + 1, ...`` held in ``q``."""
        p = self.problem
        scores = (q * self.compute(scale)) @ k.swapaxes(-1, -2)  # [B, H, rows, Skv]
        if p.window.right_bound == 0:  # causal: key j is visible to query i iff j <= i + offset
            offset = p.seq_kv - p.seq_q if p.window.bottom_right else 0
            rows = np.arange(first, first + q.shape[2])[:, None]
            cols = np.arange(p.seq_kv)[None, :]
            scores = np.where(cols <= rows + offset, scores, -np.inf)

        # a numerically stable softmax; rows that see no key give O = 0 and Stats = +inf
        row_max = scores.max(axis=-1, keepdims=True)
        row_max = np.where(np.isfinite(row_max), row_max, 0)
        weights = np.exp(scores - row_max)
        row_sum = weights.sum(axis=-1, keepdims=True)
        seen = row_sum > 0
        out = (weights @ v) / np.where(seen, row_sum, 1)
        stats = np.where(seen, row_max + np.log(np.where(seen, row_sum, 1)), np.inf)
        return out, stats

    def _store(self, slot: str, value: Any, variant_pack: Mapping[int, Any]) -> None:
        if not self.problem.has(slot):
            return
        target = variant_pack.get(self.problem.uid(slot))
        if target is not None:  # None: a virtual output nobody reads
            np.copyto(target, value, casting="unsafe")


class CustomSdpaForwardEngine:
    """The engine object hipdnn-graph ranks, asks and builds plans from."""

    name = ENGINE_NAME
    #: rank among applicable engines, lower first: this one only runs when preferred
    priority = 5000
    #: the variant pack holds NumPy arrays (hipdnn-graph converts torch/DLPack zero-copy)
    array_kind = "numpy"
    #: the engine plugin API this engine implements (a graph needing a newer one skips it)
    api_version = "1.2.0"
    #: what a caller may tune (``Graph.get_knobs_for_engine``, ``create_execution_plan_ext``)
    knobs = (ROW_BLOCK_KNOB,)

    def check(self, graph: hg.Graph) -> Support:
        nodes = graph.nodes
        if len(nodes) != 1 or not isinstance(nodes[0], hg.SdpaFwdNode):
            return Support.no("runs graphs of exactly one SDPA forward node")
        reason = why_not(SdpaProblem.from_node(nodes[0]))
        return Support.yes() if reason is None else Support.no(reason)

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(
        self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None
    ) -> CustomSdpaForwardPlan:
        """The plan; ``knobs`` holds every declared knob's value (defaults filled in)."""
        row_block = (knobs or {}).get(ROW_BLOCK_KNOB.knob_id, ROW_BLOCK_KNOB.default_value)
        return CustomSdpaForwardPlan(SdpaProblem.from_node(graph.nodes[0]), int(row_block))


class CustomBackend:
    """The plugin: a name and its engines."""

    name = "custom"

    def __init__(self) -> None:
        self._engines = [CustomSdpaForwardEngine()]

    def engines(self) -> list[CustomSdpaForwardEngine]:
        return self._engines
