"""The real benchmark corpus: seven Debian documentation packages, as Backtrail would store them.

Pages follow ``shared/eval/ROOTS.md``, the convention the human-written query sets use: every
``*.html`` under a package's root, URL id = base + path relative to the root, with the
copies no reader browses to left out (see ``excluded``). Each page's main text, title and
language come from Backtrail's own extractor (``extract_main_text``, trafilatura with its
fast fallback), and its passages from Backtrail's own chunker (``backtrail.indexer.
chunk_text`` with Config's ``passage_chars`` / ``passage_overlap`` / ``max_passages_per_page``
defaults, after the ledger's ``max_text_bytes`` cut), so the passages are the ones the
product would index for these pages.

Outputs (``<data>/real/``, data = $BACKTRAIL_BENCH_DATA or bench/data)
    pages.jsonl     id, set, url, title, language, method, html_bytes, text, outline
                    (the extractor's headings: [offset in text, level, words] each)
    passages.jsonl  id, page_id, set, url, domain, title, section, body, passage_index
                    (``passages-flat.jsonl`` when ``documents.SECTION_BREAKS`` is off)

Extraction takes a while (two worker processes): finished pages are appended to
``pages.jsonl.partial`` as they come, so a killed run resumes where it stopped; progress
(rate, ETA) goes to stderr. ``pages.jsonl`` appears, in page-id order, once every page is
done; ``passages.jsonl`` is cut from it in seconds and rebuilt whenever it is missing.

Ids: page id = 1-based position of the page in the listing (sets in ``SETS`` order, paths
sorted within a set); passage id = page id * 10,000 + passage index + 1 (``corpus.
passage_id``), so a passage id never equals a page id.

``python -m bench.real_corpus`` builds (or resumes) and prints page and passage counts per set.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from backtrail.indexer.extract import extract_main_text
from bench.common import DATA_DIR, Progress, read_jsonl, write_jsonl
from bench.corpus import passage_id


@dataclass(frozen=True)
class DocSet:
    """One Debian documentation package: its root and the site its pages stand for."""

    name: str
    root: Path
    base: str
    package: str


SETS: tuple[DocSet, ...] = (
    DocSet(
        "python",
        Path("/usr/share/doc/python3.11/html"),
        "https://docs.python.org/3.11/",
        "python3.11-doc",
    ),
    DocSet(
        "postgresql",
        Path("/usr/share/doc/postgresql-doc-15/html"),
        "https://www.postgresql.org/docs/15/",
        "postgresql-doc-15",
    ),
    DocSet(
        "rust",
        Path("/usr/share/doc/rust-doc/html"),
        "https://doc.rust-lang.org/1.63.0/",
        "rust-doc",
    ),
    DocSet(
        "django",
        Path("/usr/share/doc/python-django-doc/html"),
        "https://docs.djangoproject.com/en/3.2/",
        "python-django-doc",
    ),
    DocSet(
        "linux",
        Path("/usr/share/doc/linux-doc-6.1/html"),
        "https://www.kernel.org/doc/html/v6.1/",
        "linux-doc-6.1",
    ),
    DocSet(
        "jdk",
        Path("/usr/share/doc/openjdk-17-jre-headless/api"),
        "https://docs.oracle.com/en/java/javase/17/docs/api/",
        "openjdk-17-doc",
    ),
    DocSet(
        "libstdcxx",
        Path("/usr/share/doc/libstdc++-12-doc/libstdc++"),
        "https://gcc.gnu.org/onlinedocs/gcc-12/libstdc++/",
        "libstdc++-12-doc",
    ),
)

#: What ``make bench`` tells a machine without the source HTML to install.
APT_INSTALL = "apt-get install -y " + " ".join(s.package for s in SETS)

REAL_DIR_NAME = "real"
PAGES_FILE = "pages.jsonl"
PASSAGES_FILE = "passages.jsonl"

_ASSET_DIRS = frozenset({"_static", "_sources", "_images", "_downloads", "_modules"})
_GENERATED = re.compile(r"^(search|genindex(-.+)?)\.html$")
_REFRESH = re.compile(rb"<meta[^>]+http-equiv\s*=\s*[\"']?refresh", re.I)
#: A page smaller than this with a <meta http-equiv="refresh"> is a redirect stub.
STUB_BYTES = 2_000


def real_dir(data_dir: Path = DATA_DIR) -> Path:
    """Where the real corpus and its caches live."""
    return data_dir / REAL_DIR_NAME


def excluded(doc_set: str, rel: str) -> str | None:
    """Why a page (path relative to its root) is left out, or None when it is kept.

    ROOTS.md: asset and source folders of Sphinx, the search and general-index pages
    (``search.html``, ``genindex.html`` and Python's ``genindex-X.html`` at a set's root,
    where Sphinx writes them: Django's ``topics/db/search.html`` and ``ref/contrib/postgres/
    search.html`` are content pages and are kept), every ``print.html``, Rust ``src/``
    listings, libstdc++ ``*_source.html``, the kernel's ``translations/``, the JDK's
    ``index-files/`` and ``class-use/``.
    """
    parts = rel.split("/")
    name = parts[-1]
    if _ASSET_DIRS.intersection(parts[:-1]):
        return "asset folder"
    if name == "print.html":
        return "print.html"
    if len(parts) == 1 and _GENERATED.match(name):
        return name.split(".")[0].split("-")[0] + ".html"
    if doc_set == "rust" and parts[0] == "src":
        return "rust src/"
    if doc_set == "libstdcxx" and name.endswith("_source.html"):
        return "libstdc++ *_source.html"
    if doc_set == "linux" and parts[0] == "translations":
        return "linux translations/"
    if doc_set == "jdk" and ("index-files" in parts[:-1] or "class-use" in parts[:-1]):
        return "jdk " + ("index-files/" if "index-files" in parts else "class-use/")
    return None


def is_redirect_stub(path: Path) -> bool:
    """A "Redirecting to ..." page: under STUB_BYTES with a meta refresh."""
    return path.stat().st_size < STUB_BYTES and bool(_REFRESH.search(path.read_bytes()))


def list_pages(sets: Sequence[DocSet] = SETS) -> tuple[list[tuple[int, DocSet, str]], Counter]:
    """(page id, set, relpath) of every kept page, and the count left out per reason."""
    missing = [s.package for s in sets if not s.root.is_dir()]
    if missing:
        raise FileNotFoundError(
            f"documentation not installed: {', '.join(missing)}; run as root: {APT_INSTALL}"
        )
    kept: list[tuple[DocSet, str]] = []
    left_out: Counter = Counter()
    for s in sets:
        for rel in sorted(str(p.relative_to(s.root)) for p in s.root.rglob("*.html")):
            reason = excluded(s.name, rel)
            if reason is None and is_redirect_stub(s.root / rel):
                reason = "redirect stub"
            if reason is None:
                kept.append((s, rel))
            else:
                left_out[f"{s.name}: {reason}"] += 1
    return [(i, s, rel) for i, (s, rel) in enumerate(kept, 1)], left_out


# --------------------------------------------------------------------------- extraction


def extract_page(job: tuple[int, str, str, str]) -> dict[str, Any]:
    """One page record (runs in a worker process): Backtrail's extractor on the file's bytes."""
    page_id, set_name, root, rel = job
    url = dict((s.name, s.base) for s in SETS)[set_name] + rel
    html = (Path(root) / rel).read_bytes()
    found = extract_main_text(html, url)
    return {
        "id": page_id,
        "set": set_name,
        "url": url,
        "title": found.title or "",
        "language": found.language,
        "method": found.method,
        "html_bytes": len(html),
        "text": found.text,
        "outline": [[h.offset, h.level, h.text] for h in found.outline],
    }


def _read_partial(path: Path) -> set[int]:
    """Ids already in a partial JSONL file; a torn last line (killed mid-write) is cut off."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        with open(path, "r+b") as fh:
            fh.truncate(len(whole))
    return {json.loads(line)["id"] for line in whole.splitlines() if line.strip()}


