"""``backtrail facts`` and ``backtrail events``: what AI clients saved, and the audit log of
who changed what."""

from __future__ import annotations

import collections
import json
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
    when,
)

__all__ = ["COMMANDS"]


@click.group("facts")
def facts_group() -> None:
    """Inspect the facts AI clients saved (key/value notes with a version per key).

    \b
    Examples:
      backtrail facts list user.
      backtrail facts get user.editor
      backtrail facts history user.editor --include-reads
    """


@facts_group.command("list")
@click.argument("prefix", default="")
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Most facts to list.",
)
@JSON_OPTION
@pass_app
def facts_list(app: App, prefix: str, limit: int, as_json: bool) -> None:
    """List facts whose key starts with PREFIX (all facts without one).

    \b
    Examples:
      backtrail facts list
      backtrail facts list project/ --json
    """
    facts = app.memory().list_facts(prefix, limit=limit)
    if as_json:
        emit_json(facts)
        return
    if not facts:
        click.echo("No facts" + (f" whose key starts with {prefix!r}." if prefix else "."))
        return
    table = new_table("key", "value", "version", "by", "updated")
    for fact in facts:
        table.add_row(
            clean(fact.key),
            clean(fact.value)[:200],
            str(fact.version),
            clean(fact.client),
            when(fact.updated_at),
        )
    stdout_console().print(table)


@facts_group.command("get")
@click.argument("key")
@JSON_OPTION
@pass_app
def facts_get(app: App, key: str, as_json: bool) -> None:
    """Print the value of fact KEY (exit code 3 if there is none).

    \b
    Examples:
      backtrail facts get user.editor
      backtrail facts get user.editor --json     # with version, author and times
    """
    fact = app.memory().get_fact(key)
    if as_json:
        emit_json(fact)
    else:
        click.echo(fact.value)


@facts_group.command("history")
@click.argument("key")
@click.option(
    "--include-reads",
    is_flag=True,
    help="Also show reads (recorded only while the log_reads setting is on).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=100,
    show_default=True,
    help="Most events to show.",
)
@JSON_OPTION
@pass_app
def facts_history(app: App, key: str, include_reads: bool, limit: int, as_json: bool) -> None:
    """Who set, changed or deleted fact KEY, and when (oldest first).

    \b
    Examples:
      backtrail facts history user.editor
      backtrail facts history user.editor --include-reads --json
    """
    events = app.memory().fact_history(key, limit=limit)
    if not include_reads:
        events = [event for event in events if not event.action.endswith(".read")]
    _print_events(events, as_json)


def _print_events(events: list[Any], as_json: bool) -> None:
    if as_json:
        emit_json(events)
        return
    if not events:
        click.echo("No events.")
        return
    table = new_table("id", "when", "client", "action", "target", "details")
    for event in events:
        target = f"{event.target_type} {clean(event.target or '')}".strip()
        details = json.dumps(event.details, ensure_ascii=False) if event.details else ""
        table.add_row(
            str(event.id),
            when(event.at, seconds=True),
            clean(event.client),
            event.action,
            target,
            clean(details),
        )
    stdout_console().print(table)


@click.command()
@click.option("--since", type=DATE, help="Only events at or after DATE.")
@click.option("--until", type=DATE, help="Only events before DATE.")
@click.option("--client", help="Only events by this client (e.g. cli, mcp:claude, host).")
@click.option("--action", help="Only this action (e.g. fact.set, page.capture, forget).")
@click.option(
    "--type", "target_type", help="Only events about this kind of record (e.g. fact, page)."
)
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=100,
    show_default=True,
    help="Show at most the latest N matching events.",
)
@JSON_OPTION
@pass_app
def events(
    app: App,
    since: int | None,
    until: int | None,
    client: str | None,
    action: str | None,
    target_type: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """The audit log: who changed what, and when (oldest first).

    Events name records by id and carry counts and outcomes, never captured content.

    \b
    Examples:
      backtrail events --since 1d
      backtrail events --client mcp:claude --action fact.set --json
    """
    latest: collections.deque[Any] = collections.deque(maxlen=limit)
    for event in _all_events(app, action, target_type):
        if since is not None and event.at < since or until is not None and event.at >= until:
            continue
        if client is not None and event.client != client:
            continue
        latest.append(event)
    _print_events(list(latest), as_json)


def _all_events(app: App, action: str | None, target_type: str | None) -> Any:
    """Every audit event in id order, a thousand at a time."""
    memory = app.memory()
    after = 0
    while True:
        page = memory.events(action=action, target_type=target_type, after_id=after, limit=1000)
        yield from page
        if len(page) < 1000:
            return
        after = page[-1].id


COMMANDS: list[click.Command] = [facts_group, events]
