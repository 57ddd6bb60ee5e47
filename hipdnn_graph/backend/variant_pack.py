"""Checking and binding variant packs: ``{tensor or uid: buffer}`` → ``{uid: buffer}``.

A :class:`VariantPackBinder` is compiled once per plan from the graph's non-virtual tensors, so
that each ``execute`` only compares precomputed tuples. Buffers may be NumPy arrays, torch
tensors or any DLPack producer; they are converted zero-copy to the kind the engine asked for.
Every failure raises ``INVALID_VARIANT_PACK`` naming the tensor and what is wrong, for every
engine alike: outputs must be writable (no read-only NumPy arrays, no views of ``bytes`` or of a
read-only ``mmap``, see :mod:`hipdnn_graph.backend.memory`), must not require grad and must not
alias other buffers; torch tensors must be dense (strided). The specs live in
:mod:`.tensor_spec`, the checks of one buffer and of the workspace in :mod:`.pack_checks`.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> from hipdnn_graph.backend.variant_pack import TensorSpec, VariantPackBinder
    >>> spec = TensorSpec(uid=1, name="Q", shape=(2, 3), strides=(3, 1),
    ...                   data_type=hg.DataType.FLOAT, is_output=False)
    >>> binder = VariantPackBinder([spec], array_kind="numpy")
    >>> binder.bind({1: np.zeros((2, 3), np.float32)}, None)[1].shape
    (2, 3)
    >>> try:
    ...     binder.bind({1: np.zeros((3, 2), np.float32)}, None)
    ... except hg.HipdnnError as err:
    ...     print(err.code.name)
    ...     print(err)
    INVALID_VARIANT_PACK
    Variant pack tensor 'Q' (uid 1) has shape (3, 2) but the graph declares dims [2, 3]
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .aliasing import alias_error, check_output_kind, overlap
from .buffers import as_numpy, as_torch, is_torch_tensor
from .memory import array_is_read_only, tensor_is_read_only
from .pack_checks import check_array, check_packed_array, check_workspace
from .pack_guard import PackGuard
from .ragged import host_integers
from .tensor_spec import TensorSpec, is_runtime_scalar, pack_error, scalar_value

__all__ = [
    "TensorSpec",
    "VariantPackBinder",
    "as_numpy",
    "as_torch",
    "is_runtime_scalar",
    "is_torch_tensor",
]


#: how many :class:`PackGuard` a binder makes before it relies on its Python checks alone
_GUARDS_PER_BINDER = 8


class VariantPackBinder:
    """Checks a variant pack against precomputed specs and converts its buffers.

    The common case, a pack keyed by this graph's tensors (or uids) whose buffers are NumPy
    arrays or torch tensors of exactly the declared shape, dtype and strides, is checked in one
    pass with a dict lookup and a few tuple comparisons per buffer (a table built with the
    plan); anything else takes the slow path, which checks again from the start and explains
    the first mismatch.
    The aliasing check is skipped when the same buffer objects as in the previous call come back
    (tracked through weak references, so the binder never keeps caller buffers alive).

    Args:
        specs: the graph's non-virtual, non-constant tensors.
        array_kind: ``"numpy"`` or ``"torch"``, the buffer kind the engine wants.
    """

    def __init__(self, specs: Sequence[TensorSpec], array_kind: str = "numpy") -> None:
        if array_kind not in ("numpy", "torch"):
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"Unknown array kind {array_kind!r}")
        self.specs = list(specs)
        self.by_uid = {s.uid: s for s in self.specs}
        self.array_kind = array_kind
        self._inputs = [s for s in self.specs if not s.is_output and not s.pass_by_value]
        self.outputs = [s for s in self.specs if s.is_output]
        # (output, other) pairs to test for shared memory, in report order
        self._pairs = [
            (out, other)
            for i, out in enumerate(self.outputs)
            for other in self._inputs + self.outputs[i + 1 :]
        ]
        self._buffers = self._inputs + self.outputs
        self._buffer_uids = tuple(s.uid for s in self._buffers)
        #: the fast path's table: every accepted key (the graph's tensor object, its uid) -> spec
        self._lookup: dict[Any, TensorSpec] = {s.uid: s for s in self.specs}
        self._lookup.update({s.tensor: s for s in self.specs if s.tensor is not None})
        self._required = [s for s in self.specs if not s.is_output]
        self._last_checked: list[weakref.ref[Any]] | None = None
        self._strided: Any = None
        self._torch_kind = array_kind == "torch"
        #: packed (ragged) tensors: bound on the checked path, then against their offsets
        self._ragged = [s for s in self.specs if s.ragged is not None]
        #: the torch fast path's table: every accepted key -> (uid, torch dtype or None for a
        #: pass-by-value scalar, shape, strides, spec), read with one lookup per buffer
        self._exact: dict[Any, tuple[int, Any, tuple[int, ...], tuple[int, ...], TensorSpec]] = {}
        self._scalar_uids = frozenset(s.uid for s in self.specs if s.pass_by_value)
        if self._torch_kind:
            for spec in self.specs:  # resolve once, for the fast path of bind()
                if not spec.pass_by_value:
                    spec.torch_dtype()
            import torch

            self._strided = torch.strided
            self._exact = {
                key: (s.uid, None if s.pass_by_value else s._torch_dtype, s.shape, s.strides, s)
                for key, s in self._lookup.items()
            }
        #: (uids in pack order, tensor addresses in that order) of the last complete torch
        #: pack whose outputs passed the writability and aliasing checks
        self._last_pointers: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        #: the last complete, scalar-free torch pack the fast path accepted, as a guard that
        #: recognises a pack like it in one C++ call, with its uids in key order
        self._guard: tuple[PackGuard, tuple[int, ...]] | None = None
        #: guards still to make: when guards keep failing (a caller switching dispatch contexts)
        #: or cannot be made (no TensorGuards in this torch, one tensor given for two uids),
        #: the binder stops trying and its Python checks alone run
        self._guards_left = _GUARDS_PER_BINDER

    def bind(
        self,
        variant_pack: Mapping[Any, Any],
        workspace: Any,
        workspace_size: int = 0,
        *,
        allow_missing_outputs: bool = False,
    ) -> dict[int, Any]:
        """Return ``{uid: converted buffer}`` after checking every rule.

        With ``allow_missing_outputs`` outputs may be left out (``Graph.run`` allocates them).

        Raises:
            HipdnnError: ``INVALID_VARIANT_PACK`` naming the tensor and the problem.
        """
        return self._bind(variant_pack, workspace, workspace_size, allow_missing_outputs)[0]

    def bind_keyed(
        self, variant_pack: Mapping[Any, Any], workspace: Any, workspace_size: int = 0
    ) -> tuple[dict[int, Any], Hashable | None]:
        """:meth:`bind`, and the addresses of a complete torch pack bound on the fast path (the
        uids in pack order, the tensors' addresses and the scalars' values in that order; equal
        addresses mean the same buffers in the same places), or ``None`` for any other pack.

        Raises:
            HipdnnError: ``INVALID_VARIANT_PACK`` naming the tensor and the problem.
        """
        return self._bind(variant_pack, workspace, workspace_size, False)

    def _bind(
        self,
        variant_pack: Mapping[Any, Any],
        workspace: Any,
        workspace_size: int,
        allow_missing_outputs: bool,
    ) -> tuple[dict[int, Any], Hashable | None]:
        if variant_pack.__class__ is not dict and not isinstance(variant_pack, Mapping):
            raise pack_error(
                f"The variant pack must be a mapping of tensors or uids to buffers, "
                f"got {type(variant_pack).__name__}"
            )
        bound: dict[int, Any] | None = None
        if self._ragged:
            bound = self._bind_checked(variant_pack, allow_missing_outputs)
            self._check_ragged(bound)
        elif self._torch_kind:
            exact = self._bind_exact_torch(variant_pack)
            if exact is not None:
                bound, pointers, scalars = exact
                if len(bound) == len(self.specs):  # complete: the usual ``execute``
                    if self.outputs and pointers != self._last_pointers:
                        # addresses are all that decide aliasing and writability (shapes and
                        # strides were checked), so the answer for the same ones is known
                        self._check_outputs(bound, True)
                        self._last_pointers = pointers
                    if workspace_size > 0:
                        check_workspace(workspace, workspace_size)
                    return bound, (pointers, scalars)
                if not (allow_missing_outputs and all(s.uid in bound for s in self._required)):
                    bound = None
        else:
            bound = self._bind_exact(variant_pack, allow_missing_outputs)
        if bound is None:
            bound = self._bind_checked(variant_pack, allow_missing_outputs)
        torch_kind = self.array_kind == "torch"
        if self.outputs and len(bound) == len(self.specs):
            if torch_kind:
                self._check_torch_outputs(bound)
            else:
                self._check_numpy_outputs(bound)
        elif self.outputs:  # some outputs left out: check those present, remembering nothing
            self._check_outputs(bound, torch_kind)
        if workspace_size > 0:
            check_workspace(workspace, workspace_size)
        return bound, None

    def _bind_exact_torch(
        self, variant_pack: Mapping[Any, Any]
    ) -> tuple[dict[int, Any], tuple[tuple[int, ...], tuple[int, ...]], tuple[Any, ...]] | None:
        """A torch plan's pack bound in one pass, with the addresses of its tensors, when every
        key and buffer is exactly as declared (one table lookup and one comparison of dtype,
        strides and shape per tensor, none requiring grad); ``None`` otherwise (the slow path
        then checks everything and names what is wrong). A tensor with no strides (sparse,
        nested, mkldnn) raises on ``stride()`` and so takes the slow path too."""
        exact = self._exact
        bound: dict[int, Any] = {}
        pointers: list[int] = []
        scalars: list[Any] = []
        try:
            if self._guard is not None:
                guard, uids = self._guard
                values = guard.matches(variant_pack)
                if values is not None:  # the pack of last time's kind, checked in one call
                    addresses = tuple([value.data_ptr() for value in values])
                    return dict(zip(uids, values, strict=True)), (uids, addresses), ()
            for key, value in variant_pack.items():
                entry = exact.get(key)
                if entry is None or key.__class__ is bool:  # True == 1, but is no uid
                    return None
                uid, dtype, shape, strides, spec = entry
                if dtype is None:
                    bound[uid] = number = scalar_value(value, spec)
                    scalars.append(number)
                elif (
                    value.dtype is dtype
                    and value.stride() == strides
                    and value.shape == shape
                    and not value.requires_grad
                ):
                    bound[uid] = value
                    pointers.append(value.data_ptr())
                else:
                    return None
        except (AttributeError, TypeError, RuntimeError, HipdnnError):
            return None  # a buffer of another kind, an unhashable key, a bad scalar, no strides
        uids = tuple(bound)
        if not scalars and len(bound) == len(self.specs) and self._guards_left:
            self._guards_left -= 1
            made = PackGuard.of(variant_pack)
            self._guard = None if made is None else (made, uids)
        return bound, (uids, tuple(pointers)), tuple(scalars)

    def _bind_exact(
        self, variant_pack: Mapping[Any, Any], allow_missing_outputs: bool
    ) -> dict[int, Any] | None:
        """The pack bound in one pass when every key and buffer is exactly as declared (outputs
        writable, nothing requiring grad) and nothing is missing; ``None`` otherwise (the slow
        path then checks everything and names what is wrong)."""
        lookup = self._lookup
        torch_kind = self.array_kind == "torch"
        strided = self._strided
        bound: dict[int, Any] = {}
        try:
            for key, value in variant_pack.items():
                spec = lookup.get(key)
                if spec is None or key.__class__ is bool:  # True == 1, but is no uid
                    return None
                if spec.pass_by_value:
                    bound[spec.uid] = scalar_value(value, spec)
                elif torch_kind:
                    if not (
                        getattr(value, "dtype", None) is spec._torch_dtype
                        and value.layout is strided
                        and value.stride() == spec.strides
                        and value.shape == spec.shape
                        and not value.requires_grad
                    ):
                        return None
                    bound[spec.uid] = value
                else:
                    if not (
                        type(value) is np.ndarray
                        and value.shape == spec.shape
                        and value.dtype == spec.np_dtype
                        and value.strides == spec.byte_strides
                        and (value.flags.writeable or not spec.is_output)
                    ):
                        return None
                    bound[spec.uid] = value
        except (TypeError, HipdnnError):  # an unhashable key, a scalar that is no number
            return None
        if len(bound) == len(self.specs):
            return bound
        if allow_missing_outputs and all(s.uid in bound for s in self._required):
            return bound
        return None

    def _bind_checked(
        self, variant_pack: Mapping[Any, Any], allow_missing_outputs: bool
    ) -> dict[int, Any]:
        """Every rule checked in turn; the first broken one raises, naming the tensor."""
        by_uid = self.by_uid
        given: dict[int, Any] = {}
        for key, value in variant_pack.items():
            if isinstance(key, TensorAttributes):
                spec = by_uid.get(key.uid)  # type: ignore[arg-type]
                if spec is None:
                    raise pack_error(
                        f"Variant pack tensor '{key.name}' does not name a non-virtual tensor "
                        "of the graph"
                    )
                if spec.tensor is not None and spec.tensor is not key:
                    raise pack_error(
                        f"Variant pack tensor {spec.label} belongs to another graph; key it by "
                        "this graph's tensor or by uid"
                    )
                given[spec.uid] = value
            elif key in by_uid and type(key) is not bool:  # True == 1, but is no uid
                given[key] = value
            else:
                raise pack_error(
                    f"Variant pack key {key!r} does not name a non-virtual tensor of the graph"
                )
        torch_kind = self.array_kind == "torch"
        bound: dict[int, Any] = {}
        for spec in self.specs:
            try:
                value = given[spec.uid]
            except KeyError:
                if allow_missing_outputs and spec.is_output:
                    continue
                raise pack_error(f"Variant pack is missing tensor {spec.label}") from None
            if spec.pass_by_value:
                bound[spec.uid] = scalar_value(value, spec)
                continue
            if (
                not torch_kind
                and type(value) is np.ndarray
                and value.shape == spec.shape
                and value.dtype == spec.np_dtype
                and value.strides == spec.byte_strides
            ):  # fast path: exactly as declared
                if spec.is_output and not value.flags.writeable:
                    raise pack_error(f"Variant pack output {spec.label} is read-only")
                bound[spec.uid] = value
                continue
            if (
                torch_kind
                and spec._torch_dtype is not None
                and getattr(value, "dtype", None) is spec._torch_dtype
                and value.layout is self._strided
                and value.stride() == spec.strides
                and value.shape == spec.shape
                and not value.requires_grad
            ):  # fast path: a torch tensor exactly as declared
                bound[spec.uid] = value
                continue
            if spec.ragged is not None:
                bound[spec.uid] = self._packed_buffer(spec, value)
                continue
            if spec.is_output:
                check_output_kind(value, spec, torch_kind)
            array: Any
            if torch_kind:
                array = as_torch(value, spec.label)
                if array.requires_grad:  # an input: engines read it, never train it
                    array = array.detach()
            else:
                array = as_numpy(value, spec.label)
            check_array(array, spec, torch_kind, value)
            bound[spec.uid] = array
        return bound

    def _packed_buffer(self, spec: TensorSpec, value: Any) -> Any:
        """The converted buffer of a packed tensor, checked as far as it can be without its
        offsets (its dtype and that it is one block of memory)."""
        torch_kind = self.array_kind == "torch"
        if spec.is_output:
            check_output_kind(value, spec, torch_kind)
        array: Any
        if torch_kind:
            array = as_torch(value, spec.label)
            if array.requires_grad and not spec.is_output:
                array = array.detach()
        else:
            array = as_numpy(value, spec.label)
        check_packed_array(array, spec, torch_kind, value)
        return array

    def _check_ragged(self, bound: Mapping[int, Any]) -> None:
        """Each packed buffer present holds every element its offsets reach, and the offsets
        are valid (:meth:`~.ragged.RaggedLayout.token_bounds`); reads the offsets on the host.
        """
        host: dict[int, list[int]] = {}  # each offsets tensor read once (a device sync)
        for spec in self._ragged:
            layout = spec.ragged
            buffer = bound.get(spec.uid)
            if layout is None or buffer is None:
                continue
            uid = layout.offsets_uid
            if uid not in host:
                host[uid] = host_integers(bound[uid])
            bounds = layout.token_bounds(host[uid])
            needed = layout.elements_needed(bounds)
            size = int(buffer.numel()) if is_torch_tensor(buffer) else int(buffer.size)
            if size < needed:
                raise pack_error(
                    f"Variant pack tensor {spec.label} is packed: its ragged offsets "
                    f"'{layout.offsets_name}' reach {needed} elements "
                    f"({int(bounds[-1])} tokens), but its buffer holds {size}"
                )

    def _check_outputs(self, bound: Mapping[int, Any], torch_kind: bool) -> None:
        """Outputs present in ``bound`` are writable and alias nothing else present."""
        for spec in self.outputs:
            value = bound.get(spec.uid)
            if value is not None and (
                tensor_is_read_only(value) if torch_kind else array_is_read_only(value)
            ):
                raise pack_error(f"Variant pack output {spec.label} is read-only")
        for out, other in self._pairs:
            a, b = bound.get(out.uid), bound.get(other.uid)
            if a is not None and b is not None and overlap(a, b, out, other, torch_kind):
                raise alias_error(out, other)

    def _check_numpy_outputs(self, bound: Mapping[int, Any]) -> None:
        buffers = self._buffers
        last = self._last_checked
        if last is not None and all(
            ref() is bound[spec.uid] for ref, spec in zip(last, buffers, strict=True)
        ):
            return  # the same NumPy arrays as last time: already known to be fine
        self._check_outputs(bound, False)
        # an ndarray's memory never changes, so identity is enough to reuse the answer; torch
        # tensors can be re-pointed in place (set_), so they are checked by address every time
        self._last_checked = [weakref.ref(bound[spec.uid]) for spec in buffers]

    def _check_torch_outputs(self, bound: Mapping[int, Any]) -> None:
        # addresses are all that decide aliasing and writability (shapes and strides were
        # checked above), so the answer for the same addresses as last time is known
        scalars = self._scalar_uids
        pointers = (
            tuple(bound),
            tuple([v.data_ptr() for uid, v in bound.items() if uid not in scalars]),
        )
        if pointers == self._last_pointers:
            return
        self._check_outputs(bound, True)
        self._last_pointers = pointers
