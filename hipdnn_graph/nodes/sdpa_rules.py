"""The validation rules of the SDPA nodes, one small function each.

Each node lists its rules in hipDNN's order (see ``SdpaBwdNode.rules`` and
``SdpaFwdNode.rules``); the first rule that fails raises. Every rule receives the node's
attributes and the node label used in messages (``"SdpaBwdNode"`` or ``"SdpaFwdNode"``).
The checks this project adds (``SdpaBwdNode.checks``, ``SdpaFwdNode.checks``) have the same
form and run at the end of post-validation, after every rule of hipDNN's, so that hipDNN's
first failing rule stays the first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from itertools import chain
from typing import TYPE_CHECKING, Any

from ..attributes.base import SdpaCommonAttributes
from ..errors import HipdnnError
from ..tensor import TensorAttributes, context_data_type, generate_strides
from ..types import DataType, ErrorCode

if TYPE_CHECKING:
    from ..attributes.graph_attributes import GraphAttributes

Rule = Callable[[Any, str], None]

__all__ = ["INPUT_RULES", "Rule", "required_slots"]


def _fail(message: str, code: ErrorCode = ErrorCode.INVALID_VALUE) -> None:
    raise HipdnnError(code, message)


def _dims(tensor: TensorAttributes | None) -> list[int]:
    assert tensor is not None  # guaranteed by the required-slot rule that runs first
    return tensor.dim


def unsupported_usage(a: SdpaCommonAttributes, node: str) -> None:
    """A cuDNN-only setter was called: report hipDNN's recorded reason."""
    if a.has_unsupported_usage():
        _fail(a.get_unsupported_reason())


def required_slots(inputs: Sequence[str], outputs: Sequence[str]) -> Rule:
    """A rule checking that the named slots are set, inputs first, in the given order."""

    @cache
    def members(attributes_class: type[Any]) -> tuple[frozenset[Any], frozenset[Any]]:
        return (
            frozenset(attributes_class._IN[slot] for slot in inputs),
            frozenset(attributes_class._OUT[slot] for slot in outputs),
        )

    def rule(a: SdpaCommonAttributes, node: str) -> None:
        needed_inputs, needed_outputs = members(type(a))
        if a.inputs.keys() >= needed_inputs and a.outputs.keys() >= needed_outputs:
            return  # every slot is set (the common case, checked without the loops below)
        given, names = a.inputs, a._IN
        for slot in inputs:
            if names[slot] not in given:
                _fail(f"{node} missing {slot} input", ErrorCode.ATTRIBUTE_NOT_SET)
        given, names = a.outputs, a._OUT
        for slot in outputs:
            if names[slot] not in given:
                _fail(f"{node} missing {slot} output", ErrorCode.ATTRIBUTE_NOT_SET)

    rule.__doc__ = f"Required slots: inputs {list(inputs)}, outputs {list(outputs)}."
    return rule


def qkv_rank4(a: SdpaCommonAttributes, node: str) -> None:
    """Q, K and V must be rank-4."""
    q, k, v = _dims(a.get_q()), _dims(a.get_k()), _dims(a.get_v())
    if len(q) == len(k) == len(v) == 4:
        return  # the common case, without building the loop below
    for label, tensor in (
        ("Query tensor Q", a.get_q()),
        ("Key tensor K", a.get_k()),
        ("Value tensor V", a.get_v()),
    ):
        rank = len(_dims(tensor))
        if rank != 4:
            _fail(f"{node}: {label} must be rank-4, got rank={rank}")


def batch_match(a: SdpaCommonAttributes, node: str) -> None:
    """K and V share Q's batch size."""
    b = _dims(a.get_q())[0]
    k, v = a.get_k(), a.get_v()
    if b == _dims(k)[0] == _dims(v)[0]:
        return
    for label, tensor in (("K", k), ("V", v)):
        other = _dims(tensor)[0]
        if other != b:
            _fail(f"{node}: batch size mismatch between Q and {label}: {b} vs {other}")


