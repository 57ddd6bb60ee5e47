"""``NUMPY_REFERENCE_ENGINE``: runs whole SDPA forward/backward graphs with NumPy.

Written only against ``hipdnn_graph``'s public API, as a third-party plugin would be. Nodes run in
topological order; virtual tensors between nodes are allocated here. The math itself lives in
:mod:`backends.numpy_reference.sdpa_math`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem, Support
from hipdnn_graph.backend.dtypes import numpy_dtype

from .sdpa_math import sdpa_backward, sdpa_forward

__all__ = ["NumpyReferenceEngine", "NumpyReferencePlan"]

_IO_TYPES = frozenset(
    {hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16, hg.DataType.DOUBLE}
)
_COMPUTE = {hg.DataType.FLOAT: np.float32, hg.DataType.DOUBLE: np.float64}
_SCALAR_SLOTS = frozenset({"Attn_scale", "Dropout_scale", "Dropout_scale_inv", "Seed", "Offset"})
_INT_SLOTS = frozenset({"SEQ_LEN_Q", "SEQ_LEN_KV"})


def refusal(problem: SdpaProblem) -> str | None:
    """Why the reference cannot run this node exactly, or ``None``."""
    node = f"node '{problem.name}'"
    if problem.dropout_probability and not problem.has("Dropout_mask"):
        return (
            f"{node}: philox dropout (dropout_probability with seed/offset) is not implemented; "
            "give an explicit Dropout_mask and Dropout_scale instead"
        )
    if problem.compute_data_type not in _COMPUTE:
        return f"{node}: compute type {problem.compute_data_type.name} (FLOAT or DOUBLE only)"
    for slot, tensor in problem.tensors.items():
        if slot in _SCALAR_SLOTS:
            continue
        allowed = {hg.DataType.INT32, hg.DataType.INT64} if slot in _INT_SLOTS else _IO_TYPES
        if slot == "Dropout_mask":
            allowed = _IO_TYPES | {hg.DataType.UINT8, hg.DataType.BOOLEAN, hg.DataType.INT8}
        if tensor.data_type not in allowed:
            return f"{node}: {slot} has data type {tensor.data_type.name}"
    return None


@dataclass
class _Step:
    problem: SdpaProblem
    compute: Any


class NumpyReferencePlan:
    """Runs the nodes of one graph in order."""

    engine_name = "NUMPY_REFERENCE_ENGINE"
    workspace_size = 0

    def __init__(self, graph: hg.Graph) -> None:
        self.steps = [
            _Step(p, _COMPUTE[p.compute_data_type])
            for p in (SdpaProblem.from_node(n) for n in graph.nodes)
        ]

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        buffers: dict[int, Any] = dict(variant_pack)
        for step in self.steps:
            self._run(step, buffers)

    @staticmethod
    def _run(step: _Step, buffers: dict[int, Any]) -> None:
        p = step.problem

        def get(slot: str) -> Any:
            return buffers[p.uid(slot)] if p.has(slot) else None

        common: dict[str, Any] = {
            "scale": p.scale.resolve(buffers),
            "bias": get("Bias"),
            "alibi": p.alibi,
            "bottom_right": p.window.bottom_right,
            "left_bound": p.window.left_bound,
            "right_bound": p.window.right_bound,
            "seq_len_q": get("SEQ_LEN_Q") if p.padding else None,
            "seq_len_kv": get("SEQ_LEN_KV") if p.padding else None,
            "dropout_mask": get("Dropout_mask"),
            "dropout_scale": p.dropout_scale.resolve(buffers) if p.has("Dropout_mask") else 1.0,
            "compute_dtype": step.compute,
        }
        if p.backward:
            dbias_shape = tuple(p.tensors["dBias"].dim) if p.has("dBias") else None
            dq, dk, dv, dbias = sdpa_backward(
                get("Q"),
                get("K"),
                get("V"),
                get("O"),
                get("dO"),
                get("Stats"),
                dbias_shape=dbias_shape,
                **common,
            )
            results = {"dQ": dq, "dK": dk, "dV": dv, "dBias": dbias}
        else:
            o, stats = sdpa_forward(get("Q"), get("K"), get("V"), **common)
            results = {"O": o, "Stats": stats}
        for slot, value in results.items():
            if value is None or not p.has(slot):
                continue
            tensor = p.tensors[slot]
            out = buffers.get(tensor.get_uid())
            if out is None:  # a virtual tensor: keep it for the nodes that read it
                buffers[tensor.get_uid()] = value.astype(numpy_dtype(tensor.data_type))
            else:
                np.copyto(out, value.reshape(out.shape), casting="unsafe")


class NumpyReferenceEngine:
    """The reference engine: every SDPA feature except philox dropout, on the CPU."""

    name = "NUMPY_REFERENCE_ENGINE"
    priority = 1000
    array_kind = "numpy"

    def check(self, graph: hg.Graph) -> Support:
        for node in graph.nodes:
            if not isinstance(node, hg.SdpaBwdNode | hg.SdpaFwdNode):
                return Support.no(f"{type(node).__name__} is not implemented")
            reason = refusal(SdpaProblem.from_node(node))
            if reason is not None:
                return Support.no(reason)
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> NumpyReferencePlan:
        return NumpyReferencePlan(graph)


class NumpyReferenceBackend:
    """The built-in ``numpy`` backend plugin."""

    name = "numpy"

    def __init__(self) -> None:
        self._engines = [NumpyReferenceEngine()]

    def engines(self) -> list[NumpyReferenceEngine]:
        return self._engines
