"""Record the Philox dropout masks of torch's fused SDPA kernels (GPU research probe).

Writes ``$OUT/dropout_probe.npz`` and ``$OUT/dropout_probe.json``: for each fused forward op
(memory-efficient, flash, cuDNN) the keep mask it applied for a seed and offset set on the CUDA
generator, the seed/offset tensors it returned, how far it advanced the generator, and
``_fill_mem_eff_dropout_mask_`` masks at odd shapes and offsets. The mask of a forward is read
back from its output: with Q = 0 every row's softmax is uniform (1/N), and with V = [I_N | 0]
the output row i is M[i, :] / (N (1 - p)), so M = O · N (1 - p) > 0.5.

Run on the device machine: ``python3 benchmarks/probe_dropout_masks.py``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np
import torch

OUT = os.environ.get("OUT", ".")
report: dict[str, object] = {"torch": torch.__version__}
arrays: dict[str, np.ndarray] = {}


def note(key: str, value: object) -> None:
    report[key] = value
    print(key, "=", value, flush=True)


def schema(name: str) -> str:
    try:
        return str(getattr(torch.ops.aten, name).default._schema)
    except Exception as exc:
        return f"missing: {exc}"


for op in (
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward",
    "_fill_mem_eff_dropout_mask_",
    "_efficient_attention_forward",
    "_efficient_attention_backward",
    "_flash_attention_forward",
    "_flash_attention_backward",
):
    note(f"schema.{op}", schema(op))

dev = torch.device("cuda")
torch.cuda.init()
gen = torch.cuda.default_generators[0]


def inputs(b: int, h: int, m: int, n: int, d: int, dtype: torch.dtype):
    q = torch.zeros(b, h, m, d, device=dev, dtype=dtype)
    k = torch.randn(b, h, n, d, device=dev, dtype=dtype)
    v = torch.zeros(b, h, n, d, device=dev, dtype=dtype)
    eye = torch.eye(n, device=dev, dtype=dtype)
    v[..., :n] = eye
    return q, k, v


def mask_from_out(out: torch.Tensor, n: int, p: float) -> np.ndarray:
    m = out[..., :n].float() * n * (1.0 - p)
    return (m > 0.5).cpu().numpy()


def run_fwd(kind: str, q, k, v, p: float):
    a = torch.ops.aten
    if kind == "efficient":
        r = a._scaled_dot_product_efficient_attention(q, k, v, None, True, p, False)
        return r[0], r[2], r[3], r
    if kind == "flash":
        r = a._scaled_dot_product_flash_attention(q, k, v, p, False, True)
        return r[0], r[6], r[7], r
    r = a._scaled_dot_product_cudnn_attention(q, k, v, None, True, p, False, False)
    return r[0], r[6], r[7], r


def tinfo(t) -> object:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    vals = t.detach().cpu().reshape(-1)[:4].tolist()
    return {"dtype": str(t.dtype), "device": str(t.device), "shape": list(t.shape), "head": vals}


cases = [
    # (b, h, m, n, d, p, seed, offset)
    (2, 3, 64, 64, 64, 0.3, 1234, 0),
    (2, 3, 37, 40, 64, 0.25, 98765, 8),
    (1, 2, 64, 64, 64, 0.1, 2**40 + 7, 4096),
    (3, 1, 17, 24, 64, 0.5, 7, 12),
]
for kind in ("efficient", "flash", "cudnn"):
    for ci, (b, h, m, n, d, p, seed, offset) in enumerate(cases):
        tag = f"{kind}.{ci}"
        try:
            q, k, v = inputs(b, h, m, n, d, torch.float16)
            gen.manual_seed(seed)
            gen.set_offset(offset)
            before = gen.get_offset()
            out, s_t, o_t, r = run_fwd(kind, q, k, v, p)
            torch.cuda.synchronize()
            after = gen.get_offset()
            mask = mask_from_out(out, n, p)
            arrays[f"{tag}.mask"] = mask
            note(
                f"{tag}.meta",
                {
                    "shape": [b, h, m, n, d],
                    "p": p,
                    "seed": seed,
                    "offset": offset,
                    "offset_before": before,
                    "offset_after": after,
                    "returned_seed": tinfo(s_t),
                    "returned_offset": tinfo(o_t),
                    "keep_fraction": float(mask.mean()),
                    "outputs": [tinfo(x) for x in r],
                },
            )
            if kind == "flash":
                dbg = r[8]
                arrays[f"{tag}.debug_mask"] = dbg.float().cpu().numpy()
            if kind == "efficient":
                fill = torch.empty(b, h, m, n, device=dev, dtype=torch.float32)
                torch.ops.aten._fill_mem_eff_dropout_mask_(fill, p, seed, offset)
                fm = (fill != 0).cpu().numpy()
                arrays[f"{tag}.fill"] = fm
                arrays[f"{tag}.fill_values"] = fill.cpu().numpy()
                note(f"{tag}.fill_equals_forward", bool((fm == mask).all()))
            # determinism: same seed/offset twice
            gen.manual_seed(seed)
            gen.set_offset(offset)
            out2, *_ = run_fwd(kind, q, k, v, p)
            note(f"{tag}.repeat_same", bool(torch.equal(out, out2)))
        except Exception:
            note(f"{tag}.error", traceback.format_exc()[-1500:])

# the fill op alone at odd shapes and offsets not a multiple of 4
fill_cases = [
    (1, 1, 5, 7, 0.5, 42, 0),
    (1, 1, 5, 7, 0.5, 42, 1),
    (1, 1, 5, 7, 0.5, 42, 3),
    (2, 3, 33, 129, 0.2, 2**33 + 11, 17),
    (1, 2, 130, 300, 0.7, 2**63 - 5, 2**40 + 3),
]
for fi, (b, h, m, n, p, seed, offset) in enumerate(fill_cases):
    tag = f"fill.{fi}"
    try:
        fill = torch.empty(b, h, m, n, device=dev, dtype=torch.float32)
        torch.ops.aten._fill_mem_eff_dropout_mask_(fill, p, seed, offset)
        arrays[f"{tag}.values"] = fill.cpu().numpy()
        note(f"{tag}.meta", {"shape": [b, h, m, n], "p": p, "seed": seed, "offset": offset})
    except Exception:
        note(f"{tag}.error", traceback.format_exc()[-1500:])


# a backward fed hand-made seed/offset tensors equals the one fed the forward's own
def backward_rng_probe(kind: str) -> None:
    try:
        b, h, m, n, d, p = 2, 4, 128, 128, 64, 0.2
        torch.manual_seed(0)
        q = torch.randn(b, h, m, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(b, h, n, d, device=dev, dtype=torch.bfloat16)
        v = torch.randn(b, h, n, d, device=dev, dtype=torch.bfloat16)
        do = torch.randn(b, h, m, d, device=dev, dtype=torch.bfloat16)
        gen.manual_seed(555)
        gen.set_offset(64)
        a = torch.ops.aten
        if kind == "efficient":
            out, lse, s_t, o_t = a._scaled_dot_product_efficient_attention(
                q, k, v, None, True, p, False
            )

            def bwd(s, o, out=out, lse=lse):
                return a._scaled_dot_product_efficient_attention_backward(
                    do, q, k, v, None, out, lse, s, o, p, [True, True, True, False], False
                )[:3]
        elif kind == "flash":
            r = a._scaled_dot_product_flash_attention(q, k, v, p, False, False)
            out, lse, cq, ck, mq, mk, s_t, o_t = r[:8]

            def bwd(s, o, out=out, lse=lse, cq=cq, ck=ck, mq=mq, mk=mk):
                return a._scaled_dot_product_flash_attention_backward(
                    do, q, k, v, out, lse, cq, ck, mq, mk, p, False, s, o
                )[:3]
        else:
            r = a._scaled_dot_product_cudnn_attention(q, k, v, None, True, p, False, False)
            out, lse, cq, ck, mq, mk, s_t, o_t = r[:8]

            def bwd(s, o, out=out, lse=lse, cq=cq, ck=ck, mq=mq, mk=mk):
                return a._scaled_dot_product_cudnn_attention_backward(
                    do, q, k, v, out, lse, s, o, None, cq, ck, mq, mk, p, False
                )[:3]

        g_own = bwd(s_t, o_t)
        made_s = s_t.clone()  # flash: rng_state (seed, offset) as uint64[2]
        if s_t.numel() == 1:
            made_s = torch.tensor(555, dtype=s_t.dtype, device=s_t.device).reshape(s_t.shape)
        made_o = o_t.clone()
        if s_t.numel() == 1:
            made_o = torch.tensor(64, dtype=o_t.dtype, device=o_t.device).reshape(o_t.shape)
        g_made = bwd(made_s, made_o)
        same = [bool(torch.equal(x, y)) for x, y in zip(g_own, g_made, strict=True)]
        note(f"bwd_made_rng.{kind}", {"equal": same, "seed": tinfo(s_t), "offset": tinfo(o_t)})
        # host sync check of forward+backward with the generator set (pass-by-value path)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            gen.manual_seed(555)
            gen.set_offset(64)
            g_again = bwd(made_s, made_o)
            note(f"bwd_made_rng.{kind}.no_sync", True)
        except Exception as exc:
            note(f"bwd_made_rng.{kind}.no_sync", f"sync: {exc}")
        finally:
            torch.cuda.set_sync_debug_mode(0)
        del g_again
    except Exception:
        note(f"bwd_made_rng.{kind}.error", traceback.format_exc()[-1500:])


for kind in ("efficient", "flash", "cudnn"):
    backward_rng_probe(kind)

# how F.scaled_dot_product_attention advances the generator per backend
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

for be in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
    try:
        b, h, m, n, d = 8, 12, 1024, 1024, 64
        q = torch.randn(b, h, m, d, device=dev, dtype=torch.bfloat16)
        gen.manual_seed(1)
        before = gen.get_offset()
        with sdpa_kernel(be):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.1, is_causal=True)
        after = gen.get_offset()
        advance = {"shape": [b, h, m, n, d], "before": before, "after": after}
        note(f"sdpa_advance.{be.name}", advance)
    except Exception:
        note(f"sdpa_advance.{be.name}.error", traceback.format_exc()[-800:])

np.savez_compressed(os.path.join(OUT, "dropout_probe.npz"), **arrays)
with open(os.path.join(OUT, "dropout_probe.json"), "w") as fh:
    json.dump(report, fh, indent=1, default=str)
print("done", file=sys.stderr)
