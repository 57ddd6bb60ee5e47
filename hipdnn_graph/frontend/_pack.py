"""hipDNN variant packs (``{uid or Tensor: value}``) → the core's packs (``{uid: array}``).

Keys: a :class:`~hipdnn_graph.TensorAttributes` with a uid, or an integer uid (``np.int64``
too). Values, checked in hipDNN's order by :func:`~hipdnn_graph.frontend._memory.get_data_ptr`:

- a NumPy array, a torch tensor or another ``__dlpack__`` producer goes to the engine as itself
  (zero-copy) when its dims, strides and data type are the declared ones; otherwise, as hipDNN
  uses only its address, the declared layout is read from its address, inside the memory it
  owns (:func:`~hipdnn_graph.frontend._memory.view_in`), or for a bare ``__dlpack__`` producer
  inside known memory its address lies in (a :class:`DeviceBuffer`); past that memory,
  ``INVALID_VARIANT_PACK``;
- an ``int`` or NumPy-integer address, a :class:`DeviceBuffer` or an object with ``data_ptr()``
  becomes a view of known memory (see :mod:`hipdnn_graph.frontend._memory`);
- a ``float`` for a pass-by-value tensor is the number itself (an extension: hipDNN wants an
  address there; an integer scalar goes as a one-element NumPy array).

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> from hipdnn_graph.frontend._pack import core_variant_pack
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
    ...              compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 1, 2, 4], uid=1)
    >>> pack = core_variant_pack(g, {q: np.zeros((1, 1, 2, 4), np.float32)})
    >>> list(pack), pack[1].shape
    ([1], (1, 1, 2, 4))
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend.array_info import describe_array
from ..backend.buffers import as_numpy, as_torch
from ..backend.layout import same_layout
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType
from ._errors import FrontendTypeError, FrontendValueError
from ._memory import DeviceBuffer, get_data_ptr, resolve_pointer, view_in

if TYPE_CHECKING:
    from ..graph import Graph as CoreGraph

__all__ = ["core_variant_pack", "core_workspace", "is_device_array"]


def _uid(key: Any) -> int:
    if isinstance(key, TensorAttributes):
        if not key.has_uid():
            raise FrontendValueError(f"variant_pack key tensor '{key.name}' has no uid")
        return key.get_uid()
    if not isinstance(key, bool | np.bool_) and hasattr(type(key), "__index__"):
        return operator.index(key)
    raise FrontendTypeError("variant_pack keys must be Tensor objects or int tensor UIDs")


def _is_address(value: Any) -> bool:
    """Whether hipDNN would read ``value`` as a bare address (not as an array object)."""
    if isinstance(value, int | DeviceBuffer):
        return True
    if isinstance(value, np.ndarray) or _is_torch(value):
        return False
    return callable(getattr(value, "data_ptr", None)) or not hasattr(value, "__dlpack__")


def _is_torch(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def is_device_array(value: Any) -> bool:
    """Whether ``value`` is a torch tensor in CUDA/ROCm memory."""
    return _is_torch(value) and value.device.type == "cuda"


def core_variant_pack(
    graph: CoreGraph,
    variant_pack: Mapping[Any, Any],
    layouts: Mapping[int, tuple[Sequence[int], Sequence[int]]] | None = None,
) -> dict[int, Any]:
    """Convert a hipDNN variant pack for the core's ``execute``; ``layouts`` gives the dims and
    strides of the tensors executed at override shapes (by uid), read in place of the declared
    ones.

    Raises:
        FrontendTypeError / FrontendValueError: a key or value hipDNN's bindings reject the same
            way (bool values, unknown types, keys without uid, malformed DLPack capsules).
        HipdnnError: ``INVALID_VARIANT_PACK`` for an address outside known memory.
    """
    if not isinstance(variant_pack, Mapping):
        raise FrontendTypeError(f"variant_pack must be a dict, got {type(variant_pack).__name__}")
    by_uid = {t.get_uid(): t for t in graph.graph_tensors() if t.has_uid()}
    if layouts:
        by_uid = {uid: _at_layout(t, layouts.get(uid)) for uid, t in by_uid.items()}
    converted: dict[int, Any] = {}
    addresses: dict[int, int] = {}
    for key, value in variant_pack.items():
        uid = _uid(key)
        tensor = by_uid.get(uid)
        what = f"variant_pack[{uid}]"
        if (
            isinstance(value, float | np.floating)
            and tensor is not None
            and tensor.get_is_pass_by_value()
        ):
            converted[uid] = value
            continue
        address = get_data_ptr(value, what)
        if _is_address(value) and tensor is not None:
            addresses[uid] = address
        elif tensor is not None:
            converted[uid] = _as_declared(value, address, tensor, uid)
        else:
            converted[uid] = value
    for uid, address in addresses.items():  # every value passed hipDNN's checks: now resolve
        tensor = by_uid[uid]
        converted[uid] = resolve_pointer(
            address,
            tuple(tensor.dim),
            tuple(tensor.stride),
            tensor.data_type,
            f"'{tensor.name}' (uid {uid})",
        )
    return converted


def _at_layout(
    tensor: TensorAttributes, layout: tuple[Sequence[int], Sequence[int]] | None
) -> TensorAttributes:
    """``tensor``, or a copy of it at an override layout (its uid and type kept)."""
    if layout is None:
        return tensor
    shaped = tensor.model_copy()
    shaped.dim, shaped.stride = list(layout[0]), list(layout[1])
    return shaped


def _as_declared(value: Any, address: int, tensor: TensorAttributes, uid: int) -> Any:
    """``value`` itself when its layout is the declared one, else the declared layout read at
    its address inside its memory (hipDNN reads only the address); ``value`` itself when its
    layout or memory cannot be read (the core's check then names what is wrong)."""
    dims, strides = list(tensor.dim), list(tensor.stride)
    try:
        info = describe_array(value, f"variant_pack[{uid}]")
    except HipdnnError:
        return value
    same = info.data_type == tensor.data_type and info.dims == dims
    if same and same_layout(tuple(dims), tuple(info.strides), tuple(strides)):
        return value
    label = f"'{tensor.name}' (uid {uid})"
    bare = not (isinstance(value, np.ndarray) or _is_torch(value))
    owner = _imported(value, info.on_cpu, label) if bare else value
    if owner is None or len(strides) != len(dims):
        return value
    layout = (tuple(dims), tuple(strides), tensor.data_type)
    try:
        view = view_in(owner, address, *layout, label)
    except HipdnnError as too_small:
        if not bare:
            raise
        # a bare producer's capsule describes only what it exports; where its address lies
        # in memory known here (a DeviceBuffer, a remembered array) that holds the layout,
        # read it there, as hipDNN reads any value through its address alone
        try:
            return resolve_pointer(address, *layout, label)
        except HipdnnError:
            raise too_small from None
    return value if view is None else view


def _imported(producer: Any, on_cpu: bool, label: str) -> Any:
    """A DLPack producer as a NumPy array (``cpu``) or torch tensor (device), sharing its
    memory (its layout checked first); ``None`` when it cannot be imported so."""
    try:
        return as_numpy(producer, label) if on_cpu else as_torch(producer, label)
    except (HipdnnError, ImportError):  # a layout or device the consumer refuses; no torch
        return None


def core_workspace(workspace: Any, size: int) -> Any:
    """The core's workspace buffer for a hipDNN workspace value (``None`` when none is needed)."""
    if workspace is None:
        return None
    address = get_data_ptr(workspace, "workspace")
    if size <= 0:
        return None
    if not _is_address(workspace):
        return workspace
    return resolve_pointer(address, (size,), (1,), DataType.UINT8, "workspace")