def head_dim_match(a: SdpaCommonAttributes, node: str) -> None:
    """Q and K share the head dim (V's may differ)."""
    d, dk = _dims(a.get_q())[3], _dims(a.get_k())[3]
    if d != dk:
        _fail(f"{node}: head_dim mismatch between Q and K: {d} vs {dk}")


def seq_kv_match(a: SdpaCommonAttributes, node: str) -> None:
    """K and V share the key sequence length."""
    skv, skv_v = _dims(a.get_k())[2], _dims(a.get_v())[2]
    if skv != skv_v:
        _fail(f"{node}: seq_kv mismatch between K and V: {skv} vs {skv_v}")


def gqa_heads(a: SdpaCommonAttributes, node: str) -> None:
    """K and V head counts are positive and divide Q's (GQA/MQA); they are independent."""
    h = _dims(a.get_q())[1]
    k, v = a.get_k(), a.get_v()
    hk, hv = _dims(k)[1], _dims(v)[1]
    if hk > 0 and hv > 0 and h % hk == 0 and h % hv == 0:
        return
    for label, tensor in (("k", k), ("v", v)):
        hx = _dims(tensor)[1]
        if hx <= 0:
            _fail(f"{node}: num_heads_{label} must be positive, got {hx}")
        if h % hx != 0:
            _fail(
                f"{node}: num_heads must be divisible by num_heads_{label} for GQA/MQA. "
                f"num_heads={h}, num_heads_{label}={hx}"
            )


def do_matches_o(a: Any, node: str) -> None:
    """When O and dO both have dims, dO is rank-4 and matches O."""
    o_dims, do_dims = _dims(a.get_o()), _dims(a.get_do())
    if not o_dims or not do_dims or (do_dims == o_dims and len(do_dims) == 4):
        return
    if len(do_dims) != 4:
        _fail(f"{node}: dO must be rank-4, got rank={len(do_dims)}")
    for i, what in enumerate(("batch", "num_heads", "seq_q", "head_dim")):
        if i >= len(o_dims) or do_dims[i] != o_dims[i]:
            _fail(f"{node}: dO {what} mismatch with O")


def bias_shape(a: SdpaCommonAttributes, node: str) -> None:
    """The bias (ATTN_MASK) has rank ≤ 4 and its last two dims broadcast to [Sq, Skv]."""
    bias = a.get_bias()
    if bias is None:
        return
    dims = bias.dim
    if len(dims) > 4:
        _fail(f"{node}: ATTN_MASK rank must be <= 4, got rank={len(dims)}")
    if not dims:
        _fail(f"{node}: ATTN_MASK dims are not set (rank 0); give the bias a shape")
    sq, skv = _dims(a.get_q())[2], _dims(a.get_k())[2]
    if dims[-1] not in (skv, 1):
        _fail(f"{node}: ATTN_MASK last dim must equal seq_kv ({skv}) or 1, got {dims[-1]}")
    if len(dims) >= 2 and dims[-2] not in (sq, 1):
        _fail(f"{node}: ATTN_MASK second-to-last dim must equal seq_q ({sq}) or 1, got {dims[-2]}")


def dropout_mask_shape(a: SdpaCommonAttributes, node: str) -> None:
    """The dropout mask is [B or 1, H or 1, Sq, Skv]."""
    mask = a.get_dropout_mask()
    if mask is None:
        return
    dims = mask.dim
    if len(dims) != 4:
        _fail(f"{node}: DROPOUT_MASK must be rank-4, got rank={len(dims)}")
    b, h, sq, _ = _dims(a.get_q())
    skv = _dims(a.get_k())[2]
    if dims[0] not in (b, 1):
        _fail(f"{node}: DROPOUT_MASK dim[0] must equal batch ({b}) or 1, got {dims[0]}")
    if dims[1] not in (h, 1):
        _fail(f"{node}: DROPOUT_MASK dim[1] must equal num_heads ({h}) or 1, got {dims[1]}")
    if dims[2] != sq:
        _fail(f"{node}: DROPOUT_MASK dim[2] must equal seq_q ({sq}), got {dims[2]}")
    if dims[3] != skv:
        _fail(f"{node}: DROPOUT_MASK dim[3] must equal seq_kv ({skv}), got {dims[3]}")