def extract_all(data_dir: Path = DATA_DIR, *, workers: int = 2) -> Path:
    """pages.jsonl of every kept page (resumable, see the module doc); returns its path."""
    out_dir = real_dir(data_dir)
    pages_path = out_dir / PAGES_FILE
    if pages_path.exists():
        return pages_path
    out_dir.mkdir(parents=True, exist_ok=True)
    listing, _ = list_pages()
    partial = out_dir / (PAGES_FILE + ".partial")
    done = _read_partial(partial)
    jobs = [(i, s.name, str(s.root), rel) for i, s, rel in listing if i not in done]
    progress = Progress("extract pages", len(listing), len(listing) - len(jobs))
    if jobs:
        with open(partial, "a", encoding="utf-8") as fh, Pool(workers) as pool:
            for rec in pool.imap_unordered(extract_page, jobs, chunksize=4):
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                fh.flush()
                progress.add()
    progress.add(0, force=True)
    pages = sorted(read_jsonl(partial), key=lambda p: p["id"])
    write_jsonl(pages_path, pages)
    partial.unlink()
    return pages_path


# --------------------------------------------------------------------------- passages


def passage_settings() -> dict[str, int]:
    """The product's chunking defaults: Config's passage and text-size settings."""
    from backtrail.config import Config
    from backtrail.indexer import MAX_PASSAGES

    cfg = Config()
    return {
        "passage_chars": cfg.passage_chars,
        "passage_overlap": cfg.passage_overlap,
        "max_passages": min(cfg.max_passages_per_page, MAX_PASSAGES),
        "max_text_bytes": cfg.max_text_bytes,
    }


