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

from typing import Annotated

from pydantic import Field

from ..tensor_input import as_flag, as_int_list, keyword
from ..types import PaddingMode, ResampleMode
from .accessors import member, slot
from .checks import enum_check
from .node_attributes import InputSlots, OutputSlots
from .windowed import WindowedAttributes, int_list_field

__all__ = ["ResampleAttributes", "ResampleBwdAttributes", "ResampleFwdAttributes"]


#: ``(value, what) -> ResampleMode`` and ``-> PaddingMode`` (a member or its number; not a bool)
_resample_mode = enum_check(ResampleMode)
_padding_mode = enum_check(PaddingMode)


class ResampleAttributes(WindowedAttributes):
    """The members both resample nodes share: per spatial dim ``pre_padding``,
    ``post_padding``, ``stride`` and ``window`` (empty until set), ``resample_mode`` and
    ``padding_mode`` (``NOT_SET`` until set)."""

    window: Annotated[list[int], int_list_field("window")] = Field(default_factory=list)
    resample_mode: Annotated[ResampleMode, keyword(_resample_mode, "resample mode")] = (
        ResampleMode.NOT_SET
    )
    padding_mode: Annotated[PaddingMode, keyword(_padding_mode, "padding mode")] = (
        PaddingMode.NOT_SET
    )

    set_window, get_window = member(
        "window", as_int_list, doc="The window size of each spatial dim."
    )
    set_resample_mode, get_resample_mode = member(
        "resample_mode",
        _resample_mode,
        "resample mode",
        doc="How each window combines (:class:`ResampleMode`).",
    )
    set_padding_mode, get_padding_mode = member(
        "padding_mode",
        _padding_mode,
        "padding mode",
        doc="What the padding reads as (:class:`PaddingMode`).",
    )


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

    class InputNames(InputSlots):
        X = 0

    class OutputNames(OutputSlots):
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

    class InputNames(InputSlots):
        DY = 0
        INDEX = 1

    class OutputNames(OutputSlots):
        DX = 0

    set_dy, get_dy = slot("DY")
    set_index, get_index = slot("INDEX")
    set_dx, get_dx = slot("DX")
