"""The benchmark corpus: real documentation pages, split into passages, scalable by replicas.

Why this corpus: it is the one the anchor figures (``shared/notes/anchor-figures.md``) were
measured on, so numbers from Backtrail's core can be compared with them, and it installs from
Debian's packages on any machine of this kind (no network beyond the package registries).

Source pages
    Every ``*.html`` file of Debian's ``python3.11-doc`` (/usr/share/doc/python3.11/html) and
    ``postgresql-doc-15`` (/usr/share/doc/postgresql-doc-15/html), ~1,700 pages. Main text by
    ``trafilatura.extract`` with default options (what a reader-mode capture would keep); when
    it returns nothing, the plain text of <body> by selectolax (lexbor). Pages with no text at
    all are skipped. Title: the page's ``<title>``, verbatim. URL: a fake but stable address,
    ``https://docs.python.org/3.11/<relpath>`` or ``https://www.postgresql.org/docs/15/<relpath>``.

Outputs (bench/data/, cached: each is rebuilt only when missing)
    pages.jsonl     id, url, domain, title, path, extractor, text (one paragraph per line)
    passages.jsonl  id, page_id, url, domain, title, body, passage_index

Ids (stable for a given set of files; all ids are positive and far below the core's MAX_ID)
    page_id    = 1-based position of the file in the sorted list (python first, then postgres)
    passage id = page_id * PASSAGE_ID_FACTOR + passage_index + 1   (so never equal to a page id)

Passages
    The text is split into lines; wrapped lines are rejoined into paragraphs (a line continues
    the previous one when that one does not end a sentence and the line starts in lower case or
    the previous one ends in a comma/bracket); a paragraph longer than PASSAGE_CHARS (1,000) is
    split on sentence boundaries, and a sentence longer than that on word boundaries. These
    pieces are packed in order into passages, joined by newlines: a passage is closed once it
    reaches PASSAGE_MIN_CHARS (950) or when the next piece would take it past PASSAGE_MAX_CHARS
    (1,300). A final tail shorter than 250 characters joins the previous passage when that
    stays within PASSAGE_MAX_CHARS. Result: mean ~1,000 characters (median ~1,000), and
    15,925 passages from 1,699 pages (the anchor figures: 15,915 from 1,698).

Replicas (scaling to 100k or 1M passages)
    ``scale_passages(passages, n)`` streams n passages: round 0 is the real corpus, then round
    r = 1, 2, ... copies every passage again (a last partial round takes passages in corpus
    order) until n are produced. Replica r of passage p gets:

    - id = p.id + r * REPLICA_STRIDE, page_id = p.page_id + r * REPLICA_STRIDE, so that
      ``source_id(id) == id % REPLICA_STRIDE`` and ``replica_of(id) == id // REPLICA_STRIDE``;
    - url = p.url + "?replica=r" (same domain and title: a mirror of the same page);
    - body perturbed deterministically, seeded by (p.id, r): ~5% of the words dropped
      (round(0.05 * n_words) positions) and 1 + n_words // 75 adjacent word pairs swapped;
    - fields ``source_id`` (p.id) and ``replica`` (r); originals have replica 0.

    A recall measurement counts a hit on any replica of the right source passage.

Replica vectors
    Embedding 1M passages is impossible here (~35 passages/s), so ``replica_vectors`` derives
    the vector of replica r of passage p from p's real vector: v + N(0, sigma^2 I), then
    renormalised to unit length. For unit v in 384 dimensions the expected cosine between a
    replica and its source is about 1 / sqrt(1 + 384 sigma^2). VECTOR_SIGMA = 0.009 gives
    0.985 (two replicas of one passage: ~0.970), calibrated on what the real model does to
    replica text: 120 passages spread evenly over the corpus against their round-1 replicas
    gave cosine mean 0.983, median 0.985, p10 0.967, min 0.935 (the nearest *other* passage
    of the same sample: median 0.48). The gaussian model has less spread (sd ~0.001 per
    replica) than real perturbations. Noise is drawn per round from
    ``numpy.random.default_rng([seed, r])`` in corpus order, so any chunking gives the same
    vectors. Round 0 keeps the real vectors unchanged.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA_DIR, human_bytes, peak_rss_mb, read_jsonl, say, write_jsonl

#: Target passage size in characters; longer paragraphs and sentences are split to this size.
PASSAGE_CHARS = 1000
#: A passage is closed once it is at least this long ...
PASSAGE_MIN_CHARS = 950
#: ... or when the next paragraph would make it longer than this.
PASSAGE_MAX_CHARS = 1300
#: passage id = page_id * PASSAGE_ID_FACTOR + passage_index + 1.
PASSAGE_ID_FACTOR = 10_000
#: replica id = source id + replica * REPLICA_STRIDE (source ids stay below this).
REPLICA_STRIDE = 100_000_000
#: Standard deviation of the per-dimension gaussian noise added to replica vectors.
VECTOR_SIGMA = 0.009
#: Fraction of words a replica drops.
DROP_FRACTION = 0.05
#: Embedding dimension of all-MiniLM-L6-v2.
DIM = 384

PAGES_FILE = "pages.jsonl"
PASSAGES_FILE = "passages.jsonl"


@dataclass(frozen=True)
class Source:
    """One documentation package: where its HTML is and which fake site it stands for."""

    root: Path
    url_prefix: str
    domain: str


SOURCES: tuple[Source, ...] = (
    Source(
        Path("/usr/share/doc/python3.11/html"), "https://docs.python.org/3.11/", "docs.python.org"
    ),
    Source(
        Path("/usr/share/doc/postgresql-doc-15/html"),
        "https://www.postgresql.org/docs/15/",
        "www.postgresql.org",
    ),
)


# --------------------------------------------------------------------------- extraction


def list_html_files(sources: Sequence[Source] = SOURCES) -> list[tuple[Source, str]]:
    """All (source, relpath) pairs in a fixed order; the order defines the page ids."""
    files: list[tuple[Source, str]] = []
    for src in sources:
        if not src.root.is_dir():
            raise FileNotFoundError(
                f"{src.root} is missing: apt-get install -y python3.11-doc postgresql-doc-15"
            )
        rels = sorted(str(p.relative_to(src.root)) for p in src.root.rglob("*.html"))
        files.extend((src, rel) for rel in rels)
    return files


def html_title(html: str) -> str:
    """The text of <title>, whitespace-collapsed ('' when absent)."""
    from selectolax.lexbor import LexborHTMLParser

    node = LexborHTMLParser(html).css_first("title")
    return " ".join(node.text().split()) if node is not None else ""


def plain_text(html: str) -> str:
    """The fallback extractor: all visible text of <body>, one block per line."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    for node in tree.css("script, style, noscript"):
        node.decompose()
    return tree.body.text(separator="\n") if tree.body is not None else ""


