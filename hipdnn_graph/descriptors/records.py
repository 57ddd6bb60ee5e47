"""The serialized-graph record: one pydantic model for both wire formats.

A :class:`GraphRecord` holds what hipDNN's serialized graph holds (``graph.fbs``): graph name and
data types, every tensor once (:class:`TensorRecord`), and the nodes in topological order
(:class:`NodeRecord`), which refer to tensors by uid only. JSON (:mod:`.codec`) writes enum fields
by their hipDNN names (``"BFLOAT16"``, ``"BOTTOM_RIGHT"``); FlatBuffers writes their integer values.

Record-level rules (:func:`check_graph_record`, INVALID_VALUE, first failure wins) hold for every
record, however it was made; the limits are module constants:

* at most :data:`MAX_TENSORS` tensors and :data:`MAX_NODES` nodes, names at most
  :data:`MAX_NAME_LENGTH` characters;
* a tensor has as many strides as dims, rank at most :data:`MAX_RANK` (cuDNN's ``CUDNN_DIM_MAX``),
  every dim in ``[1, MAX_DIM]``, every stride in ``[0, MAX_STRIDE]``, a volume at most
  :data:`MAX_VOLUME` and an alignment >= 1 (empty dims, meaning "not inferred yet", are allowed);
* tensor uids are unique (``Duplicate tensor UIDs found in the graph: 1, 2``) and every uid a node
  names is a tensor of the graph;
* integers fit in int64; ``format_version`` is :data:`FORMAT_VERSION` (otherwise
  UNSUPPORTED_GRAPH_FORMAT).

Constructing a record with a wrong field type raises :class:`~hipdnn_graph.errors.HipdnnError`
(INVALID_VALUE), never pydantic's ``ValidationError``.

Example:
    >>> from hipdnn_graph.types import DataType
    >>> t = TensorRecord(uid=1, name="Q", data_type=DataType.HALF, dims=[1, 2, 4, 8],
    ...                  strides=[64, 32, 8, 1])
    >>> t.model_dump_json().split(",")[2]
    '"data_type":"HALF"'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic._internal._model_construction import ModelMetaclass

from ..errors import HipdnnError
from ..types import DataType, DiagonalAlignment, ErrorCode
from .record_checks import (
    FORMAT_VERSION,
    MAX_DIM,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_RANK,
    MAX_STRIDE,
    MAX_TENSORS,
    MAX_VOLUME,
    _invalid,
    check_graph_record,
    construct_record,
)

__all__ = [
    "FORMAT_VERSION",
    "MAX_DIM",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_RANK",
    "MAX_STRIDE",
    "MAX_TENSORS",
    "MAX_VOLUME",
    "RECORD_FIELDS",
    "GraphRecord",
    "NodeRecord",
    "SdpaBwdRecord",
    "SdpaFwdRecord",
    "TensorRecord",
    "check_graph_record",
    "construct_record",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
Int64 = Annotated[int, Field(ge=_INT64_MIN, le=_INT64_MAX)]


def _utf8(text: str) -> str:
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ValueError("names must be encodable as UTF-8") from None
    return text


#: A graph, node or tensor name: at most MAX_NAME_LENGTH characters, UTF-8 encodable.
Name = Annotated[str, Field(max_length=MAX_NAME_LENGTH), AfterValidator(_utf8)]


def _name_parser(enum_cls: Any) -> Any:
    """Validator: a member, or its name (JSON), or its value (Python only)."""
    names = {m.name: m for m in enum_cls}
    values = {m.value: m for m in enum_cls}

    def parse(value: Any, info: ValidationInfo) -> Any:
        if type(value) is enum_cls:
            return value
        if isinstance(value, str):
            member = names.get(value)
            if member is not None:
                return member
        elif info.mode == "python" and type(value) is int and value in values:
            return values[value]
        raise ValueError(f"unknown {enum_cls.__name__} {value!r}")

    return parse


def _name_schema(enum_cls: Any) -> dict[str, Any]:
    return {"type": "string", "enum": [m.name for m in enum_cls], "title": enum_cls.__name__}


def _name_writer(enum_cls: Any) -> Any:
    """Serializer: a member's name (also for a plain int that is a member's value)."""

    def write(member: Any) -> str:
        return str(member.name if type(member) is enum_cls else enum_cls(member).name)

    return write


#: A DataType field that JSON writes and reads by name ("BFLOAT16").
DataTypeName = Annotated[
    DataType,
    PlainValidator(_name_parser(DataType)),
    PlainSerializer(_name_writer(DataType), return_type=str, when_used="json"),
    WithJsonSchema(_name_schema(DataType)),
]
#: A DiagonalAlignment field that JSON writes and reads by name ("BOTTOM_RIGHT").
AlignmentName = Annotated[
    DiagonalAlignment,
    PlainValidator(_name_parser(DiagonalAlignment)),
    PlainSerializer(_name_writer(DiagonalAlignment), return_type=str, when_used="json"),
    WithJsonSchema(_name_schema(DiagonalAlignment)),
]


class _RecordMeta(ModelMetaclass):
    """Turns pydantic's ``ValidationError`` from ``Record(...)`` into INVALID_VALUE.

    Done in the metaclass rather than in ``__init__``: an ``__init__`` override would make pydantic
    call Python code for every nested record it validates.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as exc:
            raise _invalid(describe_validation_error(exc)) from None


