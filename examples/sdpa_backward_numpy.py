"""SDPA forward + backward on the NumPy reference engine, checked against finite differences.

What it shows (the job ``make demo`` runs):

1. Declare one graph holding an SDPA forward node and the SDPA backward node that consumes its
   O and Stats (causal mask, grouped-query attention: 4 query heads share 2 K/V heads).
2. ``build()`` it on ``NUMPY_REFERENCE_ENGINE`` and execute it with NumPy buffers.
3. Check the gradients: the backward computes dQ, dK, dV of the loss ``L = sum(O * dO)`` for a
   fixed dO. For a sample of Q, K and V entries the script also estimates ``dL/dx`` with central
   finite differences, ``(L(x + h) - L(x - h)) / 2h``, evaluating L with a float64 forward-only
   graph on the same engine, and compares.

The graph runs twice: with DOUBLE io/compute (the gradients must match the finite differences
to ~1e-6) and with FLOAT io/compute (to ~1e-4, float32 rounding). The script prints a table and
exits with status 1 when any check fails. Its times are medians of :data:`TIMED_RUNS` executions
after :data:`WARMUP_RUNS` untimed ones (the first executions of a process pay for BLAS threads
starting and memory being touched for the first time, which no later call pays).

Run: ``python examples/sdpa_backward_numpy.py`` (or ``make demo``).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import hipdnn_graph as hg

ENGINE = "NUMPY_REFERENCE_ENGINE"
B, H, H_KV, S, D = 2, 4, 2, 96, 32
SAMPLES_PER_TENSOR = 6
FD_STEP = 1e-5
#: max |autograd − finite difference| / max |gradient| allowed, per io type
TOLERANCE = {hg.DataType.DOUBLE: 1e-6, hg.DataType.FLOAT: 1e-4}
NUMPY_TYPE = {hg.DataType.DOUBLE: np.float64, hg.DataType.FLOAT: np.float32}
#: untimed executions before the timed ones, and how many are timed (their median is printed)
WARMUP_RUNS, TIMED_RUNS = 3, 7


def median_seconds(call: Callable[[], object]) -> float:
    """The median time of :data:`TIMED_RUNS` calls of ``call``, after :data:`WARMUP_RUNS`
    untimed ones."""
    for _ in range(WARMUP_RUNS):
        call()
    times = []
    for _ in range(TIMED_RUNS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass
class Result:
    io: hg.DataType
    engine: str
    seconds: float
    max_abs_error: float
    rel_error: float
    #: every output written with finite values (the buffers start as NaN)
    finite: bool

    @property
    def ok(self) -> bool:
        return self.finite and self.rel_error <= TOLERANCE[self.io]


def forward_backward_graph(io: hg.DataType) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    """One graph: O, Stats = sdpa(Q, K, V); dQ, dK, dV = sdpa_backward(Q, K, V, O, dO, Stats)."""
    g = hg.Graph(
        name=f"sdpa_fwd_bwd_{io.name.lower()}",
        io_data_type=io,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=io,
    )
    q = g.tensor(name="Q", dim=[B, H, S, D])
    k = g.tensor(name="K", dim=[B, H_KV, S, D])
    v = g.tensor(name="V", dim=[B, H_KV, S, D])
    do = g.tensor(name="dO", dim=[B, H, S, D])
    o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
    assert stats is not None
    o.set_output(True)  # O feeds the backward and is also returned to the caller
    stats.set_output(True).set_data_type(hg.DataType.FLOAT)
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
    for grad in (dq, dk, dv):
        grad.set_output(True)
    g.set_preferred_engine_id_ext(ENGINE)
    g.build([hg.HeuristicMode.FALLBACK])
    tensors = {"Q": q, "K": k, "V": v, "dO": do, "O": o, "Stats": stats}
    tensors.update({"dQ": dq, "dK": dk, "dV": dv})
    return g, tensors


def loss_graph() -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    """A float64 forward-only graph used to evaluate L = sum(O * dO) for finite differences."""
    g = hg.Graph(
        name="sdpa_fwd_fp64",
        io_data_type=hg.DataType.DOUBLE,
        intermediate_data_type=hg.DataType.DOUBLE,
        compute_data_type=hg.DataType.DOUBLE,
    )
    q = g.tensor(name="Q", dim=[B, H, S, D])
    k = g.tensor(name="K", dim=[B, H_KV, S, D])
    v = g.tensor(name="V", dim=[B, H_KV, S, D])
    o, _ = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=False)
    o.set_output(True)
    g.set_preferred_engine_id_ext(ENGINE)
    g.build()
    return g, {"Q": q, "K": k, "V": v, "O": o}


def run(io: hg.DataType, data: dict[str, np.ndarray[Any, Any]]) -> Result:
    graph, t = forward_backward_graph(io)
    dtype = NUMPY_TYPE[io]
    pack: dict[hg.TensorAttributes, np.ndarray[Any, Any]] = {
        t[name]: data[name].astype(dtype) for name in ("Q", "K", "V", "dO")
    }
    outputs = {name: np.full(t[name].get_dim(), np.nan, dtype) for name in ("O", "dQ", "dK", "dV")}
    outputs["Stats"] = np.full(t["Stats"].get_dim(), np.nan, np.float32)
    pack.update({t[name]: array for name, array in outputs.items()})
    seconds = median_seconds(lambda: graph.execute(pack))

    # finite differences of L = sum(O * dO) in float64, for a sample of entries
    fd_graph, ft = loss_graph()
    base = {name: data[name].astype(np.float64) for name in ("Q", "K", "V")}
    o64 = np.empty(ft["O"].get_dim(), np.float64)

    def loss(values: dict[str, np.ndarray[Any, Any]]) -> float:
        fd_graph.execute({ft["Q"]: values["Q"], ft["K"]: values["K"], ft["V"]: values["V"],
                          ft["O"]: o64})  # fmt: skip
        return float(np.sum(o64 * data["dO"]))

    rng = np.random.default_rng(1)
    max_abs, max_grad = 0.0, 0.0
    for name, grad_name in (("Q", "dQ"), ("K", "dK"), ("V", "dV")):
        grad = outputs[grad_name].astype(np.float64)
        max_grad = max(max_grad, float(np.abs(grad).max()))
        for _ in range(SAMPLES_PER_TENSOR):
            index = tuple(int(rng.integers(n)) for n in base[name].shape)
            x = base[name]
            saved = x[index]
            x[index] = saved + FD_STEP
            up = loss(base)
            x[index] = saved - FD_STEP
            down = loss(base)
            x[index] = saved
            numeric = (up - down) / (2 * FD_STEP)
            max_abs = max(max_abs, abs(numeric - float(grad[index])))
    finite = all(bool(np.isfinite(array).all()) for array in outputs.values())
    rel = max_abs / max(max_grad, 1e-30)
    return Result(io, graph.get_plan_name(), seconds, max_abs, rel, finite)


def main() -> int:
    rng = np.random.default_rng(0)
    data = {
        "Q": rng.standard_normal((B, H, S, D)),
        "K": rng.standard_normal((B, H_KV, S, D)),
        "V": rng.standard_normal((B, H_KV, S, D)),
        "dO": rng.standard_normal((B, H, S, D)),
    }
    print("SDPA forward + backward (causal, GQA) checked against central finite differences")
    print(
        f"  Q, dO [B,H,S,D] = {[B, H, S, D]}   K, V = {[B, H_KV, S, D]}   L = sum(O * dO), "
        f"step {FD_STEP:g}, {SAMPLES_PER_TENSOR} entries each of Q, K, V"
    )
    print(f"  fwd+bwd ms: the median of {TIMED_RUNS} executions after {WARMUP_RUNS} warm-up runs")
    header = f"  {'io/compute':<11}{'engine':<24}{'fwd+bwd ms':>11}{'max |err|':>12}"
    header += f"{'rel err':>11}{'tolerance':>11}  check"
    print(header)
    failed = False
    for io in (hg.DataType.DOUBLE, hg.DataType.FLOAT):
        r = run(io, data)
        failed |= not r.ok
        print(
            f"  {io.name:<11}{r.engine:<24}{r.seconds * 1e3:>11.2f}{r.max_abs_error:>12.2e}"
            f"{r.rel_error:>11.2e}{TOLERANCE[io]:>11.0e}  {'ok' if r.ok else 'FAILED'}"
        )
    if failed:
        print("gradient check FAILED", file=sys.stderr)
        return 1
    print("gradients match finite differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
