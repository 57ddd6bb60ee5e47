"""``python -m hipdnn_graph``: the ``hipdnn-graph`` command line."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