class _Record(BaseModel, metaclass=_RecordMeta):
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, ser_json_inf_nan="constants"
    )


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming the first failing field of a pydantic ``ValidationError``.

    Args:
        exc: The error pydantic raised.

    Returns:
        ``"Invalid graph record at <path>: <pydantic message>"``.
    """
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"Invalid graph record at {where}: {first['msg']}"


class TensorRecord(_Record):
    """One tensor, stored once per graph and referred to by ``uid``.

    Attributes:
        uid: Unique id within the graph.
        name: The tensor's name ("" when unnamed).
        data_type: Element type (JSON: its name).
        dims: Dimensions; empty while not inferred.
        strides: One stride per dim.
        is_virtual: Intermediate tensor (not in the variant pack).
        is_pass_by_value: The runtime pass-by-value flag.
        value: The compile-time scalar, if any (a pass-by-value constant).
        alignment: Required byte alignment of the buffer.
    """

    uid: Int64
    name: Name = ""
    data_type: DataTypeName = DataType.NOT_SET
    dims: list[Int64] = []
    strides: list[Int64] = []
    is_virtual: bool = False
    is_pass_by_value: bool = False
    value: bool | Int64 | float | None = None
    alignment: Int64 = 16


class _SdpaRecord(_Record):
    """Behavior shared by both SDPA records (the fields are declared in each, so that the
    canonical JSON lists them in a readable order: tag, uids, flags, scalars)."""

    #: Names of the fields holding tensor uids: always set, then optional.
    REQUIRED_UIDS: ClassVar[tuple[str, ...]] = ()
    OPTIONAL_UIDS: ClassVar[tuple[str, ...]] = ()

    def tensor_uids(self) -> Iterable[tuple[str, int]]:
        """Yield ``(slot, uid)`` for every tensor slot that is set, required slots first."""
        d = self.__dict__
        for slot in self.REQUIRED_UIDS:
            yield slot, d[slot]
        for slot in self.OPTIONAL_UIDS:
            uid = d[slot]
            if uid is not None:
                yield slot, uid


class SdpaBwdRecord(_SdpaRecord):
    """SDPA-backward attributes (hipDNN's ``SdpaBackwardAttributes`` table).

    Required uids: ``q k v o do stats dq dk dv``; optional uids (None when unset): ``attn_scale
    bias seq_len_q seq_len_kv seed offset dropout_mask dropout_scale dropout_scale_inv dbias``;
    the four mask flags; optional ``dropout_probability``, ``attn_scale_value``, ``left_bound``,
    ``right_bound``; ``diagonal_alignment`` (JSON: its name).
    """

    type: Literal["SDPA_BWD"] = "SDPA_BWD"
    q: Int64
    k: Int64
    v: Int64
    o: Int64
    do: Int64
    stats: Int64
    dq: Int64
    dk: Int64
    dv: Int64
    attn_scale: Int64 | None = None
    bias: Int64 | None = None
    seq_len_q: Int64 | None = None
    seq_len_kv: Int64 | None = None
    seed: Int64 | None = None
    offset: Int64 | None = None
    dropout_mask: Int64 | None = None
    dropout_scale: Int64 | None = None
    dropout_scale_inv: Int64 | None = None
    dbias: Int64 | None = None
    alibi_mask: bool = False
    padding_mask: bool = False
    causal_mask: bool = False
    causal_mask_bottom_right: bool = False
    dropout_probability: float | None = None
    attn_scale_value: float | None = None
    left_bound: Int64 | None = None
    right_bound: Int64 | None = None
    diagonal_alignment: AlignmentName = DiagonalAlignment.TOP_LEFT

    REQUIRED_UIDS: ClassVar[tuple[str, ...]] = (
        "q", "k", "v", "o", "do", "stats", "dq", "dk", "dv"
    )  # fmt: skip
    OPTIONAL_UIDS: ClassVar[tuple[str, ...]] = (
        "attn_scale", "bias", "seq_len_q", "seq_len_kv", "seed", "offset", "dropout_mask",
        "dropout_scale", "dropout_scale_inv", "dbias",
    )  # fmt: skip


class SdpaFwdRecord(_SdpaRecord):
    """SDPA-forward attributes (hipDNN's ``SdpaAttributes`` table, the modeled subset).

    Required uids: ``q k v o``; optional uids: ``stats attn_scale bias seq_len_q seq_len_kv seed
    offset dropout_mask dropout_scale``; ``generate_stats`` (None when unset); the flags, optional
    scalars and ``diagonal_alignment`` as for :class:`SdpaBwdRecord`.
    """

    type: Literal["SDPA_FWD"] = "SDPA_FWD"
    q: Int64
    k: Int64
    v: Int64
    o: Int64
    stats: Int64 | None = None
    attn_scale: Int64 | None = None
    bias: Int64 | None = None
    seq_len_q: Int64 | None = None
    seq_len_kv: Int64 | None = None
    seed: Int64 | None = None
    offset: Int64 | None = None
    dropout_mask: Int64 | None = None
    dropout_scale: Int64 | None = None
    generate_stats: bool | None = None
    alibi_mask: bool = False
    padding_mask: bool = False
    causal_mask: bool = False
    causal_mask_bottom_right: bool = False
    dropout_probability: float | None = None
    attn_scale_value: float | None = None
    left_bound: Int64 | None = None
    right_bound: Int64 | None = None
    diagonal_alignment: AlignmentName = DiagonalAlignment.TOP_LEFT

    REQUIRED_UIDS: ClassVar[tuple[str, ...]] = ("q", "k", "v", "o")
    OPTIONAL_UIDS: ClassVar[tuple[str, ...]] = (
        "stats", "attn_scale", "bias", "seq_len_q", "seq_len_kv", "seed", "offset",
        "dropout_mask", "dropout_scale",
    )  # fmt: skip


class NodeRecord(_Record):
    """One node: its name, compute type and attributes (tagged by ``attributes.type``)."""

    name: Name = ""
    compute_data_type: DataTypeName = DataType.NOT_SET
    attributes: Annotated[SdpaBwdRecord | SdpaFwdRecord, Field(discriminator="type")]


class GraphRecord(_Record):
    """A whole serialized graph.

    Attributes:
        format_version: :data:`FORMAT_VERSION`.
        name: The graph's name.
        compute_data_type: Graph compute type (JSON: its name); likewise the next two.
        intermediate_data_type: Type of virtual tensors.
        io_data_type: Type of graph inputs and outputs.
        preferred_engine_id: Engine to prefer when planning, if any.
        tensors: Every tensor of the graph, once.
        nodes: The nodes, topologically sorted.
    """

    format_version: int = Field(default=FORMAT_VERSION, json_schema_extra={"const": FORMAT_VERSION})
    name: Name = ""
    compute_data_type: DataTypeName = DataType.NOT_SET
    intermediate_data_type: DataTypeName = DataType.NOT_SET
    io_data_type: DataTypeName = DataType.NOT_SET
    preferred_engine_id: Int64 | None = None
    tensors: list[TensorRecord] = []
    nodes: list[NodeRecord] = []

    @model_validator(mode="before")
    @classmethod
    def _versioned(cls, data: Any, info: ValidationInfo) -> Any:
        if info.mode == "json" and (not isinstance(data, dict) or "format_version" not in data):
            raise HipdnnError(
                ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
                "Graph JSON must be an object with a format_version",
            )
        return data

    @field_validator("format_version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if version != FORMAT_VERSION:
            raise HipdnnError(
                ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
                f"Unsupported graph format version {version} (this library reads {FORMAT_VERSION})",
            )
        return version

    @model_validator(mode="after")
    def _graph_rules(self) -> GraphRecord:
        check_graph_record(self)
        return self


#: Every record class's field names (a record built without validation sets them all).
RECORD_FIELDS: dict[type[BaseModel], frozenset[str]] = {
    cls: frozenset(cls.model_fields)
    for cls in (GraphRecord, NodeRecord, SdpaBwdRecord, SdpaFwdRecord, TensorRecord)
}
