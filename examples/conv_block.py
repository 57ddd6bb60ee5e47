"""A convolution block as one graph: 3×3 convolution + bias + ReLU, and the same with batch norm.

``y = relu(conv(x, w) + bias)`` on channels-last activations (NHWC in memory, NCHW dims as
hipDNN declares them), and ``relu(batchnorm_inference(conv(x, w)))`` when the NumPy reference
runs batch-norm inference nodes. The script builds each graph, serializes it in hipDNN's format
(binary and JSON, read back identical), runs it on ``NUMPY_REFERENCE_ENGINE`` and checks the
result against the same math written directly in NumPy, then runs it on the GPU through a torch
engine from the engine list when one accepts the graph (or says why none does).

Run it: ``python examples/conv_block.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hipdnn_graph as hg

N, C, K, H, W = 2, 8, 16, 12, 12
EPS = 1e-5


def _channels_last(dims: list[int]) -> list[int]:
    _, c, h, w = dims
    return [h * w * c, 1, w * c, c]


def build(batchnorm: bool) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name="conv_bn_relu" if batchnorm else "conv_bias_relu",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    t = {
        "x": g.tensor(name="x", dim=[N, C, H, W], stride=_channels_last([N, C, H, W])),
        "w": g.tensor(name="w", dim=[K, C, 3, 3], stride=_channels_last([K, C, 3, 3])),
    }
    same = hg.ConvFpropAttributes().set_padding([1, 1]).set_stride([1, 1]).set_dilation([1, 1])
    conv = g.conv_fprop(t["x"], t["w"], same.set_name("conv"))
    if batchnorm:
        for name in ("mean", "inv_variance", "scale", "bias"):
            t[name] = g.tensor(name=name, dim=[1, K, 1, 1])
        normed = g.batchnorm_inference(conv, t["mean"], t["inv_variance"], t["scale"], t["bias"],
                                       name="bn")  # fmt: skip
    else:
        t["bias"] = g.tensor(name="bias", dim=[1, K, 1, 1])
        normed = g.pointwise(conv, t["bias"], mode=hg.PointwiseMode.ADD, name="bias_add")
    t["y"] = g.pointwise(normed, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    t["y"].set_output(True)
    g.validate()
    return g, t


def expected(v: dict[str, np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """The block's math in float64, written directly (cross-correlation, zero padding 1)."""
    x = np.pad(v["x"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = v["w"].astype(np.float64)
    y = sum(
        np.einsum("nchw,kc->nkhw", x[:, :, i : i + H, j : j + W], w[:, :, i, j])
        for i in range(3)
        for j in range(3)
    )
    if "mean" in v:
        y = (y - v["mean"]) * v["inv_variance"] * v["scale"] + v["bias"]
    else:
        y = y + v["bias"]
    result: np.ndarray[Any, Any] = np.maximum(y, 0)
    return result


def inputs(t: dict[str, hg.TensorAttributes]) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    values = {}
    for name, tensor in t.items():
        if name == "y":
            continue
        dims = tensor.get_dim()
        data = rng.standard_normal(dims)
        if name == "inv_variance":
            data = rng.uniform(0.5, 2.0, dims)
        if len(dims) == 4 and name in ("x", "w"):  # channels-last memory, NCHW dims
            array = np.empty([dims[0], dims[2], dims[3], dims[1]], np.float32).transpose(0, 3, 1, 2)
            array[...] = data
        else:
            array = data.astype(np.float32)
        values[name] = array
    return values


def serialize(g: hg.Graph) -> None:
    blob, text = g.serialize(), g.to_json()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(text).to_json() == text
    print(
        f"{g.get_name()}: hipDNN binary {len(blob)} bytes, JSON {len(text)} characters, read back"
    )


def run_numpy(g: hg.Graph, t: dict[str, hg.TensorAttributes]) -> np.ndarray[Any, Any]:
    values = inputs(t)
    out = np.empty([N, H, W, K], np.float32).transpose(0, 3, 1, 2)  # the output's layout: x's
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    g.build()
    g.execute({**{t[name]: a for name, a in values.items()}, t["y"]: out})
    want = expected(values)
    error = float(np.max(np.abs(out - want)) / np.max(np.abs(want)))
    assert error < 1e-5, error
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
    pack = {t[n]: torch.from_numpy(np.ascontiguousarray(a)).cuda() for n, a in inputs(t).items()}
    for name in ("x", "w"):  # the declared channels-last strides
        pack[t[name]] = pack[t[name]].contiguous(memory_format=torch.channels_last)
    out = torch.empty([N, K, H, W], device="cuda").contiguous(memory_format=torch.channels_last)
    g.execute({**pack, t["y"]: out})
    torch.cuda.synchronize()
    error = float(np.max(np.abs(out.cpu().numpy() - reference)) / np.max(np.abs(reference)))
    assert error < 1e-2, error  # TF32 convolutions (torch's default on the GPU) round to 10 bits
    print(f"GPU {g.get_plan_name()}: max |gpu - numpy| / max |y| = {error:.1e}")


def main() -> None:
    reference_engine = hg.backend.current_registry().find_engine("NUMPY_REFERENCE_ENGINE")
    runs = hg.backend.engine_node_types(reference_engine) or frozenset()
    for batchnorm in (False, True):
        if batchnorm and hg.NodeType.BATCHNORM_INFERENCE not in runs:
            print("conv_bn_relu: the NumPy reference has no batch-norm inference runner")
            continue
        g, t = build(batchnorm)
        print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
        serialize(g)
        reference = run_numpy(g, t)
        run_gpu(g, t, reference)


if __name__ == "__main__":
    main()
