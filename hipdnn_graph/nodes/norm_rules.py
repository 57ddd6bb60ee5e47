"""hipDNN's shape checks and stride inference shared by the normalization nodes
(``hipdnn_frontend/node/detail/Utilities.hpp`` and ``hipdnn_data_sdk/utilities/
ShapeUtilities.hpp``): each check raises the first error hipDNN would return, with its message.

A tensor is named in messages by its name, or by the caller's fallback when it has none.

Example:
    >>> from hipdnn_graph import TensorAttributes
    >>> scale = TensorAttributes(name="gamma", dim=[1, 5, 32])
    >>> try:
    ...     check_scale_normalized_shape(scale, TensorAttributes(dim=[2, 64, 32]), "Scale tensor")
    ... except HipdnnError as err:
    ...     print(err.message)
    gamma dimension at index 1 must be 1 (leading region before normalized shape), got 5
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..attributes.batchnorm import PeerStatsAttributes
from ..descriptors.wire_rules import FLOAT32_MAX
from ..errors import HipdnnError
from ..tensor import TensorAttributes, generate_strides
from ..types import ErrorCode
from .rules import invalid, missing, named

__all__ = [
    "check_bn_training_spatial",
    "check_channel_only_shape",
    "check_channel_only_shape_if_set",
    "check_epsilon_value",
    "check_norm_stats_shape_if_set",
    "check_normalized_dim_count",
    "check_scalar_parameter",
    "check_scale_normalized_shape",
    "check_shapes_match",
    "check_shapes_match_if_set",
    "infer_channel_tensor",
    "infer_normalized_dim_count",
    "like_strides",
    "ordered_strides",
    "refuse_peer_stats",
    "stride_order",
    "stride_order_nhwc",
]


def check_scalar_parameter(param: TensorAttributes, fallback: str) -> None:
    """hipDNN's ``validateScalarParameter``: dims set, one element, pass-by-value.

    Raises:
        HipdnnError: ``ATTRIBUTE_NOT_SET`` without dims, ``INVALID_VALUE`` for more than one
            element or a tensor that is not pass-by-value.
    """
    name = named(param, fallback)
    if not param.dim:
        raise missing(f"{name} dimensions are not set")
    total = 1
    for d in param.dim:
        total *= d
    if total != 1:
        raise invalid(f"{name} must be a scalar (single element), but has {total} elements")
    if not param.get_is_pass_by_value():
        raise invalid(f"{name} must be a pass-by-value tensor")


def check_epsilon_value(epsilon: TensorAttributes | None, label: str) -> None:
    """The project's rule after hipDNN's (which checks only EPSILON's shape): a constant
    epsilon is a finite, non-negative number that fits in float32 (a NaN, an infinity or a
    negative epsilon makes ``1 / sqrt(var + epsilon)`` NaN or infinite). An epsilon given only
    at execution (no value set) is not checked here.

    Example:
        >>> from hipdnn_graph import TensorAttributes
        >>> try:
        ...     check_epsilon_value(TensorAttributes(name="eps").set_value(-1.0), "RMSNormNode")
        ... except HipdnnError as err:
        ...     print(err.message)
        RMSNormNode: epsilon eps must be a finite, non-negative float32 number, got -1.0

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the value.
    """
    if epsilon is None or epsilon.value is None:
        return
    value = epsilon.value
    number = float(value)
    if not (math.isfinite(number) and 0 <= number <= FLOAT32_MAX):
        raise invalid(
            f"{label}: epsilon {named(epsilon, 'Epsilon')} must be a finite, non-negative "
            f"float32 number, got {value}"
        )


def infer_normalized_dim_count(x_dims: Sequence[int], scale_dims: Sequence[int]) -> int:
    """hipDNN's inference of the normalized dim count: with X's rank, the run of trailing SCALE
    dims that are not 1 (at least 1); with another rank, SCALE's rank.

    Example:
        >>> infer_normalized_dim_count([16, 64, 32, 32], [1, 64, 32, 32])
        3
        >>> infer_normalized_dim_count([16, 64, 32, 32], [1, 1, 1, 1])
        1
        >>> infer_normalized_dim_count([16, 64, 32, 32], [32, 32])
        2
    """
    if len(x_dims) != len(scale_dims):
        return len(scale_dims)
    count = 1
    for i in range(len(scale_dims) - 1, -1, -1):
        if scale_dims[i] == 1:
            break
        count = len(scale_dims) - i
    return count


def check_normalized_dim_count(
    label: str, count: int, x_dims: Sequence[int], scale_dims: Sequence[int]
) -> None:
    """The project's rule after hipDNN's (which has none): a layer norm normalizes over X's
    last ``count`` dims, so ``count`` is between 1 and X's rank, or 0 (unset) when the count
    inferred from SCALE (:func:`infer_normalized_dim_count`) is.

    Example:
        >>> try:
        ...     check_normalized_dim_count("LayerNormNode", 5, [2, 6, 4], [1, 6, 4])
        ... except HipdnnError as err:
        ...     print(err.message)
        LayerNormNode: normalized_dim_count 5 must be in [1, 3] (X's rank), or 0 to infer it

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the count.
    """
    rank = len(x_dims)
    if count == 0:
        inferred = infer_normalized_dim_count(x_dims, scale_dims)
        if not 1 <= inferred <= rank:
            raise invalid(
                f"{label}: the normalized dim count {inferred} inferred from SCALE dims "
                f"{list(scale_dims)} must be in [1, {rank}] (X's rank)"
            )
    elif not 1 <= count <= rank:
        raise invalid(
            f"{label}: normalized_dim_count {count} must be in [1, {rank}] (X's rank), or 0 to "
            "infer it"
        )


def check_shapes_match_if_set(
    first: TensorAttributes, second: TensorAttributes | None, name1: str, name2: str
) -> None:
    """hipDNN's ``validateTensorShapesMatchIfSet``: nothing unless ``second`` has dims; then one
    rank and equal dims.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first mismatching index.
    """
    if second is None or not second.dim:
        return
    check_shapes_match(first, second, name1, name2)


def check_shapes_match(
    first: TensorAttributes, second: TensorAttributes, name1: str, name2: str
) -> None:
    """hipDNN's ``validateTensorShapesMatch``: one rank and equal dims (dims unset count as a
    rank of 0).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first mismatching index.
    """
    a, b = named(first, name1), named(second, name2)
    d1, d2 = first.dim, second.dim
    if len(d1) != len(d2):
        raise invalid(
            f"{a} and {b} must have the same number of dimensions: {len(d1)} vs {len(d2)}"
        )
    for i, (x, y) in enumerate(zip(d1, d2, strict=True)):
        if x != y:
            raise invalid(f"{a} and {b} dimension mismatch at index {i}: {x} vs {y}")


def check_scale_normalized_shape(
    scale: TensorAttributes, x: TensorAttributes, fallback: str
) -> None:
    """hipDNN's ``validateScaleNormalizedShape``: the normalized shape is the longest run of
    trailing dims where scale equals x; scale has x's rank, 1 at index 0, a non-empty normalized
    shape and 1 everywhere before it (but for index 0, which is always leading).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first rule broken.
    """
    name = named(scale, fallback)
    s, d = scale.dim, x.dim
    if len(s) != len(d):
        raise invalid(f"{name} must match input rank")
    if s[0] != 1:
        raise invalid(f"{name} batch dimension (index 0) must be 1, got {s[0]}")
    matching = 0
    for a, b in zip(reversed(s), reversed(d), strict=True):
        if a != b:
            break
        matching += 1
    start = 1 if matching >= len(s) else len(s) - matching
    if start == len(s):
        raise invalid(
            f"{name} has no trailing dims matching input — RMSNorm requires at least one "
            "normalized dim"
        )
    for i in range(1, start):
        if s[i] != 1:
            raise invalid(
                f"{name} dimension at index {i} must be 1 (leading region before normalized "
                f"shape), got {s[i]}"
            )


def check_norm_stats_shape_if_set(
    stats: TensorAttributes | None, x: TensorAttributes, scale: TensorAttributes, fallback: str
) -> None:
    """hipDNN's ``validateNormStatsShapeIfSet``: when ``stats`` has dims, x's rank, 1 where scale
    is not 1 (a normalized axis), x's dim where scale is 1.

    Raises:
        HipdnnError: ``ATTRIBUTE_NOT_SET`` when scale has no dims; ``INVALID_VALUE`` naming the
            first offending index.
    """
    if stats is None or not stats.dim:
        return
    if not scale.dim:
        raise missing("Scale tensor dimensions are not set")
    name = named(stats, fallback)
    dims, xd, sd = stats.dim, x.dim, scale.dim
    if len(dims) != len(xd):
        raise invalid(
            f"{name} must have the same rank as input, expected {len(xd)} but got {len(dims)}"
        )
    for i, got in enumerate(dims):
        if i < len(sd) and sd[i] != 1:
            if got != 1:
                raise invalid(
                    f"{name} dimension at index {i} must be 1 (normalized axis, scale is "
                    f"non-1), got {got}"
                )
        elif got != xd[i]:
            raise invalid(f"{name} dimension at index {i} must match input ({xd[i]}), got {got}")


def stride_order(strides: Sequence[int]) -> list[int]:
    """hipDNN's ``extractStrideOrder``: the rank of each dim in memory (0 = innermost), by
    descending stride with ties kept in dim order; a layout whose dim 1 has the smallest stride
    and dim 0 the largest, and some later dim a larger one than dim 1, is taken as channels-last
    (dim 1 innermost).

    Example:
        >>> stride_order([4096, 1, 512, 64]), stride_order([24, 8, 4, 1])
        ([3, 0, 2, 1], [3, 2, 1, 0])
    """
    n = len(strides)
    if n == 0:
        return []
    indices = list(range(n))
    first_max = max(range(n), key=lambda i: (strides[i], -i))
    first_min = min(range(n), key=lambda i: (strides[i], i))
    if first_max == 0 and first_min == 1 and any(strides[i] > strides[1] for i in range(2, n)):
        indices = [indices[0], *indices[2:], 1]
    ranked = sorted(enumerate(indices), key=lambda p: (-strides[p[1]], p[0]))
    order = [0] * n
    for position, (_, dim) in enumerate(ranked):
        order[dim] = n - position - 1
    return order


def ordered_strides(dims: Sequence[int], order: Sequence[int]) -> list[int]:
    """hipDNN's ``generateStrides(dims, strideOrder)``: packed strides laid out innermost first
    by ``order``.

    Example:
        >>> ordered_strides([1, 1, 8, 8], [3, 0, 2, 1])
        [64, 1, 8, 1]
    """
    strides = [1] * len(dims)
    accumulator = 1
    for index in sorted(range(len(dims)), key=lambda i: (order[i], i)):
        strides[index] = accumulator
        accumulator *= dims[index]
    return strides


def like_strides(dims: Sequence[int], reference: Sequence[int]) -> list[int]:
    """Strides for ``dims`` in the layout of strides ``reference`` (packed row-major when there
    is no reference of ``dims``' rank), as hipDNN's norm nodes infer them.

    Example:
        >>> like_strides([1, 6, 4], [24, 1, 6]), like_strides([1, 6, 4], [4, 1])
        ([24, 1, 6], [24, 4, 1])
    """
    if reference and len(reference) == len(dims):
        return ordered_strides(dims, stride_order(reference))
    return generate_strides(dims)


def check_channel_only_shape(tensor: TensorAttributes, channels: int, fallback: str) -> None:
    """hipDNN's ``validateChannelOnlyTensorShape``: ``[1, channels, 1, ...]``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first rule broken (rank, batch, channel, spatial).
    """
    name, dims = named(tensor, fallback), tensor.dim
    if len(dims) < 2:
        raise invalid(f"{name} must have at least 2 dimensions for batch normalization")
    if dims[0] != 1:
        raise invalid(f"{name} batch dimension (index 0) must be 1, got {dims[0]}")
    if dims[1] != channels:
        raise invalid(f"{name} channel dimension (index 1) must be {channels}, got {dims[1]}")
    for i in range(2, len(dims)):
        if dims[i] != 1:
            raise invalid(
                f"{name} spatial dimension at index {i} must be 1 for spatial batch "
                f"normalization, got {dims[i]}"
            )


def check_channel_only_shape_if_set(
    tensor: TensorAttributes | None, channels: int, fallback: str
) -> None:
    """hipDNN's ``validateChannelOnlyShapeIfSet``: :func:`check_channel_only_shape` when the
    tensor has dims.

    Raises:
        HipdnnError: as :func:`check_channel_only_shape`.
    """
    if tensor is not None and tensor.dim:
        check_channel_only_shape(tensor, channels, fallback)


def check_bn_training_spatial(x: TensorAttributes, scale: TensorAttributes, operation: str) -> None:
    """hipDNN's ``validateBatchNormTrainingSpatialDimensions``: x of rank >= 2; spatial mode
    (scale 1 past index 1) needs N times the spatial dims > 1; per-activation mode is refused.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first rule broken.
    """
    dims = x.dim
    if len(dims) < 2:
        raise invalid(
            f"{named(x, 'Input tensor')} must have at least 2 dimensions, but has {len(dims)}"
        )
    if len(scale.dim) < 2 or all(d == 1 for d in scale.dim[2:]):
        count = dims[0]
        for d in dims[2:]:
            count *= d
        if count <= 1:
            raise invalid(
                f"{operation} (spatial mode) requires more than 1 value per channel. "
                f"N * spatial_dimensions must be > 1. Got N={dims[0]}"
            )
        return
    raise invalid(
        "Batch normalization per-activation mode is not currently supported. Use spatial mode "
        "by ensuring scale/bias tensors have shape [1, C, 1, 1, ...]"
    )


def stride_order_nhwc(rank: int) -> list[int]:
    """hipDNN's ``strideOrderNhwc``: channels innermost, then the last dim outwards, batch
    outermost.

    Example:
        >>> stride_order_nhwc(4), stride_order_nhwc(1)
        ([3, 0, 2, 1], [0])
    """
    order = [0] * rank
    if rank < 2:
        return order
    nxt = 1
    for i in range(rank - 1, 1, -1):
        order[i] = nxt
        nxt += 1
    order[0] = nxt
    return order


def infer_channel_tensor(tensor: TensorAttributes, x: TensorAttributes) -> None:
    """The batch norms' per-channel output: without dims ``[1, C, 1, ...]`` of X's rank;
    without strides channels-last packed strides (hipDNN's ``strideOrderNhwc``)."""
    if not tensor.dim:
        dims = [1] * len(x.dim)
        dims[1] = x.dim[1]
        tensor.dim = dims
    if not tensor.stride:
        tensor.stride = ordered_strides(tensor.dim, stride_order_nhwc(len(tensor.dim)))


def refuse_peer_stats(attributes: PeerStatsAttributes, label: str) -> None:
    """This project's own check of the batch norms (not one of hipDNN's): no peer statistics.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` when some are set.
    """
    if attributes.get_peer_stats():
        raise HipdnnError(
            ErrorCode.GRAPH_NOT_SUPPORTED,
            f"{label}: peer statistics (multi-GPU batch normalization) are not supported by "
            "hipdnn-graph",
        )
