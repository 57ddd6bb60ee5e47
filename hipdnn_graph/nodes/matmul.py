"""The matmul node: rules, inference and wire declaration (hipDNN's ``MatmulNode``).

hipDNN's rules (``hipdnn_frontend/node/MatmulNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar

from ..attributes.matmul import MatmulAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import Kind, SlotSpec, UnmodelledSpec
from ..tensor import TensorAttributes, generate_strides
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .rules import invalid, missing

__all__ = ["MATMUL_SPEC", "MatmulAttributeName", "MatmulNode", "check_batch_dims"]

_MIN_RANK = 2


def _divides(x: int, y: int) -> bool:
    """``x % y == 0`` where hipDNN's C++ would compute it (``y`` not 0)."""
    return y != 0 and x % y == 0


def check_batch_dims(a: Sequence[int], b: Sequence[int], batch_dims: int) -> None:
    """hipDNN's batch broadcasting rule: each leading dim of A divides B's or is divided by it.

    A zero dim (which graph validation refuses before any node rule) is never used as a divisor
    (hipDNN's C++ would divide by zero): it divides nothing and every dim divides it, so it is
    compatible with any dim.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first incompatible index.

    Example:
        >>> from hipdnn_graph import HipdnnError
        >>> check_batch_dims([2, 4, 8], [1, 8, 5], 1)
        >>> try:
        ...     check_batch_dims([2, 4, 8], [3, 8, 5], 1)
        ... except HipdnnError as err:
        ...     print(err.message)
        Matmul input tensors A and B have incompatible batch dimensions for broadcasting at index 0: A has dim=2, B has dim=3
    """  # noqa: E501
    for i in range(batch_dims):
        x, y = a[i], b[i]
        if x != y and not _divides(x, y) and not _divides(y, x):
            raise invalid(
                "Matmul input tensors A and B have incompatible batch dimensions for "
                f"broadcasting at index {i}: A has dim={x}, B has dim={y}"
            )


def _min_rank(tensor: TensorAttributes, fallback: str) -> None:
    """hipDNN's ``validateMinimumTensorDimensions``: named by the tensor's name when it has one."""
    if len(tensor.dim) < _MIN_RANK:
        raise invalid(
            f"{tensor.name or fallback} must have at least {_MIN_RANK} dimensions, "
            f"but has {len(tensor.dim)}"
        )


class MatmulNode(Node[MatmulAttributes]):
    """Multiplies ``A [..., M, K]`` by ``B [..., K, N]`` into ``C [..., M, N]``.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.MatmulAttributes().set_a(hg.TensorAttributes(dim=[2, 4, 8]))
        ...      .set_b(hg.TensorAttributes(dim=[1, 8, 5])).set_c(hg.TensorAttributes()))
        >>> node = hg.MatmulNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_c().get_dim(), a.get_c().get_stride()
        ([2, 4, 5], [20, 5, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.MATMUL

    def _tensors(self) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes]:
        """hipDNN's ``validateTensors``: A, B and C are set, in that order."""
        a = self.attributes
        x, y, c = a.get_a(), a.get_b(), a.get_c()
        if x is None:
            raise missing("MatmulNode missing A input")
        if y is None:
            raise missing("MatmulNode missing B input")
        if c is None:
            raise missing("MatmulNode missing C output")
        return x, y, c

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: A, B, C set; A and B of rank >= 2 and of one rank; the
        inner dims equal; the batch dims broadcastable.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor, ``INVALID_VALUE`` for the
                others.
        """
        x, y, _ = self._tensors()
        _min_rank(x, "Input tensor A")
        _min_rank(y, "Input tensor B")
        a_dims, b_dims = x.dim, y.dim
        if len(a_dims) != len(b_dims):
            raise invalid(
                "Matmul input tensors A and B must have the same rank: "
                f"A has rank={len(a_dims)}, B has rank={len(b_dims)}"
            )
        a_k, b_k = a_dims[-1], b_dims[-2]
        if a_k != b_k:
            raise invalid(
                "MatmulNode: Inner dimensions must match (a[...,K] vs b[...,K,...]). "
                f"Got {a_k} vs {b_k}"
            )
        check_batch_dims(a_dims, b_dims, len(a_dims) - _MIN_RANK)

    def infer_properties_node(self) -> None:
        """Fill data types; C without dims gets ``[max(A, B) per batch dim..., M, N]``, C
        without strides packed strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor, ``INVALID_VALUE`` for
                incompatible batch dims.
        """
        x, y, c = self._tensors()
        self.attributes.fill_from_context(self.graph_attributes)
        if not c.dim:
            a_dims, b_dims = x.dim, y.dim
            batch = len(a_dims) - _MIN_RANK
            check_batch_dims(a_dims, b_dims, batch)
            c.dim = [max(a_dims[i], b_dims[i]) for i in range(batch)] + [a_dims[-2], b_dims[-1]]
        if not c.stride:
            c.stride = generate_strides(c.dim)


class MatmulAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the matmul operation descriptor
    (``HipdnnBackendAttributeName.h``, 2500-2503)."""

    OPERATION_MATMUL_ADESC = 2500
    OPERATION_MATMUL_BDESC = 2501
    OPERATION_MATMUL_CDESC = 2502
    MATMUL_COMP_TYPE = 2503


_A = MatmulAttributeName
_In, _Out = MatmulAttributes.InputNames, MatmulAttributes.OutputNames

#: Where every slot of a matmul node lives on each wire (hipDNN's ``MatmulAttributes`` table,
#: 5 fields; ``umd_flops``/``umd_bytes`` are not modelled and must stay empty; its JSON has no
#: scalar object).
MATMUL_SPEC = declare_spec(
    MatmulNode,
    table="MatmulAttributes",
    union_tag=9,
    descriptor_type=DescriptorType.OPERATION_MATMUL,
    descriptor_class="MatmulOperationDescriptor",
    compute_type=_A.MATMUL_COMP_TYPE,
    scalar_group="",
    slots=(
        SlotSpec(_In.A, False, True, 0, _A.OPERATION_MATMUL_ADESC, "a_tensor_uid"),
        SlotSpec(_In.B, False, True, 1, _A.OPERATION_MATMUL_BDESC, "b_tensor_uid"),
        SlotSpec(_Out.C, True, True, 2, _A.OPERATION_MATMUL_CDESC, "c_tensor_uid"),
    ),
    unmodelled=(
        UnmodelledSpec("umd_flops", Kind.STRING, 3, "extra"),
        UnmodelledSpec("umd_bytes", Kind.STRING, 4, "extra"),
    ),
    field_count=5,
)
