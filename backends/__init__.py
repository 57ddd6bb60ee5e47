"""Built-in backend plugins of hipdnn-graph (registered through entry points)."""
