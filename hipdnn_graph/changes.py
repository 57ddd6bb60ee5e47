"""A process-wide change clock, so that a graph knows when what it validated has changed.

Tensors, node attributes and graph attributes record the clock's time whenever one of their
fields is set (:func:`touch`). A graph remembers the time at which ``validate()`` succeeded; it
is still validated while none of its objects was touched after that time. When nothing at all
changed since (the common case, for example validate → build → execute), the check is a single
comparison; otherwise it reads each object's time once (:func:`changed_since`).

Example:
    >>> from hipdnn_graph.changes import CLOCK, changed_since, touch
    >>> from hipdnn_graph import TensorAttributes
    >>> t = TensorAttributes(name="Q", dim=[1, 2, 3, 4])
    >>> mark = CLOCK.now
    >>> changed_since([t], mark)
    False
    >>> _ = t.set_dim([1, 2, 3, 5])
    >>> changed_since([t], mark), CLOCK.now > mark
    (True, True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["CLOCK", "STAMP_SLOT", "ChangeClock", "changed_at", "changed_since", "touch"]

#: the slot each watched class declares (``__slots__ = (STAMP_SLOT,)``): outside pydantic's
#: state, so equality, copies and serialization ignore it
STAMP_SLOT = "_hg_changed_at"


class ChangeClock:
    """A counter that only moves forward; ``now`` is the time of the latest change."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def tick(self) -> int:
        """Advance the clock and return the new time."""
        self.now += 1
        return self.now


#: the one clock of the process
CLOCK = ChangeClock()


def touch(obj: Any) -> None:
    """Record that ``obj`` (an object with the :data:`STAMP_SLOT` slot) changed now."""
    CLOCK.now += 1
    object.__setattr__(obj, STAMP_SLOT, CLOCK.now)


def changed_at(obj: Any) -> int:
    """When ``obj`` last changed (0: not since it was created or copied)."""
    stamp: int = getattr(obj, STAMP_SLOT, 0)
    return stamp


def changed_since(objects: Iterable[Any], mark: int) -> bool:
    """Whether any of ``objects`` changed after time ``mark``."""
    return any(changed_at(obj) > mark for obj in objects)
