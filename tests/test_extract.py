"""Main-text extraction from HTML."""

from __future__ import annotations

import sys

import pytest

from backtrail.errors import InvalidInput
from backtrail.indexer.extract import Extracted, clean_text, extract_main_text

PARAGRAPH = " ".join(
    f"Sentence {number} explains how the storage engine keeps pages on disk."
    for number in range(12)
)

ARTICLE = f"""<!doctype html>
<html lang="en-GB">
<head>
  <title>Storage engines explained | The Blog</title>
  <meta property="og:title" content="Storage engines explained">
  <style>body {{ color: red; }} .stylemarker {{}}</style>
  <script>window.scriptmarker = 1;</script>
</head>
<body>
  <nav><ul><li><a href="/">Home</a></li><li><a href="/about">About</a></li></ul></nav>
  <article>
    <h1>Storage engines</h1>
    <p>{PARAGRAPH}</p>
    <p>Second paragraph: log-structured merge trees batch writes in memory first.</p>
    <table>
      <tr><th>Engine</th><th>Structure</th></tr>
      <tr><td>RocksDB</td><td>LSM tree</td></tr>
    </table>
  </article>
  <div id="comments" class="comments"><p>Commentmarker says: great post!</p></div>
  <script>track("scriptmarker2")</script>
</body>
</html>"""


def test_article_main_text_comes_from_trafilatura_with_tables_and_no_boilerplate() -> None:
    result = extract_main_text(ARTICLE, "https://blog.example.com/storage")
    assert result.method == "trafilatura"
    assert "Sentence 11 explains how the storage engine keeps pages on disk." in result.text
    assert "log-structured merge trees" in result.text
    assert "RocksDB" in result.text and "LSM tree" in result.text
    for absent in ("scriptmarker", "stylemarker", "Commentmarker", "color: red"):
        assert absent not in result.text


def test_title_prefers_title_element_then_og_title_then_h1() -> None:
    assert extract_main_text(ARTICLE).title == "Storage engines explained | The Blog"
    og_only = '<html><head><meta property="og:title" content="OG  Title"></head><body><h1>H</h1>'
    assert extract_main_text(og_only).title == "OG Title"
    assert extract_main_text("<html><body><h1>  Just\n the H1 </h1></body></html>").title == (
        "Just the H1"
    )
    assert extract_main_text("<p>no title at all</p>").title is None


@pytest.mark.parametrize(
    ("html", "language"),
    [
        ('<html lang="en-GB"><body><p>x</p></body></html>', "en-gb"),
        ('<html lang="pt_BR"><body><p>x</p></body></html>', "pt-br"),
        ('<html><head><meta property="og:locale" content="de_DE"></head><p>x</p></html>', "de-de"),
        (
            '<html><head><meta http-equiv="Content-Language" content="fr"></head><p>x</p></html>',
            "fr",
        ),
        ('<html lang="not a language!"><body><p>x</p></body></html>', None),
        ("<html><body><p>x</p></body></html>", None),
    ],
)
def test_language_comes_from_html_lang_or_metadata_normalised(
    html: str, language: str | None
) -> None:
    assert extract_main_text(html).language == language


def test_huge_html_skips_trafilatura_and_uses_the_fast_extractor() -> None:
    result = extract_main_text(ARTICLE, max_html_chars=1000)
    assert result.method == "selectolax"
    assert "Sentence 11 explains" in result.text
    assert "RocksDB LSM tree" in result.text
    assert "scriptmarker" not in result.text and "stylemarker" not in result.text
    assert result.title == "Storage engines explained | The Blog"
    assert result.language == "en-gb"


def test_too_little_text_from_trafilatura_falls_back_to_the_whole_page() -> None:
    html = (
        "<html><body><nav><a href=/a>Alpha link</a> <a href=/b>Beta link</a></nav>"
        "<p>Short note.</p><footer>Footer words here</footer></body></html>"
    )
    result = extract_main_text(html)
    assert result.method == "selectolax"
    assert result.text == "Alpha link Beta link\nShort note.\nFooter words here"


def test_fast_extractor_puts_blocks_on_lines_and_cells_on_one_line() -> None:
    html = (
        "<body><h2>Head</h2><p>One <i>two</i></p><ul><li>a</li><li>b</li></ul>"
        "<table><tr><td>x</td><td>y</td></tr></table><button>Click</button></body>"
    )
    result = extract_main_text(html, max_html_chars=0)
    assert result.text == "Head\nOne two\na\nb\nx y"


def test_stdlib_parser_is_used_when_selectolax_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "selectolax.lexbor", None)
    result = extract_main_text(ARTICLE, max_html_chars=1000)
    assert result.method == "htmlparser"
    assert "Sentence 11 explains" in result.text
    assert "RocksDB LSM tree" in result.text
    assert "scriptmarker" not in result.text and "stylemarker" not in result.text
    assert result.title == "Storage engines explained | The Blog"
    assert result.language == "en-gb"


def test_fast_path_is_used_when_trafilatura_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)
    result = extract_main_text(ARTICLE)
    assert result.method == "selectolax"
    assert "Second paragraph" in result.text


def test_both_fast_extractors_agree_on_simple_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    html = "<html><head><title>T</title></head><body><p>Alpha <b>beta</b></p><p>Gamma</p>"
    with_selectolax = extract_main_text(html, max_html_chars=0)
    monkeypatch.setitem(sys.modules, "selectolax.lexbor", None)
    with_stdlib = extract_main_text(html, max_html_chars=0)
    assert (with_selectolax.title, with_selectolax.text) == ("T", "Alpha beta\nGamma")
    assert (with_stdlib.title, with_stdlib.text) == ("T", "Alpha beta\nGamma")


@pytest.mark.parametrize(
    "html",
    [
        "",
        "<",
        "<<<>>>",
        "<html><body><p>unclosed <div><b>nested",
        "<script>never closed",
        "<p>\x00nul\x01controls\x7f</p>",
        "<p>lone \ud800 surrogate</p>",
        "<p>" + "<div>" * 5000 + "deep" + "</div>" * 10,
        "<html><head><title>" + "t" * 100_000,
        "&#0; &#xD800; &bogus; &amp",
        "<svg><script>x</script></svg><math><mi>y</mi></math>",
        "\ufeff<p>BOM first</p>",
    ],
)
def test_malformed_html_never_raises(html: str) -> None:
    result = extract_main_text(html)
    assert isinstance(result, Extracted)
    assert isinstance(result.text, str)
    result.text.encode("utf-8")  # always valid Unicode
    assert "\x00" not in result.text


def test_bytes_are_decoded_as_utf8_or_by_declared_charset() -> None:
    assert "café" in extract_main_text("<p>café au lait</p>".encode()).text
    latin1 = '<meta charset="iso-8859-1"><p>déjà vu</p>'.encode("latin-1")
    assert "déjà vu" in extract_main_text(latin1).text
    assert "�" in extract_main_text(b"<p>bad \xff\xfe bytes</p>").text


@pytest.mark.parametrize("value", [None, 42, ["<p>x</p>"]])
def test_non_html_input_type_raises_invalid_input(value: object) -> None:
    with pytest.raises(InvalidInput, match="invalid html: must be str or bytes"):
        extract_main_text(value)  # type: ignore[arg-type]


def test_clean_text_collapses_spaces_and_blank_lines() -> None:
    assert clean_text("  a \t b \r\n\r\n\r\n\n c\x00 \n") == "a b\n\nc"
