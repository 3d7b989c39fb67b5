"""Known-item query sets built from the corpus itself: each query has one right page and passage.

Why known-item: a browser memory is mostly asked "where did I read X?", so a query is judged by
whether the page (and passage) it was made from comes back in the top k; no human relevance
labels are needed, and the sets are rebuilt identically anywhere from the same corpus.

Every family is drawn with its own ``random.Random(f"{seed}:{family}")`` (string seeds are
hashed with SHA-512 by Python, so the sets are the same in every process and on every machine),
over the corpus in page-id order. "Content pages" below excludes index-like pages (general
indexes, tables of contents, the search page, ``*/index.html``) and pages with no usable
text, which stay in the corpus as distractors. Each record has: qid, family, query, page_id,
passage_id (real ids; in a replicated corpus a hit on any replica of that passage counts),
origin (the text the query was made from) and overlap (share of the query's content words,
lower-cased with a final 's' removed, that occur in the target passage).

title
    A content page whose cleaned title is unique in the corpus (Sphinx's " — Python 3.11.2
    documentation" suffix and PostgreSQL's "Chapter 9." / "43.8." numbering removed), lower
    cased. Each word with an entry in ``bench.synonyms`` is swapped for a substitute with
    probability 1/2; then, if the title has 3 or more words, one word is dropped with
    probability 2/3. If nothing changed, one substitution (or, failing that, one drop from a
    title of 2+ words) is forced; a title that cannot change is skipped. Target: the page
    and its first passage (where the heading is).
deep
    A content page with at least 2 passages; one of its passages after the first, uniformly;
    one sentence of 10-40 words of which at least 60% are plain words (not code); 30% of its
    words (rounded) removed at random positions, order kept. Target: that passage.
lexical
    The anchor figures' probes: a passage drawn uniformly from all passages (index pages
    included), a run of 3-7 consecutive whitespace-separated tokens copied verbatim from it.
    ``matches`` counts the passages whose whitespace-normalised body contains the run (1 means
    the run is unique to its passage). Target: that passage.
paraphrase
    A content page, one of its passages and one sentence of 8-35 words (60% plain words) in
    which at least 4 content words (not stop words) occur; every content word found in
    ``bench.synonyms`` is replaced by one of its substitutes (all-capital words such as SQL
    key words are kept, as a person would keep them). Kept only if at least 60% of the content
    words were replaced and at most a third of the query's content words occur in the target
    passage (``overlap`` <= 0.34; a substitute may happen to occur there), so that BM25 has
    little to hold on to. Target: that passage.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, read_jsonl, say, write_jsonl
from bench.corpus import load_pages, load_passages, split_sentences
from bench.synonyms import lookup

FAMILIES = ("title", "deep", "lexical", "paraphrase")
QUERIES_FILE = "queries.jsonl"
DEFAULT_PER_FAMILY = 200
#: Paraphrase family: least share of content words replaced ...
MIN_REPLACED = 0.6
#: ... and largest share of the query's content words found in the target passage.
MAX_PARAPHRASE_OVERLAP = 0.34

_INDEX_LIKE = re.compile(
    r"(^|/)(genindex[^/]*|search|py-modindex|contents|bookindex|index|bug-reporting)\.html$"
)
_PY_SUFFIX = re.compile(r"\s+\u2014\s+Python [\d.]+ documentation$")
_PG_NUMBER = re.compile(r"^(?:(?:Chapter|Part|Appendix)\s+)?[A-Z]?[\dIVXL]*(?:\.\d+)*\.\s+")
_WORD = re.compile(r"^[A-Za-z][A-Za-z'\u2019-]*$")
_EDGE_PUNCT = re.compile(r"^\W+|\W+$")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not now of off on once only or other our out over own same she should
    so some such than that the their theirs them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you
    your also may might must shall cannot e.g i.e etc""".split()
)

Query = dict[str, Any]


# --------------------------------------------------------------------------- text helpers


def core(token: str) -> str:
    """A token without leading/trailing punctuation ('(os.stat),' -> 'os.stat')."""
    return _EDGE_PUNCT.sub("", token)


def is_plain_word(token: str) -> bool:
    """An ordinary English-looking word (letters, apostrophes, hyphens), not code."""
    return bool(_WORD.match(core(token)))


def is_content(token: str) -> bool:
    """A plain word that is not a stop word."""
    return is_plain_word(token) and core(token).lower() not in STOPWORDS


def normalise(token: str) -> str:
    """Crude term normal form for overlap: lower case, edge punctuation and final 's' removed."""
    t = core(token).lower()
    return t[:-1] if len(t) > 3 and t.endswith("s") else t


def overlap(query: str, target: str) -> float:
    """Share of the query's content words that also occur in the target text."""
    words = [normalise(t) for t in query.split() if is_content(t)]
    if not words:
        return 0.0
    vocab = {normalise(t) for t in target.split()}
    return round(sum(w in vocab for w in words) / len(words), 3)


def clean_title(title: str) -> str:
    """A page title as a person would remember it: no site suffix, no section numbering."""
    t = _PY_SUFFIX.sub("", title).strip()
    return _PG_NUMBER.sub("", t).strip()


