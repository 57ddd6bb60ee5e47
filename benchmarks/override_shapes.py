"""One override-shape SDPA graph serving many sequence lengths vs a graph built per length
(issue 36, item 5).

Run on a GPU machine: ``python benchmarks/override_shapes.py [--json OUT]``; ``--small`` is a
CPU smoke run (FLOAT, tiny shapes, 6 lengths; the test suite runs it). Forward SDPA (Q, K, V →
O, Stats; ``--causal`` adds a causal mask), bf16, B = 1, H = 16, D = 128, 50 sequence lengths
from 256 to 16k (evenly spaced, multiples of 64). Prints, from one run:

* **total**: the wall time of building one graph at the largest length with
  ``set_override_shape_enabled(True)`` and executing it once at every length (each new length
  builds its plan on first use), against building a graph at each length and executing it once
  (the same number of executes; the lengths of this second pass are shifted by 32 so that
  neither pass runs a shape the other one warmed in torch's or the kernels' own caches); the
  ratio ``each / override`` (issue target: ≥ 10);
* **per execute**: at every fifth length, warm ``execute`` calls of the override graph against
  those of a plan built for that length, in interleaved rounds of back-to-back calls
  (``--repeats`` each); the median ratio ``override / built`` per length and the worst of them
  (issue target: ≤ 1.02).

Times are wall-clock (``time.perf_counter``) around calls followed by a device synchronize, so
they include what the host spends per call. Both graphs run on the engine the default ranking
picks for the override-shape graph (printed; ``--engine NAME`` prefers one): the graphs built
per length prefer that engine, so the same kernels run in both (every engine is still asked
whether it applies when they are built, as any build does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import hipdnn_graph as hg

H, D = 16, 128


@dataclass(frozen=True)
class Setup:
    """What one run measures."""

    lengths: tuple[int, ...]
    heads: int
    dim: int
    data_type: hg.DataType
    device: str
    causal: bool
    engine: str | None
    repeats: int
    rounds: int


def lengths(count: int, low: int, high: int, step: int) -> tuple[int, ...]:
    """``count`` lengths from ``low`` to ``high``, evenly spaced, rounded to ``step``.

    Example:
        >>> lengths(5, 256, 16384, 64)
        (256, 4288, 8320, 12352, 16384)
    """
    if count == 1:
        return (high,)
    span = (high - low) / (count - 1)
    return tuple(low + round(i * span / step) * step for i in range(count))


def _graph(
    setup: Setup, seq: int, override: bool, engine: str | None = None
) -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    g = hg.Graph(name=f"sdpa_{seq}", io_data_type=setup.data_type,
                 intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    if override:
        g.set_override_shape_enabled(True)
    q = g.tensor(name="Q", dim=[1, setup.heads, seq, setup.dim], uid=1)
    k = g.tensor(name="K", dim=[1, setup.heads, seq, setup.dim], uid=2)
    v = g.tensor(name="V", dim=[1, setup.heads, seq, setup.dim], uid=3)
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, use_causal_mask=setup.causal,
                      attn_scale=setup.dim**-0.5)  # fmt: skip
    assert stats is not None
    o.set_output(True).set_uid(4)
    stats.set_output(True).set_uid(5).set_data_type(hg.DataType.FLOAT)
    if (engine or setup.engine) is not None:
        g.set_preferred_engine_id_ext(engine or setup.engine)
    g.build()
    return g, [q, k, v, o, stats]


class Buffers:
    """One flat allocation per tensor at the largest length; a packed view per length."""

    def __init__(self, setup: Setup) -> None:
        import torch

        from hipdnn_graph.backend.dtypes import torch_dtype

        self.torch, self.setup = torch, setup
        top = max(setup.lengths) + 64
        n = setup.heads * top * setup.dim
        dtype = torch_dtype(setup.data_type)
        gen = torch.Generator(device="cpu").manual_seed(0)
        self.flat = [torch.randn(n, generator=gen).to(setup.device, dtype) for _ in range(3)]
        self.flat.append(torch.empty(n, device=setup.device, dtype=dtype))
        self.flat.append(torch.empty(setup.heads * top, device=setup.device, dtype=torch.float32))

    def pack(self, seq: int) -> dict[int, Any]:
        """``{uid: packed tensor of length seq}``."""
        h, d = self.setup.heads, self.setup.dim
        shapes = [(1, h, seq, d)] * 4 + [(1, h, seq, 1)]
        return {
            uid: flat[: _numel(shape)].view(shape)
            for uid, flat, shape in zip((1, 2, 3, 4, 5), self.flat, shapes, strict=True)
        }

    def sync(self) -> None:
        if self.setup.device != "cpu":
            self.torch.cuda.synchronize()


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for extent in shape:
        total *= extent
    return total


def overrides(pack: dict[int, Any]) -> dict[str, Any]:
    """``execute``'s override arguments for a pack of torch tensors."""
    uids = sorted(pack)
    return {
        "override_uids": uids,
        "override_shapes": [list(pack[u].shape) for u in uids],
        "override_strides": [list(pack[u].stride()) for u in uids],
    }


