"""``backtrail forget``: remove pages and what came with them from the ledger, the index and the
vectors."""

from __future__ import annotations

import click

from backtrail.cli.common import (
    DATE,
    EXIT_FAILURE,
    JSON_OPTION,
    App,
    UsageProblem,
    clean,
    emit_json,
    is_interactive,
    pass_app,
    when,
)

__all__ = ["COMMANDS"]


@click.command()
@click.option(
    "--url", help="One page (every form of its URL), with its visits, highlights, notes, bookmarks."
)
@click.option("--domain", help="A whole site and its subdomains.")
@click.option("--since", type=DATE, help="Browsing from DATE on (with --until: a time range).")
@click.option("--until", type=DATE, help="Browsing before DATE (with --since: a time range).")
@click.option(
    "--everything", is_flag=True, help="All browsing data (facts too with --include-facts)."
)
@click.option(
    "--include-facts", is_flag=True, help="With --everything: also the facts AI clients saved."
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@JSON_OPTION
@pass_app
def forget(
    app: App,
    url: str | None,
    domain: str | None,
    since: int | None,
    until: int | None,
    everything: bool,
    include_facts: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Remove browsing data for good, from the ledger, the index and the vectors.

    Choose exactly one of --url, --domain, --since/--until or --everything. The audit
    log keeps that a deletion happened (with counts), never what was deleted.

    \b
    Examples:
      backtrail forget --domain bank.example.com
      backtrail forget --since 2024-05-01T09:00 --until 2024-05-01T11:00 --yes
      backtrail forget --url "https://example.com/private/page"
    """
    chosen = [
        name
        for name, given in (
            ("url", url),
            ("domain", domain),
            ("time range", since is not None or until is not None),
            ("everything", everything),
        )
        if given
    ]
    if len(chosen) != 1:
        raise UsageProblem("choose exactly one of --url, --domain, --since/--until, --everything")
    if include_facts and not everything:
        raise UsageProblem("--include-facts only goes with --everything")
    what = _forget_description(url, domain, since, until, everything, include_facts)
    if not yes:
        if not is_interactive():
            raise UsageProblem(f"refusing to forget {what} without confirmation: add --yes")
        if not click.confirm(f"Forget {what}? This cannot be undone", default=False, err=True):
            click.echo("Nothing was forgotten.", err=True)
            click.get_current_context().exit(EXIT_FAILURE)
    report = app.memory().forget(
        url=url,
        domain=domain,
        since=since,
        until=until,
        everything=everything,
        include_facts=include_facts,
    )
    if as_json:
        emit_json(report)
        return
    removed = ", ".join(f"{n:,} {table}" for table, n in report.counts.items() if n)
    click.echo(f"Forgot {what}: {removed or 'nothing matched'}.")
    if not (report.ledger_purged and report.index_purged):
        click.echo(
            "Some copies will be purged once other Backtrail processes release their "
            "files (run `backtrail doctor` to check).",
            err=True,
        )


def _forget_description(
    url: str | None,
    domain: str | None,
    since: int | None,
    until: int | None,
    everything: bool,
    include_facts: bool,
) -> str:
    if url:
        return f"the page {clean(url)}"
    if domain:
        return f"everything from {clean(domain)} and its subdomains"
    if everything:
        return "all browsing data" + (" and all facts" if include_facts else "")
    start = when(since) if since is not None else "the beginning"
    end = when(until) if until is not None else "now"
    return f"all browsing from {start} until {end}"


COMMANDS: list[click.Command] = [forget]
