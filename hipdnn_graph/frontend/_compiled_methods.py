"""``Graph``'s compiled-plan methods in hipDNN's binding convention: ``to_compiled_plan_binary``
returns bytes or raises ``RuntimeError`` (as ``to_binary``), ``from_compiled_plan_binary``
returns an :class:`~hipdnn_graph.frontend.Error`. The rules and bytes are the core's
(:mod:`hipdnn_graph.graph.compiled_plans`).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> err = hipdnn.Graph().from_compiled_plan_binary(None, b"")
    >>> err.get_code().name, err.get_message()
    ('HIPDNN_BACKEND_ERROR', 'Failed to deserialize compiled plan: \
ExecutionPlanDescriptor::deserializeBackendPlan() failed: plan size is zero.')
"""

from __future__ import annotations

from typing import Any

from ..errors import HipdnnError
from ..graph import Graph as CoreGraph
from ._errors import Error, FrontendRuntimeError, returning_error
from ._execute import stream_context
from ._tensor import adopt_all

__all__ = ["CompiledPlanMethods"]


class CompiledPlanMethods:
    """The compiled-plan methods of :class:`~hipdnn_graph.frontend.Graph`."""

    core_graph: CoreGraph

    def plan_serializable(self) -> bool:
        """Whether a plan is built and its engine reports ``SUPPORTS_EXECUTION_PLAN_SERIALIZATION``
        (then ``to_binary`` writes the graph and the plan in an ``HDGP`` container)."""
        return self.core_graph.plan_serializable()

    def to_compiled_plan_binary(self) -> bytes:
        """The built plan as hipDNN's compiled-plan bytes (RFC 0009's envelope).

        Raises:
            FrontendRuntimeError: before a plan is built (hipDNN's message).
        """
        try:
            return self.core_graph.to_compiled_plan_binary()
        except HipdnnError as err:
            raise FrontendRuntimeError(err.message, err.code) from None

    def from_compiled_plan_binary(self, handle: Any, data: bytes) -> Error:
        """Replace this graph by the one ``data`` holds, its plan built and ready to execute
        (no engine ranking, support check or tuning); on failure the graph is kept."""
        if handle is not None:
            stream_context(handle)
        loaded: list[CoreGraph] = []
        error = returning_error(lambda: loaded.append(CoreGraph.from_compiled_plan_binary(data)))
        if error.is_good():
            self.core_graph = loaded[0]
            adopt_all(self.core_graph.tensors)
        return error
