"""A complete, minimal backend plugin: one engine that runs SDPA forward graphs with NumPy.

It handles GQA, D != Dv, causal masks (both alignments) and every scale form, and refuses every
other feature in ``check()`` with a reason, so graph building falls through to another engine.
The plugin guide (docs/plugins.md) walks through it; running this file registers it in an
isolated registry, executes a graph on it and checks it with the conformance kit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem, Support

# --8<-- [start:engine]
IO_TYPES = {hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16, hg.DataType.DOUBLE}


class EinsumPlan:
    """Built once per graph by ``build_plan``; ``execute`` runs it on a variant pack."""

    engine_name = "EINSUM_SDPA_ENGINE"
    workspace_size = 0

    def __init__(self, problem: SdpaProblem) -> None:
        self.p = problem  # everything decided at build time lives here

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        p = self.p
        double = p.compute_data_type == hg.DataType.DOUBLE
        compute: np.dtype[Any] = np.dtype(np.float64 if double else np.float32)
        q, k, v = (np.asarray(variant_pack[p.uid(s)], compute) for s in ("Q", "K", "V"))
        k = np.repeat(k, p.heads // p.heads_k, axis=1)  # GQA: query head h reads K head h // g
        v = np.repeat(v, p.heads // p.heads_v, axis=1)
        s = p.scale.resolve(variant_pack) * np.einsum("bhqd,bhkd->bhqk", q, k)
        if p.window.right_bound is not None:  # causal: key j visible to query i iff j <= i + off
            offset = p.seq_kv - p.seq_q if p.window.bottom_right else 0
            i, j = np.arange(p.seq_q)[:, None], np.arange(p.seq_kv)[None, :]
            s = np.where(j <= i + offset + p.window.right_bound, s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        total = e.sum(axis=-1, keepdims=True)
        o = np.einsum("bhqk,bhkd->bhqd", e, v) / np.where(total > 0, total, 1.0)
        np.copyto(variant_pack[p.uid("O")], o, casting="unsafe")
        if p.has("Stats") and p.uid("Stats") in variant_pack:  # rows with no visible key: +inf
            lse = np.where(total > 0, m + np.log(np.where(total > 0, total, 1.0)), np.inf)
            np.copyto(variant_pack[p.uid("Stats")], lse, casting="unsafe")


class EinsumEngine:
    name = "EINSUM_SDPA_ENGINE"  # its id is engine_id(name), 64-bit FNV-1a as in hipDNN
    priority = 900  # lower runs first; the NumPy reference is 1000
    array_kind = "numpy"  # the buffers execute() receives

    def check(self, graph: hg.Graph) -> Support:
        if len(graph.nodes) != 1 or not isinstance(graph.nodes[0], hg.SdpaFwdNode):
            return Support.no("only graphs of one SDPA forward node")
        p = SdpaProblem.from_node(graph.nodes[0])
        unsupported = {
            "bias": p.has("Bias"),
            "ALiBi": p.alibi,
            "padding": p.padding,
            "dropout": p.uses_dropout,
            "diagonal band": p.window.left_bound is not None
            or p.window.right_bound not in (None, 0),
            "virtual Stats": p.has("Stats") and p.tensors["Stats"].get_is_virtual(),
        }
        for feature, used in unsupported.items():
            if used:
                return Support.no(f"node '{p.name}': {feature} is not supported")
        if any(t.get_data_type() not in IO_TYPES for t in p.tensors.values() if t.get_dim() != [1]):
            return Support.no(f"node '{p.name}': io types FLOAT, HALF, BFLOAT16, DOUBLE only")
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> EinsumPlan:
        return EinsumPlan(SdpaProblem.from_node(graph.nodes[0]))


class EinsumBackend:
    name = "einsum"

    def engines(self) -> list[EinsumEngine]:
        return [EinsumEngine()]


def create_backend() -> EinsumBackend:
    """The entry point: ``einsum = "my_package:create_backend"`` in ``hipdnn_graph.backends``."""
    return EinsumBackend()


# --8<-- [end:engine]


def main() -> None:
    # --8<-- [start:use]
    from hipdnn_graph.testing import check_engine

    with hg.backend.isolated_registry() as registry:  # installed plugins + ours, for this block
        registry.register(create_backend())

        g = hg.Graph(
            io_data_type=hg.DataType.FLOAT,
            intermediate_data_type=hg.DataType.FLOAT,
            compute_data_type=hg.DataType.FLOAT,
        )
        q = g.tensor(name="Q", dim=[1, 4, 32, 16])
        k, v = g.tensor(name="K", dim=[1, 2, 48, 16]), g.tensor(name="V", dim=[1, 2, 48, 8])
        o, _ = g.sdpa(q, k, v, use_causal_mask_bottom_right=True, generate_stats=False)
        o.set_output(True)
        g.set_preferred_engine_id_ext("EINSUM_SDPA_ENGINE").build()
        print(g.get_plan_name(), o.get_dim())

        supported = {
            "gqa",
            "d_ne_dv",
            "sq_ne_skv",
            "causal",
            "causal_bottom_right",
            "scale_value",
            "scale_tensor",
        }
        report = check_engine("EINSUM_SDPA_ENGINE", cases=12, kinds=("fwd",), features=supported)
        print(report.summary())
        report = check_engine("EINSUM_SDPA_ENGINE", cases=6, seed=1)  # every feature and kind
        print(report.summary())
        print(report.skipped[0].reason)
    # --8<-- [end:use]


if __name__ == "__main__":
    main()
