"""The limits and content rules every graph on hipDNN's wire keeps, whoever wrote it, and the
errors the wire codecs raise.

:func:`check_wire_graph` runs on every decoded graph and on every graph before it is written:
at most :data:`MAX_TENSORS` tensors and :data:`MAX_NODES` nodes, names of at most
:data:`MAX_NAME_LENGTH` characters, tensors within :data:`MAX_RANK`, :data:`MAX_DIM`,
:data:`MAX_STRIDE` and :data:`MAX_VOLUME`; readers take at most :data:`MAX_INPUT_BYTES`, and
say when the input is UTF-16 or UTF-32 text (:func:`wide_text_encoding`).

Example:
    >>> MAX_RANK, unsupported("no").code.name
    (8, 'UNSUPPORTED_GRAPH_FORMAT')
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_text
from ..types import ErrorCode

if TYPE_CHECKING:
    from .wire_model import WireGraph

__all__ = [
    "FLOAT32_MAX",
    "MAX_DIM",
    "MAX_INPUT_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_RANK",
    "MAX_STRIDE",
    "MAX_TENSORS",
    "MAX_VOLUME",
    "check_node_names",
    "check_wire_graph",
    "invalid",
    "unsupported",
    "wide_text_encoding",
    "wide_text_error",
]

#: Largest input either decoder accepts, in bytes (characters for ``str`` JSON).
MAX_INPUT_BYTES = 64 * 2**20
#: Largest tensor rank (cuDNN's CUDNN_DIM_MAX).
MAX_RANK = 8
#: Largest single dimension.
MAX_DIM = 2**40
#: Largest stride.
MAX_STRIDE = 2**62
#: Largest tensor volume (product of dims).
MAX_VOLUME = 2**62
#: Most tensors in one graph.
MAX_TENSORS = 65_536
#: Most nodes in one graph.
MAX_NODES = 65_536
#: Longest graph, node or tensor name, in characters.
MAX_NAME_LENGTH = 4096
#: Largest finite binary32 value: the bound of a ``float`` field of hipDNN's tables and of a
#: FLOAT constant.
FLOAT32_MAX = 3.4028234663852886e38


#: the wider text encodings: (name, codec, byte-order mark, bytes per character)
_WIDE_TEXT = (
    ("UTF-32", "utf-32-le", b"\xff\xfe\x00\x00", 4),
    ("UTF-32", "utf-32-be", b"\x00\x00\xfe\xff", 4),
    ("UTF-16", "utf-16-le", b"\xff\xfe", 2),
    ("UTF-16", "utf-16-be", b"\xfe\xff", 2),
)
_JSON_HEAD = frozenset("\t\n\r" + "".join(map(chr, range(32, 127))))


def wide_text_encoding(data: bytes) -> str | None:
    """``"UTF-16"`` or ``"UTF-32"`` when ``data`` is JSON-looking text in that encoding (with or
    without a byte-order mark: its first characters are printable ASCII, the first one that is
    not white space a ``{`` or ``[``), else None. No binary graph looks like that: its first
    bytes would all have to be such characters interleaved with NUL bytes.

    hipDNN's JSON is UTF-8; a file saved as UTF-16 (as some Windows editors do) is neither it
    nor a binary graph, and the readers say so.

    Example:
        >>> wide_text_encoding('{"name": "g"}'.encode("utf-16")), wide_text_encoding(b"{}")
        ('UTF-16', None)
    """
    for name, codec, mark, width in _WIDE_TEXT:
        body = data.removeprefix(mark)
        head = body[: 16 * width]
        if len(head) < 2 * width or b"\0" not in head:
            continue
        try:
            text = head[: len(head) - len(head) % width].decode(codec)
        except UnicodeDecodeError:
            continue
        if set(text) <= _JSON_HEAD and text.lstrip()[:1] in ("{", "["):
            return name
    return None


def wide_text_error(encoding: str) -> HipdnnError:
    """The UNSUPPORTED_GRAPH_FORMAT error for input that is text in ``encoding``."""
    return unsupported(
        f"The input is {encoding} text, not a hipDNN graph: hipDNN's JSON is UTF-8 "
        "(save the file as UTF-8)"
    )


def unsupported(message: str) -> HipdnnError:
    """An ``UNSUPPORTED_GRAPH_FORMAT`` error (malformed input, or content we cannot carry)."""
    return HipdnnError(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, message)


def invalid(message: str) -> HipdnnError:
    """An ``INVALID_VALUE`` error (content that breaks a rule of the wire)."""
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def _check_name(kind: str, name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise invalid(f"{kind} name is longer than {MAX_NAME_LENGTH} characters")
    if not name.isascii():
        as_text(name, f"{kind} name")  # UTF-8 must encode it (a name assigned past the setters)


def _explain_tensor(t: TensorAttributes) -> None:
    """Raise for the first broken tensor rule (the slow path of :func:`check_wire_graph`)."""
    name, dims, strides = t.name, t.dim, t.stride
    _check_name("Tensor", name)
    if len(dims) > MAX_RANK:
        raise invalid(f"Tensor {name} has rank {len(dims)}, more than {MAX_RANK}")
    if len(dims) != len(strides):
        raise invalid(f"Tensor {name} dims and strides have different sizes")
    if any(dim < 1 for dim in dims):
        raise invalid(f"Tensor {name} must have only positive dimensions")
    if any(dim > MAX_DIM for dim in dims):
        raise invalid(f"Tensor {name} has a dimension larger than {MAX_DIM}")
    if prod(dims) > MAX_VOLUME:
        raise invalid(f"Tensor {name} has more than {MAX_VOLUME} elements")
    if any(not -MAX_STRIDE <= stride <= MAX_STRIDE for stride in strides):
        raise invalid(f"Tensor {name} strides must be in [-{MAX_STRIDE}, {MAX_STRIDE}]")
    raise invalid(f"Tensor {name} alignment must be >= 1")


def check_wire_graph(graph: WireGraph) -> None:
    """The content rules every graph on the wire keeps, whoever wrote it.

    At most :data:`MAX_TENSORS` tensors and :data:`MAX_NODES` nodes; names at most
    :data:`MAX_NAME_LENGTH` characters; a tensor has as many strides as dims, rank at most
    :data:`MAX_RANK`, dims in ``[1, MAX_DIM]``, strides in ``[-MAX_STRIDE, MAX_STRIDE]`` (hipDNN's
    strides are int64 and its rules leave their sign free; a negative stride walks its dimension
    backwards, as the engines here read it), volume at most
    :data:`MAX_VOLUME`, alignment >= 1 (empty dims mean "not inferred yet"); uids are unique.

    Raises:
        HipdnnError: INVALID_VALUE for the first broken rule.
    """
    tensors = graph.tensors
    if len(tensors) > MAX_TENSORS:
        raise invalid(f"Graph has {len(tensors)} tensors, more than {MAX_TENSORS}")
    if len(graph.nodes) > MAX_NODES:
        raise invalid(f"Graph has {len(graph.nodes)} nodes, more than {MAX_NODES}")
    _check_name("Graph", graph.name)
    uids: list[int] = []
    all_dims: list[int] = []
    all_strides: list[int] = []
    for t in tensors:
        td = t.__dict__
        dims, strides = td["dim"], td["stride"]
        if (
            len(dims) != len(strides)
            or len(dims) > MAX_RANK
            or len(td["name"]) > MAX_NAME_LENGTH
            or td["alignment"] < 1
            or prod(dims) > MAX_VOLUME
        ):
            _explain_tensor(t)
        if not td["name"].isascii():
            _check_name("Tensor", td["name"])
        all_dims += dims
        all_strides += strides
        uids.append(td["uid"])
    if all_dims and (
        min(all_dims) < 1
        or max(all_dims) > MAX_DIM
        or min(all_strides) < -MAX_STRIDE
        or max(all_strides) > MAX_STRIDE
    ):
        for t in tensors:
            if t.dim and (min(t.dim) < 1 or max(t.dim) > MAX_DIM):
                _explain_tensor(t)
            if t.stride and (min(t.stride) < -MAX_STRIDE or max(t.stride) > MAX_STRIDE):
                _explain_tensor(t)
    if len(set(uids)) != len(uids):
        seen: set[int] = set()
        duplicates = sorted({u for u in uids if u in seen or seen.add(u)})  # type: ignore[func-returns-value]
        listed = ", ".join(str(u) for u in duplicates)
        raise invalid(f"Duplicate tensor UIDs found in the graph: {listed}")
    check_node_names(graph)


def check_node_names(graph: WireGraph) -> None:
    """Node names are at most :data:`MAX_NAME_LENGTH` characters (INVALID_VALUE otherwise)."""
    for _, attributes in graph.nodes:
        _check_name("Node", attributes.name)
