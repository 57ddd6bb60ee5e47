"""Independent full-matrix float64 SDPA reference, differentiated by torch autograd.

Deliberately naive: build the whole ``[B,H,Sq,Skv]`` score matrix, mask it, softmax it, apply
dropout, multiply by V, and let ``torch.autograd.grad`` produce dQ, dK, dV and dBias. It shares
no code with any engine of the project, so engines tested against it are tested against the math
itself. Same keyword names as ``hipdnn_graph_numpy_reference.sdpa_math``.

Inputs may be NumPy arrays (any float dtype, ml_dtypes included) or torch tensors; results are
float64 NumPy arrays. ``compute_dtype`` and ``block_q`` are accepted for signature parity and
ignored (everything is float64, nothing is tiled).

Example:
    >>> import numpy as np
    >>> q = k = v = np.ones((1, 1, 2, 2))
    >>> o, stats = reference_forward(q, k, v, scale=1.0, right_bound=0)
    >>> o.tolist()[0][0], stats[0, 0, :, 0].round(4).tolist()
    ([[1.0, 1.0], [1.0, 1.0]], [2.0, 2.6931])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["reference_backward", "reference_forward"]

F64 = torch.float64


def _t(x: Any) -> torch.Tensor:
    """Any array-like (NumPy of any dtype, torch tensor) as a float64 CPU tensor."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", F64)
    return torch.from_numpy(np.asarray(x).astype(np.float64))


def _visible(
    b: int,
    sq: int,
    skv: int,
    *,
    bottom_right: bool,
    left_bound: int | None,
    right_bound: int | None,
    seq_len_q: Any,
    seq_len_kv: Any,
) -> torch.Tensor:
    """Boolean ``[B,1,Sq,Skv]``: may query i attend to key j (band, alignment, padding)."""
    lq = torch.full((b,), sq) if seq_len_q is None else _t(seq_len_q).reshape(b).long()
    lkv = torch.full((b,), skv) if seq_len_kv is None else _t(seq_len_kv).reshape(b).long()
    lq, lkv = lq.view(b, 1, 1, 1), lkv.view(b, 1, 1, 1)
    i = torch.arange(sq).view(1, 1, sq, 1)
    j = torch.arange(skv).view(1, 1, 1, skv)
    offset = (lkv - lq) if bottom_right else torch.zeros_like(lq)
    vis = (i < lq) & (j < lkv)
    if right_bound is not None:
        vis = vis & (j <= i + offset + right_bound)
    if left_bound is not None:
        vis = vis & (j >= i + offset - left_bound)
    return vis


def _forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    bias: Any,
    probe: torch.Tensor | None,
    alibi: bool,
    dropout_mask: Any,
    dropout_scale: float,
    **mask_kw: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """O and Stats as torch float64 tensors (differentiable in q, k, v, probe)."""
    b, h, sq, _ = q.shape
    skv = k.shape[2]
    k = k.repeat_interleave(h // k.shape[1], dim=1)  # query head h reads K head h // (H/Hk)
    v = v.repeat_interleave(h // v.shape[1], dim=1)
    s = scale * q @ k.transpose(-1, -2)
    if bias is not None:
        s = s + _t(bias)
    if probe is not None:
        s = s + probe  # a zero of dbias_shape: its gradient is dS summed to that shape
    if alibi:
        slopes = 2.0 ** (-8.0 * torch.arange(1, h + 1, dtype=F64) / h)
        rel = torch.arange(skv, dtype=F64).view(1, skv) - torch.arange(sq, dtype=F64).view(sq, 1)
        s = s + slopes.view(1, h, 1, 1) * rel
    vis = _visible(b, sq, skv, **mask_kw)
    s = s.masked_fill(~vis, -torch.inf)
    has_key = vis.any(dim=-1, keepdim=True)
    # Rows without keys: softmax gives NaN; replace by 0. masked_fill's backward zeroes their
    # gradient (every entry of such a row was filled), so no NaN reaches q, k or bias.
    p = torch.where(has_key, torch.softmax(s, dim=-1), 0.0)
    stats = torch.where(has_key, torch.logsumexp(s, dim=-1, keepdim=True), torch.inf)
    if dropout_mask is not None:
        p = p * _t(dropout_mask) * dropout_scale
    return p @ v, stats


def reference_forward(
    q: Any,
    k: Any,
    v: Any,
    *,
    scale: float,
    bias: Any = None,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: Any = None,
    seq_len_kv: Any = None,
    dropout_mask: Any = None,
    dropout_scale: float = 1.0,
    compute_dtype: Any = None,
    block_q: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(o [B,H,Sq,Dv], stats [B,H,Sq,1])`` in float64; keyless rows: o = 0, stats = +inf."""
    del compute_dtype, block_q
    with torch.no_grad():
        o, stats = _forward(
            _t(q), _t(k), _t(v), scale=scale, bias=bias, probe=None, alibi=alibi,
            dropout_mask=dropout_mask, dropout_scale=dropout_scale, bottom_right=bottom_right,
            left_bound=left_bound, right_bound=right_bound, seq_len_q=seq_len_q,
            seq_len_kv=seq_len_kv,
        )  # fmt: skip
    return o.numpy(), stats.numpy()


def reference_backward(
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    do: Any,
    stats: Any,
    *,
    scale: float,
    bias: Any = None,
    dbias_shape: tuple[int, ...] | None = None,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: Any = None,
    seq_len_kv: Any = None,
    dropout_mask: Any = None,
    dropout_scale: float = 1.0,
    compute_dtype: Any = None,
    block_q: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(dq, dk, dv, dbias or None)`` in float64: the exact gradient of O·dO, by autograd.

    ``o`` and ``stats`` are accepted for signature parity and not used: this is the true
    gradient of the forward, which is what the spec's formulas (Δ from the given O, P from the
    given Stats) compute when o and stats are the forward's outputs. dbias is computed when
    ``bias`` or ``dbias_shape`` is given (default shape: ``bias.shape``).
    """
    del o, stats, compute_dtype, block_q
    qt, kt, vt = (_t(x).requires_grad_() for x in (q, k, v))
    if dbias_shape is None and bias is not None:
        dbias_shape = tuple(np.shape(bias))
    probe = None
    if dbias_shape is not None:
        probe = torch.zeros(dbias_shape, dtype=F64, requires_grad=True)
    out, _ = _forward(
        qt, kt, vt, scale=scale, bias=bias, probe=probe, alibi=alibi, dropout_mask=dropout_mask,
        dropout_scale=dropout_scale, bottom_right=bottom_right, left_bound=left_bound,
        right_bound=right_bound, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv,
    )  # fmt: skip
    wrt = [qt, kt, vt] + ([probe] if probe is not None else [])
    grads = torch.autograd.grad(out, wrt, grad_outputs=_t(do))
    dq, dk, dv = (g.numpy() for g in grads[:3])
    return dq, dk, dv, (grads[3].numpy() if probe is not None else None)
