"""Write the hipDNN-made graph files of ``examples/data/`` with the C++ wire oracle.

``hipdnn_sdpa_bwd.json`` is hipDNN's JSON of the minimal SDPA backward graph (HIPDNN_WIRE.md
B8.1). This script reads it with the tests' own JSON reader (``wire_model``, written from the
spec alone) into a description, and has the C++ oracle (flatc's C++ code for hipDNN's unmodified
schemas, compiled with g++) write it as hipDNN does: ``Finish(Graph::Pack(builder, graphT))``
into ``hipdnn_sdpa_bwd.bin``, and the same graph inside hipDNN's ``HDGP`` graph-and-plan
container, blobs 8-aligned, into ``hipdnn_sdpa_bwd.hdgp``. No byte comes from hipdnn_graph's
writer. ``test_wire_examples.py`` checks that the committed files are what this script writes.

Run from the repository root (needs g++, flatc and hipDNN's schemas, as the oracle tests do)::

    python tests/wire/make_example_data.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "autogen"))
sys.path.insert(0, str(HERE))

from cpp_oracle import CppOracle, toolchains  # noqa: E402
from wire_model import Desc, description_from_hipdnn_json  # noqa: E402

EXAMPLES = HERE.parents[1] / "examples" / "data"
SOURCE = EXAMPLES / "hipdnn_sdpa_bwd.json"


def description() -> Desc:
    """The example graph, read from its hipDNN JSON by the tests' own reader."""
    import json

    return description_from_hipdnn_json(json.loads(SOURCE.read_text(encoding="utf-8")))


def made_by(cpp: CppOracle) -> dict[str, bytes]:
    """The files the C++ oracle writes, by name."""
    desc = description()
    return {
        "hipdnn_sdpa_bwd.bin": cpp.pack(desc),
        "hipdnn_sdpa_bwd.hdgp": cpp.pack(desc, container=True),
    }


def main() -> int:
    found, missing = toolchains()
    if not found:
        print("no C++ wire oracle can be built: " + "; ".join(missing), file=sys.stderr)
        return 1
    cpp = CppOracle(found[0])
    for name, data in made_by(cpp).items():
        (EXAMPLES / name).write_bytes(data)
        print(
            f"wrote examples/data/{name} ({len(data)} bytes) with {cpp.toolchain.name} "
            f"{cpp.version}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
