"""Attributes of the batch-norm training forward node (hipDNN's ``BatchnormAttributes``).

Example:
    >>> from hipdnn_graph import BatchnormAttributes, TensorAttributes
    >>> a = BatchnormAttributes().set_x(TensorAttributes(name="x"))
    >>> a.get_x().get_name(), a.get_momentum(), a.get_peer_stats()
    ('x', None, [])
"""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr

from ..changes import touch
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .accessors import scalar_slot, slot
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["BatchnormAttributes", "PeerStatsAttributes"]


class PeerStatsAttributes(NodeAttributes):
    """A batch-norm node's peer statistics (hipDNN's ``peer_stats``, multi-GPU batch norm):
    held, not modelled. Nodes refuse them at validation; the writers refuse them by name."""

    _peer_stats: tuple[TensorAttributes, ...] = PrivateAttr(default=())

    def set_peer_stats(self, tensors: list[TensorAttributes]) -> Any:
        """hipDNN's peer statistics tensors (held, not modelled).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an entry that is not a tensor.
        """
        held = tuple(tensors)
        for tensor in held:
            if not isinstance(tensor, TensorAttributes):
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"peer_stats holds tensors, got {type(tensor).__name__}",
                )
        self._peer_stats = held
        touch(self)
        return self

    def get_peer_stats(self) -> list[TensorAttributes]:
        return list(self._peer_stats)

    def unmodelled_values(self) -> dict[str, Any]:
        if not self._peer_stats:
            return {}
        return {"peer_stats_tensor_uid": tuple(t.uid for t in self._peer_stats)}

    def copy_for_node(self) -> Any:
        clone = super().copy_for_node()
        clone._peer_stats = self._peer_stats
        return clone


class BatchnormAttributes(PeerStatsAttributes):
    """Configuration of a batch-norm training forward node (spatial mode): per channel ``c``,
    ``Y = (X - mean_c) / sqrt(var_c + EPSILON) * SCALE_c + BIAS_c`` with the statistics taken over
    N and the spatial dims; optionally the running statistics are updated with MOMENTUM.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 2, ``[N, C, ...]`` | | Y | X's (inferred) |
    | SCALE, BIAS | ``[1, C, 1, ...]`` | | MEAN, INV_VARIANCE | ``[1, C, 1, ...]`` (inferred) |
    | PREV_RUNNING_MEAN, PREV_RUNNING_VARIANCE | ``[1, C, 1, ...]`` | | NEXT_RUNNING_MEAN, NEXT_RUNNING_VARIANCE | ``[1, C, 1, ...]`` (inferred) |
    | MOMENTUM | one element | | | |
    | EPSILON | one element, pass-by-value | | | |

    The running statistics come all four or not at all. hipDNN's ``peer_stats`` (multi-GPU
    statistics exchange) are held (:meth:`set_peer_stats`) but not modelled: a node with peer
    statistics fails validation, the writers refuse it, and a hipDNN graph carrying some is
    refused by name.
    """  # noqa: E501

    class InputNames(InputSlots):
        X = 0
        SCALE = 1
        BIAS = 2
        PREV_RUNNING_MEAN = 3
        PREV_RUNNING_VARIANCE = 4
        MOMENTUM = 5
        EPSILON = 6

    class OutputNames(OutputSlots):
        Y = 0
        MEAN = 1
        INV_VARIANCE = 2
        NEXT_RUNNING_MEAN = 3
        NEXT_RUNNING_VARIANCE = 4

    set_x, get_x = slot("X")
    set_scale, get_scale = slot("SCALE")
    set_bias, get_bias = slot("BIAS")
    set_epsilon, get_epsilon = scalar_slot("EPSILON")
    set_prev_running_mean, get_prev_running_mean = slot("PREV_RUNNING_MEAN")
    set_prev_running_variance, get_prev_running_variance = slot("PREV_RUNNING_VARIANCE")
    set_momentum, get_momentum = scalar_slot("MOMENTUM")
    set_y, get_y = slot("Y")
    set_mean, get_mean = slot("MEAN")
    set_inv_variance, get_inv_variance = slot("INV_VARIANCE")
    set_next_running_mean, get_next_running_mean = slot("NEXT_RUNNING_MEAN")
    set_next_running_variance, get_next_running_variance = slot("NEXT_RUNNING_VARIANCE")

    def set_previous_running_stats(
        self,
        mean: TensorAttributes | None,
        variance: TensorAttributes | None,
        momentum: TensorAttributes | None,
    ) -> BatchnormAttributes:
        """Set PREV_RUNNING_MEAN, PREV_RUNNING_VARIANCE and MOMENTUM at once."""
        return (
            self.set_prev_running_mean(mean)
            .set_prev_running_variance(variance)
            .set_momentum(momentum)
        )
