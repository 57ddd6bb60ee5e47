"""Boolean attention masks on the GPU engines (issue 37, item 3; run on the device machine).

A BOOLEAN ``Bias`` (True attends) on each torch engine, forward and backward, bf16 and fp16,
against ``F.scaled_dot_product_attention`` given the same bool mask in float64 on the CPU:
relative error ≤ 1e-2, no NaN. An engine that cannot run it must refuse it in ``check()`` (the
test then skips with the refusal); cuDNN-frontend refuses it by name. A row the mask hides
completely must come out as zeros (the project's convention for a row that sees no key).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import hipdnn_graph as hg  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

ENGINES = [
    "TORCH_SDPA_CUDNN_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_FLEX_ENGINE",
    "TORCH_SDPA_MATH_ENGINE",
]
DTYPES = {"bf16": (torch.bfloat16, hg.DataType.BFLOAT16), "fp16": (torch.float16, hg.DataType.HALF)}
B, H, SQ, SKV, D, SCALE = 2, 4, 128, 160, 64, 0.125
TOL = 1e-2


def _rel(out: Any, ref: Any) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    assert not torch.isnan(out).any(), "NaN in output"
    return float((out - ref).norm() / max(float(ref.norm()), 1e-30))


def _mask(hide_a_row: bool) -> Any:
    g = torch.Generator().manual_seed(5)
    mask = torch.rand(B, 1, SQ, SKV, generator=g) > 0.3
    mask[..., 0] = True
    if hide_a_row:
        mask[1, 0, 7, :] = False
    return mask


def _build(engine: str, io: hg.DataType, backward: bool) -> tuple[hg.Graph, dict[str, Any]]:
    g = hg.Graph(io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    t: dict[str, Any] = {
        "Q": g.tensor(name="Q", dim=[B, H, SQ, D]),
        "K": g.tensor(name="K", dim=[B, H, SKV, D]),
        "V": g.tensor(name="V", dim=[B, H, SKV, D]),
        "M": g.tensor(name="M", dim=[B, 1, SQ, SKV], data_type=hg.DataType.BOOLEAN),
    }
    if backward:
        t["O"], t["dO"] = (
            g.tensor(name="O", dim=[B, H, SQ, D]),
            g.tensor(name="dO", dim=[B, H, SQ, D]),
        )
        t["Stats"] = g.tensor(name="Stats", dim=[B, H, SQ, 1], data_type=hg.DataType.FLOAT)
        t["dQ"], t["dK"], t["dV"] = g.sdpa_backward(
            t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", bias=t["M"],
            attn_scale=SCALE,
        )  # fmt: skip
        outs: tuple[str, ...] = ("dQ", "dK", "dV")
    else:
        t["O"], t["Stats"] = g.sdpa(t["Q"], t["K"], t["V"], name="fwd", generate_stats=True,
                                    bias=t["M"], attn_scale=SCALE)  # fmt: skip
        outs = ("O", "Stats")
    for name in outs:
        t[name].set_output(True)
    g.set_preferred_engine_id_ext(engine)
    g.build()
    if g.get_plan_name() != engine:
        reason = g.get_engine_refusals().get(engine, "ranked below another engine")
        assert isinstance(reason, str) and reason
        pytest.skip(f"{engine} refuses: {reason}")
    return g, t


def _inputs(t: dict[str, Any], tdt: Any, seed: int) -> dict[str, Any]:
    """Random Q, K, V and an upstream gradient dO shaped like Q (a forward graph has no dO)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dims = {n: t[n].dim for n in ("Q", "K", "V")} | {"dO": t["Q"].dim}
    return {n: torch.randn(d, generator=gen, device="cuda").to(tdt) for n, d in dims.items()}


