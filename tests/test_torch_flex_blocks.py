"""The closed-form padding block masks of the flex engine against torch's ``create_block_mask``.

``create_block_mask`` (FlexAttention's own, evaluating the mask modifier on every pair and
sorting) is the independent reference: every tensor of the block mask must be equal, for random
lengths (empty, one, cut inside a block, full), bands with positive and negative bounds, both
diagonal alignments and sizes that are not multiples of the block.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph_torch_rocm.kernels import _flex_blocks as blocks  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import flex  # noqa: E402
from hipdnn_graph_torch_rocm.kernels._flex_mods import Features, mask_mod  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

pytestmark = pytest.mark.skipif(not flex.flex_available(), reason="torch has no FlexAttention")


def _assert_same(f: Features, len_q: list[int], len_kv: list[int]) -> None:
    from torch.nn.attention.flex_attention import create_block_mask

    lq = torch.tensor(len_q, dtype=torch.int32)
    lk = torch.tensor(len_kv, dtype=torch.int32)
    mod = mask_mod(f, lq, lk)
    want = create_block_mask(mod, len(len_q), None, f.sq, f.skv, device="cpu")
    got = blocks.padding_block_mask(f, lq, lk, mod)
    for name in blocks.FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.shape, b.shape)
        assert torch.equal(a, b), f"{name} differs for {f}, lengths {len_q}, {len_kv}"
    assert got.seq_lengths == want.seq_lengths and got.BLOCK_SIZE == want.BLOCK_SIZE


@pytest.mark.parametrize(
    ("sq", "skv", "kw", "len_q", "len_kv"),
    [
        (512, 512, {}, [300], [512]),
        (384, 640, {}, [0, 384], [640, 0]),  # an empty query side, an empty key side
        (130, 129, {}, [1, 130], [129, 1]),  # one block and one row past a block
        (256, 640, {"bottom_right": True, "right_bound": 0}, [256, 100], [640, 50]),
        (640, 256, {"bottom_right": True, "right_bound": 0}, [640, 300], [256, 256]),
        (700, 700, {"left_bound": 130, "right_bound": 140}, [700, 511], [650, 700]),
        (384, 384, {"left_bound": 0, "right_bound": 0}, [384], [384]),  # the diagonal only
        (384, 384, {"left_bound": -5, "right_bound": 260}, [384], [300]),
        (384, 384, {"left_bound": 3, "right_bound": -5}, [384], [384]),  # nothing visible
        (300, 256, {"bottom_right": True, "left_bound": 100}, [300, 7], [0, 256]),
    ],
)
def test_closed_form_equals_create_block_mask(
    sq: int, skv: int, kw: dict[str, Any], len_q: list[int], len_kv: list[int]
) -> None:
    _assert_same(Features(sq=sq, skv=skv, padding=True, **kw), len_q, len_kv)


def test_closed_form_equals_create_block_mask_on_random_cases() -> None:
    rng = random.Random(2026)
    for _ in range(80):
        sq = rng.choice([1, 5, 128, 130, 256, 300, 384, 700])
        skv = rng.choice([1, 7, 128, 129, 256, 384, 640])
        f = Features(
            sq=sq,
            skv=skv,
            padding=True,
            bottom_right=rng.choice([False, True]),
            left_bound=rng.choice([None, None, 0, 3, 100, 130, 300, -5]),
            right_bound=rng.choice([None, None, 0, 0, 5, 140, -3, 260]),
        )
        b = rng.choice([1, 2, 3])
        len_q = [rng.choice([0, 1, sq, max(0, sq - 1), rng.randint(0, sq)]) for _ in range(b)]
        len_kv = [rng.choice([0, 1, skv, rng.randint(0, skv)]) for _ in range(b)]
        _assert_same(f, len_q, len_kv)


def _padding_spec() -> flex.FlexSpec:
    return flex.FlexSpec(b=2, h=2, hk=2, hv=2, sq=24, skv=40, d=16, dv=16, dtype=torch.float32,
                         device="cpu", forward=False, padding=True,
                         call=SdpaCall(0.25, bottom_right=True, right_bound=0))  # fmt: skip


def _grads(kernel: Any, seed: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    q, o, do = (torch.randn(2, 2, 24, 16, generator=g) for _ in range(3))
    k, v = (torch.randn(2, 2, 40, 16, generator=g) for _ in range(2))
    stats = torch.randn(2, 2, 24, 1, generator=g).abs() + 3
    lens = {"seq_len_q": torch.tensor([24, 9]).view(2, 1, 1, 1),
            "seq_len_kv": torch.tensor([33, 40]).view(2, 1, 1, 1)}  # fmt: skip
    return kernel.backward(q, k, v, o, do, stats, scale=0.25, **lens)[:3]


def test_padding_kernels_build_their_masks_in_closed_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel checks the closed form against create_block_mask when it is built and uses it;
    where they differ it says so and keeps create_block_mask, with the same gradients."""
    monkeypatch.setenv(flex.CPU_ENV, "1")
    kernel = flex.FlexKernel(_padding_spec())
    assert kernel._padding_blocks is not None and kernel.notes == []
    want = _grads(kernel, 0)

    real = blocks.padding_blocks

    def no_queries(f: Features, lq: Any, lk: Any, block: int = blocks.BLOCK) -> tuple[Any, ...]:
        return real(f, lq * 0, lk, block)

    monkeypatch.setattr(blocks, "padding_blocks", no_queries)
    fallback = flex.FlexKernel(_padding_spec())
    assert fallback._padding_blocks is None
    assert any("differs from create_block_mask" in n for n in fallback.notes), fallback.notes
    for a, b in zip(_grads(fallback, 0), want, strict=True):
        torch.testing.assert_close(a, b)
