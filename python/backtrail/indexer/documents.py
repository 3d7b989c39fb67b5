"""What of the ledger becomes index documents: a page's text cut into passages, and one
document per highlight, note, bookmark or fact.

Chunking depends only on its arguments, so re-chunking unchanged text yields the same
passages, the same ids and (in the core) the vectors already stored for them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

from backtrail.indexer.ids import (
    MAX_PASSAGES,
    TYPE_PASSAGE,
    doc_id,
    entity_doc_id,
    page_parent,
)
from backtrail.store import Bookmark, Fact, Highlight, Note, Page

logger = logging.getLogger(__name__)


Document = dict[str, Any]
"""A core document: the fields of ``backtrail._core.Document``."""

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+")
_URL_SEPARATORS = re.compile(r"[/?#&=+_.\-]+")


def chunk_text(
    text: str, size: int = 1_000, overlap: int = 100, max_passages: int | None = None
) -> list[str]:
    """Split ``text`` into passages of at most ``size`` characters.

    Passages break between lines (paragraphs) when they can, else between sentences,
    else between words (or anywhere, for text without spaces). Each passage after the
    first starts with up to ``overlap`` characters from the end of the previous one,
    cut at a word boundary. The result depends only on the arguments, so re-chunking
    unchanged text yields the same passages (and the index keeps their vectors).
    """
    if overlap < 0 or overlap * 2 > size:
        raise ValueError(f"overlap must be between 0 and size / 2, got {overlap}")
    limit = size - overlap - 1 if overlap else size
    passages: list[str] = []
    current = ""
    for piece, starts_line in _units(text, limit):
        sep = "\n" if starts_line else " "
        if current and len(current) + len(sep) + len(piece) > size:
            passages.append(current)
            if max_passages is not None and len(passages) >= max_passages:
                return passages
            tail = _tail(current, overlap)
            current = f"{tail}{sep}{piece}" if tail else piece
        else:
            current = f"{current}{sep}{piece}" if current else piece
    if current:
        passages.append(current)
    return passages


def _units(text: str, limit: int) -> Iterator[tuple[str, bool]]:
    """(piece, starts a line) pieces of at most ``limit`` characters, in order."""
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if len(line) <= limit:
            yield line, True
            continue
        first = True
        for sentence in _SENTENCE_END.split(line):
            for piece in _split_words(sentence, limit):
                yield piece, first
                first = False


def _split_words(text: str, limit: int) -> Iterator[str]:
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        if cut < limit // 2:
            cut = limit
        head, text = text[:cut].rstrip(), text[cut:].lstrip()
        if head:
            yield head
    if text:
        yield text


def _tail(passage: str, overlap: int) -> str:
    if overlap <= 0 or len(passage) <= overlap:
        return ""
    tail = passage[-overlap:]
    space = next((i for i, ch in enumerate(tail) if ch.isspace()), -1)
    if 0 <= space < len(tail) - 1:
        tail = tail[space + 1 :]
    return tail.strip()


def _url_words(url: str) -> str:
    """A URL as searchable words: ``github.com rust lang rust issues``."""
    rest = url.split("://", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    host, _, path = rest.partition("/")
    words = [word for word in _URL_SEPARATORS.split(path) if word]
    return " ".join([host, *words])


SECTION_BREAKS = False
"""Passages break where a section starts (when the section is long enough to stand
alone); False cuts the whole text every ``passage_chars`` as if it had no headings."""
SECTION_IN_VECTOR = False
"""Each passage's heading path is part of the text its vector is made from."""
_PATH_SEPARATOR = " › "
_SHARED_SEPARATOR = " · "


def page_documents(
    page: Page, *, passage_chars: int = 1_000, overlap: int = 100, max_passages: int = 4_000
) -> list[Document]:
    """The documents of a page: one ``passage`` per chunk of its current text (with the
    headings it sits under as its ``section``), or one title-only ``page`` document (title
    and URL words) when it has no text."""
    base = page_parent(page.id)
    common = {
        "url": page.url, "domain": page.domain, "title": page.title or "", "parent": base,
        "first_seen": page.first_seen, "last_seen": page.last_seen,
        "visits": page.visit_count, "language": page.language or "",
    }  # fmt: skip
    limit = min(max_passages, MAX_PASSAGES)
    chunks = section_chunks(
        page.text or "", page.outline, page.title or "", passage_chars, overlap, limit
    )
    if not chunks:
        return [{"id": base, "kind": "page", "body": _url_words(page.url), **common}]
    return [
        {"id": doc_id(TYPE_PASSAGE, page.id, n), "kind": "passage", "body": chunk,
         "section": section, **common}  # fmt: skip
        for n, (section, chunk) in enumerate(chunks)
    ]


