"""The example plugin (``examples/custom_backend``) installed for the tests' own processes only.

``make test`` does not install it into the user's environment (it would then appear in every
refusal list, log and ``hipdnn-graph backends`` listing there). The tests make it an installed
plugin as Python finds one: :func:`plugin_path` writes its ``.dist-info`` (name, version and
entry point read from its ``pyproject.toml``) into a temporary folder, and that folder and the
package's source folder go on ``sys.path`` (the ``example_plugin`` fixture of ``conftest.py``)
or on ``PYTHONPATH`` (a subprocess). ``importlib.metadata`` then finds its entry point in the
group ``hipdnn_graph.backends`` exactly as it finds an installed distribution's.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> entries = plugin_path(Path(tempfile.mkdtemp()))
    >>> sorted(p.name for p in entries[0].iterdir())
    ['hipdnn_custom_backend-0.1.0.dist-info']
"""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["PLUGIN_DIR", "plugin_path"]

#: the example plugin's package folder (its pyproject.toml, its package, its tests)
PLUGIN_DIR = Path(__file__).resolve().parents[1] / "examples" / "custom_backend"


def plugin_path(folder: Path) -> list[Path]:
    """Write the plugin's ``.dist-info`` into ``folder``; return the ``sys.path`` entries that
    make it installed (``folder``, then the plugin's source folder)."""
    project = tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = project.get("entry-points", {})
    lines = []
    for group, points in groups.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return [folder, PLUGIN_DIR]
