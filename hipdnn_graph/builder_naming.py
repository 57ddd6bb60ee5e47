"""How the family builders name what a caller left unnamed, as hipDNN's ``Graph`` does.

Example:
    >>> import hipdnn_graph as hg
    >>> x = hg.TensorAttributes()
    >>> name_unnamed("mm", [(x, "A"), (None, "B")])
    >>> x.get_name()
    'mm::A'
"""

from __future__ import annotations

from collections.abc import Iterable

from .tensor import TensorAttributes

__all__ = ["name_unnamed"]


def name_unnamed(node: str, tensors: Iterable[tuple[TensorAttributes | None, str]]) -> None:
    """Name each input tensor that has no name ``<node>::<slot>``, as hipDNN's ``Graph`` does
    when it adds a node (absent optional inputs, ``None``, are skipped)."""
    for tensor, slot in tensors:
        if tensor is not None and not tensor.name:
            tensor.name = f"{node}::{slot}"
