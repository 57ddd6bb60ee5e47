"""``hipdnn-graph run --inputs X.npz --save OUT.npz``: a graph's inputs from a NumPy ``.npz``
file, its outputs to one.

An input is keyed by its tensor's name or by its uid (``"7"``); a name that two tensors share
must be given by uid. Every runtime input must be given once, with the tensor's dims; its values
are cast to the tensor's data type where NumPy casts within a kind (float64 into HALF, int64
into INT32), never across kinds (floats into an integer tensor). A runtime pass-by-value scalar
takes an array of one element; a packed (ragged) tensor its packed tokens, any shape (``[T, H,
D]``) of at most its dims' elements. Files are read without pickles, and each member's header (its
key, dims and type) is checked against the graph before its data is read, so a file cannot make
the command allocate more than the graph's inputs take. Outputs are saved under their tensor
names (their uids where a name is empty or shared), dims as in the graph; the types ``.npy``
has no code for (BFLOAT16, the FP8, FP6 and FP4 types, INT4) are saved as float32, which holds
each of their values exactly.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[2, 3])
    >>> y = g.pointwise(x, mode=hg.PointwiseMode.NEG, name="neg").set_output(True)
    >>> _ = g.build_operation_graph()
    >>> pack = inputs_from({"x": np.ones((2, 3))}, g)
    >>> pack[x].dtype, pack[x].shape, y in pack
    (dtype('float32'), (2, 3), True)
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..backend.dtypes import numpy_dtype
from ..errors import HipdnnError
from ..graph import Graph
from ..tensor import TensorAttributes
from ..testing.inputs import empty_for, empty_packed, graph_outputs, poison, runtime_inputs
from ..types import ErrorCode
from .common import CliError, safe_text

__all__ = ["inputs_from", "load_npz", "output_keys", "read_npz", "save_npz"]


def _keys(tensors: list[TensorAttributes]) -> dict[str, TensorAttributes]:
    """Each tensor by its uid and, where no other tensor shares it, by its name."""
    names: dict[str, list[TensorAttributes]] = {}
    for t in tensors:
        if t.name:
            names.setdefault(t.name, []).append(t)
    keys = {name: ts[0] for name, ts in names.items() if len(ts) == 1}
    keys.update({str(t.uid): t for t in tensors if t.uid is not None})
    return keys


def output_keys(graph: Graph) -> dict[str, TensorAttributes]:
    """The graph's outputs by the key ``--save`` writes them under: the name, or the uid where
    the name is empty or shared."""
    outputs = graph_outputs(graph)
    counts: dict[str, int] = {}
    for t in outputs:
        counts[t.name] = counts.get(t.name, 0) + 1
    return {(t.name if t.name and counts[t.name] == 1 else str(t.uid)): t for t in outputs}


def _refuse(code: ErrorCode, message: str) -> HipdnnError:
    return HipdnnError(code, safe_text(message))


def _tensor_for(key: str, keys: Mapping[str, TensorAttributes]) -> TensorAttributes:
    tensor = keys.get(key)
    if tensor is None:
        known = ", ".join(sorted(k for k in keys if not k.isdigit())) or "none"
        raise _refuse(
            ErrorCode.INVALID_TENSOR_NAME,
            f"input '{key}' is neither the name nor the uid of one of the graph's runtime "
            f"inputs (by name: {known}; or by uid)",
        )
    return tensor


def _check_array(tensor: TensorAttributes, key: str, shape: tuple[int, ...], dtype: Any) -> None:
    """Refuse values of ``dtype`` and dims ``shape`` for ``tensor`` unless they fit it."""
    if not np.can_cast(dtype, numpy_dtype(tensor.data_type), casting="same_kind"):
        raise _refuse(
            ErrorCode.INVALID_VARIANT_PACK,
            f"input '{key}' holds {np.dtype(dtype)} values; tensor '{tensor.name}' (uid "
            f"{tensor.uid}) is {tensor.data_type.name}",
        )
    if tensor.is_pass_by_value:
        size = int(np.prod(shape, dtype=object)) if shape else 1
        if size != 1:
            raise _refuse(
                ErrorCode.INVALID_VARIANT_PACK,
                f"input '{key}' has {size} elements; the pass-by-value tensor "
                f"'{tensor.name}' (uid {tensor.uid}) takes one",
            )
    elif tensor.get_ragged_offset() is not None:  # a packed token buffer: any shape
        size, volume = int(np.prod(shape, dtype=object)), tensor.get_volume()
        if size > volume:
            raise _refuse(
                ErrorCode.INVALID_VARIANT_PACK,
                f"input '{key}' has {size} elements; the packed tensor '{tensor.name}' (uid "
                f"{tensor.uid}) holds at most {volume}, its dims {list(tensor.dim)}",
            )
    elif list(shape) != list(tensor.dim):
        raise _refuse(
            ErrorCode.INVALID_VARIANT_PACK,
            f"input '{key}' has dims {list(shape)}; tensor '{tensor.name}' (uid "
            f"{tensor.uid}) has dims {list(tensor.dim)}",
        )


def _input_value(tensor: TensorAttributes, key: str, value: Any) -> Any:
    array = np.asarray(value)
    _check_array(tensor, key, array.shape, array.dtype)
    if tensor.is_pass_by_value:
        number = array.reshape(-1)[0]
        return int(number) if numpy_dtype(tensor.data_type).kind in "iub" else float(number)
    if tensor.get_ragged_offset() is not None:  # packed: its tokens as given, one block
        return np.ascontiguousarray(
            array.astype(numpy_dtype(tensor.data_type), casting="same_kind")
        )
    buffer = empty_for(tensor)
    buffer[...] = array.astype(buffer.dtype, casting="same_kind")
    return buffer


def inputs_from(arrays: Mapping[str, Any], graph: Graph) -> dict[TensorAttributes, Any]:
    """A variant pack for ``graph`` (lowered, so that tensors have uids): its runtime inputs
    from ``arrays`` (by tensor name or uid), its outputs poisoned with NaN.

    Raises:
        HipdnnError: ``INVALID_TENSOR_NAME`` for a key that names no runtime input (or one
            given twice, by name and uid); ``INVALID_VARIANT_PACK`` for a missing input, dims
            that differ from the tensor's, values of another kind than its data type, or a
            pass-by-value input of more than one element.
    """
    inputs = runtime_inputs(graph)
    keys = _keys(inputs)
    pack: dict[TensorAttributes, Any] = {}
    given: dict[int, str] = {}
    for key, value in arrays.items():
        tensor = _tensor_for(key, keys)
        if id(tensor) in given:
            raise _refuse(
                ErrorCode.INVALID_TENSOR_NAME,
                f"inputs '{given[id(tensor)]}' and '{key}' both give tensor '{tensor.name}' "
                f"(uid {tensor.uid})",
            )
        given[id(tensor)] = key
        pack[tensor] = _input_value(tensor, key, value)
    missing = [t for t in inputs if id(t) not in given]
    if missing:
        names = ", ".join(f"'{t.name}' (uid {t.uid})" for t in missing)
        raise _refuse(ErrorCode.INVALID_VARIANT_PACK, f"no value for the graph input(s) {names}")
    for tensor in graph_outputs(graph):
        offsets = tensor.get_ragged_offset()
        if offsets is not None and offsets in pack:  # packed: the tokens its offsets reach
            pack[tensor] = poison(empty_packed(tensor, pack[offsets]))
        else:
            pack[tensor] = poison(empty_for(tensor))
    return pack


def read_npz(
    path: str, check: Callable[[str, tuple[int, ...], Any], None], what: str
) -> dict[str, Any]:
    """The arrays of the ``.npz`` file ``path`` (no pickles), ``check(key, shape, dtype)``
    called on each member's header before its data is read (so that it can refuse a member
    before memory is taken for it).

    Raises:
        CliError: ``cannot read <what> '<path>': ...`` for a file that cannot be read, is not a
            regular file (a device or pipe) or is not an ``.npz`` file of ``.npy`` members.
        HipdnnError: what ``check`` raises.
    """
    arrays: dict[str, Any] = {}
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a device or pipe: no end to read to
            raise CliError(f"cannot read {what} '{safe_text(path)}': not a regular file")
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                key = info.filename.removesuffix(".npy")
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read_header(member)
                    check(key, shape, dtype)
                with archive.open(info) as member:
                    arrays[key] = np.lib.format.read_array(member, allow_pickle=False)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise CliError(f"cannot read {what} '{safe_text(path)}': {exc}") from None
    return arrays


def load_npz(path: str, graph: Graph) -> dict[str, Any]:
    """The arrays of the ``.npz`` file ``path`` (no pickles), each member's key, dims and type
    checked against the graph's runtime inputs before its data is read.

    Raises:
        CliError: the file cannot be read or is not an ``.npz`` file of ``.npy`` members.
        HipdnnError: as :func:`inputs_from`, for the first member that does not fit.
    """
    keys = _keys(runtime_inputs(graph))

    def check(key: str, shape: tuple[int, ...], dtype: Any) -> None:
        _check_array(_tensor_for(key, keys), key, shape, dtype)

    return read_npz(path, check, "inputs from")


def save_npz(path: str, outputs: Mapping[str, Any]) -> None:
    """Write ``outputs`` (key -> array) to the ``.npz`` file ``path``, ml_dtypes arrays as
    float32.

    Raises:
        CliError: the file cannot be written.
    """
    arrays = {k: a.astype(np.float32) if a.dtype.kind == "V" else a for k, a in outputs.items()}
    try:
        with open(path, "wb") as file:
            np.savez(file, **arrays)
    except OSError as exc:
        raise CliError(f"cannot write '{safe_text(path)}': {exc.strerror or exc}") from None