def extract_text(html: str) -> tuple[str, str]:
    """Main text of a page and the extractor that produced it ('trafilatura' or 'selectolax')."""
    import trafilatura

    text = trafilatura.extract(html) or ""
    if text.strip():
        return text, "trafilatura"
    return plain_text(html), "selectolax"


# --------------------------------------------------------------------------- chunking

_SPACE = re.compile(r"[ \t\r\f\v\u00a0]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")


def clean_lines(text: str) -> list[str]:
    """Non-empty lines with runs of spaces collapsed and Sphinx's permalink marks removed."""
    lines = (_SPACE.sub(" ", line.replace("\u00b6", "")).strip() for line in text.split("\n"))
    return [line for line in lines if line]


def _continues(prev: str, line: str) -> bool:
    """Whether `line` is the wrapped continuation of `prev` (source HTML keeps hard wraps)."""
    if prev[-1] in ".!?:;":
        return False
    return line[0].islower() or prev[-1] in ",(-\u2013\u2014"


def paragraphs(text: str) -> list[str]:
    """Rejoin hard-wrapped lines into paragraphs."""
    paras: list[str] = []
    for line in clean_lines(text):
        if paras and _continues(paras[-1], line):
            paras[-1] = paras[-1] + " " + line
        else:
            paras.append(line)
    return paras


