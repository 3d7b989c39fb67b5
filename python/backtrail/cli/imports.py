"""``backtrail import``: the history, bookmarks and profiles of the browsers on this computer."""

from __future__ import annotations

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
from backtrail.service import importing

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
    """Bring in the history and bookmarks your browsers already have.

    Files are read from a copy, so the browser may keep running. Importing again adds
    only what is new.
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