def sentences_of(body: str, lo: int, hi: int, plain: float = 0.6) -> list[str]:
    """Sentences of lo..hi words of which at least `plain` are plain words (not code lines)."""
    found = []
    for line in body.split("\n"):
        for s in split_sentences(line):
            words = s.split()
            if lo <= len(words) <= hi and sum(map(is_plain_word, words)) >= plain * len(words):
                found.append(" ".join(words))
    return found


def substitute(rng: random.Random, token: str) -> str | None:
    """A synonym for a token, keeping its edge punctuation and capital; None when there is none.

    All-capital words (SQL key words, acronyms) are never replaced: a person paraphrasing
    "CREATE INDEX" or "JSON" keeps them.
    """
    word = core(token)
    options = lookup(word) if word and not word.isupper() else ()
    if not options:
        return None
    alt = rng.choice(options)
    if word[0].isupper():
        alt = alt[0].upper() + alt[1:]
    start = token.find(word)
    return token[:start] + alt + token[start + len(word) :]


def fix_articles(tokens: list[str]) -> list[str]:
    """'a'/'an' agreeing with the (possibly substituted) next word."""
    out = list(tokens)
    for i in range(len(out) - 1):
        if out[i].lower() in ("a", "an") and out[i + 1][:1].isalpha():
            article = "an" if out[i + 1][0].lower() in "aeiou" else "a"
            out[i] = article.capitalize() if out[i][0].isupper() else article
    return out


# --------------------------------------------------------------------------- corpus views


class Corpus:
    """Pages and passages indexed the ways the query makers need them."""

    def __init__(self, pages: Sequence[dict[str, Any]], passages: Sequence[dict[str, Any]]):
        self.pages = list(pages)
        self.passages = list(passages)
        self.by_page: dict[int, list[dict[str, Any]]] = {}
        for p in self.passages:
            self.by_page.setdefault(p["page_id"], []).append(p)
        self.content_pages = [
            pg
            for pg in self.pages
            if pg["id"] in self.by_page
            and not _INDEX_LIKE.search(pg["path"])
            and "<no title>" not in pg["title"]
        ]

    def first_passage(self, page_id: int) -> dict[str, Any]:
        """The passage holding the page's heading."""
        return self.by_page[page_id][0]


def _record(family: str, query: str, passage: dict[str, Any], origin: str) -> Query:
    return {
        "family": family,
        "query": query,
        "page_id": passage["page_id"],
        "passage_id": passage["id"],
        "origin": origin,
        "overlap": overlap(query, passage["body"]),
    }


# --------------------------------------------------------------------------- families


def title_query(rng: random.Random, title: str) -> str | None:
    """A remembered title: some words swapped for synonyms, maybe one dropped (see module)."""
    words = [w for w in title.split() if any(c.isalnum() for c in w)]
    if not words:
        return None
    out = list(words)
    for i, w in enumerate(words):
        alt = substitute(rng, w)
        if alt is not None and rng.random() < 0.5:
            out[i] = alt
    if len(out) >= 3 and rng.random() < 2 / 3:
        del out[rng.randrange(len(out))]
    if out == words:
        swappable = [i for i, w in enumerate(words) if substitute(rng, w) is not None]
        if swappable:
            i = rng.choice(swappable)
            out[i] = substitute(rng, words[i]) or out[i]
        elif len(words) >= 2:
            del out[rng.randrange(len(out))]
        else:
            return None
    return " ".join(fix_articles(" ".join(out).split())).lower()


def make_title(rng: random.Random, corpus: Corpus, n: int) -> list[Query]:
    """Family (a): titles with words dropped or swapped for synonyms."""
    titles = Counter(clean_title(pg["title"]).lower() for pg in corpus.pages)
    pages = [pg for pg in corpus.content_pages if titles[clean_title(pg["title"]).lower()] == 1]
    out: list[Query] = []
    for pg in rng.sample(pages, len(pages)):
        title = clean_title(pg["title"])
        q = title_query(rng, title)
        if q:
            out.append(_record("title", q, corpus.first_passage(pg["id"]), title))
        if len(out) == n:
            break
    return out


def make_deep(rng: random.Random, corpus: Corpus, n: int) -> list[Query]:
    """Family (b): a sentence from deep in the page with 30% of its words removed."""
    pages = [pg for pg in corpus.content_pages if len(corpus.by_page[pg["id"]]) >= 2]
    out: list[Query] = []
    for pg in _cycle(rng, pages, n * 3):
        passage = rng.choice(corpus.by_page[pg["id"]][1:])
        candidates = sentences_of(passage["body"], 10, 40)
        if not candidates:
            continue
        sentence = rng.choice(candidates)
        words = sentence.split()
        drop = set(rng.sample(range(len(words)), round(0.3 * len(words))))
        q = " ".join(w for i, w in enumerate(words) if i not in drop)
        out.append(_record("deep", q, passage, sentence))
        if len(out) == n:
            break
    return out


