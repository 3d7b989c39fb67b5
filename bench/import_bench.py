"""History import benchmark: 100k visits imported and title-indexed (target: <= 60 s).

Builds a Chrome ``History`` file with Chromium's real schema (100,000 visits over 25,000
URLs on 600 sites, a year of browsing, titles, referrers and durations), then runs what
``backtrail import history --browser chrome`` runs: :func:`backtrail.importers.import_history`
into a fresh data directory, then a text catch-up (titles and URL words searchable; no
embeddings). Prints the timings and writes ``bench/results/import-<date>.json``.

Run from the repository root (not a timed test)::

    .venv/bin/python -m bench.import_bench [--visits 100000] [--urls 25000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS_DIR, say

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import browser_files  # noqa: E402  (tests/browser_files.py: the real schemas)
from backtrail import importers  # noqa: E402
from backtrail.config import Config  # noqa: E402
from backtrail.service import Memory  # noqa: E402

TARGET_SECONDS = 60.0
_WORDS = (
    "rust python sqlite index query async tokio borrow checker lifetime trait macro "
    "kubernetes docker deploy cache http header cookie session websocket stream parser "
    "tutorial guide reference release notes changelog benchmark performance memory leak "
    "database migration schema vector search embedding ranking recipe travel weather "
    "football election climate budget mortgage garden bicycle camera review"
).split()


def build_history(path: Path, visits: int, urls: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    sites = [
        f"{rng.choice(_WORDS)}{n}.example.{rng.choice(['com', 'org', 'net'])}" for n in range(600)
    ]
    pages = []
    for n in range(urls):
        site = sites[int(rng.paretovariate(1.2)) % len(sites)]
        words = rng.sample(_WORDS, 4)
        pages.append(
            (
                f"https://{site}/{'/'.join(words[:2])}/{n}",
                f"{' '.join(words).capitalize()} - {site}",
            )
        )
    history = browser_files.ChromeHistory(path)
    start = 1_700_000_000
    times = sorted(rng.randrange(start, start + 365 * 86_400) for _ in range(visits))
    last: int = 0
    for number, at in enumerate(times):
        address, title = pages[int(rng.paretovariate(1.1) * 7 + number) % len(pages)]
        transition = browser_files.LINK if rng.random() < 0.8 else browser_files.TYPED
        last = history.add_visit(
            address,
            at,
            title=title,
            transition=transition | browser_files.CHAIN_END,
            duration_us=rng.randrange(0, 600_000_000),
            from_visit=last if transition == browser_files.LINK else 0,
        )
    history.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=100_000)
    parser.add_argument("--urls", type=int, default=25_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="backtrail-import-bench-") as scratch:
        root = Path(scratch)
        profile_dir = root / "chrome" / "Default"
        began = time.perf_counter()
        build_history(profile_dir / "History", args.visits, args.urls)
        say(
            f"built History: {args.visits:,} visits, {args.urls:,} URLs "
            f"in {time.perf_counter() - began:.1f} s"
        )
        config = Config.load(
            root / "home",
            overrides={
                "embeddings": False,
                "background_indexing": False,
                "text_batch_changes": importers.INDEX_BATCH_CHANGES,
            },
            environ={},
        )
        profile = importers.Profile("chrome", "Default", profile_dir, default=True)
        with Memory(config, client="bench") as memory:
            memory.catch_up(vectors=False)  # as the command does: start the index first
            began, cpu = time.perf_counter(), time.process_time()
            result = importers.import_history(memory, profile)
            imported = time.perf_counter() - began
            lag = memory.catch_up(vectors=False)
            total = time.perf_counter() - began
            cpu = time.process_time() - cpu
            hits = memory.search("borrow checker tutorial", limit=3, mode="bm25").results
            stats = memory.stats()
        say(
            f"imported {result.added:,} visits ({result.pages_created:,} pages) "
            f"in {imported:.1f} s ({result.added / imported:,.0f} visits/s)"
        )
        say(
            f"title-indexed {stats.index.get('documents', 0):,} documents "
            f"in {total - imported:.1f} s; text lag {lag.text}"
        )
        verdict = "PASS" if total <= TARGET_SECONDS and result.added == args.visits else "FAIL"
        say(
            f"total {total:.1f} s (target <= {TARGET_SECONDS:.0f} s): {verdict}; "
            f"CPU time {cpu:.1f} s (wall time grows when other work shares the cores)"
        )
        say(f"search check: {[h.title for h in hits]}")
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        out = RESULTS_DIR / f"import-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.write_text(
            f'{{"visits": {result.added}, "pages": {result.pages_created}, '
            f'"import_seconds": {imported:.2f}, "index_seconds": {total - imported:.2f}, '
            f'"total_seconds": {total:.2f}, "cpu_seconds": {cpu:.2f}, '
            f'"target_seconds": {TARGET_SECONDS}}}\n'
        )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
