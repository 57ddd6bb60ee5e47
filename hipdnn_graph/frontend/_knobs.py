"""hipDNN's knob and engine-configuration bindings: ``Knob``, ``KnobSetting``, ``KnobValueType``,
the three constraints, ``EngineConfigInfo`` and ``EngineVariant``.

The records are the core's (:mod:`hipdnn_graph.backend.knobs`,
:mod:`hipdnn_graph.graph.engine_configs`); only ``Knob`` is wrapped, because hipDNN's binding
returns an :class:`~hipdnn_graph.frontend.Error` from ``validate`` and has no public
constructor (``Knob()`` raises ``TypeError``).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> s = hipdnn.KnobSetting("tile.size", 64)
    >>> s.knob_id, s.value, s == hipdnn.KnobSetting("tile.size", 64)
    ('tile.size', 64, True)
    >>> hipdnn.EngineVariant().engine_id
    -1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..backend import knobs as core
from ..backend.knobs import (
    FloatConstraint,
    IntConstraint,
    KnobSetting,
    KnobValue,
    KnobValueType,
    StringConstraint,
)
from ..graph.engine_configs import EngineConfigInfo
from ._errors import Error, returning_error

__all__ = [
    "EngineConfigInfo",
    "EngineVariant",
    "FloatConstraint",
    "IntConstraint",
    "Knob",
    "KnobSetting",
    "KnobValueType",
    "StringConstraint",
    "wrap_knobs",
]

_TOKEN = object()


class Knob:
    """One knob of an engine, as hipDNN's binding shows it (read-only; made by the library)."""

    __slots__ = ("_knob",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) != 2 or args[0] is not _TOKEN or kwargs:
            raise TypeError("hipdnn_frontend.Knob: No constructor defined!")
        self._knob: core.Knob = args[1]

    @property
    def knob_id(self) -> str:
        return self._knob.knob_id

    @property
    def description(self) -> str:
        return self._knob.description

    @property
    def value_type(self) -> KnobValueType:
        return self._knob.value_type

    @property
    def default_value(self) -> KnobValue:
        return self._knob.default_value

    @property
    def is_deprecated(self) -> bool:
        return self._knob.deprecated

    @property
    def constraint(self) -> IntConstraint | FloatConstraint | StringConstraint | None:
        return self._knob.constraint

    def validate(self, setting: KnobSetting) -> Error:
        """Check ``setting`` against this knob; the outcome as an ``Error``."""
        return returning_error(lambda: self._knob.validate(setting))

    def __repr__(self) -> str:
        return f"<Knob {self.knob_id!r} {self.value_type.name} default={self.default_value!r}>"


def wrap_knobs(knobs: list[core.Knob]) -> list[Knob]:
    """The core's knob records as the binding's :class:`Knob` objects."""
    return [Knob(_TOKEN, k) for k in knobs]


@dataclass
class EngineVariant:
    """An engine and knob settings (``{knob_id: value}``) for ``add_engine_variants``."""

    engine_id: int = -1
    knob_settings: dict[str, KnobValue] = field(default_factory=dict)
