"""Let the compiled flex backward store dQ, dK and dV straight into their destination buffers.

Inductor lowers flex's backward operator with dQ and dV in buffers of its own
(``empty_strided``) and dK as the template's own output, so the body's ``dest.copy_(grad)``
becomes three pointwise copy kernels after the attention kernel (about 0.1 ms at 16k tokens,
H = 16, D = 128). While :func:`stores_into_destinations` is active (the first call of a body,
which compiles it), the operator's lowering is wrapped: each gradient whose one use is a copy
into a graph input of the same size, strides, dtype and device, an input nothing else reads, is
stored into that input by the attention kernel itself (dQ and dV as the buffers it mutates, dK
as its output's storage), and the copy then lowers to nothing (inductor drops ``x.copy_(x)``).
dBias stays a copy: flex accumulates it with atomic adds into a zero-filled buffer it builds
inside the score modifier's gradient graph, out of this wrapper's reach.
Anything else is left as inductor lowers it.

This reaches into inductor's internals, so :class:`~.flex.FlexKernel` compiles the body both
ways and uses this one only where both agree (:func:`disagreement`): the same bits where the
copying body gives the same bits on every run, else no further apart than its own run-to-run
variation (dBias sums with atomic adds, in an order that changes from run to run); inductor's
graph caches are off while it compiles (a cached copy-path graph would skip the lowering).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import operator
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

__all__ = ["ATOMIC_FLOOR", "disagreement", "stores_into_destinations"]

#: where an output is summed with atomic adds, two runs may round differently even when the
#: measured runs happened to agree: such an output may differ by this much of its largest
#: magnitude (a 16-bit rounding step), or by twice the measured variation if that is more
ATOMIC_FLOOR = 2.0**-7

_Runs = Sequence[Sequence[torch.Tensor | None]]

_LOCK = threading.Lock()


def _destinations() -> dict[int, Any]:
    """For the flex backward node being lowered: output index (0 dQ, 1 dK, 2 dV) → the graph
    input (a TensorBox) that output is copied into, where that copy is the output's one use and
    the input's one use."""
    from torch._inductor.virtualized import V

    node: Any = V.graph.current_node
    found: dict[int, Any] = {}
    for item in node.users:
        index: Any = item.args[1] if item.target is operator.getitem else None
        if index not in (0, 1, 2) or len(item.users) != 1:
            continue
        (copy,) = item.users
        if copy.target is not torch.ops.aten.copy_.default or len(copy.args) != 2:
            continue
        dest: Any = copy.args[0]
        if copy.args[1] is not item or getattr(dest, "op", None) != "placeholder":
            continue
        box = V.graph.graph_inputs.get(str(dest.target)) if len(dest.users) == 1 else None
        if box is not None:
            found[int(index)] = box
    return found


def _same_layout(box: Any, size: Any, stride: Any, dtype: Any, device: Any) -> bool:
    try:
        return (
            [int(x) for x in box.get_size()] == [int(x) for x in size]
            and [int(x) for x in box.get_stride()] == [int(x) for x in stride]
            and box.get_dtype() == dtype
            and box.get_device() == device
        )
    except (TypeError, ValueError, AttributeError, NotImplementedError):
        return False  # symbolic or unusual layouts: leave them to inductor


def _store_dk_into(grad_key: Any, dest: Any) -> bool:
    """Make the template's dK output the storage of ``dest`` (its stores go there)."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V

    buf: Any = getattr(getattr(grad_key, "data", None), "data", None)
    layout: Any = getattr(buf, "layout", None)
    if not isinstance(buf, ir.TritonTemplateBuffer) or type(layout) is not ir.FixedLayout:
        return False
    if not _same_layout(dest, layout.size, layout.stride, layout.dtype, layout.device):
        return False
    V.graph.mark_buffer_mutated(dest.get_name())
    buf.layout = ir.MutationLayoutSHOULDREMOVE(dest)
    return True


@contextlib.contextmanager
def stores_into_destinations() -> Iterator[list[str]]:
    """While active, flex backward lowerings store gradients into their destination inputs.

    Yields a list that names what each lowering stored directly (``"dq"``, ``"dk"``, ``"dv"``),
    for the kernel's notes and the tests. Compilation caches are off inside.

    Example (the body's first call compiles it):
        >>> with stores_into_destinations() as stored:  # doctest: +SKIP
        ...     compiled_body(q, k, v, o, do, stats, ..., dests, cfg)
        >>> stored  # doctest: +SKIP
        ['dq', 'dk', 'dv']
    """
    from torch._functorch import config as functorch_config
    from torch._higher_order_ops.flex_attention import flex_attention_backward as hop
    from torch._inductor import config as inductor_config
    from torch._inductor.lowering import lowerings

    stored: list[str] = []
    with _LOCK:
        original = lowerings[hop]
        scope = inspect.unwrap(original).__globals__
        real_empty = scope["empty_strided"]

        def lowering(*args: Any, **kwargs: Any) -> Any:
            dests = _destinations()
            wanted = [dests.get(0), dests.get(2)]  # the lowering allocates dQ, then dV
            given: list[Any] = []

            def empty_strided(size: Any, stride: Any = None, **kw: Any) -> Any:
                want = wanted.pop(0) if wanted else None
                if (
                    want is not None
                    and stride is not None
                    and _same_layout(want, size, stride, kw.get("dtype"), kw.get("device"))
                ):
                    given.append(want)
                    return want
                return real_empty(size, stride=stride, **kw)

            scope["empty_strided"] = empty_strided
            try:
                dq, dk, dv, *rest = original(*args, **kwargs)
            finally:
                scope["empty_strided"] = real_empty
            stored.extend(n for n, g in (("dq", dq), ("dv", dv)) if any(g is x for x in given))
            if 1 in dests and _store_dk_into(dk, dests[1]):
                dk = dests[1]
                stored.append("dk")
            return (dq, dk, dv, *rest)

        off = {k: False for k in ("fx_graph_cache", "fx_graph_remote_cache")
               if hasattr(inductor_config, k)}  # fmt: skip
        aot_off = {k: False for k in ("enable_autograd_cache", "enable_remote_autograd_cache")
                   if hasattr(functorch_config, k)}  # fmt: skip
        lowerings[hop] = lowering
        try:
            with inductor_config.patch(off), functorch_config.patch(aot_off):
                yield stored
        finally:
            lowerings[hop] = original


#: elements compared at a time: the float64 copies and masks of a chunk (some 250 MiB in all)
#: stand in for those of a whole output (a [1,4,16384,16384] dBias has 2**30 elements: tens of
#: GiB in float64, which ran an 80 GB card out of memory while the kernel was built)
CHUNK = 1 << 22


def _chunks(*tensors: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    """The tensors' elements in row-major order, :data:`CHUNK` at a time, as float64."""
    flat = [t.detach().reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), CHUNK):
        yield tuple(f[start : start + CHUNK].double() for f in flat)


