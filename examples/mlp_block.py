"""A transformer MLP block as one graph: RMSNorm → matmul → SiLU·matmul → matmul.

``y = (silu(n @ W_gate) * (n @ W_up)) @ W_down`` with ``n = rmsnorm(x) * gamma``: six nodes of
three families (RMS_NORM, MATMUL, POINTWISE) in bfloat16 with FLOAT intermediates. The script
builds the graph, serializes it in hipDNN's format (binary and JSON, read back identical), runs
it on ``NUMPY_REFERENCE_ENGINE`` and checks the result against the same math written directly in
NumPy, then runs it on the GPU through a torch engine from the engine list when one accepts the
graph (or says why none does).

Run it: ``python examples/mlp_block.py``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import hipdnn_graph as hg

TOKENS, MODEL, HIDDEN = 16, 64, 128


def build() -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name="mlp_block",
        io_data_type=hg.DataType.BFLOAT16,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    x = g.tensor(name="x", dim=[TOKENS, MODEL])
    gamma = g.tensor(name="gamma", dim=[1, MODEL])
    eps = g.tensor(name="eps").set_value(1e-5)
    w_gate = g.tensor(name="w_gate", dim=[MODEL, HIDDEN])
    w_up = g.tensor(name="w_up", dim=[MODEL, HIDDEN])
    w_down = g.tensor(name="w_down", dim=[HIDDEN, MODEL])
    n, _ = g.rmsnorm(x, gamma, name="norm", epsilon=eps, forward_phase=hg.NormFwdPhase.INFERENCE)
    gate = g.matmul(n, w_gate, name="gate_proj")
    up = g.matmul(n, w_up, name="up_proj")
    act = g.pointwise(gate, mode=hg.PointwiseMode.SWISH_FWD, name="silu")
    h = g.pointwise(act, up, mode=hg.PointwiseMode.MUL, name="gate_mul")
    y = g.matmul(h, w_down, name="down_proj")
    y.set_output(True)
    g.validate()
    return g, {"x": x, "gamma": gamma, "w_gate": w_gate, "w_up": w_up, "w_down": w_down, "y": y}


def expected(v: dict[str, np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """The block's math in float64, written directly."""
    x = v["x"].astype(np.float64)
    n = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * v["gamma"]
    gate, up = n @ v["w_gate"].astype(np.float64), n @ v["w_up"].astype(np.float64)
    h = gate / (1 + np.exp(-gate)) * up
    result: np.ndarray[Any, Any] = h @ v["w_down"].astype(np.float64)
    return result


def inputs(t: dict[str, hg.TensorAttributes]) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    scale = {"x": 1.0, "gamma": 1.0, "w_gate": MODEL**-0.5, "w_up": MODEL**-0.5,
             "w_down": HIDDEN**-0.5}  # fmt: skip
    return {
        name: (s * rng.standard_normal(t[name].get_dim())).astype(ml_dtypes.bfloat16)
        for name, s in scale.items()
    }


def serialize(g: hg.Graph) -> None:
    blob, text = g.serialize(), g.to_json()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(text).to_json() == text
    print(f"hipDNN binary: {len(blob)} bytes, JSON: {len(text)} characters, both read back")


def run_numpy(g: hg.Graph, t: dict[str, hg.TensorAttributes]) -> np.ndarray[Any, Any]:
    values = inputs(t)
    out = np.empty(t["y"].get_dim(), ml_dtypes.bfloat16)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    g.build()
    g.execute({**{t[name]: a for name, a in values.items()}, t["y"]: out})
    want = expected(values)
    error = float(np.max(np.abs(out.astype(np.float64) - want)) / np.max(np.abs(want)))
    assert error < 2e-2, error
    print(f"{g.get_plan_name()}: y {list(out.shape)}, max error / max |y| = {error:.1e}")
    return out


def run_gpu(g: hg.Graph, t: dict[str, hg.TensorAttributes], reference: Any) -> None:
    """On the GPU through the first torch engine of the engine list that accepts the graph."""
    try:
        import torch
    except ImportError:
        print("GPU: torch is not installed")
        return
    if not torch.cuda.is_available():
        print("GPU: no CUDA or ROCm device")
        return
    torch_engines = [e.name for e in hg.backend.current_registry().engines()
                     if e.array_kind == "torch"]  # fmt: skip
    g.set_preferred_engine_id_ext(None)
    g.create_execution_plans()
    refusals = g.get_engine_refusals()
    accepted = [name for name in torch_engines if name not in refusals]
    if not accepted:
        print("GPU: no torch engine runs this graph:")
        for name in torch_engines:
            print(f"  {name}: {refusals[name]}")
        return
    g.set_preferred_engine_id_ext(accepted[0])
    g.build()
    values = inputs(t)
    pack = {t[n]: torch.from_numpy(a.astype(np.float32)).to("cuda", torch.bfloat16)
            for n, a in values.items()}  # fmt: skip
    out = torch.empty(t["y"].get_dim(), dtype=torch.bfloat16, device="cuda")
    g.execute({**pack, t["y"]: out})
    torch.cuda.synchronize()
    got = out.float().cpu().numpy().astype(np.float64)
    want = reference.astype(np.float64)
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    assert error < 3e-2, error  # two bfloat16 roundings apart at most, and the matmul orders
    print(f"GPU {g.get_plan_name()}: max |gpu - numpy| / max |y| = {error:.1e}")


def main() -> None:
    g, t = build()
    print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
    serialize(g)
    reference = run_numpy(g, t)
    run_gpu(g, t, reference)


if __name__ == "__main__":
    main()
