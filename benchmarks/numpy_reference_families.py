"""CPU speed of the NumPy references of convolution and matmul against torch's CPU eager ops.

Issue 25's target: on CPU, the NumPy reference within 1.5× of torch's CPU eager op for matmul and
convolution in float32. For each shape, prints the median time of the NumPy reference and of
torch, run in turns in the same process, and their ratio (NumPy / torch):

* convolution forward, data gradient and weight gradient (``run_conv_fprop``,
  ``run_conv_dgrad``, ``run_conv_wgrad`` on validated nodes, plus the copy of the result into an
  output array of the tensor's layout, as the engine does) against ``F.conv2d``,
  ``torch.nn.grad.conv2d_input`` and ``torch.nn.grad.conv2d_weight`` (``conv3d`` for the 3-D
  shape), with NCHW tensors and channels-last ones (torch's inputs then in ``channels_last``
  memory format), for 3×3 and 1×1 kernels, a stride of 2, grouped and depthwise filters and a
  3-D volume;
* matmul: ``np.matmul`` against ``torch.matmul`` on the same arrays (the matmul reference is
  ``np.matmul`` on the compute-type operands).

Both sides use every thread of the process (OpenBLAS behind NumPy, oneDNN/MKL behind torch)
unless ``--threads N`` limits both. The printed thread pools say which kernels OpenBLAS runs:
with ``OPENBLAS_CORETYPE=Haswell`` it runs AVX2 kernels even on an AVX-512 CPU, where torch's run
AVX-512, and a GEMM-bound ratio cannot go below the kernels' speed ratio (about 2× there). On a
loaded machine OpenBLAS's threads stall now and then (a 2 ms product taking a second or more):
medians of a few runs then move widely, and ``--threads 1`` compares the two more steadily; with
``--threads 1`` each convolution row also prints both sides' CPU time (of the one thread doing
the work) and its ratio, which other processes sharing the cores disturb far less than wall
time.

Run: ``.venv/bin/python benchmarks/numpy_reference_families.py [--repeats N] [--threads N]
[--tiny]`` (``--tiny``: a few small shapes, to check that the script runs).
"""

from __future__ import annotations

import os
import sys

# before torch loads its OpenMP runtime (as benchmarks/numpy_reference.py does)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy_reference import interleaved_medians, interleaved_profile
from threads import limit_blas_threads, thread_settings

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families.convolution import (
    run_conv_dgrad,
    run_conv_fprop,
    run_conv_wgrad,
)

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class ConvShape:
    """A convolution: batch, input and output channels, square (cubic) image and kernel,
    padding on every side, stride, groups and spatial dims."""

    n: int
    c: int
    k: int
    size: int
    kernel: int
    padding: int
    stride: int
    groups: int = 1
    dims: int = 2

    @property
    def out(self) -> int:
        return (self.size + 2 * self.padding - self.kernel) // self.stride + 1

    def label(self) -> str:
        image = "x".join([str(self.size)] * self.dims)
        kernel = "x".join([str(self.kernel)] * self.dims)
        groups = f" groups {self.groups}" if self.groups > 1 else ""
        return (
            f"N={self.n} C={self.c} {image} K={self.k} {kernel} pad {self.padding} "
            f"stride {self.stride}{groups}"
        )


CONV_SHAPES = [
    ConvShape(1, 16, 16, 14, 3, 1, 1),
    ConvShape(8, 64, 64, 56, 3, 1, 1),
    ConvShape(8, 64, 64, 56, 1, 0, 1),
    ConvShape(8, 64, 128, 56, 3, 1, 2),
    ConvShape(8, 128, 128, 28, 3, 1, 1, groups=32),
    ConvShape(8, 64, 64, 56, 3, 1, 1, groups=64),
    ConvShape(2, 32, 32, 16, 3, 1, 1, dims=3),
]
TINY_CONV_SHAPES = [
    ConvShape(1, 4, 4, 6, 3, 1, 1),
    ConvShape(2, 4, 8, 5, 1, 0, 2),
    ConvShape(2, 4, 8, 5, 3, 1, 1, groups=2),
    ConvShape(1, 2, 2, 4, 3, 1, 1, dims=3),
]
MATMUL_SHAPES = [(256, 256, 256), (2048, 2048, 2048), (8 * 3136, 576, 64)]
TINY_MATMUL_SHAPES = [(8, 8, 8)]


def _strides(dims: tuple[int, ...], channels_last: bool) -> list[int]:
    order = [0, *range(2, len(dims)), 1] if channels_last else list(range(len(dims)))
    strides, step = [0] * len(dims), 1
    for axis in reversed(order):
        strides[axis] = step
        step *= dims[axis]
    return strides


def _array(rng: np.random.Generator, dims: tuple[int, ...], channels_last: bool) -> Array:
    """A float32 array of ``dims`` whose memory is in the given layout."""
    strides = _strides(dims, channels_last)
    order = sorted(range(len(dims)), key=lambda i: -strides[i])
    packed = rng.standard_normal([dims[i] for i in order], dtype=np.float32)
    return np.transpose(packed, np.argsort(order))