def _timed(call: Callable[[], Any], buffers: Buffers) -> float:
    buffers.sync()
    start = time.perf_counter()
    call()
    buffers.sync()
    return time.perf_counter() - start


def _per_execute(
    setup: Setup, buffers: Buffers, graph: hg.Graph, seq: int, pack: dict[int, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """Warm executes of ``graph`` at ``seq`` against a plan built for ``seq``."""
    built, _ = _graph(setup, seq, False, graph.get_plan_name())
    assert built.get_plan_name() == graph.get_plan_name()
    graph.execute(pack, **extra)
    built.execute(pack)

    def over() -> None:
        for _ in range(setup.repeats):
            graph.execute(pack, **extra)

    def plain() -> None:
        for _ in range(setup.repeats):
            built.execute(pack)

    times = [(_timed(over, buffers), _timed(plain, buffers)) for _ in range(setup.rounds)]
    return {
        "seq": seq,
        "override_us": statistics.median(t for t, _ in times) / setup.repeats * 1e6,
        "built_us": statistics.median(t for _, t in times) / setup.repeats * 1e6,
        "ratio": statistics.median(o / b for o, b in times),
    }


def run(setup: Setup) -> dict[str, Any]:
    """Measure (see the module docstring); returns the figures it prints."""
    buffers = Buffers(setup)
    warm, _ = _graph(setup, 64, False)  # imports and lazy initialisation, timed by neither
    warm.execute(buffers.pack(64))
    buffers.sync()

    top = max(setup.lengths)
    packs = {seq: buffers.pack(seq) for seq in setup.lengths}
    args = {seq: overrides(pack) for seq, pack in packs.items()}

    def override_pass() -> hg.Graph:
        graph, _ = _graph(setup, top, True)
        for seq in setup.lengths:
            graph.execute(packs[seq], **args[seq])
        return graph

    box: list[hg.Graph] = []
    total_override = _timed(lambda: box.append(override_pass()), buffers)
    graph = box[0]
    shifted = [min(seq + 32, top) if seq != top else top - 32 for seq in setup.lengths]
    shifted_packs = {seq: buffers.pack(seq) for seq in shifted}

    def each_pass() -> None:
        for seq in shifted:
            built, _ = _graph(setup, seq, False, graph.get_plan_name())
            built.execute(shifted_packs[seq])

    total_each = _timed(each_pass, buffers)

    rows = [_per_execute(setup, buffers, graph, seq, packs[seq], args[seq])
            for seq in setup.lengths[::5]]  # fmt: skip
    result = {
        "engine": graph.get_plan_name(),
        "device": setup.device,
        "lengths": len(setup.lengths),
        "range": [min(setup.lengths), top],
        "total_override_s": total_override,
        "total_each_s": total_each,
        "total_ratio": total_each / total_override,
        "per_execute": rows,
        "worst_execute_ratio": max(r["ratio"] for r in rows),
    }
    _print(result)
    return result


def _print(r: dict[str, Any]) -> None:
    low, high = r["range"]
    print(f"engine {r['engine']} on {r['device']}; {r['lengths']} lengths {low}..{high}")
    print(f"total, one override-shape graph: {r['total_override_s']:.3f} s")
    print(f"total, a graph built per length: {r['total_each_s']:.3f} s")
    print(f"total ratio (each / override, target >= 10): {r['total_ratio']:.2f}x")
    print(f"{'seq':>6} {'override us':>12} {'built us':>10} {'ratio':>7}")
    for row in r["per_execute"]:
        print(f"{row['seq']:>6} {row['override_us']:>12.1f} {row['built_us']:>10.1f} "
              f"{row['ratio']:>7.3f}")  # fmt: skip
    print(f"worst per-execute ratio (override / built, target <= 1.02): "
          f"{r['worst_execute_ratio']:.3f}x")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="CPU smoke run: tiny shapes")
    parser.add_argument("--lengths", type=int, default=50)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--engine", default=None, help="prefer this engine by name")
    parser.add_argument("--repeats", type=int, default=20, help="calls per timed round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per length")
    parser.add_argument("--json", default=None, help="also write the figures here")
    a = parser.parse_args(argv)
    if a.small:
        setup = Setup(lengths(min(a.lengths, 6), 64, 384, 64), 2, 16, hg.DataType.FLOAT, "cpu",
                      a.causal, a.engine, min(a.repeats, 3), min(a.rounds, 3))  # fmt: skip
    else:
        import torch

        if not torch.cuda.is_available():
            sys.exit("needs a CUDA or ROCm device (or --small for the CPU smoke run)")
        setup = Setup(lengths(a.lengths, 256, 16384, 64), H, D, hg.DataType.BFLOAT16, "cuda",
                      a.causal, a.engine, a.repeats, a.rounds)  # fmt: skip
    result = run(setup)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=1)
    return result


if __name__ == "__main__":
    main()
