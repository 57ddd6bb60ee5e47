"""The NumPy reference's philox keep mask, drawn block by block where the math reads it: the
same numbers as the whole mask on every code path (untiled, batch chunks, tiles), and no block
larger than the path's own work."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hipdnn_graph.philox import dropout_keep_mask
from hipdnn_graph_numpy_reference import philox_mask, sdpa_math, sdpa_problem
from hipdnn_graph_numpy_reference.philox_mask import PhiloxKeepMask

SHAPE = (3, 4, 9, 11)
P = 0.375


def _lazy() -> PhiloxKeepMask:
    return PhiloxKeepMask(2**40 + 5, 6, P, SHAPE)


@pytest.mark.parametrize(
    "key",
    [
        (1, slice(0, 2), slice(3, 5), slice(4, 11)),
        (slice(None), 2),
        (0,),
        slice(1, 3),
        (-1, -2, slice(8, 20), slice(None, 4)),
        (slice(2, 1), 0, 0, 0),
    ],
)
def test_indexing_matches_the_whole_mask(key: Any) -> None:
    whole = dropout_keep_mask(2**40 + 5, 6, P, SHAPE)
    got = _lazy()[key]
    want = whole[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(_lazy()), whole)


@pytest.mark.parametrize("key", [(0, 0, 0, 0, 0), (slice(0, 4, 2),), (3,), (0, -5)])
def test_bad_indices_raise_index_error(key: Any) -> None:
    with pytest.raises(IndexError):
        _lazy()[key]


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    b, h, sq, skv = SHAPE
    return {
        "q": rng.standard_normal((b, h, sq, 8)),
        "k": rng.standard_normal((b, 2, skv, 8)),
        "v": rng.standard_normal((b, 2, skv, 8)),
        "do": rng.standard_normal((b, h, sq, 8)),
    }


@pytest.mark.parametrize("path", ["untiled", "batch_chunks", "tiles"])
def test_every_code_path_applies_the_same_mask(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "batch_chunks":  # one batch element per call of the untiled path
        monkeypatch.setattr(sdpa_problem, "TILE_BYTES", 4 * 9 * 11 * 8)
    elif path == "tiles":
        monkeypatch.setattr(sdpa_problem, "SMALL_PATH", False)
    x = _inputs()
    kw: dict[str, Any] = {"scale": 0.5, "dropout_scale": 1 / (1 - P), "compute_dtype": np.float64,
                          "right_bound": 2}  # fmt: skip
    whole = dropout_keep_mask(2**40 + 5, 6, P, SHAPE)
    block_q = 4 if path == "tiles" else None
    o, stats = sdpa_math.sdpa_forward(x["q"], x["k"], x["v"], dropout_mask=_lazy(),
                                      block_q=block_q, **kw)  # fmt: skip
    o2, stats2 = sdpa_math.sdpa_forward(x["q"], x["k"], x["v"], dropout_mask=whole,
                                        block_q=block_q, **kw)  # fmt: skip
    np.testing.assert_array_equal(o, o2)
    np.testing.assert_array_equal(stats, stats2)
    grads = sdpa_math.sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats,
                                    dropout_mask=_lazy(), block_q=block_q, **kw)  # fmt: skip
    grads2 = sdpa_math.sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats,
                                     dropout_mask=whole, block_q=block_q, **kw)  # fmt: skip
    for a, b in zip(grads[:3], grads2[:3], strict=True):
        np.testing.assert_array_equal(a, b)


def test_tiles_draw_blocks_not_the_whole_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdpa_problem, "SMALL_PATH", False)
    drawn: list[int] = []
    real = philox_mask.dropout_keep_mask

    def recording(*args: Any, **kw: Any) -> np.ndarray:
        block = real(*args, **kw)
        drawn.append(block.size)
        return block

    monkeypatch.setattr(philox_mask, "dropout_keep_mask", recording)
    x = _inputs()
    sdpa_math.sdpa_forward(x["q"], x["k"], x["v"], scale=0.5, dropout_mask=_lazy(),
                           dropout_scale=1.6, block_q=4)  # fmt: skip
    assert drawn and max(drawn) <= SHAPE[1] * 4 * SHAPE[3] < int(np.prod(SHAPE))


def test_a_philox_mask_of_another_shape_is_refused() -> None:
    x = _inputs()
    with pytest.raises(ValueError, match="philox mask of shape"):
        sdpa_math.sdpa_forward(x["q"], x["k"], x["v"], scale=0.5,
                               dropout_mask=PhiloxKeepMask(1, 2, P, (1, 4, 9, 11)))  # fmt: skip
