"""Rules already passed in one ``Graph.validate()``, remembered by the input tensors they read.

Many nodes of a graph often read the same tensors: the denial-of-service graph of issue 11 has
65,535 SDPA-backward nodes reading one forward's O and Stats and the same Q, K, V and dO. A rule
that reads nothing of a node but its input tensors (no flag, no scalar, no output) gives the
same answer for each of them, so ``Graph.validate()`` hands every node one :class:`InputRuleMemo`:
a node runs such rules when its input tensors are new to the memo and skips them when another
node of its class already passed them with the same tensors in the same slots.

The key holds each input tensor's identity *and* its change time (see
:mod:`hipdnn_graph.changes`), so a tensor changed in between (by a node's inference, say) is
checked again. A memo lives for one ``validate()`` only: the next one checks everything again.

Nodes reading the same tensors usually come one after another, so the memo also keeps, per rule
list, the input slots that passed last (a copy) and their tensors' change times:
:meth:`InputRuleMemo.passed` compares a node's slots and those times with them before it builds
a key, which is cheaper and tells the same (the same tensors in the same slots, unchanged).

Example:
    >>> from hipdnn_graph import SdpaAttributes, TensorAttributes
    >>> from hipdnn_graph.nodes.input_memo import InputRuleMemo
    >>> q = TensorAttributes(name="Q", dim=[1, 1, 4, 8])
    >>> a, b = SdpaAttributes().set_q(q), SdpaAttributes().set_q(q)
    >>> memo = InputRuleMemo()
    >>> rules = ("a rule list",)
    >>> memo.add(memo.key(rules, a))
    >>> memo.key(rules, b) in memo
    True
    >>> _ = q.set_dim([1, 1, 4, 16])  # changed: checked again
    >>> memo.key(rules, b) in memo
    False
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..attributes.base import NodeAttributes
from ..changes import STAMP_SLOT
from ..tensor import TensorAttributes

__all__ = ["InputRuleMemo"]

Key = tuple[Any, ...]

#: reads a tensor's change time straight from its slot (``getattr`` would go through pydantic's
#: ``__getattr__`` hook, which is slow for a slot never written); raises when it is unset
_read_stamp = getattr(TensorAttributes, STAMP_SLOT).__get__


def _give_change_times(tensors: Collection[TensorAttributes]) -> None:
    """Give each tensor that never changed since it was made or copied the change time
    :func:`hipdnn_graph.changes.changed_at` reads for it: 0, "never"."""
    for tensor in tensors:
        try:
            _read_stamp(tensor)
        except AttributeError:
            object.__setattr__(tensor, STAMP_SLOT, 0)


class InputRuleMemo(set[Key]):
    """The keys of the rule lists that passed in this validation pass (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        # id of a rule list -> the attributes class, input slots and change times it passed last
        self._last: dict[int, tuple[type, dict[Any, TensorAttributes], tuple[int, ...]]] = {}

    def passed(self, rules: object, attributes: NodeAttributes) -> bool:
        """Whether the input-only rules of the list ``rules`` passed for a node of this class
        with these tensors in these slots, none changed since: :meth:`record` was called for
        such a node."""
        last = self._last.get(id(rules))
        if last is not None:
            cls, slots, times = last
            if (
                type(attributes) is cls
                and attributes.inputs == slots  # the same tensor objects in the same slots
                and tuple(map(_read_stamp, slots.values())) == times
            ):
                return True
        return self.key(rules, attributes) in self

    def record(self, rules: object, attributes: NodeAttributes) -> None:
        """Remember that the input-only rules of ``rules`` passed with ``attributes``' inputs."""
        self.add(self.key(rules, attributes))  # gives every input tensor a change time
        slots = dict(attributes.inputs)
        self._last[id(rules)] = (type(attributes), slots, tuple(map(_read_stamp, slots.values())))

    @staticmethod
    def key(rules: object, attributes: NodeAttributes) -> Key:
        """What the input-only rules of the list ``rules`` read of a node with ``attributes``:
        the attributes class, then each input slot, its tensor's identity and change time."""
        inputs = attributes.inputs
        tensors = inputs.values()
        try:  # one tuple, built without intermediate ones
            return (
                id(rules),
                type(attributes),
                *inputs,
                *map(id, tensors),
                *map(_read_stamp, tensors),
            )
        except AttributeError:  # a tensor without a change time yet: give it one, then again
            _give_change_times(tensors)
            return InputRuleMemo.key(rules, attributes)
