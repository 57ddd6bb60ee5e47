"""The variant-pack checks of one buffer against its tensor's spec (shape, dtype, strides) and
of the workspace against the plan's size; each failure names what is wrong.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> from hipdnn_graph.backend.tensor_spec import TensorSpec
    >>> spec = TensorSpec(uid=1, name="Q", shape=(2, 3), strides=(3, 1),
    ...                   data_type=hg.DataType.FLOAT, is_output=False)
    >>> check_array(np.zeros((2, 3), np.float32), spec, torch_kind=False)
    >>> try:
    ...     check_workspace(bytearray(4), 16)
    ... except hg.HipdnnError as err:
    ...     print(err)
    The workspace has 4 bytes, but the plan needs 16
"""

from __future__ import annotations

from typing import Any

from .buffers import is_torch_tensor
from .ragged import one_block
from .tensor_spec import TensorSpec, pack_error

__all__ = ["check_array", "check_packed_array", "check_workspace"]


def check_array(array: Any, spec: TensorSpec, torch_kind: bool, given: Any = None) -> None:
    """Check a converted buffer's shape, dtype and strides; messages name the dtype of the
    buffer as ``given`` (a NumPy array reads ``float64`` even when a torch engine sees a
    ``torch.float64`` view of it)."""
    shape = tuple(array.shape)
    if shape != spec.shape:
        raise pack_error(
            f"Variant pack tensor {spec.label} has shape {shape} but the graph declares "
            f"dims {list(spec.shape)}"
        )
    if torch_kind:
        strides = array.stride()
        dtype_ok = array.dtype == spec.torch_dtype()
    else:
        itemsize = array.itemsize
        strides = tuple(s // itemsize for s in array.strides)
        dtype_ok = array.dtype == spec.np_dtype
    if not dtype_ok:
        dtype = getattr(given, "dtype", None)
        raise pack_error(
            f"Variant pack tensor {spec.label} has dtype "
            f"{array.dtype if dtype is None else dtype} but the graph declares "
            f"{spec.data_type.name}"
        )
    if not spec.strides_match(strides):
        raise pack_error(
            f"Variant pack tensor {spec.label} has strides {tuple(strides)} but the graph "
            f"declares strides {list(spec.strides)}"
        )


def check_packed_array(array: Any, spec: TensorSpec, torch_kind: bool, given: Any = None) -> None:
    """Check the converted buffer of a packed (ragged) tensor: its dtype, and that it is one
    dense block of memory (any shape: flat, ``[T, H, D]``, the declared layout). How many
    elements it must hold depends on the offsets (:meth:`VariantPackBinder.bind` checks it)."""
    if torch_kind:
        strides, declared, aligned = tuple(array.stride()), spec.torch_dtype(), True
    else:
        itemsize = array.itemsize
        strides = tuple(s // itemsize for s in array.strides)
        declared, aligned = spec.np_dtype, all(s % itemsize == 0 for s in array.strides)
    if array.dtype != declared:
        dtype = getattr(given, "dtype", None)
        raise pack_error(
            f"Variant pack tensor {spec.label} has dtype "
            f"{array.dtype if dtype is None else dtype} but the graph declares "
            f"{spec.data_type.name}"
        )
    if not aligned or not one_block(tuple(array.shape), strides):
        raise pack_error(
            f"Variant pack tensor {spec.label} is packed (ragged): its buffer must be one dense "
            f"block of memory (a flat array, [T, H, D] or the declared layout), got shape "
            f"{tuple(array.shape)} and strides {strides}"
        )


def check_workspace(workspace: Any, needed: int) -> None:
    """A workspace of at least ``needed`` bytes: a torch tensor or any buffer.

    Raises:
        HipdnnError: ``INVALID_VARIANT_PACK`` for none, a non-buffer or too few bytes.
    """
    if workspace is None:
        raise pack_error(f"The plan needs a workspace of {needed} bytes, but none was given")
    if is_torch_tensor(workspace):
        size = workspace.numel() * workspace.element_size()
    else:
        size = getattr(workspace, "nbytes", None)
        if not isinstance(size, int):
            try:
                size = memoryview(workspace).nbytes
            except TypeError:
                raise pack_error(
                    f"The workspace is a {type(workspace).__name__}; pass a buffer (a NumPy "
                    f"array, a torch tensor, a bytearray) of at least {needed} bytes"
                ) from None
    if size < needed:
        raise pack_error(f"The workspace has {size} bytes, but the plan needs {needed}")
