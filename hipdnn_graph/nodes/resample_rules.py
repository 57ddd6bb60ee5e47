"""The rules and the lifecycle steps the two resample nodes share: the project's pooling
geometry checks after hipDNN's, its guard before a shape inference, the INDEX tensor's types
and inferred shape, and hipDNN's packer's mode check.
"""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import ClassVar, TypeVar

from ..attributes.resample import ResampleAttributes
from ..descriptors.backend_descriptor import BackendDescriptor
from ..tensor import TensorAttributes
from ..types import DataType
from .base import Node
from .input_memo import InputRuleMemo
from .resample_spec import check_packable_modes
from .rules import invalid, take_shape

__all__ = ["INDEX_TYPES", "ResampleNode", "check_pooling_geometry", "spatial_members"]

#: the data types hipDNN accepts for an INDEX tensor
INDEX_TYPES = (DataType.INT8, DataType.INT32)


def spatial_members(a: ResampleAttributes, spatial: int, label: str, what: str) -> None:
    """The project's guard before a shape inference hipDNN does unchecked (it would read past
    a member or divide by a zero stride): one value of each member per spatial dim, strides
    positive.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming what cannot be inferred.
    """
    members = (a.pre_padding, a.post_padding, a.stride, a.window)
    if any(len(m) < spatial for m in members):
        raise invalid(
            f"{label}: pre_padding, post_padding, stride and window need one value per spatial "
            f"dimension ({spatial}) to infer {what} dimensions"
        )
    if any(s < 1 for s in a.stride[:spatial]):
        raise invalid(f"{label}: stride must be positive to infer {what} dimensions")


def check_pooling_geometry(
    a: ResampleAttributes,
    pooled: tuple[str, TensorAttributes],
    result: tuple[str, TensorAttributes],
    label: str,
) -> None:
    """The project's rules after hipDNN's (which has none for them), for both directions: the
    pooled side (X, DX) and the result (Y, DY) are ``[N, C, spatial...]`` alike (one rank, one
    N and C); ``pre_padding``, ``post_padding``, ``stride`` and ``window`` each hold exactly one
    value per spatial dim, the stride and window positive; an INDEX has the result's dims.
    (The result's spatial dims may differ from the formula's, and a negative pre padding starts
    the windows inside the input: the engines define every window they read.)

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.ResampleBwdAttributes().set_pre_padding([0, 0]).set_post_padding([0])
        ...      .set_stride([1, 1]).set_window([2, 2]))
        >>> x, y = hg.TensorAttributes(dim=[1, 1, 4, 4]), hg.TensorAttributes(dim=[1, 1, 3, 3])
        >>> try:
        ...     check_pooling_geometry(a, ("DX", x), ("DY", y), "ResampleBwdNode")
        ... except hg.HipdnnError as err:
        ...     print(err.message)  # doctest: +ELLIPSIS
        ResampleBwdNode: pre_padding, post_padding, stride and window must each hold one ...

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first rule broken.
    """
    (inner_name, inner), (outer_name, outer) = pooled, result
    if len(outer.dim) != len(inner.dim) or outer.dim[:2] != inner.dim[:2]:
        raise invalid(
            f"{label}: {outer_name} dims {outer.dim} and {inner_name} dims {inner.dim} must "
            "share their rank, N and C"
        )
    spatial = len(inner.dim) - 2
    members = (a.pre_padding, a.post_padding, a.stride, a.window)
    if any(len(m) != spatial for m in members):
        counts = ", ".join(str(len(m)) for m in members[:3]) + f" and {len(members[3])}"
        raise invalid(
            f"{label}: pre_padding, post_padding, stride and window must each hold one value "
            f"per spatial dimension ({spatial}), got {counts} values"
        )
    if min(a.stride + a.window) < 1:
        raise invalid(
            f"{label}: stride and window must be positive, got stride {a.stride}, window {a.window}"
        )
    index = a.tensors_by_slot().get("INDEX")
    if index is not None and index.dim != outer.dim:
        raise invalid(f"{label}: Index dims {index.dim} must equal {outer_name} dims {outer.dim}")


R = TypeVar("R", bound=ResampleAttributes)


class ResampleNode(Node[R]):
    """What the resample forward and backward nodes do alike: the pooled tensor is
    :attr:`padded_slot` (X, DX), the other side of the window :attr:`result` (Y, DY); an INDEX
    takes the result's shape; post-validation adds :func:`check_pooling_geometry` and packing
    hipDNN's mode check."""

    #: the slot of the tensor on the windows' other side (``"Y"``, ``"DY"``)
    result: ClassVar[str]

    def infer_index(self, result: TensorAttributes) -> None:
        """An INDEX without dims or strides takes the result's."""
        index = self.attributes.tensors_by_slot().get("INDEX")
        if index is not None:
            take_shape(index, result)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then :func:`check_pooling_geometry` (the pooled tensor against the
        result).

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node` and :func:`check_pooling_geometry`.
        """
        super().post_validate_node(memo)
        a = self.attributes
        tensors = a.tensors_by_slot()
        pooled, result = tensors.get(self.padded_slot), tensors.get(self.result)
        assert pooled is not None and result is not None  # pre-validation checked them
        check_pooling_geometry(
            a, (self.padded_slot, pooled), (self.result, result), self.spec.label
        )

    def create_operation(
        self,
        tensor_descs: MutableMapping[int, BackendDescriptor],
        operations: MutableSequence[BackendDescriptor],
    ) -> BackendDescriptor:
        """Pack as :meth:`Node.create_operation`, after hipDNN's packer's mode check.

        Raises:
            HipdnnError: ``INVALID_VALUE`` ``"Unsupported resample mode"`` /
                ``"Unsupported padding mode"`` (see
                :func:`~hipdnn_graph.nodes.resample_spec.check_packable_modes`).
        """
        check_packable_modes(self.attributes)
        return super().create_operation(tensor_descs, operations)
