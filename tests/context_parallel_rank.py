"""What every context-parallel worker rank does alike (``context_parallel_worker.py``,
``context_parallel_packed_worker.py``): join the group its command line names, run its cases
and write their JSON records, and record what a bad call raised.

A worker's command line is ``WORKER RANK WORLD INIT OUT [cuda]``: on the CPU the group runs over
gloo, with ``cuda`` rank ``RANK`` takes GPU ``RANK`` and the group runs over NCCL; ``INIT`` is
the rendezvous file and ``OUT`` the JSON file of the rank's records (``{"crashed": traceback}``
when a case raised). The worker sets the NCCL environment (no NVLink multicast) before it
imports torch.

Example (in a worker)::

    if __name__ == "__main__":
        serve(run, value_case, gpu_value_cases)
"""

from __future__ import annotations

import datetime
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from hipdnn_graph import HipdnnError

Records = dict[str, Any]


def error_of(fn: Callable[[], Any]) -> dict[str, Any]:
    """What ``fn`` raised: a HipdnnError's code and message, or another exception's type."""
    try:
        fn()
    except HipdnnError as err:
        return {"raised": "HipdnnError", "code": err.code.name, "message": err.message}
    except Exception as err:  # reported to the test process as a failure
        return {"raised": type(err).__name__, "message": str(err)}
    return {"raised": None}


def sixteen_bit_cases(layouts: tuple[str, ...], suffix: str, **extra: Any) -> Records:
    """The GPU value cases: bf16 and float16, each of ``layouts``, causal and full, GQA (4
    query heads over 2), seed 6, named ``DTYPE-LAYOUT-KIND-SUFFIX``, with ``extra`` options."""
    cases: Records = {}
    for name, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        for layout in layouts:
            for causal in (True, False):
                kind = "causal" if causal else "full"
                cases[f"{name}-{layout}-{kind}-{suffix}"] = {
                    "layout": layout, "causal": causal, "dtype": dtype, "h": 4, "hk": 2,
                    "seed": 6, **extra,
                }  # fmt: skip
    return cases


def serve(
    run: Callable[[int, int], Records],
    value_case: Callable[..., Records],
    gpu_value_cases: Callable[[], dict[str, dict[str, Any]]],
) -> None:
    """Run this rank: ``run(rank, world)`` on the CPU; with ``cuda``, ``value_case`` on the rank's
    GPU for each of ``gpu_value_cases()`` (the whole group, ``value/NAME`` records)."""
    rank, world, init, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    on_gpu = sys.argv[5:] == ["cuda"]
    torch.set_num_threads(1)
    options: dict[str, Any] = {}
    if on_gpu:
        torch.cuda.set_device(rank)
        options["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(
        "nccl" if on_gpu else "gloo",
        init_method=f"file://{init}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
        **options,
    )
    results: Records
    try:
        if on_gpu:
            results = {
                f"value/{name}": value_case(None, world, device=f"cuda:{rank}", **kw)
                for name, kw in gpu_value_cases().items()
            }
        else:
            results = run(rank, world)
    except Exception:
        results = {"crashed": traceback.format_exc()}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f)
    dist.destroy_process_group()