def split_sentences(text: str) -> list[str]:
    """Split on '.', '!' or '?' followed by space and an upper-case letter, digit or quote."""
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _split_words(text: str, limit: int) -> list[str]:
    """Cut text into pieces of at most `limit` characters at spaces (hard cut if none)."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut].strip())
        text = text[cut:].strip()
    if text:
        pieces.append(text)
    return pieces


def _units(para: str, limit: int) -> list[str]:
    """A paragraph as pieces no longer than `limit`: itself, its sentences, or word runs."""
    if len(para) <= limit:
        return [para]
    units: list[str] = []
    for sentence in split_sentences(para):
        units.extend(_split_words(sentence, limit) if len(sentence) > limit else [sentence])
    return units


def chunk_text(text: str, target: int = PASSAGE_CHARS) -> list[str]:
    """Pack paragraphs (or sentences of long ones) into passages of about `target` chars.

    Closing at PASSAGE_MIN_CHARS with PASSAGE_MAX_CHARS of slack, rather than never exceeding
    the target, keeps the mean near 1,000 characters, as in the anchor figures' corpus.
    """
    units = [u for para in paragraphs(text) for u in _units(para, target)]
    chunks: list[str] = []
    current = ""
    for unit in units:
        full = len(current) >= PASSAGE_MIN_CHARS
        if current and (full or len(current) + 1 + len(unit) > PASSAGE_MAX_CHARS):
            chunks.append(current)
            current = unit
        else:
            current = f"{current}\n{unit}" if current else unit
    if current:
        short = len(current) < target // 4
        if chunks and short and len(chunks[-1]) + 1 + len(current) <= PASSAGE_MAX_CHARS:
            chunks[-1] = f"{chunks[-1]}\n{current}"
        else:
            chunks.append(current)
    return chunks


# --------------------------------------------------------------------------- building


def passage_id(page_id: int, index: int) -> int:
    """Stable passage id from its page id and 0-based position in the page."""
    if index + 1 >= PASSAGE_ID_FACTOR:
        raise ValueError(f"page {page_id} has more than {PASSAGE_ID_FACTOR - 1} passages")
    return page_id * PASSAGE_ID_FACTOR + index + 1


def extract_page(page_id: int, src: Source, rel: str) -> dict[str, Any]:
    """One page record; ``text`` is the cleaned main text, one paragraph per line."""
    html = (src.root / rel).read_text(encoding="utf-8", errors="replace")
    text, extractor = extract_text(html)
    return {
        "id": page_id,
        "url": src.url_prefix + rel,
        "domain": src.domain,
        "title": html_title(html),
        "path": rel,
        "extractor": extractor,
        "text": "\n".join(paragraphs(text)),
    }


def page_passages(page: dict[str, Any]) -> list[dict[str, Any]]:
    """The passage records of a page, in reading order."""
    return [
        {
            "id": passage_id(page["id"], i),
            "page_id": page["id"],
            "url": page["url"],
            "domain": page["domain"],
            "title": page["title"],
            "body": body,
            "passage_index": i,
        }
        for i, body in enumerate(chunk_text(page["text"]))
    ]


def iter_pages(sources: Sequence[Source] = SOURCES) -> Iterator[dict[str, Any]]:
    """Extract every page that has text, in page-id order, reporting progress."""
    t0 = time.perf_counter()
    for n, (page_id, (src, rel)) in enumerate(enumerate(list_html_files(sources), 1), 1):
        page = extract_page(page_id, src, rel)
        if page["text"]:
            yield page
        if n % 250 == 0:
            say(f"  {n} pages extracted ({n / (time.perf_counter() - t0):.1f} pages/s)")


def build_corpus(data_dir: Path = DATA_DIR, *, force: bool = False) -> tuple[Path, Path]:
    """Write pages.jsonl (extraction, slow) and passages.jsonl (chunking, fast); cached.

    Each file is rebuilt only when missing (or with force): deleting passages.jsonl alone
    re-chunks without re-extracting. Files are written atomically, so a present file is whole.
    """
    pages_path, passages_path = data_dir / PAGES_FILE, data_dir / PASSAGES_FILE
    if force or not pages_path.exists():
        write_jsonl(pages_path, iter_pages())
    if force or not passages_path.exists():
        passages = (p for page in read_jsonl(pages_path) for p in page_passages(page))
        write_jsonl(passages_path, passages)
    return pages_path, passages_path


def load_pages(data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """All page records with their full text (building the corpus first if needed)."""
    pages_path, _ = build_corpus(data_dir)
    return list(read_jsonl(pages_path))


def load_passages(data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """All real passage records in id order (~16k, ~20 MB of text in memory)."""
    _, passages_path = build_corpus(data_dir)
    return list(read_jsonl(passages_path))


# --------------------------------------------------------------------------- replicas


def source_id(doc_id: int) -> int:
    """The real passage (or page) id a replica id was derived from."""
    return doc_id % REPLICA_STRIDE


def replica_of(doc_id: int) -> int:
    """The replica round of an id (0 for real passages)."""
    return doc_id // REPLICA_STRIDE


def perturb_text(text: str, pid: int, replica: int) -> str:
    """Drop ~5% of the words and swap a few adjacent pairs, seeded by (pid, replica).

    Splitting on single spaces keeps the passage's newlines inside tokens, so the
    paragraph structure survives. The seed is an int, so the result is the same in every
    process (no hash randomisation).
    """
    words = text.split(" ")
    n = len(words)
    if n < 4:
        return text
    rng = random.Random(pid * 1_000_003 + replica)
    for _ in range(1 + n // 75):
        i = rng.randrange(n - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    drop = set(rng.sample(range(n), round(n * DROP_FRACTION)))
    if drop:
        words = [w for i, w in enumerate(words) if i not in drop]
    return " ".join(words)


def replica_record(p: dict[str, Any], replica: int) -> dict[str, Any]:
    """Replica `replica` of passage p (replica 0 is p itself, with source fields added)."""
    if replica == 0:
        return {**p, "source_id": p["id"], "replica": 0}
    offset = replica * REPLICA_STRIDE
    return {
        "id": p["id"] + offset,
        "page_id": p["page_id"] + offset,
        "url": f"{p['url']}?replica={replica}",
        "domain": p["domain"],
        "title": p["title"],
        "body": perturb_text(p["body"], p["id"], replica),
        "passage_index": p["passage_index"],
        "source_id": p["id"],
        "replica": replica,
    }


def rounds(n_source: int, n: int) -> Iterator[tuple[int, int]]:
    """(replica round, how many passages of the corpus it takes) until n are covered."""
    if n_source <= 0:
        raise ValueError("no source passages")
    r = 0
    while n > 0:
        take = min(n_source, n)
        yield r, take
        n -= take
        r += 1


def scale_passages(passages: Sequence[dict[str, Any]], n: int) -> Iterator[dict[str, Any]]:
    """Stream exactly n passages: the real ones, then perturbed replicas (see module doc)."""
    for r, take in rounds(len(passages), n):
        for p in passages[:take]:
            yield replica_record(p, r)


def replica_vectors(
    source: np.ndarray, n: int, *, sigma: float = VECTOR_SIGMA, seed: int = 0
) -> Iterator[np.ndarray]:
    """Stream float32 unit vectors for the n passages of ``scale_passages``, one block per round.

    ``source`` is (n_source, DIM), row i the vector of the corpus's i-th passage. Each yielded
    block is (take, DIM) for one replica round, in the same order as ``scale_passages``; peak
    memory is one round (~25 MB for 16k passages), whatever n is.
    """
    src = np.ascontiguousarray(source, dtype=np.float32)
    for r, take in rounds(len(src), n):
        if r == 0:
            yield src[:take].copy()
            continue
        rng = np.random.default_rng([seed, r])
        block = src[:take] + rng.standard_normal((take, src.shape[1]), dtype=np.float32) * sigma
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        yield block


def replica_ids(passages: Sequence[dict[str, Any]], n: int) -> np.ndarray:
    """int64 ids of the n scaled passages, in ``scale_passages`` order (for vector indexes)."""
    base = np.fromiter((p["id"] for p in passages), dtype=np.int64, count=len(passages))
    return np.concatenate([base[:take] + r * REPLICA_STRIDE for r, take in rounds(len(base), n)])


def write_replica_vectors(
    source: np.ndarray, n: int, path: Path, *, sigma: float = VECTOR_SIGMA, seed: int = 0
) -> Path:
    """Write the n replica vectors to a .npy file block by block (memory-mapped, ~1.5 GB at 1M)."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, source.shape[1]))
    start = 0
    for block in replica_vectors(source, n, sigma=sigma, seed=seed):
        out[start : start + len(block)] = block
        start += len(block)
    out.flush()
    del out
    return path


