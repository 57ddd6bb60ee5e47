"""A philox keep mask drawn block by block, where the math reads it.

The reference's math takes a ``[B|1, H|1, Sq, Skv]`` dropout mask and reads it one block at a
time (a tile of the tiled path, a batch chunk of the untiled one). :class:`PhiloxKeepMask` stands
in for that array: indexing draws just the indexed block from :mod:`hipdnn_graph.philox`, so a
philox-dropout node never holds a mask larger than the math's own scores.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.philox import dropout_keep_mask
    >>> lazy = PhiloxKeepMask(seed=3, offset=5, p=0.25, shape=(2, 3, 8, 9))
    >>> whole = dropout_keep_mask(3, 5, 0.25, (2, 3, 8, 9))
    >>> bool((lazy[1, 0:2, 3:5, 4:9] == whole[1, 0:2, 3:5, 4:9]).all())
    True
    >>> bool((np.asarray(lazy) == whole).all())
    True
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import numpy.typing as npt

from hipdnn_graph.philox import dropout_keep_mask

__all__ = ["PhiloxKeepMask"]


class PhiloxKeepMask:
    """The keep mask of one philox-dropout call, ``[B, H, Sq, Skv]`` bool, drawn on indexing.

    Indexing takes up to four integers or slices of step 1 (the forms the math uses) and returns
    a NumPy array, as indexing a NumPy array would; ``np.asarray`` draws the whole mask.
    """

    ndim = 4
    dtype = np.dtype(np.bool_)

    def __init__(self, seed: int, offset: int, p: float, shape: tuple[int, int, int, int]):
        self.seed = seed
        self.offset = offset
        self.p = p
        self.shape = shape

    def __repr__(self) -> str:
        return (
            f"PhiloxKeepMask(seed={self.seed}, offset={self.offset}, p={self.p}, "
            f"shape={self.shape})"
        )

    def __getitem__(self, key: Any) -> npt.NDArray[np.bool_]:
        items = key if isinstance(key, tuple) else (key,)
        if len(items) > 4:
            raise IndexError(f"too many indices for a 4-D mask: {key!r}")
        spans: list[tuple[int, int]] = []
        drop: list[int] = []  # integer indices remove their dimension, as in NumPy
        for axis, size in enumerate(self.shape):
            item = items[axis] if axis < len(items) else slice(None)
            if isinstance(item, slice):
                start, stop, step = item.indices(size)
                if step != 1:
                    raise IndexError(f"PhiloxKeepMask takes slices of step 1, got {item!r}")
                spans.append((start, max(start, stop)))
            else:
                index = operator.index(item)
                index = index + size if index < 0 else index
                if not 0 <= index < size:
                    raise IndexError(f"index {item} is out of bounds for axis {axis} of {size}")
                spans.append((index, index + 1))
                drop.append(axis)
        block = dropout_keep_mask(
            self.seed, self.offset, self.p, self.shape,
            batches=spans[0], heads=spans[1], rows=spans[2], cols=spans[3],
        )  # fmt: skip
        return block.reshape([n for axis, n in enumerate(block.shape) if axis not in drop])

    def __array__(self, dtype: Any = None, copy: Any = None) -> npt.NDArray[Any]:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)
