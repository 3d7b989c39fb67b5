"""Index document ids: stable 63-bit integers that name a ledger entity and a passage.

``(type << 56) | (entity_id << 16) | passage``: 8 bits of type code (:data:`TYPE_PAGE`
for a page without text, e.g. from a history import; :data:`TYPE_PASSAGE`,
:data:`TYPE_HIGHLIGHT`, :data:`TYPE_NOTE`, :data:`TYPE_BOOKMARK`, :data:`TYPE_FACT`), 40
bits of ledger row id and 16 bits of passage number. Every document of a page (its
passages, or its title-only document) has the page's base id ``doc_id(TYPE_PAGE,
page_id)`` as ``parent``, so hits group per page and ``delete_parents`` removes a page
whole. The core never sees ledger ids as anything but these numbers.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

logger = logging.getLogger(__name__)


TYPE_PAGE = 1
TYPE_PASSAGE = 2
TYPE_HIGHLIGHT = 3
TYPE_NOTE = 4
TYPE_BOOKMARK = 5
TYPE_FACT = 6

_TYPE_SHIFT = 56
_ENTITY_SHIFT = 16
MAX_ENTITY_ID = (1 << (_TYPE_SHIFT - _ENTITY_SHIFT)) - 1
MAX_PASSAGES = 1 << _ENTITY_SHIFT

ENTITY_TYPES = ("page", "highlight", "note", "bookmark", "fact")
_ENTITY_OF_TYPE = {
    TYPE_PAGE: "page", TYPE_PASSAGE: "page", TYPE_HIGHLIGHT: "highlight", TYPE_NOTE: "note",
    TYPE_BOOKMARK: "bookmark", TYPE_FACT: "fact",
}  # fmt: skip
_TYPE_OF_ENTITY = {
    "page": TYPE_PAGE, "highlight": TYPE_HIGHLIGHT, "note": TYPE_NOTE,
    "bookmark": TYPE_BOOKMARK, "fact": TYPE_FACT,
}  # fmt: skip


class DocRef(NamedTuple):
    """A decoded document id."""

    type_code: int
    entity_id: int
    passage: int

    @property
    def entity_type(self) -> str:
        """The ledger entity the document comes from (``page`` for passages too)."""
        return _ENTITY_OF_TYPE[self.type_code]


def doc_id(type_code: int, entity_id: int, passage: int = 0) -> int:
    """The stable index id of ``passage`` of the entity ``entity_id`` of ``type_code``."""
    if type_code not in _ENTITY_OF_TYPE:
        raise ValueError(f"unknown document type code {type_code}")
    if not 1 <= entity_id <= MAX_ENTITY_ID:
        raise ValueError(f"entity id {entity_id} is out of range (1..{MAX_ENTITY_ID})")
    if not 0 <= passage < MAX_PASSAGES:
        raise ValueError(f"passage number {passage} is out of range (0..{MAX_PASSAGES - 1})")
    return (type_code << _TYPE_SHIFT) | (entity_id << _ENTITY_SHIFT) | passage


def parse_doc_id(value: int) -> DocRef:
    """Inverse of :func:`doc_id`; ``ValueError`` for an id it could not have made."""
    ref = DocRef(
        value >> _TYPE_SHIFT,
        (value >> _ENTITY_SHIFT) & MAX_ENTITY_ID,
        value & (MAX_PASSAGES - 1),
    )
    if ref.type_code not in _ENTITY_OF_TYPE or ref.entity_id == 0:
        raise ValueError(f"{value} is not a Backtrail document id")
    return ref


def page_parent(page_id: int) -> int:
    """The grouping key (and title-only document id) of a page."""
    return doc_id(TYPE_PAGE, page_id)


def entity_doc_id(entity_type: str, entity_id: int) -> int:
    """The base document id of a ledger entity (a page's parent id)."""
    return doc_id(_TYPE_OF_ENTITY[entity_type], entity_id)
