"""Attributes of the resample nodes (hipDNN's ``ResampleFwdAttributes`` and
``ResampleBwdAttributes``).

Example:
    >>> from hipdnn_graph import PaddingMode, ResampleFwdAttributes, ResampleMode
    >>> a = (ResampleFwdAttributes().set_resample_mode(ResampleMode.MAXPOOL)
    ...      .set_padding_mode(PaddingMode.NEG_INF_PAD).set_window([2, 2]).set_stride([2, 2])
    ...      .set_pre_padding([0, 0]).set_post_padding([0, 0]))
    >>> a.get_resample_mode().name, a.get_window(), a.get_generate_index()
    ('MAXPOOL', [2, 2], False)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any, Self

from pydantic import BeforeValidator, Field

from ..tensor_input import as_flag, as_int_list, keyword
from ..types import PaddingMode, ResampleMode
from .slots import slot
from .windowed import WindowedAttributes, int_list_field, mode_of

__all__ = ["ResampleAttributes", "ResampleBwdAttributes", "ResampleFwdAttributes"]


def _resample_mode(value: Any) -> ResampleMode:
    """``value`` as a :class:`ResampleMode` (a member or its number; not a bool)."""
    return mode_of(ResampleMode, value, "resample mode")


def _padding_mode(value: Any) -> PaddingMode:
    """``value`` as a :class:`PaddingMode` (a member or its number; not a bool)."""
    return mode_of(PaddingMode, value, "padding mode")


class ResampleAttributes(WindowedAttributes):
    """The members both resample nodes share: per spatial dim ``pre_padding``,
    ``post_padding``, ``stride`` and ``window`` (empty until set), ``resample_mode`` and
    ``padding_mode`` (``NOT_SET`` until set)."""

    window: Annotated[list[int], int_list_field("window")] = Field(default_factory=list)
    resample_mode: Annotated[ResampleMode, BeforeValidator(_resample_mode)] = ResampleMode.NOT_SET
    padding_mode: Annotated[PaddingMode, BeforeValidator(_padding_mode)] = PaddingMode.NOT_SET

    def set_window(self, values: Any) -> Self:
        """The window size of each spatial dim.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for values that are not integers.
        """
        self.window = as_int_list(values, "window")
        return self

    def set_resample_mode(self, value: ResampleMode | int) -> Self:
        """How each window combines (:class:`ResampleMode`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a mode.
        """
        self.resample_mode = _resample_mode(value)
        return self

    def set_padding_mode(self, value: PaddingMode | int) -> Self:
        """What the padding reads as (:class:`PaddingMode`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a mode.
        """
        self.padding_mode = _padding_mode(value)
        return self

    def get_window(self) -> list[int]:
        return list(self.window)

    def get_resample_mode(self) -> ResampleMode:
        return self.resample_mode

    def get_padding_mode(self) -> PaddingMode:
        return self.padding_mode


class ResampleFwdAttributes(ResampleAttributes):
    """Configuration of a resample forward node (pooling): ``Y = resample(X)``, and with
    ``generate_index`` for ``MAXPOOL`` the INDEX of each window's maximum.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | ``[N, C, spatial...]`` | | Y | ``[N, C, out...]`` (inferred) |
    | | | | INDEX (optional, INT8 or INT32) | Y's (inferred) |

    ``out = (in + pre + post - window) / stride + 1``. ``generate_index`` is ``None`` until set
    (read as ``False``): hipDNN's newer schemas declare it optional, so a set value, ``False``
    included, is written to the wire and an unset one is not.
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        X = 0

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        Y = 0
        INDEX = 1

    generate_index: Annotated[bool | None, keyword(as_flag, "generate_index")] = None

    set_x, get_x = slot("X")
    set_y, get_y = slot("Y")
    set_index, get_index = slot("INDEX")

    def set_generate_index(self, value: bool) -> ResampleFwdAttributes:
        """Ask a ``MAXPOOL`` node for the INDEX output.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a bool.
        """
        self.generate_index = as_flag(value, "generate_index")
        return self

    def get_generate_index(self) -> bool:
        """Whether the INDEX output is asked for (``False`` when never set)."""
        return bool(self.generate_index)


class ResampleBwdAttributes(ResampleAttributes):
    """Configuration of a resample backward node: DX, the gradient of a resample forward's X,
    from DY (the gradient of its Y) and, for ``MAXPOOL``, the forward's INDEX.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | ``[N, C, out...]`` | | DX | ``[N, C, in...]`` (inferred) |
    | INDEX (``MAXPOOL``; INT8 or INT32) | DY's (inferred) | | | |

    ``in = (out - 1) * stride - pre - post + window`` when DX has no dims.
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        DY = 0
        INDEX = 1

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        DX = 0

    set_dy, get_dy = slot("DY")
    set_index, get_index = slot("INDEX")
    set_dx, get_dx = slot("DX")
