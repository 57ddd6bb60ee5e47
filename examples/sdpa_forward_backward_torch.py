"""SDPA forward → backward on the torch backend (a GPU when there is one, the CPU otherwise).

What it shows:

1. One bf16 graph: an SDPA forward node (causal, grouped-query attention) whose O and Stats feed
   the SDPA backward node. O and Stats stay virtual: the graph keeps them between the nodes.
2. ``build()`` ranks the engines that accept the graph. On a CUDA GPU that is a fused kernel
   (cuDNN, FlashAttention or memory-efficient attention, fastest first); on ROCm the AOTriton
   kernels; without a GPU, ``TORCH_SDPA_MATH_ENGINE``.
3. ``execute`` with torch tensors, repeated: from the second call on the same buffers, the
   plan replays a captured CUDA graph (GPU only).
4. The same graph, rebuilt on ``NUMPY_REFERENCE_ENGINE`` and fed the same values in float32,
   gives the reference; the script prints the relative error of each gradient and exits with
   status 1 when one exceeds 2e-2 (bf16 inputs).

Run: ``python examples/sdpa_forward_backward_torch.py`` (needs torch; ``pip install torch``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

import hipdnn_graph as hg

try:
    import torch
except ImportError:  # pragma: no cover - the example needs torch
    print("this example needs torch: pip install torch")
    sys.exit(0)

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
B, H, H_KV, S, D = (4, 16, 4, 1024, 128) if GPU else (1, 4, 2, 128, 32)
TOLERANCE = 2e-2


def build(io: hg.DataType) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    """The fwd→bwd graph; returns it with its non-virtual tensors by name."""
    g = hg.Graph(name="attention", io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[B, H, S, D])
    k = g.tensor(name="K", dim=[B, H_KV, S, D])
    v = g.tensor(name="V", dim=[B, H_KV, S, D])
    do = g.tensor(name="dO", dim=[B, H, S, D])
    o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
    assert stats is not None
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
    for t in (dq, dk, dv):
        t.set_output(True)
    return g, {"Q": q, "K": k, "V": v, "dO": do, "dQ": dq, "dK": dk, "dV": dv}


def main() -> int:
    g, t = build(hg.DataType.BFLOAT16)
    g.build()
    print(f"device: {torch.cuda.get_device_name() if GPU else 'cpu'}, torch {torch.__version__}")
    print(f"engines accepting the graph: {g.get_engine_names()}")
    print(f"running on: {g.get_plan_name()}")

    torch.manual_seed(0)
    inputs = {n: torch.randn(t[n].dim, device=DEVICE, dtype=torch.bfloat16)
              for n in ("Q", "K", "V", "dO")}  # fmt: skip
    grads = {n: torch.empty(t[n].dim, device=DEVICE, dtype=torch.bfloat16)
             for n in ("dQ", "dK", "dV")}  # fmt: skip
    pack = {t[n]: x for n, x in (*inputs.items(), *grads.items())}
    times = []
    for _ in range(5):
        start = time.perf_counter()
        g.execute(pack)
        if GPU:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    print(
        f"execute: first {times[0] * 1e3:.2f} ms, then median {np.median(times[1:]) * 1e3:.2f} ms"
    )

    ref_graph, rt = build(hg.DataType.FLOAT)
    ref_graph.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ref = ref_graph.run({rt[n]: inputs[n].float().cpu().numpy() for n in inputs})
    worst = 0.0
    print("| gradient | shape | relative error |")
    print("|---|---|---|")
    for name in ("dQ", "dK", "dV"):
        got = grads[name].float().cpu().numpy()
        want = ref[rt[name]]
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        worst = max(worst, err)
        print(f"| {name} | {list(got.shape)} | {err:.2e} |")
    ok = worst <= TOLERANCE and not any(torch.isnan(x).any() for x in grads.values())
    print("OK" if ok else f"FAILED: worst relative error {worst:.2e} > {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
