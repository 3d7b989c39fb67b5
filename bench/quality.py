"""Retrieval quality through the service, on real pages and human-written recollections.

A store is built with the service API the MCP tools use: every page of the chosen sets of
the real corpus (``bench.real_corpus``) goes in through ``Memory.capture_page`` with its
extracted text, and the indexer indexes it as it would any capture. Passage vectors come
from ``bench.vector_cache`` (a text the cache lacks is embedded by the real model, so the
store is the same either way). Then every query of ``shared/eval``'s sets goes through
``Memory.search`` at limit 10, in each mode, and is scored as ``shared/eval/README.md``
says: MRR@10 and recall@10 of the target pages per kind, and for the absent topics the
share answered with no result at all.

    python -m bench.quality --sets python,postgresql   # the Python + PostgreSQL pages
    python -m bench.quality                            # the seven packages
    python -m bench.quality --sets python,postgresql --temporal   # recency and visits
    python -m bench.quality --bounds   # also what re-ranking the candidates could reach

The store is kept under ``<data>/quality-<sets>/`` and reused (``--rebuild`` starts
over). Results: a table on stdout and ``bench/results/quality-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.common import DATA_DIR, Progress, say
from bench.real_corpus import PAGES_FILE, real_dir
from bench.run_core_real import EVAL_DIR
from bench.vector_cache import VectorCache, cache_dir, model_id, text_key

SETS = ("python", "postgresql", "rust", "django", "linux", "jdk", "libstdcxx")
QUERY_SETS = ("dev-pypg.jsonl", "dev-big.jsonl", "dev-absent.jsonl")
MODES = ("hybrid", "bm25", "vector", "vague")  # vague: find_forgotten, search_browsing(vague)
RESULTS = Path(__file__).resolve().parent / "results"


class CachedEmbedder:
    """The indexer's embedder, answering from the vector cache; texts it lacks go to the
    real model (and are counted)."""

    def __init__(self, real: Any, cache: VectorCache, model: str):
        self.real, self.cache, self.model = real, cache, model
        self.missed = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [text_key(t, self.model) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        out: list[Any] = [None] * len(texts)
        if missing:
            self.missed += len(missing)
            for i, v in zip(missing, self.real.embed([texts[i] for i in missing]), strict=True):
                out[i] = v
        have = [i for i, k in enumerate(keys) if k in self.cache]
        if have:
            for i, v in zip(have, self.cache.matrix([keys[i] for i in have]), strict=True):
                out[i] = [float(x) for x in v]
        return out


def corpus_pages(data_dir: Path, sets: Sequence[str]) -> Iterator[dict[str, Any]]:
    with open(real_dir(data_dir) / PAGES_FILE, encoding="utf-8") as f:
        for line in f:
            page = json.loads(line)
            if page["set"] in sets and page["text"]:
                yield page


NOW = 1_700_000_000
"""The stores' own clock (unix seconds)."""
DAY = 86_400


def _store(home: Path, rebuild: bool) -> Any:
    """The service over the bench store in ``home`` (begun anew with ``rebuild``), on the
    bench's clock."""
    from backtrail.config import Config
    from backtrail.service import Memory

    if rebuild and home.exists():
        import shutil

        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    return Memory(Config(data_dir=home, embeddings=True, background_indexing=False),
                  client="bench", clock=lambda: float(NOW))  # fmt: skip


def _index_with_cached_vectors(memory: Any, data_dir: Path) -> int:
    """Indexes everything captured, the passage vectors read from the vector cache; returns
    how many texts the cache lacked (those the real model embedded)."""
    import dataclasses

    model = model_id()
    real = memory._model()  # noqa: SLF001 (the bench swaps in the cache, nothing else)
    if real is None:
        raise SystemExit("the embedding model is not available: the bench needs it")
    if real.fallback:
        raise SystemExit(f"the bench needs the intended model, not a fallback: {real.fallback}")
    cached = CachedEmbedder(real.embedder, VectorCache(cache_dir(data_dir, model)), model)
    with_cache = dataclasses.replace(real, embedder=cached)
    memory._indexer._model = lambda: with_cache  # noqa: SLF001
    memory.catch_up(progress=lambda done, total, phase: None)
    return cached.missed


VARIANT_KEYS = {
    "breaks": "passages break at sections (documents.SECTION_BREAKS)",
    "vector_section": "heading paths in the vector text (documents.SECTION_IN_VECTOR)",
    "section_boost": "BM25 weight of the section field (0: not searched)",
    "drop_stop_words": "stop words left out of scoring (1/0)",
}
"""What ``--variant`` may set, to measure each part of the passages' structure alone."""


