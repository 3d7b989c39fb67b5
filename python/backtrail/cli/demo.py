"""``make run``: Backtrail's main job on a fresh machine, end to end.

``python -m backtrail.cli.demo`` (what ``make run`` runs after building and installing):

1. opens the memory in the normal data directory (``$BACKTRAIL_HOME``, else the per-user
   data directory: ``~/.local/share/backtrail`` on Linux), the same one the browser host
   and ``backtrail mcp`` use, so what the demo stores is what Claude sees;
2. stores a sample of real pages: Debian's Python 3.11 documentation
   (``/usr/share/doc/python3.11/html``, package python3.11-doc) when it is installed,
   as the pages at ``docs.python.org/3.11``, else the small sample set shipped in
   ``backtrail/samples``; each with one visit. Running it again stores nothing twice;
3. indexes them (progress bar), then shows a search over them;
4. registers the native-messaging host for the browsers found on this machine;
5. serves MCP over streamable HTTP on 127.0.0.1 with a freshly generated bearer token
   (kept in ``<data dir>/demo-http-token``), after printing how to connect Claude
   Desktop (stdio), the HTTP address and token, and where the unpacked extension is.
   Embeddings of the new pages are computed in the background while it serves.

Remove the demo pages later with ``backtrail forget --domain docs.python.org`` (or
``--domain samples.backtrail.example``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from backtrail.cli.common import clean, error_line, when
from backtrail.cli.progress import Interrupted, ProgressReporter
from backtrail.config import HOME_ENV, SETTINGS, Config
from backtrail.errors import BacktrailError, Paused
from backtrail.service import Memory, VisitInfo

__all__ = ["main", "Sample", "python_docs", "shipped_samples", "DEFAULT_PAGES"]

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
PYTHON_DOCS_URL = "https://docs.python.org/3.11/"
SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"
DEFAULT_PAGES = 120
DEFAULT_PORT = 8765
TOKEN_FILENAME = "demo-http-token"
DEMO_SOURCE = "demo"
_QUERIES = {"python-docs": "read a file line by line", "samples": "write-ahead log checkpoint"}
# Sections read first (most useful to search), then the library reference.
_PYTHON_SECTIONS = ("tutorial", "howto", "faq", "library", "reference", "using")
_MAX_PAGE_BYTES = 250_000  # very large reference pages take long to extract
_CANONICAL = re.compile(rb'<link[^>]+rel="canonical"[^>]+href="([^"]+)"', re.IGNORECASE)


@dataclass(frozen=True)
class Sample:
    """One page to store: its address, and the HTML file with its content."""

    url: str
    path: Path


def python_docs(root: Path = PYTHON_DOCS, limit: int = DEFAULT_PAGES) -> list[Sample]:
    """Up to ``limit`` pages of the Python documentation, as docs.python.org pages."""
    if not root.is_dir():
        return []
    chosen: list[Sample] = []
    for section in _PYTHON_SECTIONS:
        files = sorted((root / section).glob("*.html"))
        for path in files:
            if len(chosen) >= limit:
                return chosen
            if path.name == "index.html" or path.stat().st_size > _MAX_PAGE_BYTES:
                continue
            relative = path.relative_to(root).as_posix()
            chosen.append(Sample(PYTHON_DOCS_URL + relative, path))
    return chosen


def shipped_samples(root: Path = SAMPLES_DIR) -> list[Sample]:
    """The sample pages shipped with Backtrail (address from ``<link rel=canonical>``)."""
    found = []
    for path in sorted(root.glob("*.html")):
        match = _CANONICAL.search(path.read_bytes())
        if match:
            found.append(Sample(match.group(1).decode("ascii"), path))
    return found


# ---------------------------------------------------------------------- steps


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _heading(text: str) -> None:
    _say()
    _say(f"== {text}")


def store_pages(memory: Memory, samples: list[Sample], progress: ProgressReporter) -> int:
    """Capture each sample with one visit; returns how many pages were new or changed."""
    changed = 0
    now = int(time.time())
    for number, sample in enumerate(samples):
        visit = VisitInfo(
            visited_at=now - 3600 * (len(samples) - number),
            source=DEMO_SOURCE,
            external_id=f"demo:{sample.url}",
        )
        receipt = memory.capture_page(sample.url, html=sample.path.read_bytes(), visit=visit)
        changed += receipt.outcome != "unchanged"
        progress(number + 1, len(samples), "capture")
    return changed


def show_search(memory: Memory, query: str) -> None:
    _say(f'$ backtrail search "{query}"')
    page = memory.search(query, limit=5)
    for number, result in enumerate(page.results, 1):
        _say(f"{number:>2}. {clean(result.title) or result.url}")
        _say(f"    {result.url}")
        _say(f"    {clean(result.snippet).replace('**', '')[:160]}")
    count = len(page.results)
    _say(f"({count} result{'s' if count != 1 else ''}, {ranking_note(memory, page.mode)})")


def ranking_note(memory: Memory, mode: str) -> str:
    """Which ranking ran, in words: a hybrid search over an index without vectors ranked
    by keywords alone."""
    index = memory.stats().index
    with_vectors = int(index.get("documents_with_vectors") or 0)
    documents = int(index.get("documents") or 0)
    if mode == "bm25" or with_vectors == 0:
        off = memory.model_status() == "disabled"
        why = ": no passage has its vector yet" if with_vectors == 0 and not off else ""
        return f"keyword (BM25) ranking{why}"
    if mode != "hybrid":
        return f"{mode} ranking"
    if with_vectors >= documents:
        return f"{mode} ranking: keywords and meaning"
    return (
        f"{mode} ranking: keywords, and meaning for the {with_vectors:,} of {documents:,} "
        "passages that have their vectors so far"
    )


def register_host(config: Config) -> None:
    """Register the native-messaging host with the browsers found here."""
    try:
        from backtrail.cli import host_manifests as install
    except ImportError as error:
        _say(f"Host registration is not available in this build ({error}).")
        return
    explicit = os.environ.get(HOME_ENV)
    try:
        report = install.install("all", data_dir=config.home if explicit else None)
    except (OSError, ValueError) as error:
        _say(f"Could not register the host: {error}; run `backtrail install` to retry.")
        return
    _say(f"Launcher: {report.launcher}")
    for target in report.written:
        _say(f"Registered for {target.describe()}")
    if report.skipped:
        _say(f"Not found on this machine (skipped): {', '.join(report.skipped)}")


def extension_dir() -> Path | None:
    """The unpacked extension: the repository's ``extension/`` when run from a checkout,
    else a copy packaged with Backtrail."""
    for candidate in (Path.cwd() / "extension", Path(__file__).resolve().parent / "extension"):
        if (candidate / "manifest.json").is_file():
            return candidate.resolve()
    return None


def claude_entry(config: Config) -> dict[str, object]:
    try:
        from backtrail.cli.client_config import server_entry

        return server_entry(data_dir=config.home)
    except ImportError:
        script = Path(sys.executable).parent / "backtrail"
        return {"command": str(script), "args": ["mcp"], "env": {HOME_ENV: str(config.home)}}


def free_port(host: str, wanted: int) -> int:
    """``wanted`` if nothing listens there, else a free port the system picks."""
    for port in (wanted, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError(f"no free port on {host}")


def token_for(config: Config) -> tuple[str, Path]:
    """A new bearer token, written (owner-only) to the data directory."""
    token = secrets.token_urlsafe(32)
    path = config.home / TOKEN_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token, path


def connection_help(config: Config, http: tuple[str, int, str, Path] | None) -> None:
    _heading("Connect your AI assistant")
    _say(
        "Claude Desktop (stdio): add this to claude_desktop_config.json, or run "
        "`backtrail claude-config --write`:"
    )
    _say(json.dumps({"mcpServers": {"backtrail": claude_entry(config)}}, indent=2))
    if http is not None:
        host, port, token, token_path = http
        _say()
        _say(f"Streamable HTTP: http://{host}:{port}/mcp")
        _say(f"  header  Authorization: Bearer {token}")
        _say(f"  (the token is also in {token_path})")
    _heading("Browser extension")
    found = extension_dir()
    if found is None:
        _say("The unpacked extension is in the extension/ directory of the Backtrail sources.")
    else:
        _say(f"Load the unpacked extension from {found}")
        _say("  (chrome://extensions -> Developer mode -> Load unpacked)")


def serve(config: Config, host: str, port: int) -> int:
    try:
        from backtrail.mcp_server import serve as serve_mcp
    except ImportError as error:
        _say(f"The MCP server is not available in this build ({error}).")
        return 1
    port = free_port(host, port)
    token, token_path = token_for(config)
    connection_help(config, (host, port, token, token_path))
    _heading(f"Serving MCP on http://{host}:{port}/mcp (Ctrl-C to stop)")
    try:
        serve_mcp(config, transport="http", host=host, port=port, auth_token=token)
    except KeyboardInterrupt:
        _say("Stopped.")
    return 0


# ----------------------------------------------------------------------- main


def _samples(source: str, limit: int) -> tuple[str, list[Sample]]:
    if source in ("auto", "python-docs"):
        docs = python_docs(limit=limit)
        if docs or source == "python-docs":
            return "python-docs", docs
    return "samples", shipped_samples()[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backtrail.cli.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--pages",
        type=int,
        default=DEFAULT_PAGES,
        help=f"most pages to store (default {DEFAULT_PAGES})",
    )
    parser.add_argument(
        "--source",
        choices=("auto", "python-docs", "samples"),
        default="auto",
        help="python-docs (Debian's python3.11-doc), the shipped samples, or "
        "auto: the docs when installed",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to serve MCP on")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to serve MCP on (default {DEFAULT_PORT}; another free one if taken)",
    )
    parser.add_argument("--no-install", action="store_true", help="skip host registration")
    parser.add_argument("--no-serve", action="store_true", help="stop after the search")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except KeyboardInterrupt:
        sys.stderr.write("Stopped; run it again to continue.\n")
        return 130
    except (BacktrailError, OSError) as error:
        sys.stderr.write(f"Error: {error_line(error)}\n")
        return 1


def _run(args: argparse.Namespace) -> int:
    config = Config.load()
    kind, samples = _samples(args.source, args.pages)
    _heading("Backtrail")
    _say(f"Data directory: {config.home}")
    where = "Debian's Python 3.11 documentation" if kind == "python-docs" else "the shipped samples"
    _say(f"Storing {len(samples)} pages from {where} ...")
    # Extract each page's text as it is stored (with progress), not in the indexing pass.
    settings: dict[str, object] = {"background_indexing": False}
    if any(setting.name == "defer_extraction" for setting in SETTINGS):
        settings["defer_extraction"] = False
    with Memory(config.replace(**settings), client=DEMO_SOURCE) as memory:
        try:
            with ProgressReporter() as progress:
                changed = store_pages(memory, samples, progress)
                lag = memory.catch_up(vectors=False, progress=progress)
        except Paused:
            _say("Capture is paused (`backtrail` settings), so no pages were stored.")
            changed, lag = 0, memory.index_lag()
        except Interrupted as stop:
            _say(str(stop))
            return 130
        stats = memory.stats()
        _say(
            f"{changed} pages new or changed; the memory holds {stats.ledger.counts['pages']:,} "
            f"pages, last capture {when(stats.ledger.last_capture_at)}."
        )
        if lag.text_caught_up:
            _heading("Search")
            show_search(memory, _QUERIES[kind])
    if not args.no_install:
        _heading("Native messaging host")
        register_host(config)
    if args.no_serve:
        connection_help(config, None)
        return 0
    return serve(config, args.host, args.port)


if __name__ == "__main__":
    sys.exit(main())