def _reference(x: dict[str, Any], mask: Any) -> tuple[Any, Any, dict[str, Any]]:
    """float64 CPU output, log-sum-exp and gradients of torch's SDPA with the bool mask."""
    ref = {n: x[n].double().cpu().requires_grad_(n in "QKV") for n in ("Q", "K", "V", "dO")}
    out = F.scaled_dot_product_attention(ref["Q"], ref["K"], ref["V"], attn_mask=mask,
                                         scale=SCALE)  # fmt: skip
    out.backward(ref["dO"])
    scores = (ref["Q"] @ ref["K"].transpose(-1, -2) * SCALE).masked_fill(~mask, -torch.inf)
    lse = torch.logsumexp(scores, dim=-1, keepdim=True).detach()
    return out.detach(), lse, {f"d{n}": ref[n].grad for n in "QKV"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("hide_a_row", [False, True], ids=["every_row_sees", "a_row_hidden"])
def test_forward_matches_torch_with_the_same_bool_mask(
    engine: str, dtype: str, hide_a_row: bool
) -> None:
    tdt, io = DTYPES[dtype]
    g, t = _build(engine, io, backward=False)
    x = _inputs(t, tdt, seed=11)
    mask = _mask(hide_a_row)
    o = torch.empty(B, H, SQ, D, device="cuda", dtype=tdt)
    stats = torch.empty(B, H, SQ, 1, device="cuda", dtype=torch.float32)
    g.execute({t["Q"]: x["Q"], t["K"]: x["K"], t["V"]: x["V"], t["M"]: mask.cuda(),
               t["O"]: o, t["Stats"]: stats})  # fmt: skip
    want_o, want_lse, _ = _reference(x, mask)
    assert _rel(o, want_o) <= TOL
    seen = torch.isfinite(want_lse)
    assert _rel(stats.cpu()[seen], want_lse[seen]) <= TOL
    if hide_a_row:
        assert torch.equal(o[1, :, 7].cpu(), torch.zeros(H, D, dtype=tdt))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_backward_matches_torch_autograd_with_the_same_bool_mask(engine: str, dtype: str) -> None:
    tdt, io = DTYPES[dtype]
    g, t = _build(engine, io, backward=True)
    x = _inputs(t, tdt, seed=13)
    mask = _mask(hide_a_row=False)
    want_o, want_lse, want_grads = _reference(x, mask)
    grads = {n: torch.empty(t[n].dim, device="cuda", dtype=tdt) for n in ("dQ", "dK", "dV")}
    g.execute({
        **{t[n]: x[n] for n in ("Q", "K", "V", "dO")}, t["M"]: mask.cuda(),
        t["O"]: want_o.to(tdt).cuda(), t["Stats"]: want_lse.float().cuda(),
        **{t[n]: grads[n] for n in grads},
    })  # fmt: skip
    for name, grad in grads.items():
        assert _rel(grad, want_grads[name]) <= TOL, name


def test_cudnn_frontend_refuses_a_boolean_mask_by_name() -> None:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[B, H, SQ, D])
    mask = g.tensor(name="M", dim=[B, 1, SQ, SQ], data_type=hg.DataType.BOOLEAN)
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="n", bias=mask,
                  generate_stats=True)  # fmt: skip
    o.set_output(True)
    g.build()
    reason = g.get_engine_refusals().get("CUDNN_FRONTEND_ENGINE", "")
    assert reason in (
        "node 'n': cuDNN's SDPA adds a bias of a float type; it takes no BOOLEAN mask",
        "cuDNN does not exist in ROCm builds of torch",
        "nvidia-cudnn-frontend is not installed (pip install 'hipdnn-graph[cudnn]')",
    )


@pytest.mark.parametrize("engine", ["TORCH_SDPA_EFFICIENT_ENGINE", "TORCH_SDPA_MATH_ENGINE"])
def test_repeated_executes_read_each_new_mask(engine: str) -> None:
    """The mask is read on every call (also when the plan replays a captured CUDA graph): three
    executes with three masks give torch's output for each."""
    g, t = _build(engine, hg.DataType.BFLOAT16, backward=False)
    x = _inputs(t, torch.bfloat16, seed=17)
    mask_buffer = torch.empty(B, 1, SQ, SKV, dtype=torch.bool, device="cuda")
    o = torch.empty(B, H, SQ, D, device="cuda", dtype=torch.bfloat16)
    stats = torch.empty(B, H, SQ, 1, device="cuda", dtype=torch.float32)
    pack = {t["Q"]: x["Q"], t["K"]: x["K"], t["V"]: x["V"], t["M"]: mask_buffer,
            t["O"]: o, t["Stats"]: stats}  # fmt: skip
    for seed in (1, 2, 3):
        g_mask = torch.Generator().manual_seed(seed)
        mask = torch.rand(B, 1, SQ, SKV, generator=g_mask) > 0.5
        mask[..., 0] = True
        mask_buffer.copy_(mask)
        g.execute(pack)
        assert _rel(o, _reference(x, mask)[0]) <= TOL, seed
