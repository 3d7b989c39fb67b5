"""Writes ``doc_corpus_paths.txt.gz``: the URL ids of the real documentation corpus of
the benchmark (``shared/eval/ROOTS.md``: seven Debian documentation packages, URL =
base + path relative to the root, without assets, generated indexes, copies and
redirect stubs), so the exclusion tests run where the packages are not installed.

Run from the repository: ``python tests/data/gen_doc_corpus.py`` (the packages:
``apt-get install python3.11-doc postgresql-doc-15 rust-doc python-django-doc
linux-doc-6.1 openjdk-17-doc libstdc++-12-doc``). The file holds one ``# base`` line per
root, followed by that root's paths, sorted.
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

ROOTS = (
    ("python", "/usr/share/doc/python3.11/html", "https://docs.python.org/3.11/"),
    ("postgresql", "/usr/share/doc/postgresql-doc-15/html", "https://www.postgresql.org/docs/15/"),
    ("rust", "/usr/share/doc/rust-doc/html", "https://doc.rust-lang.org/1.63.0/"),
    ("django", "/usr/share/doc/python-django-doc/html", "https://docs.djangoproject.com/en/3.2/"),
    ("linux", "/usr/share/doc/linux-doc-6.1/html", "https://www.kernel.org/doc/html/v6.1/"),
    ("jdk", "/usr/share/doc/openjdk-17-jre-headless/api",
     "https://docs.oracle.com/en/java/javase/17/docs/api/"),
    ("libstdcxx", "/usr/share/doc/libstdc++-12-doc/libstdc++",
     "https://gcc.gnu.org/onlinedocs/gcc-12/libstdc++/"),
)  # fmt: skip
OUT = Path(__file__).with_name("doc_corpus_paths.txt.gz")
_ASSETS = {"_static", "_sources", "_images", "_downloads", "_modules"}
_GENERATED = re.compile(r"(search|genindex(-.+)?)\.html")
_REFRESH = re.compile(rb"<meta[^>]+http-equiv\s*=\s*[\"']?refresh", re.I)


def kept(name: str, root: Path, rel: str) -> bool:
    parts = rel.split("/")
    if _ASSETS.intersection(parts[:-1]) or parts[-1] == "print.html":
        return False
    if len(parts) == 1 and _GENERATED.fullmatch(parts[-1]):
        return False
    if (name, parts[0]) in {("rust", "src"), ("linux", "translations")}:
        return False
    if name == "libstdcxx" and parts[-1].endswith("_source.html"):
        return False
    if name == "jdk" and {"index-files", "class-use"}.intersection(parts[:-1]):
        return False
    path = root / rel
    return not (path.stat().st_size < 2_000 and _REFRESH.search(path.read_bytes()))


def main() -> None:
    lines: list[str] = []
    for name, root_text, base in ROOTS:
        root = Path(root_text)
        rels = sorted(str(p.relative_to(root)) for p in root.rglob("*.html"))
        paths = [rel for rel in rels if kept(name, root, rel)]
        lines += [f"# {base}", *paths]
        sys.stdout.write(f"{name}: {len(paths)} pages\n")
    OUT.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))
    sys.stdout.write(f"{OUT}: {sum(not line.startswith('# ') for line in lines)} URLs\n")


if __name__ == "__main__":
    main()
