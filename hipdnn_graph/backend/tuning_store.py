"""The autotune store: the tuned choice of each graph, on disk, shared by processes.

One JSON file holds hipDNN's heuristic-config shape, ``{"engine_overrides": [...]}``, one
entry per tuned graph: its ``key`` (the graph's content key, the device and the candidate set,
see :func:`record_key`), ``engine_name``, ``knobs`` and ``autotune_metadata`` (``rank``, the
winner's times, and every candidate tried with its time or error). The file is
:func:`default_store_path` unless the caller names one (``AutotuneStorageConfig.file_path``).

Writers never leave a half-written file: each write goes to a temporary file in the same
folder and replaces the store in one ``os.replace``; concurrent writers are serialized by an
advisory lock (``fcntl.flock`` on ``<file>.lock`` where the platform has it) around the
read-merge-replace, so no tuned entry is lost. A store that cannot be read (bad JSON, a wrong
shape) gives one ``RuntimeWarning`` naming it and is treated as empty: the graph is re-tuned and
the next write replaces the file.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "store.json"
    >>> save_entry(path, {"key": "k1", "engine_name": "E", "knobs": {}}, replace_all=False)
    >>> load_entry(path, "k1")["engine_name"]
    'E'
    >>> load_entry(path, "other") is None
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "STORE_DIR_ENV",
    "default_store_path",
    "load_entry",
    "read_store",
    "record_key",
    "save_entry",
]

#: names the folder of the default store (else ``$XDG_CACHE_HOME/hipdnn_graph``, else
#: ``~/.cache/hipdnn_graph``)
STORE_DIR_ENV = "HIPDNN_GRAPH_AUTOTUNE_DIR"
_FILE_NAME = "autotune.json"


def default_store_path() -> Path:
    """Where the store lives when the caller names no file."""
    folder = os.environ.get(STORE_DIR_ENV)
    if folder:
        return Path(folder) / _FILE_NAME
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hipdnn_graph" / _FILE_NAME


def record_key(graph_key: str, device: str, candidates: list[str]) -> str:
    """The store key: the graph's content key, the device it was tuned on, and the candidates
    timed (a later call with other candidates, a lifted filter say, tunes again)."""
    text = json.dumps([graph_key, device, sorted(candidates)])
    return hashlib.sha256(text.encode()).hexdigest()


def read_store(path: Path) -> list[dict[str, Any]]:
    """The store's entries; ``[]`` for a missing file, and for an unreadable one (with a
    ``RuntimeWarning`` naming it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as err:
        _warn(path, f"{type(err).__name__}: {err}")
        return []
    try:
        document = json.loads(text)
        entries = document["engine_overrides"]
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("engine_name"), str) for e in entries
        ):
            raise ValueError("'engine_overrides' is not a list of entries with an engine_name")
    except (ValueError, KeyError, TypeError) as err:
        _warn(path, f"{type(err).__name__}: {err}")
        return []
    return entries


def _warn(path: Path, why: str) -> None:
    warnings.warn(
        f"hipdnn_graph: the autotune store {path} cannot be read ({why}); the graph is "
        f"tuned again and the store rewritten",
        RuntimeWarning,
        stacklevel=4,
    )


def load_entry(path: Path, key: str) -> dict[str, Any] | None:
    """The entry stored under ``key``, or ``None``."""
    for entry in read_store(path):
        if entry.get("key") == key:
            return entry
    return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # no advisory locks here: os.replace still keeps the file whole
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def save_entry(path: Path, entry: dict[str, Any], *, replace_all: bool) -> None:
    """Store ``entry`` (replacing the one with its key; every other entry too when
    ``replace_all``), atomically.

    Raises:
        OSError: the folder cannot be created or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        kept = [] if replace_all else [e for e in read_store(path) if e.get("key") != entry["key"]]
        document = {"engine_overrides": [*kept, entry]}
        handle, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(document, out, indent=1, sort_keys=True)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