def core_document(p: dict[str, Any], *, seen: int = 1_700_000_000) -> dict[str, Any]:
    """A passage record as a ``backtrail._core`` Document (kind passage, parent = page).

    Every document gets the same timestamps and one visit, so time decay and visit boost do
    not reorder benchmark results; pass ``vector`` separately when there is one.
    """
    return {
        "id": p["id"],
        "kind": "passage",
        "url": p["url"],
        "domain": p["domain"],
        "title": p["title"],
        "body": p["body"],
        "parent": p["page_id"],
        "first_seen": seen,
        "last_seen": seen,
        "visits": 1,
    }


def scaled_path(n: int, data_dir: Path = DATA_DIR) -> Path:
    """Where the JSONL of the corpus scaled to n passages is cached."""
    return data_dir / f"passages-{n}.jsonl"


def write_scaled(n: int, data_dir: Path = DATA_DIR, *, force: bool = False) -> Path:
    """Write passages-<n>.jsonl (streaming; ~1.2 GB at 1M); a no-op when it exists."""
    path = scaled_path(n, data_dir)
    if path.exists() and not force:
        return path
    write_jsonl(path, scale_passages(load_passages(data_dir), n))
    return path


def iter_scaled(n: int, data_dir: Path = DATA_DIR) -> Iterable[dict[str, Any]]:
    """The n scaled passages, generated on the fly (no file needed; ~15-25k passages/s)."""
    return scale_passages(load_passages(data_dir), n)


