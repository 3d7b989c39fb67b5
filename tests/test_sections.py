"""Passages that know where they stand on their page: headings kept by extraction, passages
broken at sections with their heading path, the path searched as a field and embedded with
the text, and query words without content left out of scoring and highlighting."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from backtrail.errors import InvalidInput, PageNotFound
from backtrail.indexer import documents
from backtrail.indexer.documents import embedding_text, page_documents, section_chunks
from backtrail.indexer.extract import Heading, extract_main_text
from backtrail.service import Memory
from backtrail.store import Ledger
from backtrail.store.schema import migrate
from helpers import LOREM, make_config

SPHINX = """<html lang="en"><head><title>pg_dump — PostgreSQL 15 docs</title></head><body>
<div class="navbar"><a href="/">Home</a> <a href="/next">Next</a></div>
<div class="refentry"><h1>pg_dump<a class="headerlink" href="#a">¶</a></h1>
<p>pg_dump — extract a PostgreSQL database into a script file or other archive file.</p>
<div class="refsect1"><h2>Description</h2><p>{lorem}</p><p>{lorem}</p></div>
<div class="refsect1"><h2>Options</h2><p>The following command-line options control the
content and format of the output. {lorem}</p>
<div class="note"><h3>Note<a class="headerlink" href="#b">¶</a></h3>
<p>When the jobs option is given the dump opens one connection per worker plus one.</p></div>
</div></div></body></html>""".replace("{lorem}", LOREM)


def test_extraction_keeps_headings_at_their_lines_and_drops_permalinks() -> None:
    found = extract_main_text(SPHINX, "https://www.postgresql.org/docs/15/app-pgdump.html")
    assert "¶" not in found.text
    words = [(h.level, h.text) for h in found.outline]
    assert words == [(1, "pg_dump"), (2, "Description"), (2, "Options"), (3, "Note")]
    for heading in found.outline:
        after = found.text[heading.offset :]
        # A heading trafilatura kept starts its line; one it dropped is placed at the
        # words that followed it in the page.
        assert after.startswith(heading.text) or after.startswith(
            {"Description": LOREM[:20], "Options": "The following"}.get(heading.text, "?")
        ), heading


def test_the_fast_extractor_keeps_headings_too() -> None:
    found = extract_main_text(SPHINX, max_html_chars=10)  # skips trafilatura
    assert found.method == "selectolax"
    assert [h.text for h in found.outline] == ["pg_dump", "Description", "Options", "Note"]
    assert all(found.text[h.offset :].startswith(h.text) for h in found.outline)


def sections_text() -> tuple[str, list[tuple[int, int, str]]]:
    parts = [
        (1, "Guide"), (2, "Install"), (3, "On Linux"), (3, "On macOS"), (2, "Usage"),
    ]  # fmt: skip
    text, outline = "", []
    for level, words in parts:
        outline.append((len(text), level, words))
        body = " ".join([LOREM] * (6 if words == "Usage" else 1))
        text += f"{words}\n{body}\n"
    return text.strip(), outline


def test_passages_break_at_sections_and_carry_their_heading_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(documents, "SECTION_BREAKS", True)
    text, outline = sections_text()
    chunks = section_chunks(text, outline, "Guide — Example docs", 1_000, 100)
    # The page's own heading is left out (the title says it); short sections share a
    # passage until it is full, its path naming each of their headings; a long section
    # is cut on its own, every piece under its path.
    assert [path for path, _ in chunks] == ["Install · On Linux · On macOS", "Usage", "Usage"]
    assert chunks[0][1].startswith("Guide\n") and chunks[1][1].startswith("Usage\n")
    assert all(len(body) <= 1_000 for _, body in chunks)
    assert chunks == section_chunks(text, outline, "Guide — Example docs", 1_000, 100)


def test_without_breaks_passages_are_cut_as_before_and_still_know_their_section(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(documents, "SECTION_BREAKS", False)
    text, outline = sections_text()
    chunks = section_chunks(text, outline, "Guide", 1_000, 100)
    assert [body for _, body in chunks] == documents.chunk_text(text, 1_000, 100)
    assert chunks[-1][0] == "Usage"


def test_embedding_text_holds_the_heading_path(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"title": "pg_dump", "section": "Options › Note", "body": "one connection per job"}
    monkeypatch.setattr(documents, "SECTION_IN_VECTOR", True)
    assert embedding_text(doc) == "pg_dump › Options › Note\none connection per job"
    assert embedding_text({"title": "t", "body": "b"}) == "t\nb"
    monkeypatch.setattr(documents, "SECTION_IN_VECTOR", False)
    assert embedding_text(doc) == "pg_dump\none connection per job"


@pytest.fixture
def memory(data_home: Path, clock: object) -> Iterator[Memory]:
    with Memory(make_config(data_home), client="test", clock=clock) as opened:  # type: ignore[arg-type]
        yield opened


def test_a_passage_is_found_by_the_headings_it_sits_under(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, outline = sections_text()
    memory.capture_page("https://docs.example.com/guide", html=None, text=text,
                        title="Guide — Example docs", outline=outline)  # fmt: skip
    memory.catch_up(vectors=False)
    page = memory.search("macos", limit=5, mode="bm25")
    # "macOS" is only a heading: the passage under it is found by its section field.
    assert [r.url for r in page.results] == ["https://docs.example.com/guide"]
    stored = memory._ledger.get_page("https://docs.example.com/guide", with_text=True)  # noqa: SLF001
    assert stored.outline[1] == (outline[1][0], 2, "Install")
    # Cut every 1,000 characters (the default), each passage names the section it ends in.
    assert [d["section"] for d in page_documents(stored)][-1] == "Usage"
    monkeypatch.setattr(documents, "SECTION_BREAKS", True)
    docs = page_documents(stored)
    assert [d["section"] for d in docs] == ["Install · On Linux · On macOS", "Usage", "Usage"]


def test_stop_words_are_neither_scored_nor_highlighted(memory: Memory) -> None:
    for n, (title, body) in enumerate([
        ("Context managers", "Write a context manager with the contextlib decorator."),
        ("FAQ", "How do I do it? How do I ask? What do I do? " * 5),
    ]):  # fmt: skip
        memory.capture_page(f"https://docs.example.com/{n}", text=body, title=title)
    memory.catch_up(vectors=False)
    page = memory.search("how do I make a context manager", limit=5, mode="bm25")
    assert [r.url for r in page.results] == ["https://docs.example.com/0"]
    snippet = page.results[0].snippet
    assert "**context**" in snippet and "**manager**" in snippet
    assert "**a**" not in snippet and "**with**" not in snippet


def test_a_bad_outline_is_refused_and_changes_nothing(ledger: Ledger) -> None:
    for bad in ([[5, 9, "x"]], [[10, 2, "a"], [3, 2, "b"]], [["0", 1, "x"]], "h1", [[0, 1]]):
        with pytest.raises(InvalidInput):
            ledger.capture_page("https://example.com/a", text="body", outline=bad)  # type: ignore[arg-type]
    with pytest.raises(PageNotFound):
        ledger.get_page("https://example.com/a")


def test_headings_past_a_cut_text_are_left_out_and_urls_in_them_scrubbed(ledger: Ledger) -> None:
    heading = "See https://example.com/x?token=SECRET"
    done = ledger.capture_page(
        "https://example.com/a", text="abc\n" + heading, outline=[(4, 2, heading), (999, 2, "far")]
    )
    page = ledger.get_page(page_id=done.page.id, with_text=True)
    assert len(page.outline) == 1 and "SECRET" not in page.outline[0][2]


def test_a_ledger_from_before_outlines_is_migrated_and_its_pages_read(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, 1_700_000_000, target=5)
    conn.execute("INSERT INTO pages (canonical_url, url, domain, first_seen, last_seen, "
                 "current_version) VALUES ('https://example.com/a', 'https://example.com/a', "
                 "'example.com', 1, 1, 1)")  # fmt: skip
    conn.execute("INSERT INTO page_versions (page_id, version, text, content_hash, text_bytes, "
                 "captured_at, updated_at) VALUES (1, 1, 'old text', 'h', 8, 1, 1)")  # fmt: skip
    conn.close()
    with Ledger(path) as ledger:
        page = ledger.get_page(page_id=1, with_text=True)
        assert (page.text, page.outline) == ("old text", ())
        again = ledger.capture_page("https://example.com/a", text="old text",
                                    outline=[(0, 2, "Old")])  # fmt: skip
        assert again.outcome == "updated"
        assert ledger.get_page(page_id=1, with_text=True).outline == ((0, 2, "Old"),)


def test_heading_tuples_are_what_the_ledger_takes() -> None:
    assert Heading(3, 2, "x") == (3, 2, "x")
