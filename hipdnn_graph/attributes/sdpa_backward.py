"""Attributes of the SDPA backward node (hipDNN's ``SdpaBackwardAttributes``).

Example:
    >>> from hipdnn_graph import SdpaBackwardAttributes
    >>> a = SdpaBackwardAttributes().set_name("bwd").set_causal_mask(True).set_attn_scale(0.125)
    >>> a.get_attn_scale_value(), a.has_unsupported_usage()
    (0.125, False)
    >>> a.set_deterministic_algorithm(True).get_unsupported_reason()
    'Deterministic SDPA backward is unsupported by hipDNN'
"""

from __future__ import annotations

from typing import Any, overload

from ..tensor import TensorAttributes
from ..tensor_input import as_flag
from .accessors import scalar_slot, slot
from .node_attributes import InputSlots, OutputSlots
from .sdpa_common import SdpaCommonAttributes

__all__ = ["SdpaBackwardAttributes"]


class SdpaBackwardAttributes(SdpaCommonAttributes):
    """Configuration of SDPA backward: gradients dQ, dK, dV (and dBias) from Q, K, V, O, dO, Stats.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | Q | [B, H, Sq, D] | | dQ | like Q |
    | K | [B, Hk, Skv, D] | | dK | like K |
    | V | [B, Hv, Skv, Dv] | | dV | like V |
    | O, dO | [B, H, Sq, Dv] | | dBias | like Bias (optional) |
    | Stats | [B, H, Sq, 1], natural-log LSE | | | |
    | Attn_scale | pass-by-value scalar (optional) | | | |
    | Bias | rank ≤ 4, last dims Sq|1, Skv|1 (optional) | | | |
    | SEQ_LEN_Q, SEQ_LEN_KV | [B, 1, 1, 1] INT32, with padding_mask | | | |
    | Seed, Offset | philox dropout (with dropout_probability) | | | |
    | Dropout_mask, Dropout_scale, Dropout_scale_inv | explicit dropout | | | |
    """

    class InputNames(InputSlots):
        Q = 0
        K = 1
        V = 2
        O = 3  # noqa: E741
        dO = 4
        Stats = 5
        Attn_scale = 6
        Bias = 7
        SEQ_LEN_Q = 8
        SEQ_LEN_KV = 9
        Seed = 10
        Offset = 11
        Dropout_mask = 12
        Dropout_scale = 13
        Dropout_scale_inv = 14

    class OutputNames(OutputSlots):
        dQ = 0
        dK = 1
        dV = 2
        dBias = 3

    # ----- backward-only slots -----
    set_o, get_o = slot("O")
    set_do, get_do = slot("dO")
    set_stats, get_stats = slot("Stats")
    set_dropout_scale_inv, get_dropout_scale_inv = scalar_slot("Dropout_scale_inv")
    set_dq, get_dq = slot("dQ")
    set_dk, get_dk = slot("dK")
    set_dv, get_dv = slot("dV")
    set_dbias, get_dbias = slot("dBias")

    # ----- the two set_dropout forms -----
    @overload
    def set_dropout(
        self, probability: float, seed: TensorAttributes | int, offset: TensorAttributes | int, /
    ) -> SdpaBackwardAttributes: ...

    @overload
    def set_dropout(
        self,
        mask: TensorAttributes,
        scale: TensorAttributes | float,
        scale_inv: TensorAttributes | float,
        /,
    ) -> SdpaBackwardAttributes: ...

    def set_dropout(self, first: Any, second: Any, third: Any, /) -> SdpaBackwardAttributes:
        """``set_dropout(p, seed, offset)`` (philox) or ``set_dropout(mask, scale, scale_inv)``."""
        if isinstance(first, TensorAttributes):
            self.set_dropout_mask(first)
            self.set_dropout_scale(second)
            return self.set_dropout_scale_inv(third)
        return self._set_dropout_probability(first, second, third)

    # ----- cuDNN setters hipDNN records as unsupported (more in the base) -----
    def set_score_mod_bprop(self, value: Any) -> SdpaBackwardAttributes:
        return self._record_unsupported("SDPA score-modifier backprop is unsupported by hipDNN")

    def set_deterministic_algorithm(self, value: bool) -> SdpaBackwardAttributes:
        value = as_flag(value, "deterministic_algorithm")
        if value:
            return self._record_unsupported("Deterministic SDPA backward is unsupported by hipDNN")
        return self

    def set_rng_dump(self, value: Any) -> SdpaBackwardAttributes:
        return self._record_unsupported("SDPA backward RNG dump is unsupported by hipDNN")

    def set_sink_token(self, value: Any) -> SdpaBackwardAttributes:
        return self._record_unsupported("SDPA backward sink token is unsupported by hipDNN")

    def set_dsink_token(self, value: Any) -> SdpaBackwardAttributes:
        return self._record_unsupported(
            "SDPA backward sink-token gradient is unsupported by hipDNN"
        )
