"""``Graph``'s autotuning and engine-filtering methods in hipDNN's binding convention (the
autotune records they take and return are the core's own,
:mod:`hipdnn_graph.graph.autotune_types`, which ``hipdnn_graph.frontend`` exports).

``autotune`` raises ``RuntimeError`` (keeping the error code) on failure and returns the
results; ``deselect_*`` return the graph; ``add_engine_sweep`` returns an
:class:`~hipdnn_graph.frontend.Error`. Every rule is the core's
(:mod:`hipdnn_graph.graph.autotune`, :mod:`hipdnn_graph.graph.selection`).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> g = hipdnn.Graph()
    >>> g.deselect_workspace_greater_than(1024).deselect_engines(["MIOPEN_ENGINE"]) is g
    True
    >>> config = hipdnn.AutotuneConfig()
    >>> config.window_size = 1
    >>> try:
    ...     g.autotune(hipdnn.create_handle(), {1: 1}, config=config)
    ... except RuntimeError as err:
    ...     print(err)
    Invalid AutotuneConfig: windowSize must be >= 2 (got 1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from ..errors import HipdnnError
from ..graph import Graph as CoreGraph
from ..graph.autotune_types import (
    AutotuneConfig,
    AutotuneResult,
    AutotuneStorageConfig,
    EngineSweepSpec,
    check_config,
)
from ._errors import Error, FrontendRuntimeError, FrontendTypeError, returning_error
from ._execute import stream_context
from ._pack import core_variant_pack, core_workspace

__all__ = ["AutotuneMethods"]


def _raising(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except HipdnnError as err:
        if isinstance(err, RuntimeError):
            raise
        raise FrontendRuntimeError(err.message, err.code) from None


class AutotuneMethods:
    """The autotuning methods of :class:`~hipdnn_graph.frontend.Graph`."""

    core_graph: CoreGraph

    def add_engine_sweep(self, specs: Sequence[EngineSweepSpec]) -> Error:
        """One plan spec per combination of each spec's knob axes."""
        return returning_error(lambda: self.core_graph.add_engine_sweep(list(specs)))

    def deselect_engines(self, engines: Iterable[int | str]) -> Self:
        """Bar engines by name or id from plan creation and autotuning.

        Raises:
            FrontendTypeError: an entry that is neither a name nor an id.
        """
        try:
            self.core_graph.deselect_engines(list(engines))
        except HipdnnError as err:
            raise FrontendTypeError(err.message, err.code) from None
        return self

    def deselect_workspace_greater_than(self, max_workspace: int) -> Self:
        """Bar engines needing more than ``max_workspace`` bytes of workspace.

        Raises:
            FrontendTypeError: a size that is not a non-negative integer.
        """
        try:
            self.core_graph.deselect_workspace_greater_than(max_workspace)
        except HipdnnError as err:
            raise FrontendTypeError(err.message, err.code) from None
        return self

    def get_autotune_workspace_size(self) -> int:
        """The workspace covering every candidate (0 before any plan spec or plan)."""
        return int(self.core_graph.get_autotune_workspace_size())

    def autotune(
        self,
        handle: Any,
        variant_pack: Mapping[Any, Any],
        workspace: Any = 0,
        workspace_size: int | None = None,
        config: AutotuneConfig | None = None,
        storage_config: AutotuneStorageConfig | None = None,
    ) -> list[AutotuneResult]:
        """Time the plan specs (or the compiled plans) on these buffers and keep the fastest.

        The config is checked first, then the handle, then the pack (hipDNN's order).

        Raises:
            FrontendRuntimeError: a bad config (naming its field), a null handle, a pack
                missing a non-virtual tensor, nothing to time (``"No execution plans were
                benchmarkable"``).
        """
        config = AutotuneConfig() if config is None else config
        _raising(lambda: check_config(config))
        get = getattr(handle, "get", None)
        if callable(get) and not get():
            raise FrontendRuntimeError("autotune(): handle must not be null")
        with stream_context(handle):
            pack = _raising(lambda: core_variant_pack(self.core_graph, variant_pack))
            size = self.core_graph.get_autotune_workspace_size()
            limit = size if workspace_size is None else workspace_size
            buffer = _raising(lambda: core_workspace(workspace, limit))
            return list(
                _raising(
                    lambda: self.core_graph.autotune(
                        pack,
                        buffer,
                        workspace_size=workspace_size,
                        config=config,
                        storage=storage_config,
                    )
                )
            )
