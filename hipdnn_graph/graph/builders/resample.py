"""``Graph`` builder methods of hipDNN's resample (pooling) families: ``resample``,
``resample_fwd`` and ``resample_bwd``, named and shaped as hipDNN's ``Graph`` does.

:class:`ResampleBuilders` is a mixin of :class:`~hipdnn_graph.Graph`, next to
:class:`~hipdnn_graph.graph.builders.families.FamilyBuilders` (whose attribute handling it uses).

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[1, 1, 4, 4], stride=[16, 16, 4, 1])
    >>> y = g.resample_fwd(x, resample_mode=hg.ResampleMode.AVGPOOL_INCLUDE_PADDING,
    ...     padding_mode=hg.PaddingMode.ZERO_PAD, pre_padding=[0, 0], post_padding=[0, 0],
    ...     stride=[2, 2], window=[2, 2])
    >>> g.validate(); y.get_name(), y.get_dim()
    ('ResampleFwd_0::Y', [1, 1, 2, 2])
"""

from __future__ import annotations

from typing import Any

from ...nodes.resample_bwd import RESAMPLE_BWD_SPEC
from ...nodes.resample_fwd import RESAMPLE_FWD_SPEC
from ...tensor import TensorAttributes
from ...types import DataType, ResampleMode
from .base import BuilderHost, FamilyRecipe

__all__ = ["ResampleBuilders"]


def _index(a: Any) -> bool:
    """A resample forward writes an INDEX: ``MAXPOOL`` with ``generate_index`` set."""
    return bool(a.generate_index and a.resample_mode == ResampleMode.MAXPOOL)


_RESAMPLE: FamilyRecipe[tuple[TensorAttributes, TensorAttributes | None]] = FamilyRecipe(
    RESAMPLE_FWD_SPEC, "resample", ("X",), named=("X",), made_when={"INDEX": _index},
    spelled={"INDEX": "Index"}, output_types={"INDEX": DataType.INT32},
)  # fmt: skip
_RESAMPLE_FWD: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    RESAMPLE_FWD_SPEC, "resample_fwd", ("X",), named=("X",), made_when={"INDEX": _index},
    prepare=lambda a: a.set_generate_index(False), returns=("Y",),
)  # fmt: skip
_RESAMPLE_BWD: FamilyRecipe[TensorAttributes] = FamilyRecipe(
    RESAMPLE_BWD_SPEC,
    "resample_bwd",
    ("DY", "INDEX"),
    named=("DY", "INDEX"),
    optional=("INDEX",),
)


class ResampleBuilders(BuilderHost):
    """The resample builder methods (mixed into ``Graph``)."""

    def resample(
        self, x: Any = None, attributes: Any = None, **keywords: Any
    ) -> tuple[TensorAttributes, TensorAttributes | None]:
        """Add a resample forward (pooling) node: ``resample(x, attrs)``; returns the virtual
        ``(<node>::Y, <node>::Index)``, the INDEX (INT32) only for ``MAXPOOL`` with
        ``generate_index`` (else ``None``). An unnamed X is renamed ``<node>::X``; keywords set
        the attributes' ``name``, ``pre_padding``, ``post_padding``, ``stride``, ``window``,
        ``resample_mode``, ``padding_mode``, ``generate_index`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is not a tensor, attributes of
                another class or an unknown keyword.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
            ...              intermediate_data_type=hg.DataType.FLOAT)
            >>> x = g.tensor(name="x", dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
            >>> y, index = g.resample(x, resample_mode=hg.ResampleMode.MAXPOOL,
            ...     padding_mode=hg.PaddingMode.NEG_INF_PAD, pre_padding=[0, 0],
            ...     post_padding=[0, 0], stride=[2, 2], window=[2, 2], generate_index=True)
            >>> g.validate(); y.get_dim(), index.get_name(), index.get_data_type().name
            ([1, 3, 2, 2], 'ResampleFwd_0::Index', 'INT32')
        """
        return self._add_family(_RESAMPLE, (x,), attributes, keywords)

    def resample_fwd(
        self, x: Any = None, attributes: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a resample forward node without an INDEX: ``resample_fwd(x, attrs)`` (the
        attributes' ``generate_index`` is set to ``False``); returns the virtual
        ``<node>::Y``. Naming and keywords as :meth:`resample`'s.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an input that is not a tensor, attributes of
                another class or an unknown keyword.
        """
        return self._add_family(_RESAMPLE_FWD, (x,), attributes, keywords)

    def resample_bwd(
        self, dy: Any = None, attributes: Any = None, index: Any = None, **keywords: Any
    ) -> TensorAttributes:
        """Add a resample backward node: ``resample_bwd(dy, attrs, index=None)`` (``index``:
        the forward's INDEX, needed for ``MAXPOOL``); returns the virtual ``<node>::DX`` (dims
        inferred from DY and the members, strides in DY's order). Unnamed inputs are renamed
        ``<node>::DY`` and ``<node>::INDEX``; keywords set the attributes' ``name``, the four
        members, ``resample_mode``, ``padding_mode`` and ``compute_data_type``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for inputs that are not tensors, attributes of another
                class or an unknown keyword.
        """
        return self._add_family(_RESAMPLE_BWD, (dy, index), attributes, keywords)
