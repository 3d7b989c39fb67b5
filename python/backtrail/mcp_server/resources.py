"""Resources: a page's captured text, the recently visited pages, the open tabs.

Resource text is rendered like tool text: web content inside labelled
``<web_content>`` blocks. An unknown page is a resource-not-found error (the protocol's
answer for a URI that names nothing).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from backtrail.errors import PageNotFound
from backtrail.mcp_server.browsing import render_page
from backtrail.mcp_server.formatting import iso, web_block
from backtrail.mcp_server.insight_tools import tab_line
from backtrail.mcp_server.server import Runtime

__all__ = ["register", "RECENT_PAGES"]

RECENT_PAGES = 30
PAGE_CHARS = 20_000


def register(server: MCPServer, rt: Runtime) -> None:
    @server.resource(
        "backtrail://pages/recent", name="recent-pages", title="Recently visited pages",
        description=f"The {RECENT_PAGES} pages the user visited most recently, newest first.",
        mime_type="text/markdown",
    )  # fmt: skip
    def recent_pages() -> str:
        entries = rt.memory.timeline(limit=RECENT_PAGES)
        if not entries:
            return "No pages visited yet."
        lines = [
            f"- {iso(e.last_seen)} backtrail://page/{e.page_id} ({e.visit_count} visits): "
            f"{e.title or '(untitled)'} — {e.url}"
            for e in entries
        ]
        head = f"# Recently visited pages ({len(entries)})\n"
        return head + web_block("\n".join(lines), source="browser", kind="page titles",
                                captured_at=None)  # fmt: skip

    @server.resource(
        "backtrail://page/{page_id}", name="page", title="Page text",
        description=f"The captured main text of one page (first {PAGE_CHARS} characters); "
        "use the get_page tool to read further.",
        mime_type="text/markdown",
    )  # fmt: skip
    def page_text(page_id: str) -> str:
        if not page_id.isdigit() or len(page_id) > 18:
            raise ResourceNotFoundError(f"no page {page_id!r}: page ids are positive integers")
        try:
            page = rt.memory.get_page(page_id=int(page_id), length=PAGE_CHARS)
        except PageNotFound:
            raise ResourceNotFoundError(f"no page with id {page_id}") from None
        return render_page(page)

    @server.resource(
        "backtrail://tabs", name="open-tabs", title="Open tabs",
        description="The tabs open in the user's browser, as last reported.",
        mime_type="text/markdown",
    )  # fmt: skip
    def open_tabs() -> str:
        tabs = rt.memory.list_tabs()
        if not tabs:
            return "No open tabs are known (is the browser extension running?)."
        lines = [tab_line(t) for t in tabs[:200]]
        more = f"\n(+{len(tabs) - 200} more)" if len(tabs) > 200 else ""
        return f"# Open tabs ({len(tabs)})\n" + web_block(
            "\n".join(lines) + more, source="browser", kind="tab titles", captured_at=None
        )
