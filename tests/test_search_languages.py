"""Search in languages other than English: words are stemmed by their script, and
Latin-script ones by the page's language (the query's words in every language the memory
holds), so a page is found by other inflections of the words it holds; CJK text by any
word inside a run. An index analysed the old way is rebuilt from the ledger rather than
searched with stale terms."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from backtrail.service import Memory
from helpers import make_config

if TYPE_CHECKING:
    from conftest import FakeClock

PAGES = {
    "https://ru.example/samovar": (
        "ru",
        "Тульский самовар",
        "Тульский самовар стал символом русского чаепития. Мастера из Тулы делали "
        "самовары из меди и латуни, и вода в самоваре закипала за несколько минут. "
        "Вокруг него собиралась вся семья.",
    ),
    "https://el.example/elia": (
        "el",
        "Η ελιά της Μεσογείου",
        "Η ελιά καλλιεργείται γύρω από τη Μεσόγειο εδώ και χιλιάδες χρόνια. Κοντά στη "
        "θάλασσα τα δέντρα δίνουν καρπό κάθε φθινόπωρο, και από τον καρπό βγαίνει το "
        "λάδι που τρώει όλη η Ελλάδα.",
    ),
    "https://ar.example/maktaba": (
        "ar",
        "المكتبة العامة",
        "افتتحت المكتبة العامة في وسط المدينة، وفيها آلاف الكتب القديمة والحديثة. "
        "يأتي الطلاب كل صباح للقراءة والدراسة في قاعاتها الهادئة.",
    ),
    "https://de.example/buecher": (
        "de",
        "Alte Bücher",
        "In der Bibliothek der Stadt stehen alte Bücher, und hinter den Häusern liegt ein "
        "kleiner Garten.",
    ),
    "https://fr.example/cheval": (
        "fr",
        "Le cheval du village",
        "Les enfants mangeaient du pain près du cheval, puis ils rentraient à la maison.",
    ),
    "https://es.example/canciones": (
        "es-MX",
        "Canciones de la plaza",
        "Por la tarde los niños cantaban canciones antiguas en la plaza del pueblo.",
    ),
    "https://zh.example/shujuku": (
        "zh",
        "数据库",
        "关系型数据库使用结构化查询语言来管理数据。",
    ),
    "https://en.example/tea": (
        "en",
        "Brewing tea",
        "Brewing tea well takes fresh water, a warmed pot and patience while the leaves "
        "steep for a few minutes.",
    ),
}


def html(language: str, title: str, text: str) -> str:
    return (
        f'<html lang="{language}"><head><title>{title}</title></head><body>'
        f"<article><h1>{title}</h1><p>{text}</p><p>{text}</p></article></body></html>"
    )


@pytest.fixture
def memory(data_home: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(make_config(data_home), client="test", clock=clock) as opened:
        for url, page in PAGES.items():
            opened.capture_page(url, html=html(*page))
        opened.catch_up(vectors=False)
        yield opened


def found(memory: Memory, query: str) -> list[str | None]:
    return [result.url for result in memory.search(query, mode="bm25").results]


@pytest.mark.parametrize(
    ("query", "url"),
    [
        ("самовара", "https://ru.example/samovar"),  # genitive; the page has самовар
        ("латунью", "https://ru.example/samovar"),  # instrumental; the page has латуни
        ("θάλασσας", "https://el.example/elia"),  # genitive; the page has θάλασσα
        ("λαδιού", "https://el.example/elia"),  # genitive; the page has λάδι
        ("مكتبة", "https://ar.example/maktaba"),  # without the article; the page has المكتبة
        ("Büchern", "https://de.example/buecher"),  # dative plural; the page has Bücher
        ("Haus", "https://de.example/buecher"),  # singular; the page has Häusern
        ("chevaux", "https://fr.example/cheval"),  # plural; the page has cheval
        ("manger", "https://fr.example/cheval"),  # infinitive; the page has mangeaient
        ("cantar", "https://es.example/canciones"),  # infinitive; the page has cantaban
        ("查询", "https://zh.example/shujuku"),  # a word inside a run of Han characters
        ("brewed", "https://en.example/tea"),  # English pages are stemmed as before
    ],
)
def test_a_page_is_found_by_another_inflection_of_its_words(
    memory: Memory, query: str, url: str
) -> None:
    _, title, text = PAGES[url]
    assert query.lower() not in re.findall(r"\w+", f"{title} {text}".lower())
    assert found(memory, query) == [url]


def test_a_word_no_page_holds_in_any_form_finds_nothing(memory: Memory) -> None:
    assert found(memory, "балалайки") == []
    assert found(memory, "πορτοκαλιού") == []
    assert found(memory, "سيارة") == []
    assert found(memory, "Pferden") == []


def test_an_inflected_word_finds_its_page_in_the_default_mode_with_the_word_marked(
    memory: Memory,
) -> None:
    results = memory.search("Büchern").results
    assert results[0].url == "https://de.example/buecher"
    assert "**Bücher**" in results[0].snippet


def test_a_page_from_an_older_index_format_is_rebuilt_and_found_by_inflection(
    data_home: Path, clock: FakeClock
) -> None:
    url = "https://ru.example/samovar"
    with Memory(make_config(data_home), client="test", clock=clock) as memory:
        memory.capture_page(url, html=html(*PAGES[url]))
        memory.catch_up(vectors=False)
    settings = data_home / "index" / "backtrail-index.json"
    written = json.loads(settings.read_text())
    settings.write_text(json.dumps({**written, "format": 1}))  # as the English-only core wrote
    with Memory(make_config(data_home), client="test", clock=clock) as memory:
        memory.catch_up(vectors=False)
        assert found(memory, "самовара") == [url]
    assert json.loads(settings.read_text())["format"] == written["format"]


def test_a_page_whose_language_changes_is_stemmed_anew(data_home: Path, clock: FakeClock) -> None:
    url = "https://de.example/buecher"
    _, title, text = PAGES[url]
    with Memory(make_config(data_home), client="test", clock=clock) as memory:
        memory.capture_page(url, html=html("en", title, text))  # a page that misstates it
        memory.catch_up(vectors=False)
        assert found(memory, "Büchern") == []
        memory.capture_page(url, html=html("de", title, text))
        memory.catch_up(vectors=False)
        assert found(memory, "Büchern") == [url]