def padding_tensors(a: SdpaCommonAttributes, node: str) -> None:
    """With padding_mask, seq_len_q and seq_len_kv are [B, 1, 1, 1] INT32 tensors."""
    if not a.padding_mask:
        return
    pairs = (("seq_len_q", a.get_seq_len_q()), ("seq_len_kv", a.get_seq_len_kv()))
    for label, tensor in pairs:
        if tensor is None:
            _fail(
                f"{node}: padding_mask=true requires {label} tensor to be set",
                ErrorCode.ATTRIBUTE_NOT_SET,
            )
    b = _dims(a.get_q())[0]
    for label, tensor in pairs:
        dims = _dims(tensor)
        if len(dims) != 4:
            _fail(f"{node}: {label} must be rank-4, got rank={len(dims)}")
        if dims[0] != b:
            _fail(f"{node}: {label} dim[0] must equal batch ({b}), got {dims[0]}")
        for i in (1, 2, 3):
            if dims[i] != 1:
                _fail(f"{node}: {label} dim[{i}] must be 1, got {dims[i]}")
        assert tensor is not None
        if tensor.data_type != DataType.INT32:
            _fail(f"{node}: {label} must have INT32 data type")


def scale_rules(a: SdpaCommonAttributes, node: str) -> None:
    """A scale tensor excludes a scale value, and must be a pass-by-value scalar."""
    scale = a.get_attn_scale()
    if scale is not None and a.attn_scale_value is not None:
        _fail(f"{node}: attn_scale tensor and attn_scale_value cannot both be set")
    if scale is None:
        return
    label = scale.name or "SCALE tensor"
    if not scale.dim:
        _fail(f"{label} dimensions are not set", ErrorCode.ATTRIBUTE_NOT_SET)
    volume = scale.get_volume()
    if volume != 1:
        _fail(f"{label} must be a scalar (single element), but has {volume} elements")
    if not scale.get_is_pass_by_value():
        _fail(f"{label} must be a pass-by-value tensor")


def output_o_dims(a: Any, node: str) -> None:
    """When O has dims they are [B, H, Sq, Dv]."""
    o_dims = _dims(a.get_o())
    if not o_dims:
        return
    if len(o_dims) != 4:
        _fail(f"{node}: Output O must be rank-4, got rank={len(o_dims)}")
    q, dv = _dims(a.get_q()), _dims(a.get_v())[3]
    for i, what in enumerate(("batch", "num_heads", "seq_q")):
        if o_dims[i] != q[i]:
            _fail(f"{node}: Output O {what} mismatch: expected {q[i]} got {o_dims[i]}")
    if o_dims[3] != dv:
        _fail(f"{node}: Output O head_dim must match V head_dim: expected {dv} got {o_dims[3]}")


# ----- this project's checks, run after hipDNN's rules (``SdpaNode.checks``) -----

#: the slots that take a scalar: a pass-by-value value, or a one-element tensor
SCALAR_SLOTS = ("Attn_scale", "Dropout_scale", "Dropout_scale_inv", "Seed", "Offset")


@cache
def _scalar_members(attributes_class: type[Any]) -> frozenset[Any]:
    return frozenset(m for name, m in attributes_class._IN.items() if name in SCALAR_SLOTS)


def _nothing_to_check(a: SdpaCommonAttributes) -> bool:
    """No scalar slot is set and no tensor is pass-by-value (the common case, checked fast)."""
    fields = a.__dict__  # the field dicts are read once: this runs for every node
    inputs, outputs = fields["inputs"], fields["outputs"]
    if not _scalar_members(type(a)).isdisjoint(inputs):
        return False
    for tensor in chain(inputs.values(), outputs.values()):
        values = tensor.__dict__
        if values["value"] is not None or values["is_pass_by_value"]:
            return False
    return True


