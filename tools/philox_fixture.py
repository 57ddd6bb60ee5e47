"""Cut the small Philox dropout fixture of the tests out of a GPU probe's output.

``benchmarks/probe_dropout_masks.py`` (run on a CUDA GPU) writes ``dropout_probe.npz`` and
``dropout_probe.json``; this script keeps a few kilobytes of them in
``tests/data/philox_dropout_h200.npz`` (+ ``.json``): the uniforms that
``torch.ops.aten._fill_mem_eff_dropout_mask_`` wrote (as uint32 bit patterns, whole for the small
cases, a few row blocks of the large ones) and the keep masks that the memory-efficient forward
kernel applied (bit-packed).

Usage: ``python tools/philox_fixture.py PROBE_DIR [OUT_DIR]`` (OUT_DIR defaults to tests/data).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

#: fill case → (rows start, rows stop) blocks kept of each [B, H, M, N] case (None: all rows)
_FILL_ROWS: dict[int, list[tuple[int, int]] | None] = {
    0: None,
    1: None,
    2: None,
    3: [(0, 2), (31, 33)],
    4: [(0, 1), (128, 130)],
}


def main(probe: Path, out: Path) -> None:
    report = json.loads((probe / "dropout_probe.json").read_text())
    data = np.load(probe / "dropout_probe.npz")
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, object] = {
        "source": "benchmarks/probe_dropout_masks.py on an NVIDIA H200",
        "torch": report["torch"],
        "fill": {},
        "efficient": {},
    }
    for k, blocks in _FILL_ROWS.items():
        m = report[f"fill.{k}.meta"]
        values = data[f"fill.{k}.values"]
        spans = blocks or [(0, values.shape[2])]
        for r0, r1 in spans:
            arrays[f"fill.{k}.rows{r0}_{r1}"] = values[:, :, r0:r1, :].view(np.uint32)
        meta["fill"][str(k)] = {**m, "rows": spans}  # type: ignore[index]
    for k in range(4):
        m = report[f"efficient.{k}.meta"]
        mask = data[f"efficient.{k}.mask"]
        arrays[f"efficient.{k}.mask_bits"] = np.packbits(mask.reshape(-1))
        meta["efficient"][str(k)] = {  # type: ignore[index]
            "shape": list(mask.shape),
            "p": m["p"],
            "seed": m["seed"],
            "offset": m["offset"],
        }
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "philox_dropout_h200.npz", **arrays)
    (out / "philox_dropout_h200.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "tests/data"))
