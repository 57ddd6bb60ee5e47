"""hipDNN's ``Error`` value, and the exceptions hipDNN's bindings raise, as ``HipdnnError``\\ s.

hipDNN's Python bindings *return* an :class:`Error` from the lifecycle and the loaders, and raise
``TypeError`` / ``ValueError`` / ``RuntimeError`` / ``IndexError`` elsewhere. Here every raised
error is also a :class:`~hipdnn_graph.HipdnnError` with an :class:`~hipdnn_graph.ErrorCode`:
:class:`FrontendTypeError` is both a ``HipdnnError`` and a ``TypeError``, and so on, so that code
written for either library catches it.

Example:
    >>> from hipdnn_graph.frontend import Error, ErrorCode
    >>> err = Error(ErrorCode.INVALID_VALUE, "Tensor Q must have only positive dimensions")
    >>> err.is_bad(), err.get_code().name, Error().is_good()
    (True, 'INVALID_VALUE', True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import HipdnnError, NotSupportedError
from ..types import ErrorCode

__all__ = [
    "Error",
    "FrontendIndexError",
    "FrontendRuntimeError",
    "FrontendTypeError",
    "FrontendValueError",
    "UnsupportedFeatureError",
    "returning_error",
]


class Error:
    """hipDNN's ``error_t``: a code and a message; ``OK`` with an empty message by default.

    Args:
        code: an :class:`~hipdnn_graph.ErrorCode` (``OK`` when left out).
        message: the text (``err_msg``).
    """

    def __init__(self, code: ErrorCode | int = ErrorCode.OK, message: str = "") -> None:
        self.code = ErrorCode(code)
        self.err_msg = str(message)

    @classmethod
    def of(cls, error: HipdnnError) -> Error:
        """The ``Error`` value of a raised :class:`~hipdnn_graph.HipdnnError`."""
        return cls(error.code, error.message)

    def get_code(self) -> ErrorCode:
        return self.code

    def get_message(self) -> str:
        return self.err_msg

    def is_good(self) -> bool:
        """Whether the code is ``OK``."""
        return self.code == ErrorCode.OK

    def is_bad(self) -> bool:
        """Whether the code is not ``OK``."""
        return self.code != ErrorCode.OK

    def __repr__(self) -> str:
        return f"Error({self.code.name}, {self.err_msg!r})"


def returning_error(call: Callable[[], Any]) -> Error:
    """Run ``call``; a raised :class:`~hipdnn_graph.HipdnnError` becomes the returned ``Error``.

    The built-in exception types hipDNN raises (``TypeError`` and the others above) still raise.
    """
    try:
        call()
    except (FrontendTypeError, FrontendValueError, FrontendRuntimeError, FrontendIndexError):
        raise
    except HipdnnError as err:
        return Error.of(err)
    return Error()


class _BuiltinKind(HipdnnError):
    """A ``HipdnnError`` that is also one of Python's built-in exception types (the subclasses
    below), made from its message first, as hipDNN's bindings raise them."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_VALUE) -> None:
        super().__init__(code, message)


class FrontendTypeError(_BuiltinKind, TypeError):
    """A ``TypeError`` (as hipDNN raises it) that is also a ``HipdnnError``."""


class FrontendValueError(_BuiltinKind, ValueError):
    """A ``ValueError`` (as hipDNN raises it) that is also a ``HipdnnError``."""


class FrontendRuntimeError(_BuiltinKind, RuntimeError):
    """A ``RuntimeError`` (as hipDNN raises it) that is also a ``HipdnnError``."""


class FrontendIndexError(_BuiltinKind, IndexError):
    """An ``IndexError`` (as hipDNN raises it) that is also a ``HipdnnError``."""


class UnsupportedFeatureError(NotSupportedError, AttributeError):
    """A hipDNN binding this module does not provide (another op family, autotuning, ...).

    ``GRAPH_NOT_SUPPORTED``, and an ``AttributeError`` too, so ``hasattr()`` answers ``False``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def __reduce__(self) -> tuple[type[HipdnnError], tuple[str]]:  # type: ignore[override]
        return (UnsupportedFeatureError, (self.message,))
