"""Enumerations with hipDNN's integer values.

Every enum here is an :class:`enum.IntEnum`, so ``DataType.BFLOAT16 == 3`` holds and the values
can be written into descriptors and serialized graphs unchanged. A member prints as its class
and name (``DataType.FLOAT``), as the members of hipDNN's Python enums do (nanobind enums, which
are :class:`enum.Enum` subclasses), and so does an f-string; ``int(member)`` and ``.value`` give
the number.

Example:
    >>> from hipdnn_graph import DataType
    >>> DataType.BFLOAT16.value, DataType(1).name
    (3, 'FLOAT')
    >>> print(DataType.FLOAT, f"{DataType.HALF}", int(DataType.HALF))
    DataType.FLOAT DataType.HALF 2
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "AttentionImplementation",
    "BuildPlanPolicy",
    "ConvolutionMode",
    "DataType",
    "DiagonalAlignment",
    "ErrorCode",
    "HeuristicMode",
    "HipdnnEnum",
    "MoeGroupedMatmulMode",
    "NodeType",
    "NormFwdPhase",
    "PaddingMode",
    "PointwiseMode",
    "ReductionMode",
    "ResampleMode",
]


class HipdnnEnum(IntEnum):
    """The base of the enums here: an :class:`enum.IntEnum` that prints as ``Class.MEMBER``.

    Python 3.11 made an ``IntEnum`` member print as its number; hipDNN's bindings print the
    name, so ``str()``, ``print()`` and ``format()`` (f-strings) give ``Class.MEMBER`` here. A
    number is one ``int()`` or ``.value`` away.

    Example:
        >>> from hipdnn_graph import ErrorCode
        >>> str(ErrorCode.INVALID_VALUE), f"{ErrorCode.OK}", repr(ErrorCode.OK)
        ('ErrorCode.INVALID_VALUE', 'ErrorCode.OK', '<ErrorCode.OK: 0>')
    """

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, format_spec: str) -> str:
        return format(str(self), format_spec)


class ErrorCode(HipdnnEnum):
    """hipDNN's error codes, in hipDNN's order (``OK`` is 0)."""

    OK = 0
    INVALID_VALUE = 1
    HIPDNN_BACKEND_ERROR = 2
    ATTRIBUTE_NOT_SET = 3
    GRAPH_NOT_SUPPORTED = 4
    SHAPE_DEDUCTION_FAILED = 5
    INVALID_TENSOR_NAME = 6
    INVALID_VARIANT_PACK = 7
    GRAPH_EXECUTION_PLAN_CREATION_FAILED = 8
    GRAPH_EXECUTION_FAILED = 9
    HEURISTIC_QUERY_FAILED = 10
    UNSUPPORTED_GRAPH_FORMAT = 11
    CUDA_API_FAILED = 12
    CUDNN_BACKEND_API_FAILED = 13
    INVALID_CUDA_DEVICE = 14
    HANDLE_ERROR = 15
    NVRTC_COMPILATION_FAILED = 16


class DataType(HipdnnEnum):
    """Element types of tensors and of node computations."""

    NOT_SET = 0
    FLOAT = 1
    HALF = 2
    BFLOAT16 = 3
    DOUBLE = 4
    UINT8 = 5
    INT32 = 6
    INT8 = 7
    FP8_E4M3 = 8
    FP8_E5M2 = 9
    FP8_E8M0 = 10
    FP4_E2M1 = 11
    INT4 = 12
    FP6_E2M3 = 13
    FP6_E3M2 = 14
    INT64 = 15
    BOOLEAN = 16
    FP8_E4M3_FNUZ = 17
    FP8_E5M2_FNUZ = 18
    INT8x4 = 19
    UINT8x4 = 20
    INT8x32 = 21
    FAST_FLOAT_FOR_FP8 = 22
    COMPLEX_FP32 = 23
    COMPLEX_FP64 = 24


class HeuristicMode(HipdnnEnum):
    """Heuristic modes accepted by ``Graph.create_execution_plans``."""

    FALLBACK = 0
    A = 1
    B = 2
    OPENSOURCE = 3


class BuildPlanPolicy(HipdnnEnum):
    """Which ranked plans ``Graph.build_plans`` prepares."""

    HEURISTICS_CHOICE = 0
    ALL = 1


class DiagonalAlignment(HipdnnEnum):
    """Where the mask diagonal starts when ``seq_q != seq_kv``."""

    TOP_LEFT = 0
    BOTTOM_RIGHT = 1


class AttentionImplementation(HipdnnEnum):
    """How hipDNN maps SDPA forward onto kernels: a hint (every value runs on hipdnn-graph's
    engines), carried on the wire and by hipDNN's Python API, not modelled here."""

    AUTO = 0
    COMPOSITE = 1
    UNIFIED = 2