def scalar_slots(a: SdpaCommonAttributes, node: str) -> None:
    """Only the scalar slots take pass-by-value tensors (never an output), and each of their
    tensors holds one element."""
    if _nothing_to_check(a):
        return
    for slot, tensor in (*sorted(a.inputs.items()), *sorted(a.outputs.items())):
        if slot.name in SCALAR_SLOTS:
            volume = tensor.get_volume()
            if volume != 1:
                _fail(
                    f"{node}: {slot.name} must be a scalar (single element), "
                    f"but has {volume} elements"
                )
        elif tensor.get_is_pass_by_value():
            what = "holds a constant value" if tensor.value is not None else "is pass-by-value"
            _fail(
                f"{node}: {slot.name} tensor {tensor.name} {what}; only the scalar slots "
                "(Attn_scale, Dropout_scale, Dropout_scale_inv, Seed, Offset) take "
                "pass-by-value tensors"
            )


def backward_input_shapes(a: Any, node: str) -> None:
    """O and dO are [B, H, Sq, Dv] (Q's batch, heads and sequence length, V's head dim) and
    Stats is [B, H, Sq, 1], or [B, H, Sq]: the same elements, as hipDNN's own
    ``sample_sdpa_backward.json`` gives them (hipDNN's ``SdpaBwdNode`` checks no Stats shape)."""
    b, h, sq, _ = _dims(a.get_q())
    expected = [b, h, sq, _dims(a.get_v())[3]]
    check_shape(node, "O", a.get_o(), expected, "[B, H, Sq, Dv]")
    check_shape(node, "dO", a.get_do(), expected, "[B, H, Sq, Dv]")
    stats = a.get_stats()
    if stats is None or stats.dim != [b, h, sq]:
        check_shape(node, "Stats", stats, [b, h, sq, 1], "[B, H, Sq, 1]")


def bias_broadcast(a: SdpaCommonAttributes, node: str) -> None:
    """The bias's leading dims broadcast too: its batch and head dims (counted from the right)
    are B and H, or 1."""
    bias = a.get_bias()
    if bias is None:
        return
    dims = bias.dim
    b, h = _dims(a.get_q())[:2]
    if len(dims) >= 4 and dims[-4] not in (b, 1):
        _fail(f"{node}: ATTN_MASK batch dim must equal batch ({b}) or 1, got {dims[-4]}")
    if len(dims) >= 3 and dims[-3] not in (h, 1):
        _fail(f"{node}: ATTN_MASK num_heads dim must equal num_heads ({h}) or 1, got {dims[-3]}")


#: the slots whose constant multiplies scores or probabilities: finite in float32 like
#: ``attn_scale_value`` (hipDNN stores its scalars as binary32)
_SCALE_SLOTS = ("Attn_scale", "Dropout_scale", "Dropout_scale_inv")
_FLOAT32_MAX = 3.4028234663852886e38


def _fits_float32(value: float) -> bool:
    return math.isfinite(value) and abs(value) <= _FLOAT32_MAX


def finite_scale(a: SdpaCommonAttributes, node: str) -> None:
    """The scales are finite numbers that fit in float32 (hipDNN's type for scalar attributes;
    a larger one overflows float32 compute, and the outputs would be NaN): ``attn_scale_value``,
    and the constant an Attn_scale, Dropout_scale or Dropout_scale_inv tensor holds."""
    value = a.attn_scale_value
    if value is not None and not _fits_float32(value):
        _fail(f"{node}: attn_scale_value must be a finite number that fits in float32, got {value}")
    inputs, names = a.inputs, a._IN
    for slot in _SCALE_SLOTS:
        tensor = inputs.get(names[slot]) if slot in names else None
        if tensor is None or tensor.value is None:
            continue
        held = tensor.value
        if not _fits_float32(float(held)):
            _fail(
                f"{node}: {slot} tensor {tensor.name} holds {held}, not a finite number that "
                "fits in float32"
            )


