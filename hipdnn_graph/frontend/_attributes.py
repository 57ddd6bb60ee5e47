"""``SdpaAttributes`` with every member of hipDNN's binding.

The core's :class:`~hipdnn_graph.SdpaAttributes` holds what hipdnn-graph runs. hipDNN's class
also has paged attention, block masks, sink tokens, FP8 scales and statistics outputs, and a few
hints; this subclass stores each of them, so every setter has its getter, and
:meth:`SdpaAttributes.unsupported_reason` names the first one the engines cannot honour.
``Graph.sdpa`` records that reason on the node, so ``validate()`` returns it as an
``INVALID_VALUE`` error, as the core does for its own unsupported setters.

Example:
    >>> from hipdnn_graph.frontend import DataType, SdpaAttributes, Tensor
    >>> table = Tensor.create([1], DataType.INT32)
    >>> a = SdpaAttributes().set_paged_attention_k_table(table)
    >>> a.get_page_table_k() is table, a.unsupported_reason()
    (True, 'SDPA paged attention is unsupported by hipDNN')
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..attributes.checks import enum_member
from ..attributes.sdpa import SdpaAttributes as CoreSdpaAttributes
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_data_type, as_index
from ..types import DataType, ErrorCode
from ._enums import AttentionImplementation

__all__ = ["EXTRA_TENSORS", "SdpaAttributes"]

# hipDNN slot -> (setter suffix, getter suffix, unsupported reason), in hipDNN's slot order.
# The paged-attention and sink-token reasons are the core's own (its setters of those names).
EXTRA_TENSORS: dict[str, tuple[str, str, str]] = {
    "Page_table_K": (
        "paged_attention_k_table",
        "page_table_k",
        "SDPA paged attention is unsupported by hipDNN",
    ),
    "Page_table_V": (
        "paged_attention_v_table",
        "page_table_v",
        "SDPA paged attention is unsupported by hipDNN",
    ),
    "Block_mask": ("block_mask", "block_mask", "SDPA block mask is unsupported by hipdnn-graph"),
    "Descale_Q": ("descale_q", "descale_q", "SDPA FP8 descale_q is unsupported by hipdnn-graph"),
    "Descale_K": ("descale_k", "descale_k", "SDPA FP8 descale_k is unsupported by hipdnn-graph"),
    "Descale_V": ("descale_v", "descale_v", "SDPA FP8 descale_v is unsupported by hipdnn-graph"),
    "Descale_S": ("descale_s", "descale_s", "SDPA FP8 descale_s is unsupported by hipdnn-graph"),
    "Scale_S": ("scale_s", "scale_s", "SDPA FP8 scale_s is unsupported by hipdnn-graph"),
    "Scale_O": ("scale_o", "scale_o", "SDPA FP8 scale_o is unsupported by hipdnn-graph"),
    "SINK_TOKEN": ("sink_token", "sink_token", "SDPA sink token is unsupported by hipDNN"),
    "Max": ("logit_max", "max", "SDPA logit max output is unsupported by hipdnn-graph"),
    "Sum_exp": (
        "score_sum_exp",
        "sum_exp",
        "SDPA score sum-exp output is unsupported by hipdnn-graph",
    ),
    "RNG_DUMP": ("rng_dump", "rng_dump", "SDPA RNG dump is unsupported by hipdnn-graph"),
    "Amax_S": ("amax_s", "amax_s", "SDPA FP8 amax_s output is unsupported by hipdnn-graph"),
    "Amax_O": ("amax_o", "amax_o", "SDPA FP8 amax_o output is unsupported by hipdnn-graph"),
}


class SdpaAttributes(CoreSdpaAttributes):
    """hipDNN's ``SdpaAttributes`` binding: the core's class plus the members listed above.

    Extra members (set → read back):

    - paged attention tables: ``set_paged_attention_k_table`` / ``_v_table`` →
      ``get_page_table_k`` / ``_v``; ``set_paged_attention_max_seq_len_kv`` → ``max_seq_len_kv``;
    - ``set_block_mask``, ``set_sink_token``, ``set_descale_q|k|v|s``, ``set_scale_s|o`` →
      ``get_`` of the same name;
    - statistics outputs ``set_logit_max``, ``set_score_sum_exp``, ``set_rng_dump``,
      ``set_amax_s|o`` → ``get_max``, ``get_sum_exp``, ``get_rng_dump``, ``get_amax_s|o``;
    - ``set_mma_core_mode`` → ``mma_core_mode``; ``set_implementation`` → ``implementation``
      (a hint: any value runs); ``set_unfuse_fma`` → ``unfuse_fma_hint`` (advisory and ignored,
      with a warning, as in hipDNN).
    """

    extra_tensors: dict[str, TensorAttributes] = Field(default_factory=dict)
    max_seq_len_kv: int | None = None
    mma_core_mode: DataType = DataType.NOT_SET
    implementation: AttentionImplementation = AttentionImplementation.AUTO
    unfuse_fma_hint: bool = False

    def _set_extra(self, slot: str, tensor: TensorAttributes | None) -> SdpaAttributes:
        if tensor is None:
            self.extra_tensors.pop(slot, None)
        elif not isinstance(tensor, TensorAttributes):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Slot {slot} expects a Tensor, got {type(tensor).__name__}",
            )
        else:
            self.extra_tensors[slot] = tensor
        return self

    # The core's versions of these four only record "unsupported"; these store the value too.
    def set_paged_attention_k_table(self, value: Any) -> SdpaAttributes:
        return self._set_extra("Page_table_K", value)

    def set_paged_attention_v_table(self, value: Any) -> SdpaAttributes:
        return self._set_extra("Page_table_V", value)

    def set_sink_token(self, value: Any) -> SdpaAttributes:
        return self._set_extra("SINK_TOKEN", value)

    def set_paged_attention_max_seq_len_kv(self, value: int) -> SdpaAttributes:
        self.max_seq_len_kv = as_index(value, "max_seq_len_kv")
        return self

    def set_dropout_probability(self, probability: float) -> SdpaAttributes:
        """Set ``dropout_probability`` alone (the seed and offset slots are left as they are)."""
        return self._set_dropout_probability(probability, self.get_seed(), self.get_offset())

    def set_mma_core_mode(self, data_type: DataType | int) -> SdpaAttributes:
        self.mma_core_mode = as_data_type(data_type)
        return self

    def set_implementation(self, implementation: AttentionImplementation | int) -> SdpaAttributes:
        what = "attention implementation"
        self.implementation = enum_member(AttentionImplementation, implementation, what)
        return self

    def set_unfuse_fma(self, value: bool) -> SdpaAttributes:
        self.unfuse_fma_hint = bool(value)
        return self

    def unsupported_reason(self) -> str:
        """The first member set here that hipdnn-graph's engines cannot honour (``""`` if none):
        the extra tensors in hipDNN's slot order, then ``max_seq_len_kv``, then an
        ``mma_core_mode`` other than NOT_SET."""
        for slot, (_, _, reason) in EXTRA_TENSORS.items():
            if slot in self.extra_tensors:
                return reason
        if self.max_seq_len_kv is not None:
            return EXTRA_TENSORS["Page_table_K"][2]
        if self.mma_core_mode != DataType.NOT_SET:
            return (
                f"SDPA mma_core_mode {self.mma_core_mode.name} is unsupported by hipdnn-graph "
                "(its engines pick their own MMA types)"
            )
        return ""


def _accessors(slot: str) -> tuple[Any, Any]:
    def setter(self: SdpaAttributes, tensor: TensorAttributes | None) -> SdpaAttributes:
        return self._set_extra(slot, tensor)

    def getter(self: SdpaAttributes) -> TensorAttributes | None:
        return self.extra_tensors.get(slot)

    return setter, getter


# set_<x> / get_<y> for every extra slot, generated from the table (the four explicit setters
# above are kept: they replace the core's record-only versions of the same names)
for _slot, (_set, _get, _) in EXTRA_TENSORS.items():
    _setter, _getter = _accessors(_slot)
    _setter.__name__, _getter.__name__ = f"set_{_set}", f"get_{_get}"
    _setter.__doc__ = f"Store the {_slot} tensor (read back with ``get_{_get}``)."
    _getter.__doc__ = f"The {_slot} tensor, or ``None``."
    if f"set_{_set}" not in SdpaAttributes.__dict__:
        setattr(SdpaAttributes, f"set_{_set}", _setter)
    setattr(SdpaAttributes, f"get_{_get}", _getter)