class NodeType(HipdnnEnum):
    """hipDNN's node kinds."""

    UNKNOWN = 0
    CONVOLUTION_FPROP = 1
    CONVOLUTION_DGRAD = 2
    CONVOLUTION_WGRAD = 3
    BATCHNORM = 4
    BATCHNORM_INFERENCE = 5
    BATCHNORM_BACKWARD = 6
    BATCHNORM_INFERENCE_VARIANCE_EXT = 7
    POINTWISE = 8
    MATMUL = 9
    LAYER_NORM = 10
    RMS_NORM = 11
    SDPA_FWD = 12
    SDPA_BWD = 13
    BLOCK_SCALE_QUANTIZE = 14
    BLOCK_SCALE_DEQUANTIZE = 15
    CUSTOM_OP = 16
    REDUCTION = 17
    RESAMPLE_FWD = 18
    RMS_NORM_BACKWARD = 19
    LAYERNORM_BACKWARD = 20
    MOE_GROUPED_MATMUL = 21
    MOE_GROUPED_MATMUL_BWD = 22
    #: hipDNN's frontend has ``NodeType::RESAMPLE_BWD``; no header read here numbers it, so 23
    #: (the next number free after hipDNN's ``MOE_GROUPED_MATMUL_BWD = 22``) is the project's.
    RESAMPLE_BWD = 23


class PointwiseMode(HipdnnEnum):
    """The element-wise operation of a pointwise node (hipDNN's frontend ``PointwiseMode``).

    The numbers are hipDNN's and also its FlatBuffers schema's (where ``MAX`` and ``MIN`` are
    spelled ``MAX_OP`` and ``MIN_OP``). Newer hipDNN adds ``MOD``, ``POW`` and ``COS`` (48-50);
    no schema available here numbers them, so they are not mirrored.

    SiLU (PyTorch's ``silu``, ``x * sigmoid(x)``) is ``SWISH_FWD`` with ``swish_beta`` unset or
    1 (swish is ``x * sigmoid(beta * x)``), and its gradient ``SWISH_BWD``. There is no
    ``SILU_FWD`` alias: neither hipDNN's nor cuDNN's enum has one, and an alias would print as
    ``SWISH_FWD`` and mean SiLU only while ``swish_beta`` is 1.
    """

    NOT_SET = 0
    ABS = 1
    ADD = 2
    ADD_SQUARE = 3
    BINARY_SELECT = 4
    CEIL = 5
    CMP_EQ = 6
    CMP_GE = 7
    CMP_GT = 8
    CMP_LE = 9
    CMP_LT = 10
    CMP_NEQ = 11
    DIV = 12
    ELU_BWD = 13
    ELU_FWD = 14
    ERF = 15
    EXP = 16
    FLOOR = 17
    GELU_APPROX_TANH_BWD = 18
    GELU_APPROX_TANH_FWD = 19
    GELU_BWD = 20
    GELU_FWD = 21
    GEN_INDEX = 22
    IDENTITY = 23
    LOG = 24
    LOGICAL_AND = 25
    LOGICAL_NOT = 26
    LOGICAL_OR = 27
    MAX = 28
    MIN = 29
    MUL = 30
    NEG = 31
    RECIPROCAL = 32
    RELU_BWD = 33
    RELU_FWD = 34
    RSQRT = 35
    SIGMOID_BWD = 36
    SIGMOID_FWD = 37
    SIN = 38
    SOFTPLUS_BWD = 39
    SOFTPLUS_FWD = 40
    SQRT = 41
    SUB = 42
    SWISH_BWD = 43
    SWISH_FWD = 44
    TAN = 45
    TANH_BWD = 46
    TANH_FWD = 47


