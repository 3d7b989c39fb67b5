"""Exporting the memory: JSON Lines for machines, one self-contained HTML file for people.

Both formats read through the service API (:class:`~backtrail.service.memory.Memory`), in the
same order: pages (most recently seen first, with their current text unless
``include_text`` is off), then bookmarks, highlights, notes and facts.

**JSON Lines**: the first line is a header ``{"type": "backtrail-export", "format": 1,
"exported_at": <unix seconds>, "counts": {...}}``; every further line is one record with
a ``type`` of ``page``, ``bookmark``, ``highlight``, ``note`` or ``fact`` and the
record's fields (times in unix seconds).

**HTML**: a single file with inline style and a small inline script (allowed by hash in
its Content-Security-Policy; nothing is loaded from anywhere) that filters the items as
you type. Pages are grouped by the day they were last seen; each page's text folds out.
Every value from the web is HTML-escaped, and links carry ``rel="noreferrer"``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from backtrail import __version__
from backtrail.errors import PageNotFound

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = ["FORMATS", "ExportSummary", "iter_records", "write_jsonl", "write_html"]

FORMATS = ("jsonl", "html")
FORMAT_VERSION = 1
Progress = Callable[[int, int, str], None]

_PAGE_BATCH = 500
_MAX_ITEMS = 100_000
_READ_CHARS = 1_000_000
_KINDS = ("page", "bookmark", "highlight", "note", "fact")


@dataclass
class ExportSummary:
    """How many records of each kind were written."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _expected(memory: Memory) -> dict[str, int]:
    counts = memory.stats().ledger.counts
    return {
        "page": counts.get("pages", 0),
        "bookmark": counts.get("bookmarks", 0),
        "highlight": counts.get("highlights", 0),
        "note": counts.get("notes", 0),
        "fact": counts.get("facts", 0),
    }


def iter_records(memory: Memory, *, include_text: bool = True) -> Iterator[dict[str, Any]]:
    """Every record as a JSON-ready dict with a ``type``, in export order."""
    offset = 0
    while True:
        entries = memory.timeline(limit=_PAGE_BATCH, offset=offset)
        for entry in entries:
            record: dict[str, Any] = {"type": "page", **asdict(entry)}
            record["id"] = record.pop("page_id")
            if include_text:
                record["language"], record["text"] = _page_text(memory, entry.page_id)
            yield record
        if len(entries) < _PAGE_BATCH:
            break
        offset += len(entries)
    for bookmark in memory.list_bookmarks(limit=_MAX_ITEMS):
        yield {"type": "bookmark", **asdict(bookmark)}
    for highlight in memory.list_highlights(limit=_MAX_ITEMS):
        yield {"type": "highlight", **asdict(highlight)}
    for note in memory.list_notes(limit=_MAX_ITEMS):
        yield {"type": "note", **asdict(note)}
    offset = 0
    while True:
        facts = memory.list_facts(limit=1000, offset=offset)
        for fact in facts:
            yield {"type": "fact", **asdict(fact)}
        if len(facts) < 1000:
            break
        offset += len(facts)


def _page_text(memory: Memory, page_id: int) -> tuple[str | None, str | None]:
    parts: list[str] = []
    offset: int | None = 0
    language = None
    try:
        while offset is not None:
            piece = memory.get_page(page_id=page_id, offset=offset, length=_READ_CHARS)
            language = piece.language
            parts.append(piece.text)
            offset = piece.next_offset
    except PageNotFound:  # forgotten while exporting
        return None, None
    text = "".join(parts)
    return language, text or None


def _counting(
    records: Iterator[dict[str, Any]], summary: ExportSummary, total: int, progress: Progress | None
) -> Iterator[dict[str, Any]]:
    done = 0
    for record in records:
        summary.counts[record["type"]] += 1
        done += 1
        if progress is not None and (done % 200 == 0 or done == total):
            progress(done, total, "export")
        yield record
    if progress is not None:
        progress(done, max(done, total), "export")


def write_jsonl(
    memory: Memory, out: TextIO, *, include_text: bool = True, progress: Progress | None = None
) -> ExportSummary:
    """Write the JSON Lines export to ``out``."""
    expected = _expected(memory)
    header = {
        "type": "backtrail-export",
        "format": FORMAT_VERSION,
        "version": __version__,
        "exported_at": int(time.time()),
        "counts": expected,
    }
    out.write(json.dumps(header, ensure_ascii=False) + "\n")
    summary = ExportSummary()
    records = iter_records(memory, include_text=include_text)
    for record in _counting(records, summary, sum(expected.values()), progress):
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return summary


# ------------------------------------------------------------------------ html

