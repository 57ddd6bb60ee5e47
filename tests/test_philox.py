"""The Philox4x32-10 dropout stream (hipdnn_graph.philox) against known answers and against the
masks that CUDA's memory-efficient SDPA kernel drew on an H200 (tests/data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph import philox

DATA = Path(__file__).parent / "data"


def _fixture() -> tuple[dict[str, np.ndarray], dict[str, dict[str, dict[str, object]]]]:
    meta = json.loads((DATA / "philox_dropout_h200.json").read_text())
    with np.load(DATA / "philox_dropout_h200.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, meta


ARRAYS, META = _fixture()


# Random123's kat_vectors for philox4x32 with 10 rounds: (counter, key, expected output)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox_known_answers(counter, key, expected) -> None:
    out = philox.philox4x32_10(counter, key)
    assert tuple(int(w) for w in out) == expected


def test_philox_is_elementwise() -> None:
    ctr = np.array([0, 1, 2**32 - 1], dtype=np.uint64)
    words = philox.philox4x32_10((ctr, 5, 0, 0), (9, 11))
    for n, c in enumerate(ctr):
        single = philox.philox4x32_10((int(c), 5, 0, 0), (9, 11))
        assert [int(w[n]) for w in words] == [int(w) for w in single]


@pytest.mark.parametrize("case", sorted(META["fill"]))
def test_uniforms_equal_the_h200_fill_kernel_bit_for_bit(case: str) -> None:
    m = META["fill"][case]
    for r0, r1 in m["rows"]:
        want = ARRAYS[f"fill.{case}.rows{r0}_{r1}"]
        got = philox.dropout_uniforms(m["seed"], m["offset"], m["shape"], rows=(r0, r1))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), want)


@pytest.mark.parametrize("case", sorted(META["efficient"]))
def test_keep_mask_equals_the_h200_efficient_forward(case: str) -> None:
    m = META["efficient"][case]
    shape = m["shape"]
    want = np.unpackbits(ARRAYS[f"efficient.{case}.mask_bits"])[: np.prod(shape)]
    got = philox.dropout_keep_mask(m["seed"], m["offset"], m["p"], shape)
    np.testing.assert_array_equal(got.reshape(-1), want.astype(bool))


def test_fixture_covers_odd_offsets_and_wide_seeds() -> None:
    offsets = {m["offset"] % 4 for m in META["fill"].values()}
    assert offsets >= {0, 1, 3}
    assert any(m["seed"] >= 2**32 for m in META["fill"].values())
    assert any(m["offset"] >= 2**32 for m in META["fill"].values())
    assert sum(a.nbytes for a in ARRAYS.values()) < 100_000


def test_element_position_is_row_major_plus_offset() -> None:
    shape = (2, 3, 5, 7)
    full = philox.dropout_uniforms(99, 0, (1, 1, 1, 2 * 3 * 5 * 7 + 11)).reshape(-1)
    for offset in (0, 1, 2, 3, 4, 11):
        got = philox.dropout_uniforms(99, offset, shape).reshape(-1)
        np.testing.assert_array_equal(got, full[offset : offset + got.size])


def test_blocks_equal_slices_of_the_whole_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    shape = (2, 3, 33, 129)
    whole = philox.dropout_uniforms(2**40 + 3, 5, shape)
    monkeypatch.setattr(philox, "_CHUNK_BLOCKS", 3)  # many small chunks: same numbers
    np.testing.assert_array_equal(philox.dropout_uniforms(2**40 + 3, 5, shape), whole)
    for rows, cols in (((0, 33), (0, 129)), ((4, 9), (3, 20)), ((32, 33), (128, 129))):
        block = philox.dropout_uniforms(2**40 + 3, 5, shape, rows=rows, cols=cols)
        np.testing.assert_array_equal(block, whole[:, :, rows[0] : rows[1], cols[0] : cols[1]])
    assert philox.dropout_uniforms(1, 2, shape, rows=(3, 3)).shape == (2, 3, 0, 129)
    block = philox.dropout_uniforms(2**40 + 3, 5, shape, batches=(1, 2), heads=(1, 3), cols=(7, 9))
    np.testing.assert_array_equal(block, whole[1:2, 1:3, :, 7:9])


def test_keep_mask_is_the_uniforms_above_p() -> None:
    shape = (2, 3, 17, 40)
    u = philox.dropout_uniforms(11, 3, shape)
    for p in (0.0, 0.1, 0.5, 0.9):
        np.testing.assert_array_equal(philox.dropout_keep_mask(11, 3, p, shape), u > np.float32(p))
    block = philox.dropout_keep_mask(11, 3, 0.5, shape, batches=(1, 2), heads=(2, 3), rows=(4, 5))
    np.testing.assert_array_equal(block, u[1:2, 2:3, 4:5] > 0.5)


def test_int64_values_read_as_unsigned() -> None:
    shape = (1, 2, 3, 4)
    np.testing.assert_array_equal(
        philox.dropout_uniforms(-5, -7, shape), philox.dropout_uniforms(2**64 - 5, 2**64 - 7, shape)
    )
    np.testing.assert_array_equal(
        philox.dropout_uniforms(np.int64(-1), np.int32(3), shape),
        philox.dropout_uniforms(2**64 - 1, 3, shape),
    )


def _block(counter: int, key: tuple[int, int]) -> np.ndarray:
    words = philox.philox4x32_10((counter & 0xFFFFFFFF, counter >> 32, 0, 0), key)
    return philox.uniform_from_bits(np.array([int(w) for w in words], dtype=np.uint32))


def test_offsets_near_the_top_of_64_bits_keep_counting() -> None:
    # offset 2**64 - 6: positions 0-1 are lanes 2-3 of block 2**62 - 2, positions 2-5 block
    # 2**62 - 1, positions 6-9 (stream index 2**64 and up) block 2**62: the counter goes on
    u = philox.dropout_uniforms(3, 2**64 - 6, (1, 1, 1, 12)).reshape(-1)
    np.testing.assert_array_equal(u[0:2], _block(2**62 - 2, (3, 0))[2:])
    np.testing.assert_array_equal(u[2:6], _block(2**62 - 1, (3, 0)))
    np.testing.assert_array_equal(u[6:10], _block(2**62, (3, 0)))
    np.testing.assert_array_equal(u[10:12], _block(2**62 + 1, (3, 0))[:2])


def test_uniform_conversion_and_keep_words() -> None:
    x = np.array([0, 1, 255, 256, 2**24, 2**31 + 128, 2**31 + 129, 2**32 - 129, 2**32 - 1])
    u = philox.uniform_from_bits(x)
    assert u.dtype == np.float32
    want = (x.astype(np.float32) * np.float32(2.0**-32) + np.float32(2.0**-33)).astype(np.float32)
    np.testing.assert_array_equal(u, want)
    assert u.min() > 0.0 and u.max() == 1.0
    rng = np.random.default_rng(0)
    for p in (0.0, 1e-9, 0.1, 0.25, 0.5, 0.7, 0.999999):
        t = philox.dropout_keep_words(p)
        near = np.arange(max(0, t - 600), min(2**32, t + 600), dtype=np.uint64)
        sample = np.concatenate([near, rng.integers(0, 2**32, 20000, dtype=np.uint64)])
        keep = philox.uniform_from_bits(sample.astype(np.uint32)) > np.float32(p)
        np.testing.assert_array_equal(keep, sample >= t)


def test_keep_mask_rate_and_determinism() -> None:
    shape = (2, 4, 64, 96)
    a = philox.dropout_keep_mask(7, 0, 0.3, shape)
    assert a.dtype == np.bool_ and abs(a.mean() - 0.7) < 0.01
    np.testing.assert_array_equal(a, philox.dropout_keep_mask(7, 0, 0.3, shape))
    assert not np.array_equal(a, philox.dropout_keep_mask(8, 0, 0.3, shape))
    assert not np.array_equal(a, philox.dropout_keep_mask(7, 4, 0.3, shape))
    assert philox.dropout_keep_mask(7, 0, 0.0, shape).all()
    assert philox.dropout_scale(0.2) == 1 / 0.8


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda: philox.dropout_uniforms(1.5, 0, (1, 1, 2, 2)), "seed must be an integer"),
        (lambda: philox.dropout_uniforms(2**64, 0, (1, 1, 2, 2)), "does not fit in 64 bits"),
        (lambda: philox.dropout_uniforms(0, -(2**63) - 1, (1, 1, 2, 2)), "offset"),
        (lambda: philox.dropout_uniforms(0, 0, (1, 2, 2)), "shape must be [B, H, Sq, Skv]"),
        (lambda: philox.dropout_uniforms(0, 0, (1, 1, -2, 2)), "shape"),
        (lambda: philox.dropout_uniforms(0, 0, (1, 1, 4, 4), rows=(3, 5)), "rows (3, 5)"),
        (lambda: philox.dropout_uniforms(0, 0, (1, 1, 4, 4), cols=(2, 1)), "cols (2, 1)"),
        (lambda: philox.dropout_uniforms(0, 0, (1, 1, 4, 4), batches=(0, 2)), "batches (0, 2)"),
        (lambda: philox.dropout_keep_mask(0, 0, 0.5, (1, 2, 4, 4), heads=(-1, 1)), "heads"),
        (lambda: philox.dropout_keep_mask(0, 0, 1.0, (1, 1, 2, 2)), "[0, 1)"),
        (lambda: philox.dropout_keep_mask(0, 0, float("nan"), (1, 1, 2, 2)), "[0, 1)"),
        (lambda: philox.dropout_scale(-0.1), "[0, 1)"),
        (lambda: philox.philox4x32_10((0, 0, 0), (0, 0)), "4 words"),
        (lambda: philox.philox4x32_10((0, 0, 0, 0), (2**32, 0)), "key word"),
    ],
)
def test_bad_arguments_raise_invalid_value(call, text: str) -> None:
    with pytest.raises(hg.HipdnnError) as err:
        call()
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert text in err.value.message