class ReductionMode(HipdnnEnum):
    """How a reduction node combines the elements it reduces (hipDNN's frontend
    ``ReductionMode``).

    The numbers are hipDNN's and its FlatBuffers schema's (where ``MIN`` and ``MAX`` are spelled
    ``MIN_OP`` and ``MAX_OP``).
    """

    NOT_SET = 0
    ADD = 1
    MUL = 2
    MIN = 3
    MAX = 4
    AMAX = 5
    AVG = 6
    NORM1 = 7
    NORM2 = 8
    MUL_NO_ZEROS = 9


class ConvolutionMode(HipdnnEnum):
    """Whether a convolution flips its kernel (hipDNN's frontend ``ConvolutionMode``, in its
    binding order).

    The numbers are its schema's ``ConvMode`` (``UNSET`` 0, ``CONVOLUTION`` 1,
    ``CROSS_CORRELATION`` 2); hipDNN's attributes default to ``CROSS_CORRELATION``.
    """

    NOT_SET = 0
    CROSS_CORRELATION = 2
    CONVOLUTION = 1


class NormFwdPhase(HipdnnEnum):
    """Whether a normalization forward node also writes the statistics its backward needs
    (hipDNN's ``NormFwdPhase``; the same numbers in its schema's ``norm_common``)."""

    NOT_SET = 0
    INFERENCE = 1
    TRAINING = 2


class ResampleMode(HipdnnEnum):
    """How a resample node combines each window (hipDNN's frontend ``ResampleMode``, its numbers).

    hipDNN's schema (``resample_common.fbs``) and backend number only ``NOT_SET`` to
    ``AVGPOOL_INCLUDE_PADDING`` (0-3), with the same numbers; ``BILINEAR`` and ``NEAREST`` exist
    for cuDNN compatibility, have no backend mapping and cannot be written to hipDNN's wire.
    """

    NOT_SET = 0
    MAXPOOL = 1
    AVGPOOL_EXCLUDE_PADDING = 2
    AVGPOOL_INCLUDE_PADDING = 3
    BILINEAR = 4
    NEAREST = 5


class PaddingMode(HipdnnEnum):
    """What a resample node reads outside its input (hipDNN's frontend ``PaddingMode``).

    hipDNN's schema spells ``NOT_SET`` as ``PADDING_NOT_SET`` and numbers 0-2 alike;
    ``EDGE_VAL_PAD`` exists for cuDNN compatibility, has no backend mapping and cannot be written
    to hipDNN's wire.
    """

    NOT_SET = 0
    NEG_INF_PAD = 1
    ZERO_PAD = 2
    EDGE_VAL_PAD = 3


class MoeGroupedMatmulMode(HipdnnEnum):
    """How a MoE grouped matmul routes its rows (hipDNN's frontend ``MoeGroupedMatmulMode``, in
    its binding order).

    ``NONE``: the tokens are already routed (row ``r`` in, row ``r`` out); ``GATHER``: routed row
    ``r`` reads token row ``TOKEN_INDEX[r]``; ``SCATTER``: routed row ``r`` writes output row
    ``TOKEN_INDEX[r] * top_k + TOKEN_KS[r]``.

    The numbers are its schema's (``NONE`` 0, ``GATHER`` 1, ``SCATTER`` 2), which has no
    ``NOT_SET``; hipDNN's frontend numbers ``NOT_SET`` 0 and the others one higher, so here
    ``NOT_SET`` is -1 (no wire carries it: the node refuses it and the writers name it).
    hipDNN's attributes default to ``NONE``.
    """

    NOT_SET = -1
    NONE = 0
    GATHER = 1
    SCATTER = 2
