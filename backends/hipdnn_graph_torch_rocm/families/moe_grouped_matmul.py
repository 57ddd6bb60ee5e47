"""The MoE grouped matmul lowerings: ``OUTPUT`` (forward, NONE / GATHER / SCATTER routing) and
``DWEIGHT`` (the weight gradient), hipDNN's math (as its CPU references and the NumPy
reference define it) in the compute type (FLOAT or DOUBLE, as hipDNN's references compute;
16-bit operands are cast to it).

Two paths, one result:

* eager (``TORCH_EAGER_ENGINE``): the routing tensors (``FIRST_TOKEN_OFFSET``, ``TOKEN_INDEX``,
  ``TOKEN_KS``; a few int32 per routed row) are copied to the host, **one synchronisation per
  node**, and checked by the core's rules (:mod:`hipdnn_graph.nodes.moe_math`:
  :func:`moe_routes`, :func:`check_offsets`, which the NumPy reference checks by too: the same
  ``INVALID_VALUE`` messages); then one GEMM per expert over its rows (index_select,
  matmul, index_copy), as the reference computes;
* traced (``torch.compile``, ``TORCH_FUSION_ENGINE``): no host synchronisation and no
  data-dependent Python: each row's group is ``searchsorted`` of the offsets, indices are
  clamped in range, and every expert's GEMM runs over all routed rows, ``torch.where`` keeping
  the rows of that expert (``experts`` times the eager FLOPs: exact, not fast). The validity of
  the routes is the lowering's :data:`~._common.CHECK` result; when it is False the fusion plan
  runs the graph eagerly, which raises the exact error, and writes no output.

``torch._grouped_mm`` is not used: it takes end offsets with every row in a group and, on the
torch builds here, 16-bit operands on recent NVIDIA GPUs only, while hipDNN's groups start at
their offsets (rows before the first belong to none), map group ``g`` to expert
``g % experts`` and compute in FLOAT or DOUBLE.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> F, I = hg.DataType.FLOAT, hg.DataType.INT32
    >>> g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    >>> out = g.moe_grouped_matmul(g.tensor(name="t", dim=[1, 3, 2]),
    ...                            g.tensor(name="w", dim=[2, 2, 1]),
    ...                            g.tensor(name="o", dim=[2, 1, 1], data_type=I), None, None)
    >>> g.validate()
    >>> inputs = {"TOKEN": torch.ones(1, 3, 2),
    ...           "WEIGHT": torch.tensor([[[1.0], [1.0]], [[2.0], [3.0]]]),
    ...           "FIRST_TOKEN_OFFSET": torch.tensor([0, 2], dtype=torch.int32).reshape(2, 1, 1)}
    >>> prepare_moe_grouped_matmul(g.nodes[0])(inputs)["OUTPUT"].ravel().tolist()
    [2.0, 2.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.nodes.moe_math import check_offsets, moe_routes
from hipdnn_graph.nodes.moe_math import moe_grouped_matmul_bwd_refusal as _math_bwd_refusal
from hipdnn_graph.nodes.moe_math import moe_grouped_matmul_refusal as _math_refusal

from ._common import CHECK, Prepared, TorchFamily, compiling, compute_dtype, torch_type_refusal

__all__ = [
    "FAMILIES",
    "moe_grouped_matmul_bwd_refusal",
    "moe_grouped_matmul_refusal",
    "prepare_moe_grouped_matmul",
    "prepare_moe_grouped_matmul_bwd",
]

Mode = hg.MoeGroupedMatmulMode
_ROUTING = ("FIRST_TOKEN_OFFSET", "TOKEN_INDEX", "TOKEN_KS")


def _prefixed(node: Any, reason: str | None) -> str | None:
    return None if reason is None else f"node '{node.name}': {reason}"


def moe_grouped_matmul_refusal(node: hg.MoeGroupedMatmulNode) -> str | None:
    """Why the lowering cannot run this forward node (hipDNN's reason from
    :mod:`hipdnn_graph.nodes.moe_math`, a routing mode it does not define, or a type torch
    lacks), or None."""
    mode = node.attributes.get_mode()
    if mode not in (Mode.NONE, Mode.GATHER, Mode.SCATTER):
        return f"node '{node.name}': routing mode {mode.name}"
    return _prefixed(node, _math_refusal(node)) or torch_type_refusal(node)


def moe_grouped_matmul_bwd_refusal(node: hg.MoeGroupedMatmulBwdNode) -> str | None:
    """Why the lowering cannot run this weight-gradient node, or None."""
    return _prefixed(node, _math_bwd_refusal(node)) or torch_type_refusal(node)


def _host(inputs: Mapping[str, Any], slots: tuple[str, ...]) -> dict[str, Any]:
    """The routing inputs present, as NumPy arrays on the host (one synchronisation)."""
    return {s: inputs[s].detach().to("cpu").numpy() for s in slots if s in inputs}


def _flat(torch: Any, value: Any) -> Any:
    return value.reshape(-1).to(torch.int64)


def _offsets_valid(torch: Any, offsets: Any, rows: int, first_zero: bool) -> Any:
    """:func:`check_offsets` as a 0-d bool tensor."""
    ok = ((offsets >= 0) & (offsets <= rows)).all()
    if offsets.numel() > 1:
        ok = ok & (offsets[1:] >= offsets[:-1]).all()
    if first_zero and offsets.numel():
        ok = ok & (offsets[0] == 0)
    return ok


def prepare_moe_grouped_matmul(node: hg.MoeGroupedMatmulNode) -> Prepared:
    """OUTPUT of a forward node, its dims, mode and ``top_k`` read now."""
    import torch

    a = node.attributes
    compute = compute_dtype(node)
    slots = a.tensors_by_slot()
    tokens, experts = slots["TOKEN"].dim[1], slots["WEIGHT"].dim[0]
    n = slots["WEIGHT"].dim[2]
    out_dims = list(slots["OUTPUT"].dim)
    out_rows = out_dims[1]
    mode, top_k = a.get_mode(), a.get_top_k()
    routed = slots["TOKEN_INDEX"].get_volume() if mode == Mode.GATHER else tokens
    present = tuple(s for s in _ROUTING if s in slots)

    def eager(token: Any, weight: Any, inputs: Mapping[str, Any]) -> Any:
        src, dst, expert = moe_routes(node, _host(inputs, present), tokens, experts, out_rows)
        device = token.device
        result = token.new_zeros((out_rows, n))
        for e in sorted(set(expert.tolist())):  # one GEMM per expert over its rows
            rows = expert == e
            s = torch.from_numpy(src[rows]).to(device)
            d = torch.from_numpy(dst[rows]).to(device)
            result.index_copy_(0, d, token.index_select(0, s) @ weight[e])
        return result

    def traced(token: Any, weight: Any, inputs: Mapping[str, Any]) -> tuple[Any, Any]:
        device = token.device
        offsets = _flat(torch, inputs["FIRST_TOKEN_OFFSET"])
        rows = torch.arange(routed, device=device, dtype=torch.int64)
        group = torch.searchsorted(offsets, rows, right=True) - 1
        owned = group >= 0
        expert = torch.remainder(group.clamp(min=0), experts)
        src, dst = rows, rows
        ok = _offsets_valid(torch, offsets, routed, first_zero=False)
        if mode == Mode.GATHER:
            src = _flat(torch, inputs["TOKEN_INDEX"])
        elif mode == Mode.SCATTER:
            index, ks = _flat(torch, inputs["TOKEN_INDEX"]), _flat(torch, inputs["TOKEN_KS"])
            if index.numel() != tokens or ks.numel() != tokens:
                ok = ok & False  # the eager run names it
                index, ks = rows, torch.zeros_like(rows)
            ok = ok & (~owned | ((ks >= 0) & (ks < top_k))).all()
            dst = index * top_k + ks
        src_in = (src >= 0) & (src < tokens)
        dst_in = (dst >= 0) & (dst < out_rows)
        ok = ok & (~owned | (src_in & dst_in)).all()
        written = owned & dst_in
        hits = torch.zeros(out_rows + 1, dtype=torch.int64, device=device)
        hits = hits.index_add(0, torch.where(written, dst, out_rows), written.to(torch.int64))
        ok = ok & (hits[:out_rows] <= 1).all()
        gathered = token.index_select(0, torch.where(src_in, src, 0))
        values = gathered.new_zeros((routed, n))
        for e in range(experts):  # every expert over every row; its own rows kept
            keep = (owned & (expert == e)).unsqueeze(-1)
            values = torch.where(keep, gathered @ weight[e], values)
        result = token.new_zeros((out_rows + 1, n))  # the last row takes what no row keeps
        result = result.index_copy(0, torch.where(written, dst, out_rows), values)
        return result[:out_rows], ok

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        token = inputs["TOKEN"].to(compute).reshape(tokens, -1)
        weight = inputs["WEIGHT"].to(compute)
        if not compiling():
            return {"OUTPUT": eager(token, weight, inputs).reshape(out_dims)}
        result, ok = traced(token, weight, inputs)
        return {"OUTPUT": result.reshape(out_dims), CHECK: ok}

    return run


def prepare_moe_grouped_matmul_bwd(node: hg.MoeGroupedMatmulBwdNode) -> Prepared:
    """DWEIGHT of a weight-gradient node, its dims read now."""
    import torch

    slots = node.attributes.tensors_by_slot()
    compute = compute_dtype(node)
    tokens = slots["TOKEN"].dim[1]
    experts = slots["FIRST_TOKEN_OFFSET"].get_volume()
    dw_dims = list(slots["DWEIGHT"].dim)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        token = inputs["TOKEN"].to(compute).reshape(tokens, -1)
        dout = inputs["DOUTPUT"].to(compute).reshape(tokens, -1)
        if not compiling():
            offsets = _host(inputs, ("FIRST_TOKEN_OFFSET",))["FIRST_TOKEN_OFFSET"]
            offsets = offsets.reshape(-1).astype("int64")
            check_offsets(node, offsets, tokens, first_zero=True)
            bounds = [*offsets.tolist(), tokens]
            parts = [token[s:e].T @ dout[s:e] for s, e in pairwise(bounds)]
            return {"DWEIGHT": torch.stack(parts).reshape(dw_dims)}
        offsets = _flat(torch, inputs["FIRST_TOKEN_OFFSET"])
        rows = torch.arange(tokens, device=token.device, dtype=torch.int64)
        group = torch.searchsorted(offsets, rows, right=True) - 1
        parts = []
        for e in range(experts):  # each expert's rows kept, the others zero
            keep = (group == e).unsqueeze(-1)
            t = torch.where(keep, token, torch.zeros_like(token))
            d = torch.where(keep, dout, torch.zeros_like(dout))
            parts.append(t.T @ d)
        ok = _offsets_valid(torch, offsets, tokens, first_zero=True)
        return {"DWEIGHT": torch.stack(parts).reshape(dw_dims), CHECK: ok}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(
        hg.NodeType.MOE_GROUPED_MATMUL,
        prepare_moe_grouped_matmul,
        moe_grouped_matmul_refusal,
        host_checked=True,
    ),
    TorchFamily(
        hg.NodeType.MOE_GROUPED_MATMUL_BWD,
        prepare_moe_grouped_matmul_bwd,
        moe_grouped_matmul_bwd_refusal,
        host_checked=True,
    ),
)
