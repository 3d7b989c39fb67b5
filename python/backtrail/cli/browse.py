"""``backtrail recent`` and ``backtrail show``: the pages you read lately, and one page's
stored text (what the assistant's ``get_timeline`` and ``get_page`` tools read)."""

from __future__ import annotations

import click
from rich.text import Text

from backtrail.cli.common import (
    DATE,
    JSON_OPTION,
    App,
    clean,
    emit_json,
    pass_app,
    stdout_console,
)
from backtrail.service import present

__all__ = ["COMMANDS"]


@click.command()
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True,
              help="Pages to list.")  # fmt: skip
@click.option("--since", type=DATE, help="Only pages last read at or after DATE.")
@click.option("--domain", help="Only this site (and its subdomains).")
@JSON_OPTION
@pass_app
def recent(app: App, limit: int, since: int | None, domain: str | None, as_json: bool) -> None:
    """The pages you read most recently, newest first.

    \b
    Examples:
      backtrail recent
      backtrail recent --limit 50 --since 7d
      backtrail recent --domain docs.python.org --json
    """
    memory = app.memory()
    entries = memory.timeline(since, None, domain=domain, limit=limit)
    if as_json:
        emit_json(entries)
        return
    console = stdout_console()
    if not entries:
        console.print(Text("No pages read in that window."))
    for entry in entries:
        title, site = memory.presented_title(entry.title, entry.domain)
        line = Text(f"{entry.page_id:>6}  ", style="dim")
        line.append(clean(title) or clean(entry.url), style="bold")
        meta = [clean(site or entry.domain), present.relative_time(entry.last_seen),
                present.visits_text(entry.visit_count)]  # fmt: skip
        line.append("  " + " · ".join(m for m in meta if m), style="dim")
        console.print(line)


@click.command()
@click.argument("page_id", type=click.IntRange(min=1), metavar="ID")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Character to start at.")
@click.option("--chars", type=click.IntRange(1, 100_000), default=8_000, show_default=True,
              help="Characters of text to show.")  # fmt: skip
@JSON_OPTION
@pass_app
def show(app: App, page_id: int, offset: int, chars: int, as_json: bool) -> None:
    """One page: its address, when and how often you read it, and its stored text
    (ID is the id `search` and `recent` print).

    \b
    Examples:
      backtrail show 42
      backtrail show 42 --offset 8000
    """
    memory = app.memory()
    page = memory.get_page(page_id=page_id, offset=offset, length=chars)
    if as_json:
        emit_json(page)
        return
    title, site = memory.presented_title(page.title, page.domain)
    console = stdout_console()
    console.print(Text(clean(title) or clean(page.url), style="bold"))
    console.print(Text(clean(page.url), style="green"))
    meta = [clean(site or page.domain), f"last read {present.relative_time(page.last_seen)}",
            present.visits_text(page.visit_count)]  # fmt: skip
    console.print(Text(" · ".join(m for m in meta if m), style="dim"))
    console.print()
    if not page.total_chars:
        console.print(Text("(no text was captured for this page; only its visits are known)"))
        return
    console.print(Text(clean(page.text, one_line=False)))
    end = page.offset + len(page.text)
    more = f"; more with --offset {page.next_offset}" if page.next_offset is not None else ""
    click.echo(f"[characters {page.offset:,}-{end:,} of {page.total_chars:,}{more}]", err=True)


COMMANDS: list[click.Command] = [recent, show]