def parse_variant(text: str) -> dict[str, float]:
    """``breaks=0,section_boost=0.3`` as a dict (values as numbers)."""
    out: dict[str, float] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key not in VARIANT_KEYS:
            raise SystemExit(f"unknown variant key {key!r}: one of {', '.join(VARIANT_KEYS)}")
        out[key] = float(value)
    return out


def apply_variant(variant: dict[str, float]) -> dict[str, Any]:
    """Sets the chunking switches of ``variant`` and returns its search options."""
    from backtrail.indexer import documents

    documents.SECTION_BREAKS = bool(variant.get("breaks", documents.SECTION_BREAKS))
    documents.SECTION_IN_VECTOR = bool(variant.get("vector_section", documents.SECTION_IN_VECTOR))
    options: dict[str, Any] = {}
    if "section_boost" in variant:
        options["section_boost"] = variant["section_boost"]
    if "drop_stop_words" in variant:
        options["drop_stop_words"] = bool(variant["drop_stop_words"])
    return options


def with_options(memory: Any, options: dict[str, Any]) -> None:
    """Every search of ``memory`` runs with the core ``options`` added (the bench's hook)."""
    if options:
        plain = memory._options  # noqa: SLF001
        memory._options = lambda request: {**plain(request), **options}  # noqa: SLF001


def open_store(data_dir: Path, sets: Sequence[str], rebuild: bool,
               sample: int | None = None, eval_dir: Path | None = None) -> Any:  # fmt: skip
    """The service over a store holding every page of ``sets`` (with ``sample``, that many
    of them: :func:`curve_pages`), indexed with vectors."""
    from backtrail.indexer import documents

    chunking = ("" if documents.SECTION_BREAKS else "-flat") + (
        "" if documents.SECTION_IN_VECTOR else "-plainvec"
    )
    name = "+".join(sets) if sample is None else f"sample{sample}"
    home = data_dir / ("quality-" + name + chunking)
    ready = home / "ready"
    # Every page is captured at the store's clock, once, so time decay and visits weigh
    # alike for all and relevance decides.
    memory = _store(home, rebuild)
    if ready.exists():
        return memory
    pages = list(corpus_pages(data_dir, sets))
    if sample is not None:
        pages = curve_pages(pages, sample, eval_dir or EVAL_DIR)
    progress = Progress("capture", len(pages), every=30)
    with memory.batch():
        for page in pages:
            memory.capture_page(page["url"], text=page["text"], title=page["title"],
                                language=page.get("language"),
                                outline=[tuple(h) for h in page.get("outline") or ()])  # fmt: skip
            progress.add(1)
    progress.add(0, force=True)
    t0 = time.perf_counter()
    missed = _index_with_cached_vectors(memory, data_dir)
    say(f"indexed {len(pages):,} pages in {time.perf_counter() - t0:.0f} s "
        f"({missed:,} passages not in the vector cache, embedded now)")  # fmt: skip
    ready.write_text(json.dumps({"pages": len(pages), "embedded_now": missed}))
    return memory


CURVE = (1_700, 9_000)
"""The smaller stores of the curve (``--curve``); the largest point is the whole store."""


def curve_pages(pages: Sequence[dict[str, Any]], size: int, eval_dir: Path) -> list[dict[str, Any]]:
    """``size`` of ``pages``: every target page of the dev sets, then the others in one
    fixed random order (so each smaller store is part of each larger one)."""
    targets = {t for name in QUERY_SETS for q in common.read_jsonl(eval_dir / name)
               for t in q["targets"]}  # fmt: skip
    kept = [p for p in pages if p["url"] in targets]
    others = [p for p in pages if p["url"] not in targets]
    random.Random(42).shuffle(others)
    return kept + others[: max(0, size - len(kept))]


def queries(eval_dir: Path, urls: set[str]) -> list[dict[str, Any]]:
    """Each query set's queries with a target the store holds (absent topics always)."""
    out = []
    for name in QUERY_SETS:
        for q in common.read_jsonl(eval_dir / name):
            if q["kind"] == "absent" or urls.intersection(q["targets"]):
                out.append({**q, "set": name.removesuffix(".jsonl")})
    return out