def dropout_range(a: SdpaCommonAttributes, node: str) -> None:
    """``dropout_probability`` is in [0, 1)."""
    p = a.dropout_probability
    if p is not None and not 0.0 <= p < 1.0:
        _fail(f"{node}: dropout_probability must be in [0, 1), got {p}")


#: The rules above that read nothing of a node but its input tensors (never a flag, a scalar or
#: an output tensor): their answer is the same for every node whose slots hold the same tensors,
#: so ``Graph.validate()`` runs them once per set of input tensors (see :mod:`.input_memo`).
#: ``tests/test_core_validate_scale.py`` checks that each one reads input slots only.
INPUT_RULES: frozenset[Rule] = frozenset(
    {
        qkv_rank4,
        batch_match,
        head_dim_match,
        seq_kv_match,
        gqa_heads,
        do_matches_o,
        bias_shape,
        dropout_mask_shape,
        backward_input_shapes,
        bias_broadcast,
    }
)


# ----- helpers for inference and post-validation -----
@lru_cache(maxsize=1024)
def _packed(dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(generate_strides(dims))


def packed_strides(dims: Sequence[int]) -> list[int]:
    """:func:`~hipdnn_graph.generate_strides`, remembered for the shapes seen last (a graph
    of many nodes has few shapes)."""
    return list(_packed(tuple(dims)))


def infer_like(
    target: TensorAttributes | None, dims: Sequence[int], context: GraphAttributes
) -> None:
    """Give ``target`` what it lacks: the graph's data type (as ``fill_from_context`` does),
    ``dims`` and packed strides, recorded as one change (a fresh output lacks all three)."""
    if target is None:
        return
    current = target.__dict__  # the field values, read once (this runs for every output)
    data_type, dim, stride = current["data_type"], current["dim"], current["stride"]
    if data_type and dim and stride:
        return  # nothing to fill (every output, when validate() runs again)
    fields: dict[str, Any] = {}
    if not data_type:  # NOT_SET is 0
        fields["data_type"] = context_data_type(current["is_virtual"], context)
    if not dim:
        fields["dim"] = dim = list(dims)
    if not stride:
        fields["stride"] = list(_packed(tuple(dim)))  # packed_strides(dim), one call less
    target._set_fields(fields)


def check_output_shape(
    node: str, label: str, tensor: TensorAttributes | None, expected: list[int], source: str
) -> None:
    """Reject an explicit output shape that disagrees with its source, or an overlapping layout."""
    if tensor is None:
        return
    fields = tensor.__dict__  # read once: this runs for every output
    dim = fields["dim"]
    if dim != expected:
        check_shape(node, label, tensor, expected, source)
    if tuple(fields["stride"]) != _packed(tuple(dim)):  # packed (the common case) is fine
        check_layout(node, label, tensor)


def check_shape(
    node: str, label: str, tensor: TensorAttributes | None, expected: list[int], source: str
) -> None:
    """Reject dims that differ from ``expected`` (``source`` names where they come from)."""
    if tensor is not None and tensor.dim != expected:
        _fail(f"{node}: {label} dims {tensor.dim} must match {source} dims {list(expected)}")


def check_layout(node: str, label: str, tensor: TensorAttributes | None) -> None:
    """Reject an output whose strides make distinct elements share memory."""
    if tensor is not None and not is_non_overlapping(tensor.dim, tensor.stride):
        _fail(
            f"{node}: {label} strides {tensor.stride} overlap for dims {tensor.dim}; "
            "an output needs a non-overlapping layout"
        )


def is_non_overlapping(dims: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether distinct indices of a strided tensor address distinct elements."""
    if tuple(strides) == _packed(tuple(dims)):
        return True  # packed row-major, the common case
    pairs = sorted((s, d) for d, s in zip(dims, strides, strict=True) if d != 1)
    span = 1
    for stride, dim in pairs:
        if stride < span:
            return False
        span = stride * dim
    return True