# --------------------------------------------------------------------------- command line


def _report(pages: list[dict[str, Any]], passages: list[dict[str, Any]]) -> None:
    lengths = sorted(len(p["body"]) for p in passages)
    extractors: dict[str, int] = {}
    for page in pages:
        extractors[page["extractor"]] = extractors.get(page["extractor"], 0) + 1
    say(f"pages: {len(pages)} ({extractors}), passages: {len(passages)}")
    say(
        f"passage chars: mean {sum(lengths) / len(lengths):.0f}, "
        f"median {lengths[len(lengths) // 2]}, min {lengths[0]}, max {lengths[-1]}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Build the corpus (cached) and optionally a scaled replica set."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--scale", type=int, action="append", default=[], help="write N passages")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    build_corpus(force=args.force)
    say(f"corpus ready in {time.perf_counter() - t0:.1f} s")
    pages, passages = load_pages(), load_passages()
    _report(pages, passages)
    for n in args.scale:
        t0 = time.perf_counter()
        path = write_scaled(n, force=args.force)
        say(
            f"{n} passages -> {path} ({human_bytes(path.stat().st_size)}) in "
            f"{time.perf_counter() - t0:.1f} s, peak RSS {peak_rss_mb():.0f} MB"
        )


if __name__ == "__main__":
    main()
