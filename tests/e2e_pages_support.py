"""The local HTTP server the end-to-end tests serve their pages from (and check what the
browser requested)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["PageServer"]


class PageServer:
    """HTML pages on ``http://127.0.0.1:<port>/`` from a background thread. The same
    pages answer as ``http://localhost:<port>/`` (a second host name). ``requests``
    lists ``(host header, path)`` of every request served."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.requests: list[tuple[str, str]] = []
        self.held: dict[str, threading.Event] = {}
        pages, requests, held = self.pages, self.requests, self.held

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                requests.append((self.headers.get("Host", ""), path))
                content_type, body = pages.get(path, ("text/plain", b""))
                self.send_response(200 if path in pages else 404)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if path in held:  # the document commits, then stays loading until released
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    held[path].wait(60)
                    body = body[len(body) // 2 :]
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="pages", daemon=True)
        self._thread.start()

    def __enter__(self) -> PageServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def add(self, path: str, html: str, content_type: str = "text/html; charset=utf-8") -> str:
        """Serve ``html`` at ``path``; returns its 127.0.0.1 URL."""
        self.pages[path] = (content_type, html.encode("utf-8"))
        return self.url(path)

    def article(
        self, path: str, title: str, paragraphs: Iterable[str], *, script: str = "",
        host: str = "127.0.0.1",
    ) -> str:  # fmt: skip
        """Serve a small article (``<h1>`` + ``<p id="p0">``...) at ``path``; returns its
        URL on ``host``. ``script`` is inlined at the end of the body."""
        body = "\n".join(f'<p id="p{i}">{escape(text)}</p>' for i, text in enumerate(paragraphs))
        tail = f"<script>{script}</script>" if script else ""
        self.add(path, (
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
            f"</title></head><body><main><article><h1>{escape(title)}</h1>\n{body}\n"
            f"</article></main>{tail}</body></html>"
        ))  # fmt: skip
        return self.url(path, host)

    def hold(self, path: str) -> threading.Event:
        """Send only the first half of ``path`` until the returned event is set (at most a
        minute): the document commits and its tab stays loading meanwhile."""
        self.held[path] = threading.Event()
        return self.held[path]

    def served(self, path: str) -> list[str]:
        """The Host headers of the requests for ``path`` so far."""
        return [host for host, served in list(self.requests) if served == path]
