"""Graph-wide attributes: the name and the three default data types.

Example:
    >>> from hipdnn_graph import DataType, GraphAttributes
    >>> ga = GraphAttributes().set_io_data_type(DataType.HALF).set_compute_data_type(DataType.FLOAT)
    >>> ga.get_io_data_type().name, ga.get_intermediate_data_type().name
    ('HALF', 'NOT_SET')
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

from ..changes import STAMP_SLOT, touch
from ..tensor_input import as_data_type, as_text, keyword
from ..types import DataType
from .accessors import Accessor, member
from .checks import data_type_check

__all__ = ["GraphAttributes"]


class GraphAttributes(BaseModel):
    """hipDNN's ``GraphAttributes``: name, io, intermediate and compute data types (all NOT_SET)."""

    model_config = ConfigDict(extra="forbid", ignored_types=(Accessor,))
    # the change clock's time of the last change (see :mod:`hipdnn_graph.changes`)
    __slots__ = (STAMP_SLOT,)

    name: Annotated[str, keyword(as_text, "Graph name")] = ""
    io_data_type: Annotated[DataType, BeforeValidator(as_data_type)] = DataType.NOT_SET
    intermediate_data_type: Annotated[DataType, BeforeValidator(as_data_type)] = DataType.NOT_SET
    compute_data_type: Annotated[DataType, BeforeValidator(as_data_type)] = DataType.NOT_SET

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        touch(self)  # a graph using these attributes is no longer validated

    def set_name(self, name: str) -> GraphAttributes:
        """Set the graph's name (any value is taken as its ``str``).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a name that is not valid Unicode text (a lone
                surrogate cannot be serialized).
        """
        self.name = as_text(str(name), "Graph name")
        return self

    def get_name(self) -> str:
        return self.name

    set_io_data_type, get_io_data_type = member("io_data_type", data_type_check)
    set_intermediate_data_type, get_intermediate_data_type = member(
        "intermediate_data_type", data_type_check
    )
    set_compute_data_type, get_compute_data_type = member("compute_data_type", data_type_check)