_SCRIPT = """
const box = document.getElementById("filter");
const items = Array.from(document.querySelectorAll(".item"));
box.addEventListener("input", () => {
  const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
  for (const item of items) {
    const text = item.textContent.toLowerCase();
    item.hidden = !words.every((word) => text.includes(word));
  }
  for (const day of document.querySelectorAll(".day")) {
    day.hidden = !day.querySelector(".item:not([hidden])");
  }
});
"""

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#222}
header{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ddd}
h1{font-size:1.4rem;margin:.2rem 0}h2{margin-top:2rem}h3{font-size:1rem;color:#555}
#filter{width:100%;font-size:1rem;padding:.4rem;box-sizing:border-box}
nav a{margin-right:1rem}.item{margin:.6rem 0}.meta{color:#666;font-size:.85rem}
.url{color:#2a7a2a;font-size:.8rem;word-break:break-all}
.text{white-space:pre-wrap;background:#f7f7f7;padding:.6rem;font-size:.9rem}
blockquote{margin:.3rem 0 .3rem 1rem;border-left:3px solid #cc5;padding-left:.6rem}
@media (prefers-color-scheme:dark){body,header{background:#111;color:#ddd}
.text{background:#1b1b1b}.meta{color:#999}}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _day(ts: int | None) -> str:
    return "unknown" if ts is None else datetime.fromtimestamp(ts).strftime("%A %Y-%m-%d")


def _clock(ts: int | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _link(url: str | None, title: str | None) -> str:
    label = _e(title or url or "(untitled)")
    if not url:
        return f"<strong>{label}</strong>"
    return f'<a href="{_e(url)}" rel="noreferrer noopener" target="_blank">{label}</a>'


def _page_html(record: dict[str, Any]) -> str:
    visits = record["visit_count"]
    meta = (
        f"{_e(record['domain'])} · last seen {_clock(record['last_seen'])} · "
        f"{visits} visit{'s' if visits != 1 else ''}"
    )
    body = [
        f'<div class="item">{_link(record["url"], record["title"])} '
        f'<span class="meta">{meta}</span><div class="url">{_e(record["url"])}</div>'
    ]
    text = record.get("text")
    if text:
        body.append(
            f"<details><summary>Text ({len(text):,} characters)</summary>"
            f'<div class="text">{_e(text)}</div></details>'
        )
    body.append("</div>")
    return "".join(body)


def _item_html(record: dict[str, Any]) -> str:
    kind = record["type"]
    if kind == "bookmark":
        meta = f"{_e(record['folder'] or '')} · added {_clock(record['created_at'])}"
        return (
            f'<div class="item">{_link(record["url"], record["title"])} '
            f'<span class="meta">{meta}</span></div>'
        )
    if kind == "highlight":
        note = f"<p>{_e(record['note'])}</p>" if record.get("note") else ""
        return (
            f'<div class="item"><blockquote>{_e(record["text"])}</blockquote>{note}'
            f'<span class="meta">{_link(record["url"], record["domain"])} · '
            f"{_clock(record['created_at'])}</span></div>"
        )
    if kind == "note":
        about = f" · about {_link(record['url'], record['url'])}" if record.get("url") else ""
        return (
            f'<div class="item"><div class="text">{_e(record["content"])}</div>'
            f'<span class="meta">{_clock(record["updated_at"])}{about}</span></div>'
        )
    return (
        f'<div class="item"><strong>{_e(record["key"])}</strong>: {_e(record["value"])} '
        f'<span class="meta">version {record["version"]} by {_e(record["client"])}, '
        f"{_clock(record['updated_at'])}</span></div>"
    )


_SECTIONS = {"bookmark": "Bookmarks", "highlight": "Highlights", "note": "Notes", "fact": "Facts"}


def _section_header(kind: str, count: int) -> str:
    empty = "" if count else '<p class="meta">None.</p>'
    return f'<h2 id="{kind}s">{_SECTIONS[kind]}</h2>{empty}\n'


def write_html(
    memory: Memory, out: TextIO, *, include_text: bool = True, progress: Progress | None = None
) -> ExportSummary:
    """Write the single-file HTML export to ``out``."""
    expected = _expected(memory)
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    exported = datetime.now().strftime("%Y-%m-%d %H:%M")
    nav = " ".join(
        f'<a href="#{kind}s">{label} ({expected[kind]:,})</a>'
        for kind, label in (("page", "Pages"), *_SECTIONS.items())
    )
    out.write(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Backtrail export {exported}</title><style>{_STYLE}</style></head><body>\n"
        f'<header><h1>Backtrail</h1><p class="meta">Exported {exported} by Backtrail '
        f"{_e(__version__)}. Page titles and text come from the web.</p>"
        '<input id="filter" type="search" placeholder="Filter: type words to narrow the list"'
        " autofocus><nav>" + nav + "</nav></header>\n"
        '<h2 id="pages">Pages</h2>\n'
    )
    summary = ExportSummary()
    records = _counting(
        iter_records(memory, include_text=include_text), summary, sum(expected.values()), progress
    )
    day: str | None = None
    at = 0  # position in _KINDS of the section being written
    for record in records:
        position = _KINDS.index(record["type"])
        if position > at:
            if day:
                out.write("</section>\n")
                day = None
            for kind in _KINDS[at + 1 : position + 1]:
                out.write(_section_header(kind, expected[kind]))
            at = position
        if record["type"] == "page":
            this_day = _day(record["last_seen"])
            if this_day != day:
                closing = "</section>" if day else ""
                out.write(f'{closing}<section class="day"><h3>{this_day}</h3>\n')
                day = this_day
            out.write(_page_html(record) + "\n")
        else:
            out.write(_item_html(record) + "\n")
    if day:
        out.write("</section>\n")
    for kind in _KINDS[at + 1 :]:
        out.write(_section_header(kind, expected[kind]))
    out.write(f"<script>{_SCRIPT}</script>\n</body></html>\n")
    return summary
