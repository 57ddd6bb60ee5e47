"""Engine filtering: the engines a caller bars from a graph (hipDNN's ``deselect_*`` family).

The filters are settings of the graph: they outlive rebuilding it, and they apply where
engines are chosen: ``create_execution_plans`` lists a barred engine among the refusals with
the filter that barred it (so ``check_support``'s error says why), and ``autotune`` reports
each barred plan spec as a failed result (hipDNN's "Plan barred ..." message).

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[4])
    >>> _ = g.pointwise(x, mode=hg.PointwiseMode.EXP).set_output(True)
    >>> _ = g.deselect_engines(["TORCH_EAGER_ENGINE"]).create_execution_plans()
    >>> g.get_engine_refusals()["TORCH_EAGER_ENGINE"]
    'deselected by deselect_engines()'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from ..backend.contract import engine_id
from ..backend.knobs import BehaviorNote, engine_behavior_notes
from ..errors import HipdnnError
from ..types import ErrorCode

__all__ = ["EngineFilters", "EngineSelection"]

_MASK64 = (1 << 64) - 1


@dataclass
class EngineFilters:
    """What :class:`EngineSelection` collected: barred engine ids (64-bit), the largest
    workspace allowed, barred behavior notes."""

    engine_ids: set[int] = field(default_factory=set)
    max_workspace: int | None = None
    behavior_notes: set[BehaviorNote] = field(default_factory=set)

    def reason(self, engine: Any, workspace: int | None) -> str | None:
        """Why ``engine`` (needing ``workspace`` bytes, ``None`` when unknown) is barred, or
        ``None``."""
        if engine_id(engine.name) in self.engine_ids:
            return "deselected by deselect_engines()"
        limit = self.max_workspace
        if limit is not None and workspace is not None and workspace > limit:
            return (
                f"deselected by deselect_workspace_greater_than({limit}): it needs {workspace} "
                f"bytes of workspace"
            )
        notes = self.behavior_notes.intersection(engine_behavior_notes(engine))
        if notes:
            names = ", ".join(sorted(n.name for n in notes))
            return f"deselected by deselect_behavior_notes(): it declares {names}"
        return None

    def is_empty(self) -> bool:
        return not self.engine_ids and self.max_workspace is None and not self.behavior_notes


def _id_of(ref: Any) -> int:
    if isinstance(ref, str):
        return engine_id(ref)
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref & _MASK64
    raise HipdnnError(
        ErrorCode.INVALID_VALUE, f"An engine is named by its id or its name; got {ref!r}"
    )


class EngineSelection:
    """The ``Graph`` methods of this module (a mixin of :class:`~hipdnn_graph.Graph`)."""

    def engine_filters(self) -> EngineFilters:
        """This graph's filters (created empty on first use)."""
        filters: EngineFilters | None = self.__dict__.get("_engine_filters")
        if filters is None:
            filters = EngineFilters()
            self.__dict__["_engine_filters"] = filters
        return filters

    def deselect_engines(self, engines: Iterable[int | str]) -> Self:
        """Bar engines, named by name or 64-bit id (an id no engine has bars nothing).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an entry that is neither a name nor an id.
        """
        if isinstance(engines, str | bytes):
            engines = [engines]  # type: ignore[list-item]
        ids = [_id_of(ref) for ref in engines]
        self.engine_filters().engine_ids.update(ids)
        return self

    def deselect_workspace_greater_than(self, max_workspace: int) -> Self:
        """Bar engines needing more than ``max_workspace`` bytes of workspace (the last call
        wins).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a negative or non-integer size.
        """
        if isinstance(max_workspace, bool) or not isinstance(max_workspace, int):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"The workspace limit must be an integer; got {max_workspace!r}",
            )
        if max_workspace < 0:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"The workspace limit must not be negative; got {max_workspace}",
            )
        self.engine_filters().max_workspace = max_workspace
        return self

    def deselect_behavior_notes(self, notes: Iterable[BehaviorNote | int]) -> Self:
        """Bar engines declaring any of ``notes`` (cudnn-frontend's name; hipDNN's
        :class:`~hipdnn_graph.backend.knobs.BehaviorNote` values).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a behavior note.
        """
        checked = []
        for note in notes:
            try:
                if isinstance(note, bool):
                    raise ValueError(note)
                checked.append(BehaviorNote(note))
            except ValueError:
                members = ", ".join(m.name for m in BehaviorNote)
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"A behavior note must be one of {members}; got {note!r}",
                ) from None
        self.engine_filters().behavior_notes.update(checked)
        return self
