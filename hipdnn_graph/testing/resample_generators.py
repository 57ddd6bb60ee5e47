"""Random valid graphs of the resample (pooling) family for the conformance kit
(:data:`~hipdnn_graph.testing.FAMILIES` registers it as ``"resample"``); the INDEX a ``MAXPOOL``
backward reads gets values its forward could write from the kit's input maker
(:mod:`hipdnn_graph.testing.input_constraints`).

A graph holds one resample forward node (Y, and for ``MAXPOOL`` half the time an INDEX of INT32
or INT8) or one resample backward node (DX from DY and, for ``MAXPOOL``, an INDEX): 1-3 spatial
dims, a window, stride and pre/post padding per dim (padding below the window, so every window
holds an element of X), any of the modes hipDNN defines math for (``MAXPOOL``,
``AVGPOOL_EXCLUDE_PADDING``, ``AVGPOOL_INCLUDE_PADDING``) with ``NEG_INF_PAD`` or ``ZERO_PAD``,
NCHW or channels-last.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.types import DataType
    >>> g, features = draw_resample(np.random.default_rng(0), DataType.FLOAT, 0)
    >>> g.validate(); g.nodes[0].get_node_type().name.startswith("RESAMPLE")
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph
from ..types import DataType, PaddingMode, ResampleMode
from .draw_common import draw_dims, layout_strides, mark_output, new_graph, pick

__all__ = ["draw_resample"]

_MODES = (ResampleMode.MAXPOOL, ResampleMode.AVGPOOL_EXCLUDE_PADDING,
          ResampleMode.AVGPOOL_INCLUDE_PADDING)  # fmt: skip
_PADDINGS = (PaddingMode.NEG_INF_PAD, PaddingMode.ZERO_PAD)
_INDEX_TYPES = (DataType.INT32, DataType.INT8)


def _geometry(
    rng: np.random.Generator, spatial: int
) -> tuple[dict[str, Any], list[int], list[int]]:
    """Members, input sizes and output sizes of a random pooling."""
    window = draw_dims(rng, spatial, high=4)
    stride = draw_dims(rng, spatial, high=4)
    pre = [int(rng.integers(0, w)) for w in window]
    post = [int(rng.integers(0, w)) for w in window]
    sizes, outs = [], []
    for w, s, p, q in zip(window, stride, pre, post, strict=True):
        size = max(1, w - p - q) + int(rng.integers(0, 6))
        sizes.append(size)
        outs.append((size + p + q - w) // s + 1)
    members = {"window": window, "stride": stride, "pre_padding": pre, "post_padding": post}
    return members, sizes, outs


def draw_resample(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """A resample forward or backward node (see the module doc)."""
    kind = pick(rng, ("fwd", "bwd"))
    spatial = int(rng.integers(1, 4))
    mode, padding = pick(rng, _MODES), pick(rng, _PADDINGS)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    members, sizes, outs = _geometry(rng, spatial)
    channels_last = rng.random() < 0.5
    x_dims, y_dims = [n, c, *sizes], [n, c, *outs]
    x_strides = layout_strides(x_dims, channels_last)
    y_strides = layout_strides(y_dims, channels_last)
    index_type = pick(rng, _INDEX_TYPES)
    g = new_graph(f"resample_{seed}", io)
    keywords = {"name": "pool", "resample_mode": mode, "padding_mode": padding, **members}
    features = {kind, mode.name, padding.name, f"spatial={spatial}"}
    features |= {"channels_last"} if channels_last else set()
    if any(s < w for s, w in zip(members["stride"], members["window"], strict=True)):
        features.add("overlapping")
    if kind == "fwd":
        with_index = mode == ResampleMode.MAXPOOL and rng.random() < 0.5
        x = g.tensor(name="X", dim=x_dims, stride=x_strides)
        y, index = g.resample(x, generate_index=with_index, **keywords)
        mark_output(y, y_dims, y_strides)
        if index is not None:
            mark_output(index, y_dims, y_strides)
            index.set_data_type(index_type)
            features.add(f"index={index_type.name}")
        return g, features
    dy = g.tensor(name="DY", dim=y_dims, stride=y_strides)
    index = None
    if mode == ResampleMode.MAXPOOL:
        index = g.tensor(name="INDEX", dim=y_dims, stride=y_strides, data_type=index_type)
        features.add(f"index={index_type.name}")
    dx = g.resample_bwd(dy, index=index, **keywords)
    mark_output(dx, x_dims, x_strides)
    return g, features
