"""Griffe extension for the API pages: adapt the project's docstrings to mkdocstrings.

* griffe-pydantic labels every class-level assignment of a model as a field, including aliases
  such as ``__str__ = __repr__``, whose missing annotation then breaks its template: the label
  is removed from unannotated members.
* ``Example:`` sections (doctests) are read as ``Examples:``, so that ``>>>`` blocks render as
  code instead of Markdown quotes.
* Sphinx roles (``:class:`~a.b.C```) become code spans (``C``), since the pages use Markdown.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


class DropUnannotatedFields(griffe.Extension):
    """Apply the fixes above to every object of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._visit(pkg)

    def _fix_docstring(self, obj: Any) -> None:
        doc = obj.docstring
        if doc is not None:
            value = _EXAMPLE.sub(r"\1Examples:", doc.value)
            doc.value = _ROLE.sub(_role, value)

    def _visit(self, obj: Any) -> None:
        self._fix_docstring(obj)
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            if member.is_class or member.is_module:
                if member.is_class:
                    for inner in member.members.values():
                        if (
                            not inner.is_alias
                            and "pydantic-field" in inner.labels
                            and inner.annotation is None
                        ):
                            inner.labels.discard("pydantic-field")
                self._visit(member)
            else:
                self._fix_docstring(member)
