"""What the two resample families declare alike: hipDNN's backend attribute ids, the
``ResampleMode``/``PaddingMode`` schema enums, the members of their tables (slots 3-8 of
``ResampleFwdAttributes`` and ``ResampleBwdAttributes``), and the refusal of the modes hipDNN
cannot pack."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from ..descriptors.enums import AttributeType as T
from ..descriptors.node_spec import Kind, ScalarSpec, WireEnum
from ..errors import HipdnnError
from ..types import ErrorCode, PaddingMode, ResampleMode

__all__ = [
    "PADDING_MODE",
    "RESAMPLE_MODE",
    "ResampleAttributeName",
    "check_packable_modes",
    "resample_scalars",
]


class ResampleAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the resample operation descriptors
    (``HipdnnBackendAttributeName.h``: forward 3300-3302, the shared 3400-3407). The backward
    tensor ids (``HIPDNN_ATTR_OPERATION_RESAMPLE_BWD_DY/DX/INDEX``) are named by hipDNN's packer
    but no header read here numbers them: 3900-3902 are the project's (a range no hipDNN header
    read here uses; hipDNN's 3600-3610 are the layer-norm backward's)."""

    OPERATION_RESAMPLE_FWD_XDESC = 3300
    OPERATION_RESAMPLE_FWD_YDESC = 3301
    OPERATION_RESAMPLE_FWD_IDXDESC = 3302
    RESAMPLE_MODE = 3400
    RESAMPLE_PRE_PADDINGS = 3401
    RESAMPLE_POST_PADDINGS = 3402
    RESAMPLE_STRIDES = 3403
    RESAMPLE_WINDOW_DIMS = 3404
    RESAMPLE_PADDING_MODE = 3405
    RESAMPLE_GENERATE_INDEX_EXT = 3406
    RESAMPLE_COMP_TYPE = 3407
    OPERATION_RESAMPLE_BWD_DY = 3900
    OPERATION_RESAMPLE_BWD_DX = 3901
    OPERATION_RESAMPLE_BWD_INDEX = 3902


#: hipDNN's ``ResampleMode`` schema enum (``resample_common.fbs``: NOT_SET, MAXPOOL,
#: AVGPOOL_EXCLUDE_PADDING, AVGPOOL_INCLUDE_PADDING = 0-3). Its JSON writes the number (no
#: spelling table is declared for it), and BILINEAR/NEAREST have no number there; hipDNN's
#: benchmark graphs spell the schema's names, read too.
RESAMPLE_MODE = WireEnum(
    "ResampleMode",
    ResampleMode,
    {m.value: m.value for m in ResampleMode if m.value <= ResampleMode.AVGPOOL_INCLUDE_PADDING},
    aliases={m.name: m.value for m in ResampleMode if m.value <= 3},
)

#: hipDNN's ``PaddingMode`` schema enum (PADDING_NOT_SET, NEG_INF_PAD, ZERO_PAD = 0-2), written
#: as its number in JSON (the schema's names read too); EDGE_VAL_PAD has no number there.
PADDING_MODE = WireEnum(
    "PaddingMode",
    PaddingMode,
    {m.value: m.value for m in PaddingMode if m.value <= PaddingMode.ZERO_PAD},
    aliases={"PADDING_NOT_SET": 0, "NEG_INF_PAD": 1, "ZERO_PAD": 2},
)

_A = ResampleAttributeName


def resample_scalars() -> tuple[ScalarSpec, ...]:
    """The four vectors (slots 3-6) and the two modes (slots 7, 8) both tables have, written on
    the JSON node object, with the shared descriptor attributes (3400-3405)."""
    return (
        ScalarSpec("pre_padding", Kind.I64_VEC, 3, (_A.RESAMPLE_PRE_PADDINGS, T.INT64)),
        ScalarSpec("post_padding", Kind.I64_VEC, 4, (_A.RESAMPLE_POST_PADDINGS, T.INT64)),
        ScalarSpec("stride", Kind.I64_VEC, 5, (_A.RESAMPLE_STRIDES, T.INT64)),
        ScalarSpec("window", Kind.I64_VEC, 6, (_A.RESAMPLE_WINDOW_DIMS, T.INT64)),
        ScalarSpec(
            "resample_mode",
            Kind.ENUM,
            7,
            (_A.RESAMPLE_MODE, T.RESAMPLE_MODE),
            always=True,
            enum=RESAMPLE_MODE,
        ),
        ScalarSpec(
            "padding_mode",
            Kind.ENUM,
            8,
            (_A.RESAMPLE_PADDING_MODE, T.PADDING_MODE),
            always=True,
            enum=PADDING_MODE,
        ),
    )


def check_packable_modes(attributes: Any) -> None:
    """hipDNN's packers' refusal: a resample mode or padding mode with no backend value (the
    ``NOT_SET`` ones and the cuDNN-compatibility ``BILINEAR``, ``NEAREST``, ``EDGE_VAL_PAD``).

    Raises:
        HipdnnError: ``INVALID_VALUE`` ``"Unsupported resample mode"`` or
            ``"Unsupported padding mode"``.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = hg.ResampleFwdAttributes().set_resample_mode(hg.ResampleMode.BILINEAR)
        >>> try:
        ...     check_packable_modes(a)
        ... except hg.HipdnnError as err:
        ...     print(err.code.name, err.message)
        INVALID_VALUE Unsupported resample mode
    """
    mode = attributes.resample_mode
    if mode == ResampleMode.NOT_SET or RESAMPLE_MODE.member(mode) is None:
        raise HipdnnError(ErrorCode.INVALID_VALUE, "Unsupported resample mode")
    padding = attributes.padding_mode
    if padding == PaddingMode.NOT_SET or PADDING_MODE.member(padding) is None:
        raise HipdnnError(ErrorCode.INVALID_VALUE, "Unsupported padding mode")
