"""``Graph``'s engine-configuration methods in hipDNN's binding convention: discovery getters
raise ``RuntimeError``, the ``add_engine*`` family and ``create_execution_plan_ext`` return an
:class:`~hipdnn_graph.frontend.Error`. Every rule is the core's
(:mod:`hipdnn_graph.graph.engine_configs`).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> g = hipdnn.Graph()
    >>> err = g.add_engine(0)
    >>> err.is_bad(), err.get_message()
    (True, 'Graph has not been built. Call build_operation_graph() first.')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

from ..backend.knobs import KnobSetting
from ..errors import HipdnnError
from ..graph import Graph as CoreGraph
from ..graph.engine_configs import EngineConfigInfo
from ..types import HeuristicMode
from ._errors import Error, FrontendRuntimeError, returning_error
from ._knobs import EngineVariant, Knob, wrap_knobs

__all__ = ["EngineMethods"]


def _raising(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except HipdnnError as err:
        raise FrontendRuntimeError(err.message, err.code) from None


class EngineMethods:
    """The engine-configuration methods of :class:`~hipdnn_graph.frontend.Graph`."""

    core_graph: CoreGraph

    # ----- discovery (raise RuntimeError) -----
    def get_engine_configs(
        self, modes: list[HeuristicMode] | None = None, handle: Any = None
    ) -> list[EngineConfigInfo]:
        """Every engine that applies, best first, with its knobs and workspace estimate."""
        configs = _raising(lambda: self.core_graph.get_engine_configs(modes))
        return [replace(c, knobs=cast(Any, wrap_knobs(c.knobs))) for c in configs]

    def get_knobs_for_engine(self, engine_id: int) -> list[Knob]:
        return wrap_knobs(_raising(lambda: self.core_graph.get_knobs_for_engine(engine_id)))

    def get_knob_lookup_for_engine(self, engine_id: int) -> dict[str, Knob]:
        return {k.knob_id: k for k in self.get_knobs_for_engine(engine_id)}

    def get_behavior_notes_for_engine(self, engine_id: int) -> list[Any]:
        return list(_raising(lambda: self.core_graph.get_behavior_notes_for_engine(engine_id)))

    def get_estimated_max_workspace_size(self) -> int:
        return int(_raising(self.core_graph.get_estimated_max_workspace_size))

    def get_execution_plan_engine_id(self) -> int:
        return int(_raising(self.core_graph.get_execution_plan_engine_id))

    # ----- plan creation and plan specs (return an Error) -----
    def create_execution_plan_ext(
        self, engine_id: int, knob_settings: Sequence[KnobSetting] = ()
    ) -> Error:
        """Choose ``engine_id`` with ``knob_settings`` (hard select: no fallback)."""
        return returning_error(
            lambda: self.core_graph.create_execution_plan_ext(engine_id, list(knob_settings))
        )

    def add_engine(self, engine_id: int, knob_settings: Sequence[KnobSetting] = ()) -> Error:
        return returning_error(lambda: self.core_graph.add_engine(engine_id, list(knob_settings)))

    def add_engines(self, engine_ids: Sequence[int]) -> Error:
        return returning_error(lambda: self.core_graph.add_engines(list(engine_ids)))

    def add_engine_configs(self, configs: Sequence[EngineConfigInfo]) -> Error:
        return returning_error(lambda: self.core_graph.add_engine_configs(list(configs)))

    def add_engine_variants(self, variants: Sequence[EngineVariant]) -> Error:
        pairs = [(v.engine_id, dict(v.knob_settings)) for v in variants]
        return returning_error(lambda: self.core_graph.add_engine_variants(pairs))

    def add_all_engines(self, modes: list[HeuristicMode] | None = None) -> Error:
        return returning_error(lambda: self.core_graph.add_all_engines(modes))
