"""Attributes of the SDPA forward node (hipDNN's ``SdpaAttributes``).

Example:
    >>> from hipdnn_graph import SdpaAttributes
    >>> a = SdpaAttributes().set_name("fwd").set_is_inference(False).set_causal_mask(True)
    >>> a.get_generate_stats(), a.get_causal_mask()
    (True, True)
"""

from __future__ import annotations

from typing import Annotated, Any, overload

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_flag, as_optional_flag, keyword
from ..types import ErrorCode
from .accessors import member, slot
from .node_attributes import InputSlots, OutputSlots
from .sdpa_common import SdpaCommonAttributes

__all__ = ["SdpaAttributes"]


class SdpaAttributes(SdpaCommonAttributes):
    """Configuration of SDPA forward: O (and the softmax Stats) from Q, K, V.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | Q | [B, H, Sq, D] | | O | [B, H, Sq, Dv] |
    | K | [B, Hk, Skv, D] | | Stats | [B, H, Sq, 1] (when generated) |
    | V | [B, Hv, Skv, Dv] | | | |
    | Attn_scale, Bias, SEQ_LEN_Q, SEQ_LEN_KV | optional | | | |
    | Seed, Offset, Dropout_mask, Dropout_scale | optional | | | |
    """

    class InputNames(InputSlots):
        Q = 0
        K = 1
        V = 2
        Attn_scale = 3
        Bias = 4
        SEQ_LEN_Q = 5
        SEQ_LEN_KV = 6
        Seed = 7
        Offset = 8
        Dropout_mask = 9
        Dropout_scale = 10

    class OutputNames(OutputSlots):
        O = 0  # noqa: E741
        Stats = 1

    generate_stats: Annotated[bool | None, keyword(as_optional_flag, "generate_stats")] = None

    set_o, get_o = slot("O")
    set_stats, get_stats = slot("Stats")

    set_generate_stats, get_generate_stats = member(
        "generate_stats",
        as_optional_flag,
        doc="Whether the forward writes Stats (needed by the backward).",
    )

    def set_is_inference(self, value: bool) -> SdpaAttributes:
        """cuDNN spelling: ``set_is_inference(b)`` is ``set_generate_stats(not b)``."""
        return self.set_generate_stats(not as_flag(value, "is_inference"))

    @overload
    def set_dropout(
        self, probability: float, seed: TensorAttributes | int, offset: TensorAttributes | int, /
    ) -> SdpaAttributes: ...

    @overload
    def set_dropout(
        self, mask: TensorAttributes, scale: TensorAttributes | float, /
    ) -> SdpaAttributes: ...

    def set_dropout(self, first: Any, second: Any, third: Any = None, /) -> SdpaAttributes:
        """``set_dropout(p, seed, offset)`` (philox) or ``set_dropout(mask, scale)``."""
        if isinstance(first, TensorAttributes):
            if third is not None:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    "SDPA forward set_dropout(mask, scale) takes two tensors "
                    "(scale_inv is a backward-only input)",
                )
            self.set_dropout_mask(first)
            return self.set_dropout_scale(second)
        return self._set_dropout_probability(first, second, third)

    # ----- cuDNN setters recorded as unsupported (first reason wins; more in the base) -----
    def set_paged_attention_k_table(self, value: Any) -> SdpaAttributes:
        return self._record_unsupported("SDPA paged attention is unsupported by hipDNN")

    def set_paged_attention_v_table(self, value: Any) -> SdpaAttributes:
        return self._record_unsupported("SDPA paged attention is unsupported by hipDNN")

    def set_paged_attention_max_seq_len_kv(self, value: int) -> SdpaAttributes:
        return self._record_unsupported("SDPA paged attention is unsupported by hipDNN")

    def set_sink_token(self, value: Any) -> SdpaAttributes:
        return self._record_unsupported("SDPA sink token is unsupported by hipDNN")