def run(memory: Any, qs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: the ranked URLs, the top hit's evidence and the latency of each query."""
    out: dict[str, Any] = {}
    for mode in MODES:
        rows = []
        for q in qs:
            t0 = time.perf_counter()
            if mode == "vague":
                page = memory.find_forgotten(q["query"], limit=10)
            else:
                page = memory.search(q["query"], limit=10, mode=mode)
            ms = (time.perf_counter() - t0) * 1e3
            top = page.results[0].explanation if page.results else {}
            rows.append({"id": q["id"], "urls": [r.url for r in page.results], "ms": ms,
                         "top": {k: top.get(k) for k in ("vector_similarity", "coverage",
                                                         "bm25_score", "fusion")}})  # fmt: skip
        out[mode] = rows
    return out


FLOORS = (0.33, 0.35, 0.36, 0.37, 0.38, 0.385, 0.39, 0.40, 0.41, 0.42)
"""The ``search_min_similarity`` values the calibration tries (the floor at 10,000
passages; :func:`backtrail.service.search.chance_floor` scales it to the store)."""


def calibration(memory: Any, qs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How ``search_min_similarity`` trades absent topics against the dev sets: every query
    searched once with the rule off, the evidence the rule reads recorded (the best vector
    similarity among the first hits, and the largest share of the query's words one holds), and
    for each floor of :data:`FLOORS`, scaled to this store's size, the share of absent
    topics answered with nothing and the dev sets' MRR@10 / recall@10 had the rule applied
    (a query keeps its answer when a hit holds ``COVERAGE_PASS`` of its words)."""
    import dataclasses

    from backtrail.service import search as search_module

    kept = memory.config
    memory.config = dataclasses.replace(kept, search_min_similarity=0.0)
    rows = []
    try:
        for q in qs:
            page = memory.search(q["query"], limit=search_module._EVIDENCE_HITS)  # noqa: SLF001
            evidence = [r.explanation for r in page.results]
            rows.append({
                "urls": [r.url for r in page.results][:10],
                "best_similarity": max((e.get("vector_similarity") or -1.0 for e in evidence),
                                       default=-1.0),
                "coverage": max((e.get("coverage") or 0.0 for e in evidence), default=0.0),
            })  # fmt: skip
    finally:
        memory.config = kept
    documents = memory._indexer.index.documents()  # noqa: SLF001
    sweep = {}
    for base in FLOORS:
        floor = search_module.chance_floor(base, documents)
        applied = [{**r, "urls": [] if r["coverage"] < search_module.COVERAGE_PASS
                    and r["best_similarity"] < floor else r["urls"]} for r in rows]  # fmt: skip
        found = scores(qs, applied)
        sweep[f"{base:.3f}"] = {"floor": floor, **{g: found[g] for g in found if " " not in g}}
    return {"documents": documents, "rows": rows, "sweep": sweep}


def scores(qs: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """MRR@10 / recall@10 per query set and kind; for absent topics the empty share."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for q, row in zip(qs, rows, strict=True):
        if q["kind"] == "absent":
            groups.setdefault("absent", []).append((float(not row["urls"]), 0.0))
            continue
        rank = next((i for i, u in enumerate(row["urls"][:10], 1) if u in q["targets"]), None)
        pair = (1.0 / rank if rank else 0.0, 1.0 if rank else 0.0)
        for g in (q["set"], f"{q['set']} {q['kind']}"):
            groups.setdefault(g, []).append(pair)
    return {g: {"n": len(v), "mrr": float(np.mean([a for a, _ in v])),
                "recall": float(np.mean([b for _, b in v]))}
            for g, v in sorted(groups.items())}  # fmt: skip


def bounds(memory: Any, qs: Sequence[dict[str, Any]], ran: dict[str, Any]) -> dict[str, Any]:
    """What ranking the two signals differently could reach at most: per query the best of
    the three modes' rankings, chosen with hindsight (MRR@10 / recall@10 per set and kind),
    and the share of queries with a target among the pages of the pools a search ranks
    (BM25's and the vectors', what any re-ranking of the candidates could find)."""
    from backtrail.service.search import _POOL_DEPTH as pool

    def rank(urls: Sequence[str], q: dict[str, Any]) -> int:
        return next((i for i, u in enumerate(urls[:10], 1) if u in q["targets"]), 11)

    chosen = [{"urls": min((ran[m][i]["urls"] for m in ("hybrid", "bm25", "vector")),
                           key=lambda urls, q=q: rank(urls, q))}
              for i, q in enumerate(qs)]  # fmt: skip
    pooled: dict[str, list[bool]] = {}
    for q in qs:
        if q["kind"] == "absent":
            continue
        urls = {r.url for m in ("bm25", "vector")
                for r in memory.search(q["query"], limit=pool, mode=m).results}  # fmt: skip
        pooled.setdefault(q["set"], []).append(bool(urls.intersection(q["targets"])))
    return {"best_mode_per_query": scores(qs, chosen), "pool": pool,
            "target_in_pool": {g: float(np.mean(v)) for g, v in pooled.items()}}  # fmt: skip


# --------------------------------------------------------------------------- temporal


def _perturbed(text: str, rng: random.Random) -> str:
    """``text`` with 5% of its words dropped: a near-copy (a mirror, another version)."""
    words = text.split(" ")
    return " ".join(w for w in words if rng.random() >= 0.05)


def temporal(data_dir: Path, sets: Sequence[str], eval_dir: Path) -> dict[str, Any]:
    """Among near-copies of a page, does the copy read recently and often rank first?

    A store of ``sets``, every page read once a year ago. For each dev query with a target
    there, three near-copies of the target (5% of the words dropped) are captured at other
    addresses: one, chosen at random, read 6 times in the last 20 days, the others once,
    60-200 days ago. The query goes through ``Memory.search`` and ``Memory.find_forgotten``;
    a success is the favourite first among the target and its copies in the top 10.
    """
    rng = random.Random(11)
    memory = _store(data_dir / ("temporal-" + "+".join(sets)), rebuild=True)
    pages = {p["url"]: p for p in corpus_pages(data_dir, sets)}
    qs = [q for q in common.read_jsonl(eval_dir / "dev-pypg.jsonl")
          if q["kind"] != "absent" and q["targets"][0] in pages]  # fmt: skip
    with memory.batch():
        for page in pages.values():
            memory.capture_page(page["url"], text=page["text"], title=page["title"],
                                captured_at=NOW - 365 * DAY)  # fmt: skip
    groups: list[tuple[dict[str, Any], list[str], str]] = []
    for n, q in enumerate(qs):
        target = pages[q["targets"][0]]
        copies = [f"https://mirror{c}.example/{n}/{target['url'].rsplit('/', 1)[-1]}"
                  for c in range(3)]  # fmt: skip
        favourite = rng.choice(copies)
        for url in copies:
            visits = ([NOW - rng.randint(1, 20) * DAY for _ in range(6)] if url == favourite
                      else [NOW - rng.randint(60, 200) * DAY])  # fmt: skip
            memory.capture_page(url, text=_perturbed(target["text"], rng),
                                title=target["title"], captured_at=min(visits))  # fmt: skip
            for at in sorted(visits):
                memory.record_visit(url, visited_at=at)
        groups.append((q, [target["url"], *copies], favourite))
    missed = _index_with_cached_vectors(memory, data_dir)
    out: dict[str, Any] = {"groups": len(groups), "embedded_now": missed}
    with memory:
        for name, ask in (("search", memory.search), ("find_forgotten", memory.find_forgotten)):
            wins = 0
            for q, family, favourite in groups:
                urls = [r.url for r in ask(q["query"], limit=10).results]
                first = next((u for u in urls if u in family), None)
                wins += first == favourite
            out[name] = wins / len(groups)
    return out


_CURVE_GROUPS = ("dev-pypg", "dev-big", "absent")


def curve(args: argparse.Namespace, sets: Sequence[str], options: dict[str, Any],
          whole: int) -> list[dict[str, Any]]:  # fmt: skip
    """Hybrid MRR@10 / recall@10 of the stores of :data:`CURVE` pages smaller than the
    whole store of ``whole`` pages."""
    points = []
    every = list(corpus_pages(DATA_DIR, sets))
    for size in (n for n in CURVE if n < whole):
        urls = {p["url"] for p in curve_pages(every, size, args.eval_dir)}
        memory = open_store(DATA_DIR, sets, args.rebuild, sample=size, eval_dir=args.eval_dir)
        with_options(memory, options)
        with memory:
            pages = len(urls)
            qs = queries(args.eval_dir, urls)
            rows = [{"urls": [r.url for r in memory.search(q["query"], limit=10).results]}
                    for q in qs]  # fmt: skip
        points.append({"pages": pages, **scores(qs, rows)})
    return points


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS), help="corpus sets, comma-separated")
    ap.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    ap.add_argument("--rebuild", action="store_true", help="build the store anew")
    ap.add_argument(
        "--temporal", action="store_true", help="only the check of recency and visits"
    )
    ap.add_argument(
        "--calibrate", action="store_true",
        help="also sweep search_min_similarity (absent topics against the dev sets)",
    )  # fmt: skip
    ap.add_argument(
        "--bounds", action="store_true",
        help="also the best mode per query (with hindsight) and the targets in the pools",
    )  # fmt: skip
    ap.add_argument(
        "--no-curve", action="store_true",
        help=f"skip the curve: the hybrid scores of stores of {', '.join(map(str, CURVE))} "
        "pages (every dev target kept), beside the whole store",
    )  # fmt: skip
    ap.add_argument(
        "--variant", default="",
        help="measure one part alone, e.g. breaks=0,vector_section=0,section_boost=0,"
        "drop_stop_words=0 (" + "; ".join(f"{k}: {v}" for k, v in VARIANT_KEYS.items()) + ")",
    )  # fmt: skip
    args = ap.parse_args(argv)
    options = apply_variant(parse_variant(args.variant))
    sets = [s for s in args.sets.split(",") if s]
    if unknown := set(sets) - set(SETS):
        ap.error(f"unknown sets: {', '.join(sorted(unknown))}")
    if args.temporal:
        found = temporal(DATA_DIR, sets, args.eval_dir)
        sys.stdout.write(json.dumps(found) + "\n")
        return
    memory = open_store(DATA_DIR, sets, args.rebuild)
    with_options(memory, options)
    urls = {page["url"] for page in corpus_pages(DATA_DIR, sets)}
    qs = queries(args.eval_dir, urls)
    with memory:
        ran = run(memory, qs)
        calibrated = calibration(memory, qs) if args.calibrate else None
        bounded = bounds(memory, qs, ran) if args.bounds else None
    size = len(urls)
    points = [] if args.no_curve else curve(args, sets, options, size)
    points.append({"pages": size, **scores(qs, ran["hybrid"])})
    result = {"sets": sets, "variant": args.variant, "queries": len(qs),
              "scores": {m: scores(qs, rows) for m, rows in ran.items()}, "runs": ran,
              "calibration": calibrated, "bounds": bounded, "curve": points}  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    out = sys.stdout.write
    out(f"| group | n | {' | '.join(MODES)} |\n|---|---|{'---|' * len(MODES)}\n")
    for g in result["scores"]["hybrid"]:
        cells = []
        for m in MODES:
            s = result["scores"][m][g]
            cells.append(f"{s['mrr']:.3f}" + ("" if g == "absent" else f" / {s['recall']:.3f}"))
        out(f"| {g} | {result['scores']['hybrid'][g]['n']} | {' | '.join(cells)} |\n")
    for m in MODES:
        out(f"{m} p50 {np.median([r['ms'] for r in ran[m]]):.1f} ms\n")
    if calibrated:
        out(f"\n{calibrated['documents']:,} passages\n| search_min_similarity | floor here "
            "| absent with nothing | dev sets (MRR@10 / recall@10) |\n|---|---|---|---|\n")
        for base, found in calibrated["sweep"].items():
            devs = ", ".join(f"{g} {s['mrr']:.3f} / {s['recall']:.3f}"
                             for g, s in found.items() if g not in ("absent", "floor"))
            out(f"| {base} | {found['floor']:.3f} | {found['absent']['mrr']:.3f} | {devs} |\n")
    out("\n| pages | " + " | ".join(g for g in result["curve"][-1] if g in _CURVE_GROUPS)
        + " |\n|---|" + "---|" * sum(g in _CURVE_GROUPS for g in result["curve"][-1]) + "\n")
    for point in result["curve"]:
        cells = [f"{s['mrr']:.3f}" + ("" if g == "absent" else f" / {s['recall']:.3f}")
                 for g, s in point.items() if g in _CURVE_GROUPS]  # fmt: skip
        out(f"| {point['pages']:,} | {' | '.join(cells)} |\n")
    if bounded:
        out("\n| group | best mode per query (hindsight) | target among the "
            f"{bounded['pool']} best of BM25 or vectors |\n|---|---|---|\n")
        for g, found in bounded["best_mode_per_query"].items():
            pool = bounded["target_in_pool"].get(g)
            cell = "" if pool is None else f"{pool:.3f}"
            out(f"| {g} | {found['mrr']:.3f} / {found['recall']:.3f} | {cell} |\n")
    say(f"wrote {path}")


if __name__ == "__main__":
    main()
