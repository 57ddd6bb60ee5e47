"""``Graph`` builder methods of the node families beyond attention, named and shaped as hipDNN's.

:class:`FamilyBuilders` is a mixin of :class:`~hipdnn_graph.Graph`: each method copies the
attributes it is given (the caller's object stays as it was), names an unnamed node
``<Prefix>_<index>`` and its unnamed inputs ``<node>::<SLOT>``, creates the virtual outputs
``<node>::<SLOT>`` and adds the node, as hipDNN's ``Graph`` does.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[2, 8])
    >>> y = g.pointwise(x, hg.PointwiseAttributes().set_mode(hg.PointwiseMode.RELU_FWD))
    >>> _ = y.set_output(True)
    >>> g.validate()
    >>> y.get_name(), y.get_dim()
    ('Pointwise_0::OUT_0', [2, 8])
"""

from __future__ import annotations

from typing import Any

from ...descriptors.wire_rules import MAX_TENSORS
from ...errors import HipdnnError
from ...nodes.conv_dgrad import CONVOLUTION_BWD_SPEC
from ...nodes.conv_fprop import CONVOLUTION_FWD_SPEC
from ...nodes.conv_wgrad import CONVOLUTION_WRW_SPEC
from ...nodes.custom_op import CustomOpNode
from ...nodes.matmul import MATMUL_SPEC
from ...nodes.moe_grouped_matmul import MOE_GROUPED_MATMUL_SPEC
from ...nodes.moe_grouped_matmul_bwd import MOE_GROUPED_MATMUL_BWD_SPEC
from ...nodes.pointwise import POINTWISE_SPEC
from ...nodes.reduction import REDUCTION_SPEC
from ...tensor import TensorAttributes
from ...types import ErrorCode
from .base import FamilyRecipe, name_unnamed
from .block_scale import BlockScaleBuilders
from .norm import NormBuilders

__all__ = ["FamilyBuilders", "name_unnamed"]

_POINTWISE: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    POINTWISE_SPEC,
    "pointwise",
    ("IN_0", "IN_1", "IN_2"),
    named=("IN_0", "IN_1", "IN_2"),
)
_REDUCTION: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    REDUCTION_SPEC, "reduction", ("X",), spell=str, named=("X", "Y")
)
_MATMUL: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    MATMUL_SPEC, "matmul", ("A", "B"), spell=str, named=("A", "B")
)
_CONV_FPROP: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    CONVOLUTION_FWD_SPEC, "conv_fprop", ("X", "W"), spell=str, named=("X", "W")
)
_CONV_DGRAD: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    CONVOLUTION_BWD_SPEC, "conv_dgrad", ("DY", "W"), spell=str, named=("DY", "W")
)
_CONV_WGRAD: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    CONVOLUTION_WRW_SPEC, "conv_wgrad", ("DY", "X"), spell=str, named=("DY", "X")
)
_MOE_INPUTS = ("TOKEN", "WEIGHT", "FIRST_TOKEN_OFFSET", "TOKEN_INDEX", "TOKEN_KS")
_MOE_BWD_INPUTS = ("DOUTPUT", "TOKEN", "FIRST_TOKEN_OFFSET")
_MOE_GROUPED_MATMUL: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    MOE_GROUPED_MATMUL_SPEC, "moe_grouped_matmul",
    _MOE_INPUTS, named=_MOE_INPUTS, none_inputs=True,
)  # fmt: skip
_MOE_GROUPED_MATMUL_BWD: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    MOE_GROUPED_MATMUL_BWD_SPEC, "moe_grouped_matmul_bwd",
    _MOE_BWD_INPUTS, named=_MOE_BWD_INPUTS, none_inputs=True,
)  # fmt: skip


