"""The two exception types of hipdnn-graph.

Errors are raised, never returned. Every error carries an :class:`ErrorCode` and hipDNN's exact
message text.

Example:
    >>> from hipdnn_graph import ErrorCode, HipdnnError
    >>> err = HipdnnError(ErrorCode.INVALID_VALUE, "Tensor Q must have only positive dimensions")
    >>> err.code.name, str(err)
    ('INVALID_VALUE', 'Tensor Q must have only positive dimensions')
"""

from __future__ import annotations

from .types import ErrorCode

__all__ = ["HipdnnError", "NotSupportedError"]


class HipdnnError(Exception):
    """An error with a hipDNN :class:`ErrorCode` and message.

    Attributes:
        code: What kind of failure this is.
        message: hipDNN's text for it; ``str(error)`` returns exactly this.
    """

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.name}, {self.message!r})"

    def __reduce__(self) -> tuple[type[HipdnnError], tuple[ErrorCode, str]]:
        return (HipdnnError, (self.code, self.message))


class NotSupportedError(HipdnnError):
    """Raised with ``GRAPH_NOT_SUPPORTED`` when no engine can run a graph, so callers can fall back.

    Example:
        >>> from hipdnn_graph import NotSupportedError
        >>> NotSupportedError("no engine").code.name
        'GRAPH_NOT_SUPPORTED'
    """

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.GRAPH_NOT_SUPPORTED, message)

    def __reduce__(self) -> tuple[type[HipdnnError], tuple[str]]:  # type: ignore[override]
        return (NotSupportedError, (self.message,))
