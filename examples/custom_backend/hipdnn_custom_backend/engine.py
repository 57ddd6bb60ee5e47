"""``CUSTOM_NUMPY_SDPA_FWD_ENGINE``: a plain NumPy SDPA forward, as a plugin author writes one.

Only ``hipdnn_graph``'s public API is used: the graph and node classes, and from
``hipdnn_graph.backend`` the :class:`~hipdnn_graph.backend.Support` answer and the
:class:`~hipdnn_graph.backend.SdpaProblem` view of a node (shapes, mask window, where the scale
comes from, which slots are set).

The engine runs graphs made of exactly one SDPA forward node, with no mask or a causal mask
(top-left or bottom-right aligned), grouped-query attention and any scale form. Everything else
(bias, ALiBi, padding, dropout, diagonal bands, backward nodes) is refused in :meth:`check` with
a reason, so hipdnn-graph ranks another engine instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem, Support

__all__ = [
    "ENGINE_NAME",
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

    def __init__(self, problem: SdpaProblem) -> None:
        self.problem = problem
        self.compute = _COMPUTE_TYPES[problem.compute_data_type]

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

        scores = (q * self.compute(scale)) @ k.swapaxes(-1, -2)  # [B, H, Sq, Skv]
        if p.window.right_bound == 0:  # causal: key j is visible to query i iff j <= i + offset
            offset = p.seq_kv - p.seq_q if p.window.bottom_right else 0
            rows = np.arange(p.seq_q)[:, None]
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

        self._store("O", out, variant_pack)
        self._store("Stats", stats, variant_pack)

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

    def check(self, graph: hg.Graph) -> Support:
        nodes = graph.nodes
        if len(nodes) != 1 or not isinstance(nodes[0], hg.SdpaFwdNode):
            return Support.no("runs graphs of exactly one SDPA forward node")
        reason = why_not(SdpaProblem.from_node(nodes[0]))
        return Support.yes() if reason is None else Support.no(reason)

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> CustomSdpaForwardPlan:
        return CustomSdpaForwardPlan(SdpaProblem.from_node(graph.nodes[0]))


class CustomBackend:
    """The plugin: a name and its engines."""

    name = "custom"

    def __init__(self) -> None:
        self._engines = [CustomSdpaForwardEngine()]

    def engines(self) -> list[CustomSdpaForwardEngine]:
        return self._engines
