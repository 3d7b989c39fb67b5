"""What the system benchmark feeds Backtrail: pages built from the bench corpus, and the
cached-vector embedder that makes the 10k / 100k stores affordable.

Two kinds of page:

- **Real pages** (:func:`real_pages`): the corpus's 1,699 documentation pages as the
  browser would send them, i.e. their source HTML from the Debian packages (median 3.3k,
  mean 9.3k characters of main text, ~10 passages on average). Used for the figures that
  must use the real embedder: capture-to-searchable, sustained ingest, backlog drain,
  disk per 1,000 typical pages.
- **Scale pages** (:func:`scale_pages`, :func:`stream_pages`): one page per corpus
  *passage* (mean ~1,000 characters, one or two index passages), so that 100k pages
  stay within a bench run on two cores. Page n of a tier is passage n of
  ``corpus.scale_passages`` (the real passages, then perturbed replicas); its bench id
  is the passage id (replica rule included), so ``bench.metrics`` scores Backtrail's
  page results directly. ``stream_pages`` are further replicas (rounds >= 50) sent while
  queries run.

:class:`CachedEmbedder` answers ``embed(texts)`` for the text of scale pages from the
cached real vectors of the core embedder (``bench/data/vectors-core-title.npy``: title +
body of each real passage, as the product embeds it) and, for replicas, the replica
vectors of ``corpus.replica_vectors`` (source + N(0, 0.009^2) noise). A page cut into two
index passages gets its source passage's vector for both. Texts it does not know go to
the real embedder (counted as misses).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backtrail.indexer import chunk_text
from bench import common, corpus

#: First replica round of the pages ingested while queries run (scale tiers use 0..~7).
STREAM_ROUND = 50
#: Replica rounds of the near-duplicate groups of the temporal check.
TEMPORAL_ROUND = 90
#: The vectors of the real passages as the core embeds them (title + "\n" + body).
VECTORS_FILE = "vectors-core-title.npy"
IDS_FILE = "vector_ids-core-title.npy"


@dataclass(frozen=True)
class Page:
    """One page to capture. ``bench_id``: the passage id (with replica offset) for scale
    pages, the corpus page id for real pages."""

    bench_id: int
    url: str
    title: str
    body: str
    html: bool = False
    time_ms: int = 0


def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.strip().encode(), digest_size=8).digest(), "big")


def page_url(p: dict[str, Any], replica: int) -> str:
    """A distinct URL per passage page: ``<corpus page url>/passage-<i>[?replica=r]``."""
    base = p["url"].split("?", 1)[0]
    url = f"{base}/passage-{p['passage_index']}"
    return f"{url}?replica={replica}" if replica else url


class Corpus:
    """The corpus passages and their cached vectors, loaded once. ``synthetic``: seeded
    random unit vectors instead of the real ones (for CPU and latency runs on a machine
    that cannot embed the corpus first; search quality is then meaningless)."""

    def __init__(self, *, synthetic: bool = False) -> None:
        self.passages = corpus.load_passages()
        self.index_of = {p["id"]: i for i, p in enumerate(self.passages)}
        vec_path, ids_path = common.DATA_DIR / VECTORS_FILE, common.DATA_DIR / IDS_FILE
        if synthetic:
            rng = np.random.default_rng(7)
            block = rng.standard_normal((len(self.passages), 384), dtype=np.float32)
            self.vectors = block / np.linalg.norm(block, axis=1, keepdims=True)
            self._round_cache = {0: self.vectors}
            return
        if not vec_path.exists():
            from backtrail.indexer import embedding
            from bench.run_core_measure import core_corpus_vectors

            common.say("no cached core vectors yet: embedding the corpus once (~13 min)")
            core_corpus_vectors(embedding.load_embedder())
        ids = np.load(ids_path)
        if not np.array_equal(ids, [p["id"] for p in self.passages]):
            raise SystemExit(f"{ids_path} does not match passages.jsonl; delete it and rerun")
        self.vectors = np.load(vec_path).astype(np.float32)
        self._round_cache: dict[int, np.ndarray] = {0: self.vectors}

    def round_vectors(self, replica: int) -> np.ndarray:
        """All replica vectors of one round (the formula of ``corpus.replica_vectors``)."""
        block = self._round_cache.get(replica)
        if block is None:
            rng = np.random.default_rng([0, replica])
            noise = rng.standard_normal(self.vectors.shape, dtype=np.float32)
            block = self.vectors + noise * corpus.VECTOR_SIGMA
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            if len(self._round_cache) > 12:
                self._round_cache.pop(next(k for k in self._round_cache if k != 0))
            self._round_cache[replica] = block
        return block

    def vector_of(self, bench_id: int) -> np.ndarray:
        replica = corpus.replica_of(bench_id)
        return self.round_vectors(replica)[self.index_of[corpus.source_id(bench_id)]]

    def passage_page(self, p: dict[str, Any], replica: int, time_ms: int) -> Page:
        rec = corpus.replica_record(p, replica)
        return Page(rec["id"], page_url(p, replica), p["title"], rec["body"], time_ms=time_ms)


def visit_time_ms(bench_id: int, now_ms: int) -> int:
    """A seeded last-visit time within the past year (so time decay has something to do)."""
    age_days = random.Random(bench_id).random() * 365
    return now_ms - int(age_days * 86_400_000)


def scale_pages(c: Corpus, start: int, stop: int, now_ms: int) -> Iterator[Page]:
    """Pages ``start .. stop-1`` of the scale order (real passages, then replicas)."""
    n = len(c.passages)
    for position in range(start, stop):
        replica, index = divmod(position, n)
        p = c.passages[index]
        bench_id = p["id"] + replica * corpus.REPLICA_STRIDE
        yield c.passage_page(p, replica, visit_time_ms(bench_id, now_ms))


def stream_pages(c: Corpus, now_ms: int, seed: int = 1) -> Iterator[Page]:
    """An endless stream of fresh pages (replica rounds >= STREAM_ROUND, shuffled)."""
    order = list(range(len(c.passages)))
    random.Random(seed).shuffle(order)
    replica = STREAM_ROUND
    while True:
        for index in order:
            yield c.passage_page(c.passages[index], replica, now_ms - 60_000)
        replica += 1


class CachedEmbedder:
    """``embed(texts)`` from cached vectors for registered page texts; real model otherwise."""

    def __init__(self, c: Corpus, passage_chars: int = 1_000, overlap: int = 100) -> None:
        self.corpus = c
        self.passage_chars = passage_chars
        self.overlap = overlap
        self.rows: dict[int, int] = {}  # text key -> bench id
        self.hits = 0
        self.misses = 0
        self._real: Any = None

    def register(self, page: Page) -> None:
        for chunk in chunk_text(page.body, self.passage_chars, self.overlap):
            self.rows[_key(chunk)] = page.bench_id

    def _lookup(self, text: str) -> int | None:
        found = self.rows.get(_key(text))
        if found is None and "\n" in text:
            found = self.rows.get(_key(text.split("\n", 1)[1]))
        return found

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float] | None] = []
        missing: list[int] = []
        for i, text in enumerate(texts):
            bench_id = self._lookup(text)
            if bench_id is None:
                missing.append(i)
                out.append(None)
            else:
                out.append(self.corpus.vector_of(bench_id).tolist())
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            if self._real is None:
                from backtrail.indexer import embedding

                self._real = embedding.load_embedder()
            vectors = self._real.embed([texts[i] for i in missing])
            for i, v in zip(missing, vectors, strict=True):
                out[i] = list(v)
        return [v for v in out if v is not None]


# ---------------------------------------------------------------------- real pages


_BODY_P = re.compile(r"<p>", re.IGNORECASE)


def source_html(page: dict[str, Any]) -> str:
    """The Debian HTML file a corpus page was extracted from."""
    for src in corpus.SOURCES:
        if page["url"].startswith(src.url_prefix):
            return (src.root / page["path"]).read_text(encoding="utf-8", errors="replace")
    raise KeyError(page["url"])


def real_pages(count: int, seed: int, now_ms: int, *, tag: str = "real") -> list[Page]:
    """``count`` corpus pages drawn at random (the real size distribution), as HTML."""
    pages = corpus.load_pages()
    rng = random.Random(seed)
    chosen = rng.sample(pages, min(count, len(pages)))
    out = []
    for n, p in enumerate(chosen):
        html = source_html(p)
        url = f"{p['url']}?{tag}={seed}-{n}"
        out.append(Page(p["id"], url, p["title"], html, html=True, time_ms=now_ms))
    return out


def typical_pages(count: int, now_ms: int) -> list[tuple[Page, str]]:
    """(page, marker) for ``count`` pages around the median size, each with a unique
    marker word in its first paragraph that survives text extraction."""
    from backtrail.indexer.extract import extract_main_text

    pages = sorted(corpus.load_pages(), key=lambda p: len(p["text"]))
    middle = len(pages) // 2
    window = pages[middle - 4 * count : middle + 4 * count]
    random.Random(7).shuffle(window)
    out: list[tuple[Page, str]] = []
    for p in window:
        if len(out) >= count:
            break
        marker = f"zqmark{len(out)}x{random.Random(p['id']).randrange(10**6)}"
        html = source_html(p)
        body_at = html.lower().find("<body")
        found = _BODY_P.search(html, max(body_at, 0))
        if found is None:
            continue
        html = html[: found.end()] + marker + " " + html[found.end() :]
        url = f"{p['url']}?typical={len(out)}"
        if marker not in extract_main_text(html, url).text:
            continue
        out.append((Page(p["id"], url, p["title"], html, html=True, time_ms=now_ms), marker))
    return out


def text_chars(page_ids: Sequence[int]) -> tuple[int, int]:
    """(characters of main text, index passages) of corpus pages, as the bench extracted them."""
    by_id = {p["id"]: p["text"] for p in corpus.load_pages()}
    chars = sum(len(by_id[i]) for i in page_ids)
    passages = sum(len(chunk_text(by_id[i], 1_000, 100)) for i in page_ids)
    return chars, passages