def _spread(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference of ``a`` and ``b`` (in float64); ``inf`` where their NaNs or
    infinities sit in other places. Compared a chunk at a time (:data:`CHUNK`)."""
    if a.shape != b.shape:
        return math.inf
    worst = 0.0
    for x, y in _chunks(a, b):
        if not torch.equal(torch.isnan(x), torch.isnan(y)):
            return math.inf
        x, y = x.nan_to_num(0.0), y.nan_to_num(0.0)
        if not torch.equal(torch.isinf(x), torch.isinf(y)) or not torch.equal(
            x[torch.isinf(x)], y[torch.isinf(y)]
        ):
            return math.inf
        finite = torch.isfinite(x)
        if bool(finite.any()):
            worst = max(worst, float((x[finite] - y[finite]).abs().max()))
    return worst


def _magnitude(a: torch.Tensor) -> float:
    """The largest finite magnitude in ``a`` (0 for none), a chunk at a time."""
    largest = 0.0
    for (x,) in _chunks(a):
        finite = x[torch.isfinite(x)]
        if finite.numel():
            largest = max(largest, float(finite.abs().max()))
    return largest


def disagreement(
    copying: _Runs, storing: _Runs, names: Sequence[str], atomic: Sequence[str] = ()
) -> str | None:
    """Why the storing body's outputs are not the copying body's, or ``None`` when they agree.

    ``copying`` holds two or more runs of the copying body on the same inputs, ``storing`` one
    or more of the storing body (each run's outputs in ``names`` order; ``None`` for an output
    a body does not return; each run writes into fresh buffers filled with another value, so an
    element a body leaves unwritten shows). The copying body's run-to-run variation of an
    output is the largest difference between any two of its runs. An output agrees when every
    storing run is within twice that variation of the first copying run: the same bits where
    the copying body repeats its bits (dQ, dK, dV are deterministic), and for the outputs named
    in ``atomic`` (summed with atomic adds in a changing order) at least within
    :data:`ATOMIC_FLOOR` of their largest magnitude, since two runs may agree by chance.

    Example:
        >>> import torch
        >>> a, b = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 2**-20])
        >>> disagreement([[a], [a]], [[b]], ["dk"]) is None  # dK repeats its bits: b differs
        False
        >>> disagreement([[a], [b]], [[b]], ["db"]) is None  # within dBias's own variation
        True
    """
    if len(copying) < 2 or not storing:
        raise ValueError("two copying runs and a storing run are needed")
    for i, name in enumerate(names):
        ref = [run[i] for run in copying]
        got = [run[i] for run in storing]
        if any((t is None) != (ref[0] is None) for t in ref + got):
            return f"{name} returned by one body only"
        first = ref[0]
        if first is None:
            continue
        runs = [t for t in ref if t is not None]
        variation = max(_spread(a, b) for j, a in enumerate(runs) for b in runs[j + 1 :])
        tol = 2 * variation
        if name in atomic:
            tol = max(tol, ATOMIC_FLOOR * _magnitude(first))
        diff = max(_spread(t, first) for t in got if t is not None)
        if not diff <= tol:
            return (
                f"{name} differs from the copying body's by {diff:.3g} (its own run-to-run "
                f"variation {variation:.3g}, tolerance {tol:.3g})"
            )
    return None