def passages_file() -> str:
    """The passages' file name for the indexer's chunking (sections or not)."""
    from backtrail.indexer import documents

    return PASSAGES_FILE if documents.SECTION_BREAKS else "passages-flat.jsonl"


def page_passages(page: dict[str, Any], settings: dict[str, int]) -> list[dict[str, Any]]:
    """The passages Backtrail's indexer would make of a page, as bench records."""
    from backtrail.indexer.documents import section_chunks

    text = page["text"]
    cut = text.encode("utf-8")[: settings["max_text_bytes"]]
    if len(cut) < len(text.encode("utf-8")):  # the ledger's cut, on a character boundary
        text = cut.decode("utf-8", errors="ignore")
    outline = [tuple(h) for h in page.get("outline") or () if h[0] <= len(text)]
    chunks = section_chunks(
        text, outline, page["title"], settings["passage_chars"], settings["passage_overlap"],
        settings["max_passages"],
    )  # fmt: skip
    domain = urlsplit(page["url"]).hostname or ""
    return [
        {
            "id": passage_id(page["id"], i),
            "page_id": page["id"],
            "set": page["set"],
            "url": page["url"],
            "domain": domain,
            "title": page["title"],
            "section": section,
            "body": body,
            "passage_index": i,
        }
        for i, (section, body) in enumerate(chunks)
    ]


def build(data_dir: Path = DATA_DIR, *, workers: int = 2) -> tuple[Path, Path]:
    """pages.jsonl and passages.jsonl of the real corpus (each built only when missing)."""
    pages_path = extract_all(data_dir, workers=workers)
    passages_path = real_dir(data_dir) / passages_file()
    if not passages_path.exists():
        settings = passage_settings()
        write_jsonl(
            passages_path,
            (p for page in read_jsonl(pages_path) for p in page_passages(page, settings)),
        )
    return pages_path, passages_path


def iter_pages(data_dir: Path = DATA_DIR) -> Iterator[dict[str, Any]]:
    """Page records (with text) in id order, building the corpus first if needed."""
    return read_jsonl(build(data_dir)[0])


def load_passages(data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """Every passage record of the real corpus, in id order (~150k; ~0.5 GB in memory)."""
    return list(read_jsonl(build(data_dir)[1]))


def embedding_text(p: dict[str, Any]) -> str:
    """What the indexer embeds for a passage: ``backtrail.indexer.embedding_text``."""
    from backtrail.indexer import embedding_text as product_embedding_text

    doc = {"title": p["title"], "section": p.get("section", ""), "body": p["body"]}
    return product_embedding_text(doc)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- report


def counts(data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """Pages, pages without text, passages and characters per set (and in all)."""
    rows: dict[str, dict[str, Any]] = {
        s.name: {"set": s.name, "pages": 0, "no_text": 0, "passages": 0, "chars": 0} for s in SETS
    }
    for page in iter_pages(data_dir):
        r = rows[page["set"]]
        r["pages"] += 1
        r["no_text"] += not page["text"]
    for p in read_jsonl(build(data_dir)[1]):
        rows[p["set"]]["passages"] += 1
        rows[p["set"]]["chars"] += len(p["body"])
    total = {
        "set": "all",
        **{k: sum(r[k] for r in rows.values()) for k in ("pages", "no_text", "passages", "chars")},
    }
    out = [*rows.values(), total]
    for r in out:
        r["mean_chars"] = r["chars"] / r["passages"] if r["passages"] else 0.0
    return out


def main(argv: Sequence[str] | None = None) -> None:
    from bench.common import markdown_table, say

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="only list pages and exclusions")
    ap.add_argument(
        "--missing", action="store_true", help="print the Debian packages not installed, and exit"
    )
    args = ap.parse_args(argv)
    if args.missing:
        say(" ".join(s.package for s in SETS if not s.root.is_dir()))
        return
    listing, left_out = list_pages()
    sys.stderr.write(f"{len(listing):,} pages kept; left out:\n")
    for reason, n in sorted(left_out.items()):
        sys.stderr.write(f"  {reason}: {n:,}\n")
    if args.list:
        per_set = Counter(s.name for _, s, _ in listing)
        say(markdown_table([{"set": k, "pages": v} for k, v in per_set.items()]))
        return
    t0 = time.perf_counter()
    build(workers=args.workers)
    sys.stderr.write(f"real corpus ready in {time.perf_counter() - t0:.0f} s: {real_dir()}\n")
    say(markdown_table(counts(), ["set", "pages", "no_text", "passages", "mean_chars"]))


if __name__ == "__main__":
    main()