def _operand_dims(s: ConvShape) -> tuple[tuple[int, ...], ...]:
    """The dims of ``x``, ``w`` and ``y`` (or ``dy``)."""
    x_dims = (s.n, s.c, *[s.size] * s.dims)
    w_dims = (s.k, s.c // s.groups, *[s.kernel] * s.dims)
    y_dims = (s.n, s.k, *[s.out] * s.dims)
    return x_dims, w_dims, y_dims


def _node(kind: str, s: ConvShape, channels_last: bool) -> Any:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x_dims, w_dims, y_dims = _operand_dims(s)

    def tensor(name: str, dims: tuple[int, ...]) -> hg.TensorAttributes:
        return g.tensor(name=name, dim=list(dims), stride=_strides(dims, channels_last))

    members = {
        "pre_padding": [s.padding] * s.dims,
        "post_padding": [s.padding] * s.dims,
        "stride": [s.stride] * s.dims,
        "dilation": [1] * s.dims,
    }
    if kind == "fprop":
        out = g.conv_fprop(tensor("x", x_dims), tensor("w", w_dims), **members)
    elif kind == "dgrad":
        out = g.conv_dgrad(tensor("dy", y_dims), tensor("w", w_dims), **members)
        out.set_dim(list(x_dims))
    else:
        out = g.conv_wgrad(tensor("dy", y_dims), tensor("x", x_dims), **members)
        out.set_dim(list(w_dims))
    out.set_output(True)  # strides inferred in the layout of the first input
    g.validate()
    return g.nodes[0]


def _engine_call(
    run: Callable[[Any, dict[str, Any]], dict[str, Array]],
    node: Any,
    inputs: dict[str, Any],
    slot: str,
    out: Array,
) -> Callable[[], None]:
    """The reference as the engine runs it: the runner, then its result into the output."""
    return lambda: np.copyto(out, run(node, inputs)[slot])


def compare_convolution(
    s: ConvShape, channels_last: bool, repeats: int, single_thread: bool = False
) -> None:
    """Rows for fprop, dgrad and wgrad of one shape and layout; ``single_thread`` adds the
    main thread's CPU time of each side and their ratio (with one thread, all of the work; it
    moves far less than wall time when other processes share the cores)."""
    import torch

    rng = np.random.default_rng(0)
    x_dims, w_dims, y_dims = _operand_dims(s)
    x, w, dy = (_array(rng, dims, channels_last) for dims in (x_dims, w_dims, y_dims))
    xt, wt, dyt = (torch.from_numpy(a) for a in (x, w, dy))  # the same memory and layout
    layout = torch.channels_last if s.dims == 2 else torch.channels_last_3d
    assert xt.is_contiguous(memory_format=layout) == channels_last
    y, dx, dw = (np.empty_like(a) for a in (dy, x, w))
    functional, grad = torch.nn.functional, torch.nn.grad
    conv = {"padding": s.padding, "stride": s.stride, "groups": s.groups}
    forward = getattr(functional, f"conv{s.dims}d")
    data_grad = getattr(grad, f"conv{s.dims}d_input")
    weight_grad = getattr(grad, f"conv{s.dims}d_weight")
    cases = {
        "fprop": (
            lambda: forward(xt, wt, **conv),
            _engine_call(
                run_conv_fprop, _node("fprop", s, channels_last), {"X": x, "W": w}, "Y", y
            ),
        ),
        "dgrad": (
            lambda: data_grad(xt.shape, wt, dyt, **conv),
            _engine_call(
                run_conv_dgrad, _node("dgrad", s, channels_last), {"DY": dy, "W": w}, "DX", dx
            ),
        ),
        "wgrad": (
            lambda: weight_grad(xt, wt.shape, dyt, **conv),
            _engine_call(
                run_conv_wgrad, _node("wgrad", s, channels_last), {"DY": dy, "X": x}, "DW", dw
            ),
        ),
    }
    spatial = "DHW"[3 - s.dims :]
    layout = f"N{spatial}C" if channels_last else f"NC{spatial}"
    for kind, (torch_fn, numpy_fn) in cases.items():
        (t_torch, cpu_torch, _), (t_numpy, cpu_numpy, _) = interleaved_profile(
            [torch_fn, numpy_fn], repeats
        )
        cpu = (
            f" (CPU {cpu_numpy * 1e3:.2f} vs {cpu_torch * 1e3:.2f} ms: "
            f"{cpu_numpy / max(cpu_torch, 1e-9):.2f})"
            if single_thread
            else ""
        )
        print(
            f"conv {kind} {layout} {s.label()} | numpy {t_numpy * 1e3:8.2f} ms{cpu} | "
            f"torch {t_torch * 1e3:8.2f} ms | ratio numpy/torch {t_numpy / t_torch:5.2f}"
        )


def compare_matmul(m: int, k: int, n: int, repeats: int) -> None:
    """One row: ``np.matmul`` against ``torch.matmul`` on the same float32 arrays."""
    import torch

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    at, bt = torch.from_numpy(a), torch.from_numpy(b)
    t_torch, t_numpy = interleaved_medians(
        [lambda: torch.matmul(at, bt), lambda: np.matmul(a, b)], repeats
    )
    gflops = 2 * m * k * n / t_numpy / 1e9
    print(
        f"matmul {m}x{k} @ {k}x{n} | numpy {t_numpy * 1e3:8.2f} ms {gflops:6.1f} GFLOP/s | "
        f"torch {t_torch * 1e3:8.2f} ms | ratio numpy/torch {t_numpy / t_torch:5.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each function")
    parser.add_argument("--tiny", action="store_true", help="small shapes only (a smoke run)")
    parser.add_argument(
        "--threads", type=int, default=0, help="threads for both sides (default: all)"
    )
    args = parser.parse_args()
    import torch

    keep = None
    if args.threads > 0:
        torch.set_num_threads(args.threads)
        keep = limit_blas_threads(args.threads)

    for line in thread_settings():
        print(line)
    for shape in TINY_CONV_SHAPES if args.tiny else CONV_SHAPES:
        for channels_last in (False, True):
            compare_convolution(shape, channels_last, args.repeats, args.threads == 1)
    for m, k, n in TINY_MATMUL_SHAPES if args.tiny else MATMUL_SHAPES:
        compare_matmul(m, k, n, args.repeats)
    del keep


if __name__ == "__main__":
    sys.exit(main())
