"""Main text, title and language from a page's HTML.

:func:`extract_main_text` is the one entry point. It prefers trafilatura (tuned for
recall, tables included, comments excluded) and falls back to a fast whole-page
HTML-to-text conversion (selectolax when installed, else the standard library's
``html.parser``) when trafilatura is missing, fails, returns too little, or the HTML is
larger than a threshold (trafilatura is slow on huge documents). Scripts, styles and
other non-content elements never reach the text. It never raises on malformed input:
the worst case is an empty result with ``method == "none"``.

Headings are kept as an outline beside the text (:class:`Heading`: where each heading's
line starts in the text, its level and its words), so the chunker can break passages at
sections and give each passage the path of headings it sits under. Sphinx's "¶"
permalinks at the end of headings and definitions are dropped.

The title comes from ``<title>``, then ``og:title``, then the first ``<h1>``; the
language from ``<html lang>``, then ``Content-Language`` / ``og:locale`` metadata, then
trafilatura's metadata, normalised to a lower-case BCP 47 tag such as ``"en-us"``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Literal, NamedTuple

from backtrail.errors import InvalidInput

__all__ = [
    "DEFAULT_MAX_HTML_CHARS",
    "DEFAULT_MIN_TEXT_CHARS",
    "Extracted",
    "ExtractMethod",
    "Heading",
    "extract_main_text",
    "clean_text",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_HTML_CHARS = 2_000_000
"""HTML longer than this (in characters) skips trafilatura and uses the fast path."""

DEFAULT_MIN_TEXT_CHARS = 100
"""A trafilatura result shorter than this loses to a longer fast-path text."""

ExtractMethod = Literal["trafilatura", "selectolax", "htmlparser", "none"]

_SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object",
     "embed", "button", "select", "option", "input", "textarea"}
)  # fmt: skip
_BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
     "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
     "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
     "tfoot", "thead", "tr", "ul", "body", "html"}
)  # fmt: skip
_VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr"}
)  # fmt: skip
_CELL_TAGS = frozenset({"td", "th"})
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_SPACES_RE = re.compile(r"[^\S\n]+")
_BLANK_LINES_RE = re.compile(r"\n{3,}")
_NEWLINES_RE = re.compile(r"\n{2,}")
_LANG_RE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]{1,8})*$")
_PERMALINK_RE = re.compile(r"[ \t]*\u00b6+[ \t]*$", re.M)
_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)


class Heading(NamedTuple):
    """A heading of the main text: its line starts at ``offset`` (in characters) of the
    text, at ``level`` 1 (``<h1>``) to 6. A plain tuple, as the ledger stores it."""

    offset: int
    level: int
    text: str


@dataclass(frozen=True)
class Extracted:
    """What :func:`extract_main_text` found. ``text`` is ``""`` when nothing was found;
    ``outline`` holds the headings found in it, in order."""

    title: str | None
    text: str
    language: str | None
    method: ExtractMethod
    outline: tuple[Heading, ...] = ()


@dataclass
class _Fast:
    title: str | None
    og_title: str | None
    h1: str | None
    language: str | None
    text: str
    method: ExtractMethod
    headings: list[RawHeading]

    def best_title(self) -> str | None:
        return self.title or self.og_title or self.h1


def extract_main_text(
    html: str | bytes,
    url: str | None = None,
    *,
    max_html_chars: int = DEFAULT_MAX_HTML_CHARS,
    min_text_chars: int = DEFAULT_MIN_TEXT_CHARS,
) -> Extracted:
    """Extract the readable main text of ``html`` (``url`` helps trafilatura's rules).

    Raises ``InvalidInput`` only when ``html`` is neither ``str`` nor ``bytes``; any
    content, however malformed, yields a result.
    """
    if not isinstance(html, (str, bytes)):
        raise InvalidInput("html", f"must be str or bytes, not {type(html).__name__}")
    try:
        document = _sanitize(_decode(html) if isinstance(html, bytes) else html)
        fast = _fast_extract(document)
        if len(document) <= max_html_chars:
            main = _trafilatura(document, url if isinstance(url, str) else None)
            if main is not None:
                text, language = main
                if len(text) >= min_text_chars or len(text) >= len(fast.text):
                    return Extracted(
                        title=fast.best_title(),
                        text=text,
                        language=fast.language or _normalize_language(language),
                        method="trafilatura",
                        outline=outline(text, fast.headings),
                    )
        else:
            logger.debug("HTML has %d characters; using the fast extractor", len(document))
        return Extracted(
            fast.best_title(), fast.text, fast.language, fast.method,
            outline(fast.text, fast.headings),
        )  # fmt: skip
    except Exception:  # extraction must never take the caller down
        logger.warning("text extraction failed; storing no text", exc_info=True)
        return Extracted(None, "", None, "none")


def decode_html(data: bytes) -> str:
    """HTML bytes as text, by the charset the document declares (UTF-8 otherwise),
    undecodable bytes replaced."""
    return _sanitize(_decode(data))


def clean_text(text: str) -> str:
    """Normalise extracted text: no control characters or lone surrogates, runs of
    spaces collapsed, lines trimmed, at most one blank line in a row."""
    text = _sanitize(text).replace("\r\n", "\n").replace("\r", "\n")
    text = _PERMALINK_RE.sub("", text)
    lines = (_SPACES_RE.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANK_LINES_RE.sub("\n\n", "\n".join(lines)).strip()


#: One heading of the document: (level, words, the words that follow it).
RawHeading = tuple[int, str, str]


def outline(text: str, headings: list[RawHeading]) -> tuple[Heading, ...]:
    """The document's headings placed in ``text``, in order: at the line holding the
    heading's words, else (main-text extractors drop some headings) at the line where the
    words following the heading begin. A heading found in neither way is left out."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    flat, where = _collapsed(text)
    found: list[Heading] = []
    at = 0  # the first line a later heading may take
    for level, words, after in headings:
        words = _clean_heading(words)
        if not words:
            continue
        line = next((i for i in range(at, len(lines)) if lines[i] == words), None)
        if line is None and after:
            begin = starts[at] if at < len(starts) else len(text)
            hit = flat.find(after, where_index(where, begin))
            if hit >= 0:
                line = _line_of(starts, where[hit])
        if line is not None and line >= at:
            found.append(Heading(starts[line], level, words))
            at = line + 1
    return tuple(found)


def _collapsed(text: str) -> tuple[str, list[int]]:
    """``text`` with each run of white space made one space, and the offset in ``text``
    of each of its characters."""
    out: list[str] = []
    where: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not space and out:
                out.append(" ")
                where.append(i)
            space = True
        else:
            out.append(ch)
            where.append(i)
            space = False
    return "".join(out), where


def where_index(where: list[int], offset: int) -> int:
    """The first collapsed position at or after ``offset`` of the original text."""
    from bisect import bisect_left

    return bisect_left(where, offset)


def _line_of(starts: list[int], offset: int) -> int:
    from bisect import bisect_right

    return bisect_right(starts, offset) - 1


def _clean_heading(text: str | None) -> str:
    return _PERMALINK_RE.sub("", _clean_inline(text) or "").strip()


def _fast_text(text: str) -> str:
    """Whole-page text has a line per block; blank lines carry no meaning there."""
    return _NEWLINES_RE.sub("\n", clean_text(text))


def _clean_inline(text: str | None) -> str | None:
    if text is None:
        return None
    cleaned = _SPACES_RE.sub(" ", _sanitize(text).replace("\n", " ")).strip()
    return cleaned or None


def _sanitize(text: str) -> str:
    text = _SURROGATE_RE.sub("\ufffd", text)
    return _CONTROL_RE.sub("", text)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    match = _CHARSET_RE.search(data[:4096])
    if match:
        try:
            return data.decode(match.group(1).decode("ascii"), errors="replace")
        except (LookupError, UnicodeDecodeError):
            pass
    return data.decode("utf-8", errors="replace")


def _normalize_language(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    tag = value.strip().replace("_", "-").lower()
    tag = tag.split(",")[0].split(";")[0].strip()
    return tag if _LANG_RE.match(tag) and len(tag) <= 35 else None


# -------------------------------------------------------------------- trafilatura


def _trafilatura(document: str, url: str | None) -> tuple[str, str | None] | None:
    try:
        import trafilatura
    except ImportError:
        logger.debug("trafilatura is not installed; using the fast extractor")
        return None
    try:
        result: Any = trafilatura.bare_extraction(
            document,
            url=url,
            favor_recall=True,
            include_tables=True,
            include_comments=False,
            include_images=False,
            include_links=False,
            with_metadata=True,
        )
    except Exception:  # trafilatura and lxml raise many types on hostile input
        logger.debug("trafilatura failed; using the fast extractor", exc_info=True)
        return None
    if result is None:
        return None
    text = getattr(result, "text", None)
    if not isinstance(text, str):
        return None
    return clean_text(text), getattr(result, "language", None)


# ------------------------------------------------------------------- fast fallback


def _fast_extract(document: str) -> _Fast:
    try:
        from selectolax.lexbor import LexborHTMLParser
    except ImportError:
        return _htmlparser_extract(document)
    try:
        return _selectolax_extract(LexborHTMLParser(document))
    except Exception:
        logger.debug("selectolax failed; using html.parser", exc_info=True)
        return _htmlparser_extract(document)


def _selectolax_extract(tree: Any) -> _Fast:
    def first_text(selector: str) -> str | None:
        node = tree.css_first(selector)
        return _clean_inline(node.text(deep=True)) if node is not None else None

    def meta(selector: str) -> str | None:
        node = tree.css_first(selector)
        return node.attributes.get("content") if node is not None else None

    html_node = tree.css_first("html")
    language = _normalize_language(html_node.attributes.get("lang")) if html_node else None
    language = (
        language
        or _normalize_language(meta('meta[http-equiv="content-language" i]'))
        or _normalize_language(meta('meta[property="og:locale"]'))
    )
    title = first_text("title")
    og_title = _clean_inline(meta('meta[property="og:title"]'))
    h1 = first_text("h1")
    body = tree.body
    text = ""
    headings: list[RawHeading] = []
    if body is not None:
        for node in body.css(",".join(sorted(_SKIP_TAGS))):
            node.decompose()
        for node in body.css(",".join(sorted(_BLOCK_TAGS - {"html", "body"}))):
            node.insert_before("\n")
            node.insert_after("\n")
        for node in body.css(",".join(sorted(_CELL_TAGS))):
            node.insert_after(" ")
        nodes = body.css(",".join(_HEADING_TAGS))
        for i, node in enumerate(nodes):
            node.insert_after(f"{_MARK}{i}{_MARK}")
        marked = body.text(deep=True, separator="", strip=False)
        headings = _marked_headings(nodes, marked)
        text = _fast_text(_MARK_RE.sub("", marked))
    return _Fast(title, og_title, h1, language, text, "selectolax", headings)


_MARK = "\ue000"
_MARK_RE = re.compile(_MARK + r"\d+" + _MARK)
_AFTER_CHARS = 60


def _marked_headings(nodes: list[Any], marked: str) -> list[RawHeading]:
    """(level, words, the first words after it) of each heading node, read from the page
    text in which each heading is followed by its numbered mark."""
    after: dict[int, str] = {}
    pieces = _MARK_RE.split(marked)
    numbers = [int(m.group()[1:-1]) for m in _MARK_RE.finditer(marked)]
    for n, piece in zip(numbers, pieces[1:], strict=True):
        after[n] = " ".join(_sanitize(piece).split())[:_AFTER_CHARS]
    return [
        (int(node.tag[1]), node.text(deep=True), after.get(i, "")) for i, node in enumerate(nodes)
    ]


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip_depth = 0
        self.skip_stack: list[str] = []
        self.capture: str | None = None
        self.title: str | None = None
        self.h1: str | None = None
        self.og_title: str | None = None
        self.language: str | None = None
        self.meta_language: str | None = None
        self._buffer: list[str] = []
        self.headings: list[RawHeading] = []
        self._heading: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "html" and self.language is None:
            self.language = _normalize_language(values.get("lang"))
        elif tag == "meta":
            self._meta(values)
        if tag in ("title", "h1") and self.capture is None:
            self.capture = tag
            self._buffer = []
        if tag in _HEADING_TAGS and self._heading is None:
            self._heading = (tag, [])
        if tag in _SKIP_TAGS and tag not in _VOID_TAGS:
            self.skip_stack.append(tag)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        elif tag in _CELL_TAGS:
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "meta":
            self._meta({name: value or "" for name, value in attrs})
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self.skip_stack and tag in self.skip_stack:
            while self.skip_stack and self.skip_stack.pop() != tag:
                pass
        if tag == self.capture:
            value = _clean_inline("".join(self._buffer))
            if tag == "title" and self.title is None:
                self.title = value
            elif tag == "h1" and self.h1 is None:
                self.h1 = value
            self.capture = None
        if self._heading is not None and tag == self._heading[0]:
            self.headings.append((int(tag[1]), "".join(self._heading[1]), ""))
            self._heading = None
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")
        elif tag in _CELL_TAGS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if self.capture is not None:
            self._buffer.append(data)
        if self._heading is not None and not self.skip_stack:
            self._heading[1].append(data)
        if not self.skip_stack and self.capture != "title":
            self.parts.append(data)

    def _meta(self, values: dict[str, str]) -> None:
        prop = values.get("property", "").lower()
        if prop == "og:title" and self.og_title is None:
            self.og_title = _clean_inline(values.get("content"))
        elif prop == "og:locale" and self.meta_language is None:
            self.meta_language = _normalize_language(values.get("content"))
        elif values.get("http-equiv", "").lower() == "content-language":
            self.meta_language = _normalize_language(values.get("content"))


def _htmlparser_extract(document: str) -> _Fast:
    collector = _TextCollector()
    try:
        collector.feed(document)
        collector.close()
    except Exception:  # html.parser is lenient, but keep what was collected so far
        logger.debug("html.parser stopped early", exc_info=True)
    return _Fast(
        title=collector.title,
        og_title=collector.og_title,
        h1=collector.h1,
        language=collector.language or collector.meta_language,
        text=_fast_text("".join(collector.parts)),
        method="htmlparser",
        headings=collector.headings,
    )
