"""A variant pack seen before, recognised in one call into torch's C++ tensor checks.

Binding a torch pack checks each tensor's dtype, shape, strides and ``requires_grad`` from
Python, four attribute reads and two tuple comparisons per tensor (about 0.5 µs each on a
typical host, 4-5 µs for an SDPA backward's nine buffers). A :class:`PackGuard` is made from a
pack that passed those checks and answers "is this pack keyed the same way, with tensors of
the same type, dtype, shape, strides, gradient flag and dispatch keys?" for all of its tensors
in one call to ``torch._C._dynamo.guards.TensorGuards.check``, the C++ check that Dynamo's
guards were built on.

The guard is an accelerator only: when torch lacks it, when it cannot be made, or when it says
no, the binder checks the pack from Python as before, so every answer the binder gives stays
the Python path's. The guard is stricter than those checks (a tensor subclass, a tensor made in
inference mode, a call under another dispatch context all fail it) and never looser:

- keys compare by equality, like the binder's table lookup, except that ``True`` and ``False``
  (equal to the uids 1 and 0) are never uids;
- torch's check ignores ``requires_grad`` while gradients are disabled, so the guard then
  reads that flag itself;
- it keeps no reference to the tensors it was made from.

Example:
    >>> import torch
    >>> from hipdnn_graph.backend.pack_guard import PackGuard
    >>> pack = {1: torch.zeros(2, 3), 2: torch.zeros(3)}
    >>> guard = PackGuard.of(pack)
    >>> guard is None or guard.matches({1: torch.ones(2, 3), 2: torch.ones(3)}) is not None
    True
    >>> guard is None or guard.matches({1: torch.ones(3, 2), 2: torch.ones(3)}) is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PackGuard"]


def _tensor_guards() -> Any | None:
    """torch's ``TensorGuards`` class, or None where this torch has none."""
    try:
        from torch._C._dynamo.guards import TensorGuards
    except (ImportError, AttributeError):
        return None
    return TensorGuards


class PackGuard:
    """The keys and tensor checks of one accepted pack (see the module docstring)."""

    __slots__ = ("_bool_keys_possible", "_check", "_grad_enabled", "keys")

    def __init__(self, keys: tuple[Any, ...], check: Any, grad_enabled: Any) -> None:
        self.keys = keys
        self._check = check
        self._grad_enabled = grad_enabled
        # a key equal to 0 or 1 (an int, a NumPy integer) also equals False or True, no uids
        self._bool_keys_possible = any(key in (0, 1) for key in keys)

    @classmethod
    def of(cls, pack: Mapping[Any, Any]) -> PackGuard | None:
        """A guard for a pack of torch tensors that the binder accepted, or None when torch has
        no tensor guards or cannot make one for these tensors (torch's check refuses a pack
        that gives one tensor object for two uids)."""
        guards = _tensor_guards()
        if guards is None:
            return None
        import torch

        values = tuple(pack.values())
        try:
            check = guards(
                *values,
                dynamic_dims_sizes=[list(v.shape) for v in values],
                dynamic_dims_strides=[list(v.stride()) for v in values],
            ).check
            if not check(*values):  # a guard that refuses its own pack would never help
                return None
        except Exception:
            return None
        return cls(tuple(pack), check, torch.is_grad_enabled)

    def matches(self, pack: Mapping[Any, Any]) -> tuple[Any, ...] | None:
        """The pack's buffers in key order when it passes every check of the guard, else None."""
        keys = tuple(pack)
        if keys != self.keys:
            return None
        if self._bool_keys_possible and any(key.__class__ is bool for key in keys):
            return None
        values = tuple(pack.values())
        if not self._check(*values):
            return None
        if not self._grad_enabled() and any(value.requires_grad for value in values):
            return None
        return values