def make_lexical(rng: random.Random, corpus: Corpus, n: int) -> list[Query]:
    """Family (c): a verbatim 3-7 token run from a uniformly drawn passage."""
    out: list[Query] = []
    while len(out) < n:
        passage = rng.choice(corpus.passages)
        tokens = passage["body"].split()
        length = rng.randint(3, 7)
        if len(tokens) < length:
            continue
        start = rng.randrange(len(tokens) - length + 1)
        run = " ".join(tokens[start : start + length])
        if not any(c.isalpha() for c in run):
            continue
        out.append(_record("lexical", run, passage, run))
    flat = [" ".join(p["body"].split()) for p in corpus.passages]
    for q in out:
        q["matches"] = sum(q["query"] in body for body in flat)
    return out


def paraphrase(rng: random.Random, sentence: str) -> tuple[str, float] | None:
    """Replace every content word the synonym table knows; (query, replaced share) or None."""
    tokens = sentence.split()
    content = [i for i, t in enumerate(tokens) if is_content(t)]
    if len(content) < 4:
        return None
    replaced = 0
    for i in content:
        alt = substitute(rng, tokens[i])
        if alt is not None:
            tokens[i] = alt
            replaced += 1
    return " ".join(fix_articles(" ".join(tokens).split())), replaced / len(content)


def make_paraphrase(rng: random.Random, corpus: Corpus, n: int) -> list[Query]:
    """Family (d): a sentence with most content words replaced by synonyms."""
    out: list[Query] = []
    for pg in _cycle(rng, corpus.content_pages, n * 20):
        passage = rng.choice(corpus.by_page[pg["id"]])
        made = [(s, paraphrase(rng, s)) for s in sentences_of(passage["body"], 8, 35)]
        good = [
            (s, p[0])
            for s, p in made
            if p is not None
            and p[1] >= MIN_REPLACED
            and overlap(p[0], passage["body"]) <= MAX_PARAPHRASE_OVERLAP
        ]
        if not good:
            continue
        sentence, q = rng.choice(good)
        out.append(_record("paraphrase", q, passage, sentence))
        if len(out) == n:
            break
    return out


def _cycle(rng: random.Random, items: Sequence[Any], at_least: int) -> list[Any]:
    """Shuffled passes over items (each item once per pass) totalling >= at_least items.

    Drawing pages without replacement spreads queries over as many pages as possible; the
    extra passes only matter when a family rejects many candidates.
    """
    out: list[Any] = []
    while len(out) < at_least and items:
        out.extend(rng.sample(list(items), len(items)))
    return out


MAKERS: dict[str, Callable[[random.Random, Corpus, int], list[Query]]] = {
    "title": make_title,
    "deep": make_deep,
    "lexical": make_lexical,
    "paraphrase": make_paraphrase,
}


def build_queries(
    corpus: Corpus,
    *,
    per_family: int = DEFAULT_PER_FAMILY,
    seed: int = 0,
    families: Sequence[str] = FAMILIES,
) -> list[Query]:
    """All families' queries with qids like 'deep-0007', deterministic for (corpus, seed)."""
    queries: list[Query] = []
    for family in families:
        rng = random.Random(f"{seed}:{family}")
        for i, q in enumerate(MAKERS[family](rng, corpus, per_family)):
            queries.append({"qid": f"{family}-{i:04d}", **q})
    return queries


def queries_path(data_dir: Path = DATA_DIR) -> Path:
    """Where the default query sets are cached."""
    return data_dir / QUERIES_FILE


def write_queries(
    data_dir: Path = DATA_DIR,
    *,
    per_family: int = DEFAULT_PER_FAMILY,
    seed: int = 0,
    force: bool = False,
) -> Path:
    """Write queries.jsonl (building the corpus first if needed); a no-op when it exists."""
    path = queries_path(data_dir)
    if path.exists() and not force:
        return path
    corpus = Corpus(load_pages(data_dir), load_passages(data_dir))
    write_jsonl(path, build_queries(corpus, per_family=per_family, seed=seed))
    return path


def load_queries(families: Sequence[str] | None = None, data_dir: Path = DATA_DIR) -> list[Query]:
    """The cached queries, optionally only some families (building them first if needed)."""
    wanted = set(families or FAMILIES)
    return [q for q in read_jsonl(write_queries(data_dir)) if q["family"] in wanted]


def main(argv: Sequence[str] | None = None) -> None:
    """Build the query sets and print counts, overlap and a few samples per family."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-family", type=int, default=DEFAULT_PER_FAMILY)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--samples", type=int, default=3)
    args = ap.parse_args(argv)
    path = write_queries(per_family=args.per_family, seed=args.seed, force=args.force)
    queries = list(read_jsonl(path))
    say(f"{len(queries)} queries -> {path}")
    for family in FAMILIES:
        qs = [q for q in queries if q["family"] == family]
        if not qs:
            continue
        mean_overlap = sum(q["overlap"] for q in qs) / len(qs)
        pages = len({q["page_id"] for q in qs})
        say(f"{family}: {len(qs)} queries over {pages} pages, mean overlap {mean_overlap:.2f}")
        for q in qs[: args.samples]:
            say(f"    {q['query']!r}  <- {q['origin'][:90]!r}")


if __name__ == "__main__":
    main()