class FamilyBuilders(NormBuilders, BlockScaleBuilders):
    """The builder methods of the non-attention families (mixed into ``Graph``)."""

    def pointwise(self, *args: Any, **keywords: Any) -> TensorAttributes:
        """Add a pointwise node: ``pointwise(in0, attrs)``, ``pointwise(in0, in1, attrs)`` or
        ``pointwise(in0, in1, in2, attrs)``; returns the virtual ``<node>::OUT_0``.

        ``attrs`` (a :class:`PointwiseAttributes`) may be left out or given as ``attributes=``;
        keywords set its fields (``name``, ``mode``, ``compute_data_type``, ``relu_lower_clip``,
        ``relu_upper_clip``, ``relu_lower_clip_slope``, ``swish_beta``, ``elu_alpha``,
        ``softplus_beta``, ``axis``). Unnamed inputs are renamed ``<node>::IN_0`` … .

        Raises:
            HipdnnError: ``INVALID_VALUE`` for no input or more than three, an argument of the
                wrong type or an unknown keyword.
        """
        given = keywords.pop("attributes", None)
        tensors = list(args)
        if tensors and not isinstance(tensors[-1], TensorAttributes):
            if given is not None:
                raise HipdnnError(ErrorCode.INVALID_VALUE, "pointwise() got attributes twice")
            given = tensors.pop()
        if not 1 <= len(tensors) <= 3 or not all(isinstance(t, TensorAttributes) for t in tensors):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "pointwise() takes one, two or three input tensors, then PointwiseAttributes",
            )
        return self._add_family(_POINTWISE, tuple(tensors), given, keywords)

    def matmul(
        self, a: Any = None, b: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a matmul node ``C = A @ B``: ``matmul(a, b, attrs)``; returns the virtual
        ``<node>::C``. Unnamed inputs are renamed ``<node>::A`` and ``<node>::B``; keywords set
        the attributes' ``name`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        return self._add_family(_MATMUL, (a, b), attributes, keywords)

    def reduction(self, x: Any = None, *args: Any, **keywords: Any) -> TensorAttributes:
        """Add a reduction node: ``reduction(x, attrs)`` or ``reduction(x, y, attrs)``; returns
        Y: the given ``y``, else a virtual ``<node>::Y`` whose dims the caller sets (they say
        which axes reduce; nothing infers them). An unnamed X (and an unnamed given Y) is
        renamed ``<node>::X`` (``<node>::Y``);
        keywords set the attributes' ``name``, ``mode``, ``is_deterministic`` and
        ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for arguments that are not tensors, attributes of
                another class, too many arguments or an unknown keyword.
        """
        given = keywords.pop("attributes", None)
        rest = list(args)
        if rest and not isinstance(rest[-1], TensorAttributes):
            if given is not None:
                raise HipdnnError(ErrorCode.INVALID_VALUE, "reduction() got attributes twice")
            given = rest.pop()
        if (
            not isinstance(x, TensorAttributes)
            or len(rest) > 1
            or not all(isinstance(t, TensorAttributes) for t in rest)
        ):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "reduction() takes tensor X [and tensor Y], then ReductionAttributes",
            )
        made = {"Y": rest[0]} if rest else None
        return self._add_family(_REDUCTION, (x,), given, keywords, given_outputs=made)

    # ----- convolution ---------------------------------------------------------------------

    def conv_fprop(
        self, x: Any = None, w: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a forward convolution ``Y = conv(X, W)``: ``conv_fprop(x, w, attrs)``; returns
        the virtual ``<node>::Y`` (dims and strides inferred). Unnamed inputs are renamed
        ``<node>::X`` and ``<node>::W``; keywords set the attributes' ``name``,
        ``pre_padding``, ``post_padding``, ``stride``, ``dilation``, ``convolution_mode`` and
        ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        return self._add_family(_CONV_FPROP, (x, w), attributes, keywords)

    def conv_dgrad(
        self, dy: Any = None, w: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a data-gradient convolution ``DX = conv_dgrad(DY, W)``: ``conv_dgrad(dy, w,
        attrs)``; returns the virtual ``<node>::DX`` (dims inferred for one group, strides in
        DY's order). Unnamed inputs are renamed ``<node>::DY`` and ``<node>::W``; keywords as
        :meth:`conv_fprop`'s.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        return self._add_family(_CONV_DGRAD, (dy, w), attributes, keywords)

    def conv_wgrad(
        self, dy: Any = None, x: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a weight-gradient convolution ``DW = conv_wgrad(DY, X)``: ``conv_wgrad(dy, x,
        attrs)`` (hipDNN's binding order); returns the virtual ``<node>::DW`` (dims inferred for
        one group, strides in X's order). Unnamed inputs are renamed ``<node>::DY`` and
        ``<node>::X``; keywords as :meth:`conv_fprop`'s.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        return self._add_family(_CONV_WGRAD, (dy, x), attributes, keywords)

    # ----- MoE grouped matmul (hipDNN's Graph::moe_grouped_matmul / moe_grouped_matmul_bwd) -----
    def moe_grouped_matmul(
        self,
        token: Any = None,
        weight: Any = None,
        first_token_offset: Any = None,
        token_index: Any = None,
        token_ks: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> TensorAttributes:
        """Add a MoE grouped matmul node: ``moe_grouped_matmul(token, weight, first_token_offset,
        token_index, token_ks, attrs)`` (the routing tensors ``None`` where the mode has none);
        returns the virtual ``<node>::OUTPUT``. Unnamed inputs are renamed ``<node>::TOKEN`` …
        ``<node>::TOKEN_KS``; keywords set ``name``, ``mode``, ``top_k`` and
        ``compute_data_type``. A ``None`` input is left unset (validation names it, as hipDNN's).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is neither a tensor nor ``None``,
                attributes of another class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT)
            >>> token, weight = g.tensor(dim=[1, 8, 16]), g.tensor(dim=[2, 16, 32])
            >>> offsets = g.tensor(dim=[2, 1, 1], data_type=hg.DataType.INT32)
            >>> out = g.moe_grouped_matmul(token, weight, offsets, None, None)
            >>> g.validate(); out.get_name(), out.get_dim()
            ('MoeGroupedMatmul_0::OUTPUT', [1, 8, 32])
        """
        inputs = (token, weight, first_token_offset, token_index, token_ks)
        return self._add_family(_MOE_GROUPED_MATMUL, inputs, attributes, keywords)

    def moe_grouped_matmul_bwd(
        self,
        doutput: Any = None,
        token: Any = None,
        first_token_offset: Any = None,
        attributes: Any = None,
        **keywords: Any,
    ) -> TensorAttributes:
        """Add a MoE grouped matmul weight-gradient node: ``moe_grouped_matmul_bwd(doutput,
        token, first_token_offset, attrs)``; returns the virtual ``<node>::DWEIGHT`` (dims
        ``[experts, K, N]`` and column-major strides inferred). Unnamed inputs are renamed
        ``<node>::DOUTPUT``, ``<node>::TOKEN`` and ``<node>::FIRST_TOKEN_OFFSET``; keywords set
        ``name`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is neither a tensor nor ``None``,
                attributes of another class or an unknown keyword.
        """
        inputs = (doutput, token, first_token_offset)
        return self._add_family(_MOE_GROUPED_MATMUL_BWD, inputs, attributes, keywords)

    # ----- custom op (hipDNN's Graph::custom_op) -----
    def custom_op(
        self, inputs: Any = None, n_outputs: Any = None, attributes: Any = None, **keywords: Any
    ) -> list[TensorAttributes]:
        """Add a custom (plugin-defined) op node: ``custom_op(inputs, n_outputs, attrs)``;
        returns its ``n_outputs`` new virtual outputs ``<node>::OUT_<i>``, whose dims, strides
        (and data types, if not the graph's) the caller sets: nothing infers them. Unnamed
        inputs are renamed ``<node>::IN_<i>``; keywords set ``name``, ``custom_op_id``, ``data``
        and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not a list of tensors, a count
                that is not a non-negative integer or above the wire's 65,536 tensors
                (:data:`~hipdnn_graph.descriptors.wire_rules.MAX_TENSORS`), attributes of
                another class or an unknown keyword (each before any tensor is made).

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT)
            >>> x = g.tensor(dim=[4, 8])
            >>> (y,) = g.custom_op([x], 1, custom_op_id="example.identity")
            >>> _ = y.set_dim([4, 8]).set_stride([8, 1]).set_output(True)
            >>> g.validate(); x.get_name(), y.get_name()
            ('CustomOp_0::IN_0', 'CustomOp_0::OUT_0')
        """
        tensors = list(inputs) if isinstance(inputs, list | tuple) else None
        if tensors is None or not all(isinstance(t, TensorAttributes) for t in tensors):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "custom_op() takes a list of input tensors, an output count, then "
                "CustomOpAttributes",
            )
        if isinstance(n_outputs, bool) or not isinstance(n_outputs, int) or n_outputs < 0:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"custom_op() takes a non-negative output count, got {n_outputs!r}",
            )
        if n_outputs > MAX_TENSORS:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"custom_op() takes at most {MAX_TENSORS} outputs (the most tensors a graph "
                f"holds on the wire), got {n_outputs}",
            )
        attrs = self._family_attributes(attributes, CustomOpNode, keywords, "custom_op")
        name_unnamed(attrs.name, ((t, f"IN_{i}") for i, t in enumerate(tensors)))
        outputs = [self._output_tensor(f"{attrs.name}::OUT_{i}") for i in range(n_outputs)]
        attrs.set_inputs(tensors).set_outputs(outputs)
        self._add_node(CustomOpNode(attrs, self.attributes))
        return outputs
