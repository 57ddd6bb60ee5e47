"""An engine for one node family: pointwise graphs, with NumPy, tested with the conformance kit.

The engine declares ``node_types = {POINTWISE}``, so any graph with another family is refused
before its ``check()`` runs; ``check()`` refuses the modes it does not implement, parameters it
ignores and inputs that broadcast only from the left, each with a reason. The conformance kit,
asked for pointwise graphs (``families=("pointwise",)``), runs it against the NumPy reference:
cases it refuses are skipped with its reason, the others must match. The same kit over every
family skips the graphs of the other families with the reason ``node_types`` gives.

Run it: ``python examples/pointwise_engine.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import Support, isolated_registry
from hipdnn_graph.testing import FAMILIES, check_engine

# --8<-- [start:engine]
M = hg.PointwiseMode
#: the modes this engine runs, as NumPy functions of the operands (in float32)
MODES: dict[hg.PointwiseMode, Callable[..., Any]] = {
    M.ADD: np.add, M.SUB: np.subtract, M.MUL: np.multiply, M.DIV: np.divide,
    M.MAX: np.maximum, M.MIN: np.minimum, M.ABS: np.abs, M.NEG: np.negative,
    M.EXP: np.exp, M.TANH_FWD: np.tanh, M.IDENTITY: lambda x: x,
    M.SIGMOID_FWD: lambda x: 1 / (1 + np.exp(-x)),
    M.RELU_FWD: lambda x: np.maximum(x, 0),
}  # fmt: skip
PARAMETERS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope")


class PointwisePlan:
    engine_name = "NUMPY_POINTWISE_ENGINE"
    workspace_size = 0

    def __init__(self, graph: hg.Graph) -> None:
        # per node: the function, the input uids, the output uid and dims, resolved once
        self.steps = []
        for node in graph.nodes:
            a = node.attributes
            ins = [t.get_uid() for t in a.input_tensors()]
            out = a.get_output_0()
            self.steps.append((MODES[a.mode], ins, out.get_uid(), tuple(out.dim)))

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        buffers = dict(variant_pack)  # virtual tensors between nodes are added here
        for function, ins, out, dims in self.steps:
            args = [np.asarray(buffers[uid], dtype=np.float32) for uid in ins]
            with np.errstate(all="ignore"):
                value = np.broadcast_to(function(*args), dims)
            if out in variant_pack:
                np.copyto(variant_pack[out], value, casting="unsafe")
            else:
                buffers[out] = value


class PointwiseEngine:
    name = "NUMPY_POINTWISE_ENGINE"
    priority = 10
    array_kind = "numpy"
    node_types = frozenset({hg.NodeType.POINTWISE})

    def check(self, graph: hg.Graph) -> Support:
        for node in graph.nodes:
            a = node.attributes
            where = f"node '{node.name}'"
            if a.mode not in MODES:
                return Support.no(f"{where}: mode {a.mode.name} is not implemented")
            if any(getattr(a, p) is not None for p in PARAMETERS):
                return Support.no(f"{where}: ReLU clip parameters are not implemented")
            if a.compute_data_type != hg.DataType.FLOAT:
                return Support.no(f"{where}: computes in FLOAT only")
            out = a.get_output_0()
            for t in a.input_tensors():
                if not hg.nodes.pointwise.broadcast_compatible(t.dim, out.dim):
                    return Support.no(f"{where}: '{t.name}' broadcasts only from the left")
        return Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> PointwisePlan:
        return PointwisePlan(graph)


class PointwiseBackend:
    name = "pointwise_example"

    def engines(self) -> list[PointwiseEngine]:
        return [PointwiseEngine()]


# --8<-- [end:engine]


def main() -> None:
    # --8<-- [start:use]
    with isolated_registry() as registry:
        registry.register(PointwiseBackend())
        g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                     compute_data_type=hg.DataType.FLOAT)  # fmt: skip
        x, b = g.tensor(name="x", dim=[2, 3]), g.tensor(name="b", dim=[1, 3])
        y = g.pointwise(g.pointwise(x, b, mode=M.ADD, name="bias"), mode=M.TANH_FWD, name="act")
        y.set_output(True)
        g.build()
        out = np.empty((2, 3), np.float32)
        xs = np.arange(6, dtype=np.float32).reshape(2, 3)
        g.execute({x: xs, b: np.full((1, 3), -2.0, np.float32), y: out})
        print(g.get_plan_name(), np.round(out.astype(np.float64), 3).tolist())

        report = check_engine("NUMPY_POINTWISE_ENGINE", cases=40, seed=0, families=("pointwise",))
        print(report.summary())
        assert report.ok and report.passed
        cases = 4 * len(FAMILIES)
        every = check_engine("NUMPY_POINTWISE_ENGINE", cases=cases, seed=1, families=FAMILIES)
        print(every.details())
    # --8<-- [end:use]


if __name__ == "__main__":
    main()
