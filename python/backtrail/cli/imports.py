"""``backtrail import``: the history, bookmarks and profiles of the browsers on this computer,
and the memories of mcp-memory-bridge and BraveMCP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from backtrail.cli.common import (
    DATE,
    JSON_OPTION,
    App,
    clean,
    emit_json,
    new_table,
    pass_app,
    stdout_console,
)
from backtrail.cli.progress import ProgressReporter
from backtrail.service import importing, peer_import

__all__ = ["COMMANDS"]


BROWSER_OPTION = click.option(
    "--browser",
    required=True,
    type=click.Choice(importing.BROWSERS),
    help="Which browser's files to read.",
)


PROFILE_OPTION = click.option(
    "--profile",
    metavar="NAME|DIR",
    help="Profile name or directory name (see `backtrail import profiles`), or the path of a "
    "profile directory (default: the browser's default profile).",
)


@click.group("import")
def import_group() -> None:
    """Bring in what your browsers, mcp-memory-bridge or BraveMCP already hold.

    Browser files are read from a copy, so the browser may keep running; the other
    tools' databases are opened read-only. Importing again adds only what is new.
    """


@import_group.command("history")
@BROWSER_OPTION
@PROFILE_OPTION
@click.option("--since", type=DATE, help="Only visits at or after DATE (default: all).")
@click.option("--no-index", is_flag=True, help="Store the visits but leave indexing for later.")
@JSON_OPTION
@pass_app
def import_history(
    app: App, browser: str, profile: str | None, since: int | None, no_index: bool, as_json: bool
) -> None:
    """Import a browser's history: every visit with its original time.

    Chrome, Chromium, Brave and Edge keep it in the profile's `History` database,
    Firefox in `places.sqlite`. Titles become searchable right away; page text is
    captured later, when you visit pages with the extension installed.

    \b
    Examples:
      backtrail import history --browser chrome
      backtrail import history --browser firefox --profile default-release --since 2024-01-01
      backtrail import history --browser brave --profile ~/backup/Brave/Default
    """
    chosen = importing.resolve_profile(browser, profile)
    # A bulk import makes one change per visit: index them in larger commits.
    batch = max(app.config.text_batch_changes, importing.INDEX_BATCH_CHANGES)
    memory = app.memory(text_batch_changes=batch)
    with ProgressReporter() as progress:
        if not no_index:
            # An index that exists before a bulk write catches up from the change feed,
            # which is much faster than the full scan a brand-new index starts with.
            memory.catch_up(vectors=False, progress=progress)
        result = importing.import_history(memory, chosen, since=since, progress=progress)
        lag = None if no_index else memory.catch_up(vectors=False, progress=progress)
    if as_json:
        emit_json({"import": result, "profile_name": chosen.name, "lag": lag})
        return
    click.echo(
        f"Imported {result.added:,} new visits ({result.pages_created:,} new pages) from "
        f"{browser} profile {chosen.name!r} ({result.file})."
    )
    extra = [f"{result.skipped:,} already there or excluded"] if result.skipped else []
    if result.unsupported:
        extra.append(f"{result.unsupported:,} not web pages")
    if result.invalid:
        extra.append(f"{result.invalid:,} refused as invalid (see -v)")
    if extra:
        click.echo("Left out: " + ", ".join(extra) + ".")
    _index_outcome(lag, memory.config.embeddings)


def _index_outcome(lag: Any, embeddings: bool) -> None:
    if lag is None:
        click.echo("Not indexed yet: run `backtrail index` to make it searchable.")
    elif embeddings and lag.text_caught_up and not lag.vectors_caught_up and lag.ledger_seq:
        click.echo(
            "Titles are searchable now. Embeddings for meaning-based search follow in the "
            "background while the browser host or an MCP server runs, or run `backtrail index`."
        )
    elif lag.text_caught_up:
        click.echo("Everything is searchable now.")


@import_group.command("bookmarks")
@BROWSER_OPTION
@PROFILE_OPTION
@JSON_OPTION
@pass_app
def import_bookmarks(app: App, browser: str, profile: str | None, as_json: bool) -> None:
    """Import a browser's bookmarks, with their folders.

    The stored bookmarks of that profile become equal to the browser's: new ones are
    added, changed ones updated, deleted ones removed.

    \b
    Examples:
      backtrail import bookmarks --browser chrome
      backtrail import bookmarks --browser firefox --json
    """
    chosen = importing.resolve_profile(browser, profile)
    memory = app.memory()
    with ProgressReporter() as progress:
        result = importing.import_bookmarks(memory, chosen)
        lag = memory.catch_up(vectors=False, progress=progress)
    if as_json:
        emit_json({"import": result, "profile_name": chosen.name, "lag": lag})
        return
    click.echo(
        f"Bookmarks of {browser} profile {chosen.name!r}: {result.added:,} added, "
        f"{result.updated:,} updated, {result.removed:,} removed, {result.unchanged:,} unchanged"
        + (f", {result.skipped:,} skipped (not web pages)" if result.skipped else "")
        + "."
    )


DATABASE = click.argument("path", metavar="PATH", type=click.Path(path_type=Path, dir_okay=False))


@import_group.command("mcp-memory-bridge")
@DATABASE
@click.option(
    "--overwrite", is_flag=True,
    help="Replace facts that hold another value here (default: report and keep them).",
)  # fmt: skip
@JSON_OPTION
@pass_app
def import_memory_bridge(app: App, path: Path, overwrite: bool, as_json: bool) -> None:
    """Import mcp-memory-bridge's facts (PATH is its memory.db) with their history.

    Every fact keeps its value, writer and time, and its history (writes, refused
    compare-and-swaps, deletes, reads and searches) joins the audit trail, so
    `memory_get` and `memory_history` answer as mcp-memory-bridge did. A key that
    already holds another value here is reported and kept unless --overwrite.

    \b
    Examples:
      backtrail import mcp-memory-bridge ~/mcp-memory-bridge/memory.db
      backtrail import mcp-memory-bridge memory.db --overwrite --json
    """
    memory = app.memory()
    with ProgressReporter() as progress:
        result = peer_import.import_memory_bridge(
            memory, path, overwrite=overwrite, progress=progress
        )
        lag = memory.catch_up(vectors=False, progress=progress)
    if as_json:
        emit_json({"import": result, "lag": lag})
        return
    click.echo(
        f"Facts from {result.file}: {result.facts:,} keys, {result.created:,} new, "
        f"{result.updated:,} replaced, {result.unchanged:,} already here"
        + (f", {result.deleted:,} deleted" if result.deleted else "")
        + (f", {result.history_only:,} deleted there (history only)" if result.history_only else "")
        + f"; {result.events:,} history events added."
    )
    if result.conflicts:
        shown = ", ".join(repr(key) for key in result.conflicts[:20])
        more = f" and {len(result.conflicts) - 20:,} more" if len(result.conflicts) > 20 else ""
        click.echo(
            f"Kept as they are ({len(result.conflicts):,} hold another value here; "
            f"--overwrite replaces them): {clean(shown)}{more}."
        )
    if result.invalid:
        click.echo(f"Refused: {len(result.invalid):,} keys (see -v).")
    if result.events_left_out:
        click.echo(f"Left out: {result.events_left_out:,} events about no fact.")


@import_group.command("bravemcp")
@DATABASE
@click.option("--no-index", is_flag=True, help="Store everything but leave indexing for later.")
@JSON_OPTION
@pass_app
def import_bravemcp(app: App, path: Path, no_index: bool, as_json: bool) -> None:
    """Import BraveMCP's memory (PATH is its brave-mcp.db).

    Pages keep their title, visit count and first and last visit (the visits between are
    spread evenly, as BraveMCP keeps only the count), their stored text becomes
    searchable like captured text (where a page has no text here yet), summaries become
    notes by `bravemcp`, and highlights, notes and bookmarks keep their times.

    \b
    Examples:
      backtrail import bravemcp ~/BraveMCP/storage/brave-mcp.db
      backtrail import bravemcp brave-mcp.db --no-index --json
    """
    batch = max(app.config.text_batch_changes, importing.INDEX_BATCH_CHANGES)
    memory = app.memory(text_batch_changes=batch)
    with ProgressReporter() as progress:
        if not no_index:
            memory.catch_up(vectors=False, progress=progress)
        result = peer_import.import_bravemcp(memory, path, progress=progress)
        lag = None if no_index else memory.catch_up(vectors=False, progress=progress)
    if as_json:
        emit_json({"import": result, "lag": lag})
        return
    added, marks = result.added, result.bookmarks
    click.echo(
        f"From {result.file}: {added.get('pages', 0):,} new pages, "
        f"{added.get('visits', 0):,} visits, {added.get('texts', 0):,} page texts, "
        f"{added.get('summaries', 0):,} summaries, {added.get('highlights', 0):,} highlights, "
        f"{added.get('notes', 0):,} notes; bookmarks {marks.get('added', 0):,} added, "
        f"{marks.get('updated', 0):,} updated, {marks.get('removed', 0):,} removed."
    )
    if result.left_out:
        labels = {"not_web": "not web pages", "excluded": "excluded by a rule",
                  "invalid": "refused as invalid (see -v)", "no_page": "highlights of no page",
                  "no_time": "pages without a time",
                  "visits_over_limit": "visits past the limit of one page"}  # fmt: skip
        parts = [f"{n:,} {labels.get(k, k)}" for k, n in sorted(result.left_out.items())]
        click.echo("Left out: " + ", ".join(parts) + ".")
    _index_outcome(lag, memory.config.embeddings)


@import_group.command("profiles")
@click.option("--browser", type=click.Choice(importing.BROWSERS), help="Only this browser.")
@JSON_OPTION
def import_profiles(browser: str | None, as_json: bool) -> None:
    """List the browser profiles found on this computer.

    \b
    Examples:
      backtrail import profiles
      backtrail import profiles --browser firefox --json
    """
    found = importing.find_profiles(browser)
    if as_json:
        emit_json(
            [
                {
                    "browser": p.browser,
                    "name": p.name,
                    "directory": p.directory,
                    "default": p.default,
                    "history": p.history_file.is_file(),
                    "bookmarks": p.bookmarks_file.is_file(),
                }
                for p in found
            ]
        )
        return
    if not found:
        click.echo("No browser profiles found.")
        return
    table = new_table("browser", "profile", "default", "directory")
    for p in found:
        table.add_row(p.browser, clean(p.name), "yes" if p.default else "", str(p.directory))
    stdout_console().print(table)


COMMANDS: list[click.Command] = [import_group]
