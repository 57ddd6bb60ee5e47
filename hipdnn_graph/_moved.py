"""The module paths the package had before its root was split into rooms, still importable.

The Graph core moved into ``hipdnn_graph/graph/``, its builders into
``hipdnn_graph/graph/builders/`` and the command line into ``hipdnn_graph/cli/``. Code written
against the old paths (``from hipdnn_graph.keyword_types import SdpaKeywords``,
``import hipdnn_graph.prepared``) keeps working: :class:`MovedModules`, installed on
``sys.meta_path`` when the package loads, answers an old path with the module at its new one
(the same module object, so state and identity are shared). :data:`MOVED` is the one table.

Example:
    >>> import importlib
    >>> old = importlib.import_module("hipdnn_graph.keyword_types")
    >>> old is importlib.import_module("hipdnn_graph.graph.builders.keyword_types")
    True
    >>> old.__spec__.name  # the module keeps its own spec
    'hipdnn_graph.graph.builders.keyword_types'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

__all__ = ["MOVED", "MovedModules", "install"]

#: old module path (below ``hipdnn_graph.``) → new one
MOVED = {
    "block_scale_builders": "graph.builders.block_scale",
    "builder_base": "graph.builders.base",
    "cli_backends": "cli.backends",
    "cli_common": "cli.common",
    "cli_convert": "cli.convert",
    "cli_inspect": "cli.inspect",
    "cli_run": "cli.run",
    "execution": "graph.execution",
    "family_builders": "graph.builders.families",
    "graph_rules": "graph.rules",
    "graph_structure": "graph.structure",
    "graph_validation": "graph.validation",
    "keyword_types": "graph.builders.keyword_types",
    "lifecycle": "graph.lifecycle",
    "norm_builders": "graph.builders.norm",
    "ordering": "graph.ordering",
    "prepared": "graph.prepared",
    "resample_builders": "graph.builders.resample",
    "sdpa_builders": "graph.builders.sdpa",
    "sdpa_keywords": "graph.builders.sdpa_keywords",
}

_PACKAGE = __name__.rpartition(".")[0]


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``hipdnn_graph.<old>`` for every old path of :data:`MOVED` and hands back the
    module at its new path."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != _PACKAGE or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self) -> None:
        #: the module's own spec, by module id, between create_module and exec_module
        self._own_specs: dict[int, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The module at the new path (imported if it was not yet)."""
        name = spec.name.rpartition(".")[2]
        module = importlib.import_module(f"{_PACKAGE}.{MOVED[name]}")
        self._own_specs[id(module)] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the new module ran when it was imported); the import system has set
        the old path's spec on it, which its own is put back over (a module whose ``__spec__``
        names another package makes its relative imports warn)."""
        module.__spec__ = self._own_specs.pop(id(module), module.__spec__)


def install() -> None:
    """Put one :class:`MovedModules` on ``sys.meta_path`` (a second call adds none)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
