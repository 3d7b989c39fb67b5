"""``backtrail search`` and ``backtrail stats``: finding what you read, and what the memory
holds."""

from __future__ import annotations

import re

import click
from rich.table import Table
from rich.text import Text

from backtrail.cli.common import (
    DATE,
    JSON_OPTION,
    App,
    clean,
    emit_json,
    lag_text,
    pass_app,
    stdout_console,
    when,
)
from backtrail.service import SEARCH_KINDS, SearchPage, present

__all__ = ["COMMANDS"]


_MARK = re.compile(r"\*\*(.+?)\*\*")


def _lag_note(page: SearchPage) -> str | None:
    lag = page.lag
    if lag.ledger_seq and (lag.rebuilding_text or lag.text):
        return "the index is catching up with recent changes; run `backtrail index` to finish"
    return None


def _highlighted(snippet: str) -> Text:
    """A snippet with ``**marked**`` words in bold, as rich Text (never markup)."""
    text = Text()
    position = 0
    value = clean(snippet)
    for match in _MARK.finditer(value):
        text.append(value[position : match.start()])
        text.append(match.group(1), style="bold yellow")
        position = match.end()
    text.append(value[position:])
    return text


@click.command()
@click.argument("query")
@click.option("--since", type=DATE, help="Only what was last seen at or after DATE.")
@click.option("--until", type=DATE, help="Only what was last seen before DATE.")
@click.option(
    "--domain", "domains", multiple=True, help="Only this site (and its subdomains); repeatable."
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(SEARCH_KINDS),
    help="Only these kinds of results; repeatable (default: all but facts).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="Results to show (default: the search_limit setting).",
)
@click.option(
    "--mode",
    type=click.Choice(("hybrid", "bm25", "vector")),
    help="Ranking: hybrid (words and meaning; the default when the model is available), "
    "bm25 (words only) or vector (meaning only).",
)
@click.option("--cursor", help="Continue a previous search (its JSON gives next_cursor).")
@JSON_OPTION
@pass_app
def search(
    app: App,
    query: str,
    since: int | None,
    until: int | None,
    domains: tuple[str, ...],
    kinds: tuple[str, ...],
    limit: int | None,
    mode: str | None,
    cursor: str | None,
    as_json: bool,
) -> None:
    """Search what you have read: pages, highlights, notes and bookmarks.

    \b
    Examples:
      backtrail search "write-ahead log checkpoint"
      backtrail search "borrow checker" --domain doc.rust-lang.org --since 30d
      backtrail search tokio --kind highlight --kind note --json
    """
    page = app.memory().search(
        query,
        limit=limit,
        since=since,
        until=until,
        domains=list(domains) or None,
        kinds=list(kinds) or None,
        cursor=cursor,
        mode=mode,
    )
    if as_json:
        emit_json(page)
        return
    console = stdout_console()
    if page.no_match:
        console.print(Text(f"Nothing found for {clean(query)!r}: nothing in memory is close "
                           "to it. Try other words, or fewer filters."))  # fmt: skip
    elif not page.results:
        console.print(Text(f"No results for {clean(query)!r}."))
    for number, result in enumerate(page.results, 1):
        head = Text(f"{number:>2}. ", style="bold")
        title = result.display_title or result.title
        head.append(clean(title) or clean(result.url) or "(untitled)", style="bold")
        if result.kind != "page":
            head.append(f"  [{result.kind}]", style="magenta")
        console.print(head)
        meta = [clean(result.site) if result.site else result.origin]
        if result.last_seen is not None:
            meta.append(present.relative_time(result.last_seen))
        if result.visit_count:
            meta.append(present.visits_text(result.visit_count))
        meta.append(f"id {result.id}")
        body = Text()
        if result.url:
            body.append(clean(result.url) + "\n", style="green")
        body.append(" · ".join(meta), style="dim")
        if result.snippet.strip():
            body.append("\n").append_text(_highlighted(result.snippet))
        for line in body.wrap(console, max(20, console.width - 4)):
            line.rstrip()
            console.print(Text("    ").append_text(line))
        console.print()
    footer = f"{len(page.results)} result{'s' if len(page.results) != 1 else ''} ({page.mode})"
    if page.next_cursor:
        footer += f"; more with --cursor {page.next_cursor}"
    console.print(Text(footer, style="dim"))
    for note in (page.notice, _lag_note(page)):
        if note:
            click.echo(f"Note: {note}", err=True)


@click.command()
@JSON_OPTION
@pass_app
def stats(app: App, as_json: bool) -> None:
    """How much is stored, where, how far the index is, and what was skipped.

    \b
    Examples:
      backtrail stats
      backtrail stats --json
    """
    result = app.memory().stats()
    if as_json:
        emit_json(result)
        return
    ledger, lag = result.ledger, result.lag
    table = Table(title="Backtrail", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("data directory", str(app.config.home))
    table.add_row(
        "ledger",
        f"{ledger.path} (schema {ledger.schema_version}, "
        f"{(ledger.db_bytes + ledger.wal_bytes) / 1e6:.1f} MB)",
    )
    for name in ("pages", "visits", "bookmarks", "highlights", "notes", "facts", "tabs"):
        table.add_row(name, f"{ledger.counts.get(name, 0):,}")
    table.add_row("last capture", when(ledger.last_capture_at))
    table.add_row("last visit", when(ledger.last_visit_at))
    index = result.index
    table.add_row(
        "index",
        f"{index.get('documents', 0):,} documents, "
        f"{index.get('documents_with_vectors', 0):,} with vectors, "
        f"{(index.get('disk_bytes') or 0) / 1e6:.1f} MB",
    )
    table.add_row("index lag", lag_text(lag, result.model))
    table.add_row("model", result.model)
    skipped = ", ".join(f"{rule} {count:,}" for rule, count in result.skipped.items())
    table.add_row("not captured", f"by rule: {skipped}" if skipped else "nothing skipped")
    stdout_console().print(table)


COMMANDS: list[click.Command] = [search, stats]
