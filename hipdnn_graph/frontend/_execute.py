"""Running a built core graph the way hipDNN's ``execute`` family does: on the handle's stream,
with a hipDNN variant pack, returning an ``Error`` (and, when timed, an ``ExecutionTiming``).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> from hipdnn_graph.frontend._execute import run_core
    >>> error, timing = run_core(hipdnn.Graph().core_graph, hipdnn.create_handle(), {}, 0)
    >>> error.get_code().name, timing.quality.name
    ('INVALID_VALUE', 'INVALID')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import HipdnnError
from ._enums import TimingQuality
from ._errors import Error, FrontendTypeError, returning_error
from ._memory import torch_device_available
from ._pack import core_variant_pack, core_workspace, is_device_array

if TYPE_CHECKING:
    from ..graph import Graph as CoreGraph
    from ..graph.overrides import Signature

__all__ = ["ExecutionTiming", "run_core", "stream_context"]


@dataclass
class ExecutionTiming:
    """What :meth:`~hipdnn_graph.frontend.Graph.execute_timed_ext` measured (``elapsed_ms`` is
    ``None`` when nothing was measured)."""

    elapsed_ms: float | None = None
    timed_out: bool = False
    quality: TimingQuality = TimingQuality.INVALID


def stream_context(handle: Any) -> AbstractContextManager[Any]:
    """Run on the handle's stream (checks the handle: a destroyed one raises).

    Raises:
        FrontendTypeError: not a handle (an object with ``get()``).
        FrontendRuntimeError: a destroyed :class:`~hipdnn_graph.frontend.Handle`.
    """
    get = getattr(handle, "get", None)
    if not callable(get):
        raise FrontendTypeError(
            f"handle must be a Handle (an object with get()), got {type(handle).__name__}"
        )
    get()
    stream = handle.get_stream() if callable(getattr(handle, "get_stream", None)) else 0
    if stream and torch_device_available():
        import torch

        external = torch.cuda.ExternalStream(stream)  # type: ignore[no-untyped-call]
        return torch.cuda.stream(external)
    return nullcontext()


def run_core(
    core: CoreGraph,
    handle: Any,
    variant_pack: Mapping[Any, Any],
    workspace: Any,
    plan_index: int | None = None,
    timed: bool = False,
    overrides: Signature | None = None,
) -> tuple[Error, ExecutionTiming]:
    """Convert the pack (hipDNN's TypeErrors/ValueErrors raise), run the active plan or the plan
    at ``plan_index`` on the handle's stream, and return the outcome as an ``Error``.

    ``overrides`` (``(uids, shapes, strides)``, see :mod:`hipdnn_graph.graph.overrides`) runs
    the active plan at override shapes: they are checked first (hipDNN's frontend checks), and
    addresses in the pack are read at the override layouts."""
    timing = ExecutionTiming()
    with stream_context(handle):
        try:
            size = core.get_workspace_size()
            layouts = _override_layouts(core, overrides)
        except HipdnnError as err:
            return Error.of(err), timing
        pack: dict[int, Any] = {}
        buffers: list[Any] = []

        def convert() -> None:
            pack.update(core_variant_pack(core, variant_pack, layouts))
            buffers.append(core_workspace(workspace, size))

        error = returning_error(convert)
        if error.is_bad():
            return error, timing

        def call() -> None:
            if overrides is not None and any(overrides):
                uids, shapes, strides = overrides
                core.execute(pack, buffers[0], None, uids, shapes, strides)
            elif plan_index is None:
                core.execute(pack, buffers[0])
            else:
                core.execute_plan_at_index(pack, buffers[0], plan_index)

        if not timed:
            return returning_error(call), timing
        return _timed(call, any(is_device_array(v) for v in pack.values()))


def _override_layouts(
    core: CoreGraph, overrides: Signature | None
) -> dict[int, tuple[Sequence[int], Sequence[int]]] | None:
    """The override layouts by uid, after hipDNN's frontend checks (None without overrides).

    Raises:
        HipdnnError: ``INVALID_VALUE`` as :func:`~hipdnn_graph.graph.overrides.check_arguments`.
    """
    if overrides is None or not any(overrides):
        return None
    from ..graph.overrides import check_arguments

    check_arguments(core, overrides)
    uids, shapes, strides = overrides
    return {uid: (shape, stride) for uid, shape, stride in zip(uids, shapes, strides, strict=True)}


def _timed(call: Callable[[], None], on_device: bool) -> tuple[Error, ExecutionTiming]:
    if on_device:
        import torch

        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        error = returning_error(call)
        end.record()
        end.synchronize()
        elapsed = float(start.elapsed_time(end))
    else:
        began = time.perf_counter()
        error = returning_error(call)
        elapsed = (time.perf_counter() - began) * 1e3
    if error.is_bad():
        return error, ExecutionTiming()
    return error, ExecutionTiming(elapsed, False, TimingQuality.DEVICE_ONLY)