def section_chunks(
    text: str,
    outline: Sequence[tuple[int, int, str]],
    title: str,
    size: int = 1_000,
    overlap: int = 100,
    max_passages: int | None = None,
) -> list[tuple[str, str]]:
    """``text`` cut into passages of at most ``size`` characters, each with its heading
    path (``"Options › Notes"``, outermost first; the heading that names the page itself
    is left out, as the title carries it).

    With :data:`SECTION_BREAKS`, a passage starts where a section starts: sections
    shorter than ``size`` share a passage with the ones after them until it is full (its
    path is then the first one's, followed by each later section's heading: ``"Install ›
    On Linux · On macOS"``), and a longer one is cut by :func:`chunk_text` alone. The
    result depends only on the arguments."""
    sections = _sections(text, outline, title)
    if not SECTION_BREAKS:
        chunks = chunk_text(text, size, overlap, max_passages)
        return list(zip(_paths_at(text, chunks, sections), chunks, strict=True))
    out: list[tuple[str, str]] = []
    pending: list[tuple[str, str]] = []  # short sections waiting to fill one passage

    def flush() -> None:
        if pending:
            # The path where the passage starts, then each later section's own heading.
            heads = [pending[0][0], *(p.rsplit(_PATH_SEPARATOR, 1)[-1] for p, _ in pending[1:])]
            path = _SHARED_SEPARATOR.join(dict.fromkeys(h for h in heads if h))
            out.append((path, "\n".join(body for _, body in pending)))
            pending.clear()

    for path, body in sections:
        if len(body) > size:
            flush()
            out.extend((path, chunk) for chunk in chunk_text(body, size, overlap))
        else:
            if pending and sum(len(b) + 1 for _, b in pending) + len(body) > size:
                flush()
            pending.append((path, body))
    flush()
    return out[:max_passages] if max_passages is not None else out


def _sections(
    text: str, outline: Sequence[tuple[int, int, str]], title: str
) -> list[tuple[str, str]]:
    """(heading path, text) of each section of ``text``, in order; empty sections left
    out."""
    cuts: list[tuple[int, str]] = [(0, "")]
    stack: list[tuple[int, str]] = []
    for i, (offset, level, words) in enumerate(outline):
        if i == 0 and (offset < 100 or words.casefold() in title.casefold()):
            continue  # the page's own heading: the title says it
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, words))
        cuts.append((offset, _PATH_SEPARATOR.join(w for _, w in stack)))
    out = []
    for (start, path), (end, _) in zip(cuts, [*cuts[1:], (len(text), "")], strict=True):
        body = text[start:end].strip()
        if body:
            out.append((path, body))
    return out


def _paths_at(text: str, chunks: list[str], sections: list[tuple[str, str]]) -> list[str]:
    """The heading path in force where each chunk of ``text`` starts."""
    starts, at = [], 0
    for path, body in sections:
        at = text.find(body, at)
        starts.append((at, path))
    paths, at = [], 0
    for chunk in chunks:
        found = text.find(chunk.split("\n", 1)[0][:200], at)
        at = found if found >= 0 else at
        paths.append(next((p for s, p in reversed(starts) if s <= at), ""))
    return paths


def item_document(entity_type: str, item: Any) -> Document:
    """The one document of a highlight, note, bookmark or fact."""
    base = {"id": entity_doc_id(entity_type, item.id), "kind": entity_type, "visits": 0,
            "first_seen": item.created_at, "last_seen": item.updated_at}  # fmt: skip
    if isinstance(item, Highlight):
        body = item.text if not item.note else f"{item.text}\n{item.note}"
        return {**base, "url": item.url, "domain": item.domain, "title": "", "body": body}
    if isinstance(item, Note):
        return {**base, "url": item.url or "", "domain": item.domain or "", "title": "",
                "body": item.content}  # fmt: skip
    if isinstance(item, Bookmark):
        body = " ".join(part for part in (item.folder, _url_words(item.url)) if part)
        return {**base, "url": item.url, "domain": item.domain, "title": item.title or "",
                "body": body}  # fmt: skip
    if isinstance(item, Fact):
        return {**base, "url": "", "domain": "", "title": item.key,
                "body": f"{item.key}: {item.value}"}  # fmt: skip
    raise TypeError(f"cannot index {type(item).__name__}")


def embedding_text(doc: Document) -> str:
    """What is embedded for a document: its title and the headings it sits under
    (``title › section › subsection``), then its body."""
    title, body = doc.get("title") or "", doc.get("body") or ""
    section = doc.get("section") or "" if SECTION_IN_VECTOR else ""
    head = _PATH_SEPARATOR.join(part for part in (title, section) if part)
    return f"{head}\n{body}".strip() if head else body.strip()
