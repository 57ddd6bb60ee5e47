"""The engine plugin API version: what an engine implements and what a graph requires.

hipDNN (RFC 0016) versions its engine plugin API semantically. Each plugin reports the version
it implements; each graph carries ``min_required_engine_api_version`` (graph.fbs), stamped when
the operation graph is built from the features it uses: runtime pass-by-value tensors need
1.2.0, override shapes at execute time 1.1.0, anything else the baseline 1.0.0 (hipDNN's
``computeMinimumEnginePluginApiVersion``; the highest floor wins). An engine older than a
graph requires is skipped, with a reason, before its ``check()`` is asked.

Here an engine declares the version as ``api_version`` (``"1.2.0"`` or ``(1, 2, 0)``). One that
declares none was written against this contract before versions existed, which already handed
runtime pass-by-value scalars to every engine as Python numbers: it is taken to implement
:data:`ENGINE_API_VERSION` (1.2.0), so existing plugins keep receiving the graphs they ran. An
engine that implements less declares it (``api_version = "1.0.0"``) and is skipped for graphs
that need more.

Example:
    >>> required_api_version(override_shape=False, runtime_pass_by_value=True)
    EngineApiVersion(major=1, minor=2, patch=0)
    >>> class Old:
    ...     name = "OLD_ENGINE"
    ...     api_version = "1.0.0"
    >>> api_version_refusal(Old(), EngineApiVersion(1, 2, 0))
    'implements engine plugin API 1.0.0; the graph requires at least 1.2.0'
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import HipdnnError
from ..types import ErrorCode

__all__ = [
    "BASELINE_API_VERSION",
    "ENGINE_API_VERSION",
    "OVERRIDE_EXECUTE_API_VERSION",
    "PASS_BY_VALUE_API_VERSION",
    "EngineApiVersion",
    "api_version_refusal",
    "engine_api_version",
    "graph_required_api_version",
    "required_api_version",
]

_U32 = 2**32


class EngineApiVersion(NamedTuple):
    """``major.minor.patch`` (graph.fbs's ``EngineApiVersion`` struct: three uint32)."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @classmethod
    def parse(cls, value: Any) -> EngineApiVersion:
        """``"1.2.0"``, ``(1, 2, 0)`` or an :class:`EngineApiVersion`.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for anything else (hipDNN refuses a plugin whose
                version does not parse).
        """
        parts: Any = value.split(".") if isinstance(value, str) else value
        try:
            numbers = [int(p) for p in parts]
            if len(numbers) != 3 or isinstance(value, bytes):
                raise ValueError
        except (TypeError, ValueError):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"An engine plugin API version is 'major.minor.patch'; got {value!r}",
            ) from None
        if any(
            isinstance(p, bool) or not 0 <= n < _U32 for p, n in zip(parts, numbers, strict=True)
        ):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"An engine plugin API version holds three uint32 numbers; got {value!r}",
            )
        return cls(*numbers)


BASELINE_API_VERSION = EngineApiVersion(1, 0, 0)
OVERRIDE_EXECUTE_API_VERSION = EngineApiVersion(1, 1, 0)
PASS_BY_VALUE_API_VERSION = EngineApiVersion(1, 2, 0)
#: the version this contract defines; the built-in engines declare it
ENGINE_API_VERSION = PASS_BY_VALUE_API_VERSION


def required_api_version(*, override_shape: bool, runtime_pass_by_value: bool) -> EngineApiVersion:
    """The floor a graph with these features requires (hipDNN's mapping)."""
    if runtime_pass_by_value:
        return PASS_BY_VALUE_API_VERSION
    if override_shape:
        return OVERRIDE_EXECUTE_API_VERSION
    return BASELINE_API_VERSION


def graph_required_api_version(graph: Any) -> EngineApiVersion:
    """The floor ``graph`` requires: from its features (a runtime pass-by-value tensor, the
    override-shape flag), or the version stamped on it when that is higher (a graph read from
    a newer writer keeps its stamp).

    Example:
        >>> import hipdnn_graph as hg
        >>> g = hg.Graph()
        >>> _ = g.pointwise(g.tensor(name="x", dim=[4]), mode=hg.PointwiseMode.EXP)
        >>> str(graph_required_api_version(g))
        '1.0.0'
    """
    metadata = getattr(graph, "wire_metadata", None)
    tensors = graph.graph_tensors() if hasattr(graph, "graph_tensors") else ()
    derived = required_api_version(
        override_shape=bool(getattr(metadata, "is_override_shape_enabled", False)),
        runtime_pass_by_value=any(t.get_is_runtime_pass_by_value() for t in tensors),
    )
    stamped = getattr(metadata, "min_required_engine_api_version", None)
    return max(derived, EngineApiVersion(*stamped)) if stamped is not None else derived


def engine_api_version(engine: Any) -> EngineApiVersion:
    """The version ``engine`` declares (``api_version``), :data:`ENGINE_API_VERSION` when it
    declares none.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a declaration that does not parse.
    """
    declared = getattr(engine, "api_version", None)
    return ENGINE_API_VERSION if declared is None else EngineApiVersion.parse(declared)


def api_version_refusal(engine: Any, required: EngineApiVersion) -> str | None:
    """Why ``engine`` is skipped for a graph requiring ``required``, or ``None``."""
    try:
        version = engine_api_version(engine)
    except HipdnnError as err:
        return f"declares no valid engine plugin API version: {err.message}"
    if version < required:
        return f"implements engine plugin API {version}; the graph requires at least {required}"
    return None
