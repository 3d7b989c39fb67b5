"""The data commands of ``backtrail``: search, stats, import, export, forget, index,
reindex, config, facts, events and doctor (registered by :mod:`backtrail.cli`).

Each command parses its options, calls the service (:class:`~backtrail.memory.Memory`,
:mod:`backtrail.importers`, :mod:`backtrail.export`, :mod:`backtrail.doctor`) and prints:
rich tables on a terminal, plain text otherwise, JSON with ``--json``. Long work reports
progress on standard error and stops cleanly on Ctrl-C.
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from backtrail import doctor as doctor_checks
from backtrail import export as exporting
from backtrail import importers
from backtrail.cli_common import (
    DATE,
    EXIT_FAILURE,
    App,
    clean,
    emit_json,
    is_interactive,
    jsonable,
    pass_app,
    stdout_console,
    when,
)
from backtrail.config import CONFIG_FILENAMES, ENV_PREFIX, SETTINGS, Config
from backtrail.errors import InvalidInput
from backtrail.memory import SEARCH_KINDS, SearchPage
from backtrail.progress import ProgressReporter

__all__ = ["COMMANDS"]


class UsageProblem(click.ClickException):
    """A misuse the command can explain in one line (exit code 2)."""

    exit_code = 2


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
_MARK = re.compile(r"\*\*(.+?)\*\*")


def _progress() -> ProgressReporter:
    """Progress on stderr (a bar on a terminal, log lines otherwise)."""
    return ProgressReporter()


def _table(*headers: str) -> Table:
    """A table whose cells wrap (long paths and URLs are folded, never cut)."""
    table = Table()
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _lag_note(page: SearchPage) -> str | None:
    lag = page.lag
    if lag.ledger_seq and (lag.rebuilding_text or lag.text):
        return "the index is catching up with recent changes; run `backtrail index` to finish"
    return None


# ----------------------------------------------------------------------- search


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
    if not page.results:
        console.print(Text(f"No results for {clean(query)!r}."))
    for number, result in enumerate(page.results, 1):
        head = Text(f"{number:>2}. ", style="bold")
        head.append(clean(result.title) or clean(result.url) or "(untitled)", style="bold")
        if result.kind != "page":
            head.append(f"  [{result.kind}]", style="magenta")
        console.print(head)
        meta = [clean(result.domain) if result.domain else result.origin]
        if result.last_seen is not None:
            meta.append(f"last seen {when(result.last_seen)}")
        if result.visit_count:
            meta.append(f"{result.visit_count} visit{'s' if result.visit_count != 1 else ''}")
        meta.append(f"score {result.score:.3f}")
        body = Text()
        if result.url:
            body.append(clean(result.url) + "\n", style="green")
        body.append(" · ".join(meta) + "\n", style="dim")
        body.append_text(_highlighted(result.snippet))
        for line in body.wrap(console, max(20, console.width - 4)):
            line.rstrip()
            console.print(Text("    ").append_text(line))
        console.print()
    footer = f"{len(page.results)} result{'s' if len(page.results) != 1 else ''} ({page.mode})"
    if page.next_cursor:
        footer += f"; more with --cursor {page.next_cursor}"
    console.print(Text(footer, style="dim"))
    note = _lag_note(page)
    if note:
        click.echo(f"Note: {note}", err=True)


# ------------------------------------------------------------------------ stats


@click.command()
@JSON_OPTION
@pass_app
def stats(app: App, as_json: bool) -> None:
    """How much is stored, where, and how far the index is.

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
    table.add_row("index lag", _lag_text(lag, result.model))
    table.add_row("model", result.model)
    stdout_console().print(table)


def _lag_text(lag: Any, model: str) -> str:
    if lag.ledger_seq == 0:
        return "nothing to index yet"
    text = (
        "rebuilding"
        if lag.rebuilding_text
        else ("up to date" if not lag.text else f"{lag.text:,} changes behind")
    )
    vectors = (
        "rebuilding"
        if lag.rebuilding_vectors
        else ("up to date" if not lag.vectors else f"{lag.vectors:,} changes behind")
    )
    return f"text {text}; embeddings {'off' if model == 'disabled' else vectors}"


# ----------------------------------------------------------------------- import

BROWSER_OPTION = click.option(
    "--browser",
    required=True,
    type=click.Choice(importers.BROWSERS),
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
    chosen = importers.resolve_profile(browser, profile)
    # A bulk import makes one change per visit: index them in larger commits.
    batch = max(app.config.text_batch_changes, importers.INDEX_BATCH_CHANGES)
    memory = app.memory(text_batch_changes=batch)
    with _progress() as progress:
        if not no_index:
            # An index that exists before a bulk write catches up from the change feed,
            # which is much faster than the full scan a brand-new index starts with.
            memory.catch_up(vectors=False, progress=progress)
        result = importers.import_history(memory, chosen, since=since, progress=progress)
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
    chosen = importers.resolve_profile(browser, profile)
    memory = app.memory()
    with _progress() as progress:
        result = importers.import_bookmarks(memory, chosen)
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
@click.option("--browser", type=click.Choice(importers.BROWSERS), help="Only this browser.")
@JSON_OPTION
def import_profiles(browser: str | None, as_json: bool) -> None:
    """List the browser profiles found on this computer.

    \b
    Examples:
      backtrail import profiles
      backtrail import profiles --browser firefox --json
    """
    found = importers.find_profiles(browser)
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
    table = _table("browser", "profile", "default", "directory")
    for p in found:
        table.add_row(p.browser, clean(p.name), "yes" if p.default else "", str(p.directory))
    stdout_console().print(table)


# ----------------------------------------------------------------------- export


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(exporting.FORMATS),
    default="jsonl",
    show_default=True,
    help="jsonl: one JSON record per line; html: one browsable file.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="File to write ('-': standard output; default: "
    "backtrail-export-DATE.jsonl/.html in the current directory).",
)
@click.option("--no-text", is_flag=True, help="Leave out the pages' text (titles and URLs only).")
@pass_app
def export(app: App, fmt: str, output: Path | None, no_text: bool) -> None:
    """Export everything stored, as JSON Lines or one browsable HTML file.

    Pages (with their text unless --no-text), bookmarks, highlights, notes and facts.
    The file is written under a temporary name and renamed when complete.

    \b
    Examples:
      backtrail export --format html            # then open the file in a browser
      backtrail export --format jsonl -o - | gzip > backtrail.jsonl.gz
    """
    write = exporting.write_html if fmt == "html" else exporting.write_jsonl
    target = output or Path(f"backtrail-export-{datetime.now():%Y-%m-%d}.{fmt}")
    memory = app.memory()
    with _progress() as progress:
        if str(target) == "-":
            summary = write(memory, sys.stdout, include_text=not no_text, progress=progress)
            sys.stdout.flush()
        else:
            summary = _write_file(
                target, lambda out: write(memory, out, include_text=not no_text, progress=progress)
            )
    if str(target) != "-":
        counts = ", ".join(
            f"{n:,} {kind}{'s' if n != 1 else ''}" for kind, n in summary.counts.items() if n
        )
        click.echo(f"Wrote {target} ({counts or 'nothing stored yet'}).", err=True)


def _write_file(target: Path, write: Any) -> Any:
    """Write through a temporary file renamed into place, so a failed or interrupted
    export never leaves half a file."""
    target = target.expanduser()
    handle, temporary = tempfile.mkstemp(prefix=".backtrail-export-", dir=target.parent or ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            result = write(out)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return result


# ----------------------------------------------------------------------- forget


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


# ---------------------------------------------------------------- index, reindex


@click.command("index")
@click.option(
    "--text-only", is_flag=True, help="Make everything searchable by words; skip embeddings."
)
@JSON_OPTION
@pass_app
def index_command(app: App, text_only: bool, as_json: bool) -> None:
    """Bring the search index up to date: text first, then embeddings (the slow part).

    Ctrl-C stops after the current batch; run it again to continue.

    \b
    Examples:
      backtrail index
      backtrail index --text-only
    """
    memory = app.memory()
    with _progress() as progress:
        lag = memory.catch_up(vectors=not text_only, progress=progress)
    _finish_index(lag, as_json, memory.model_status())


@click.command()
@click.option(
    "--text-only", is_flag=True, help="Rebuild the text index; leave embeddings for later."
)
@click.option(
    "--restart", is_flag=True, help="Start over even if an earlier rebuild was interrupted."
)
@JSON_OPTION
@pass_app
def reindex(app: App, text_only: bool, restart: bool, as_json: bool) -> None:
    """Rebuild the search index from the ledger (after an upgrade, or if it is damaged).

    Search keeps working on what is indexed while it runs. Ctrl-C stops after the
    current batch; running `backtrail reindex` again resumes the interrupted rebuild.

    \b
    Examples:
      backtrail reindex
      backtrail reindex --text-only
    """
    memory = app.memory(embeddings=False) if text_only else app.memory()
    lag = memory.index_lag()
    vectors_pending = lag.rebuilding_vectors and memory.config.embeddings
    resuming = not restart and lag.ledger_seq and (lag.rebuilding_text or vectors_pending)
    with _progress() as progress:
        if resuming:
            progress.say("Resuming the interrupted rebuild (use --restart to start over).")
            lag = memory.catch_up(progress=progress)
        else:
            lag = memory.reindex(progress=progress)
    _finish_index(lag, as_json, memory.model_status())


def _finish_index(lag: Any, as_json: bool, model: str) -> None:
    if as_json:
        emit_json({"lag": lag, "model": model})
        return
    click.echo(f"Index: {_lag_text(lag, model)}.")
    if model != "disabled" and not lag.vectors_caught_up and lag.ledger_seq:
        reason = "" if model in ("ready", "not loaded") else f" (model: {model})"
        click.echo(f"Embeddings are not complete{reason}; `backtrail index` continues them.")


# ----------------------------------------------------------------------- config


@click.group("config", invoke_without_command=True)
@click.pass_context
def config_group(ctx: click.Context) -> None:
    """Show and change settings (stored in config.toml in the data directory).

    Environment variables BACKTRAIL_<NAME> override the file for one run.

    \b
    Examples:
      backtrail config                      # every setting with its value and help
      backtrail config get search_limit
      backtrail config set embeddings false
      backtrail config unset embeddings
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(config_list)


@config_group.command("list")
@JSON_OPTION
@pass_app
def config_list(app: App, as_json: bool = False) -> None:
    """Every setting: value, default and what it does."""
    described = app.config.describe()
    if as_json:
        emit_json(described)
        return
    table = _table("setting", "value", "default", "meaning")
    for item in described:
        changed = item["value"] != item["default"]
        table.add_row(
            item["name"],
            Text(_show(item["value"]), style="bold" if changed else ""),
            _show(item["default"]),
            item["help"],
        )
    stdout_console().print(table)


@config_group.command("get")
@click.argument("name", type=click.Choice([s.name for s in SETTINGS]), metavar="NAME")
@JSON_OPTION
@pass_app
def config_get(app: App, name: str, as_json: bool) -> None:
    """Print the value of setting NAME."""
    value = jsonable(getattr(app.config, name))
    if as_json:
        emit_json({"name": name, "value": value})
    else:
        click.echo(_show(value))


@config_group.command("set")
@click.argument(
    "name", type=click.Choice([s.name for s in SETTINGS if s.name != "data_dir"]), metavar="NAME"
)
@click.argument("value")
@pass_app
def config_set(app: App, name: str, value: str) -> None:
    """Set setting NAME to VALUE in the data directory's config file."""
    home = app.config.home
    try:  # the text form is parsed the way an environment variable's would be
        parsed = Config.load(home, environ={f"{ENV_PREFIX}{name.upper()}": value})
    except InvalidInput as error:
        raise InvalidInput(name, error.reason) from None
    _write_setting(home, name, jsonable(getattr(parsed, name)))
    click.echo(f"{name} = {_show(jsonable(getattr(parsed, name)))}")
    overridden = f"{ENV_PREFIX}{name.upper()}"
    if overridden in os.environ:
        click.echo(f"Note: {overridden} is set and overrides this while it is.", err=True)


@config_group.command("unset")
@click.argument(
    "name", type=click.Choice([s.name for s in SETTINGS if s.name != "data_dir"]), metavar="NAME"
)
@pass_app
def config_unset(app: App, name: str) -> None:
    """Remove setting NAME from the config file (back to its default)."""
    home = app.config.home
    _write_setting(home, name, None)
    click.echo(f"{name} = {_show(jsonable(getattr(Config.load(home), name)))} (default)")


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "(none)" if value is None else str(value)


def _write_setting(home: Path, name: str, value: Any) -> None:
    """Set (or with ``None`` remove) one setting in the config file. The new settings
    are validated first, and the file is replaced atomically, so it is never invalid."""
    existing = next((home / f for f in CONFIG_FILENAMES if (home / f).is_file()), None)
    toml = existing.suffix == ".toml" if existing else sys.version_info >= (3, 11)
    path = existing or home / ("config.toml" if toml else "config.json")
    values: dict[str, Any] = {}
    if existing is not None:
        raw = existing.read_text(encoding="utf-8")
        values = _toml_load(raw) if toml else json.loads(raw)
    if value is None:
        values.pop(name, None)
    else:
        values[name] = value
    Config.load(home, overrides=values, environ={})  # refuses a bad value before writing
    text = _toml_dump(values) if toml else json.dumps(values, indent=2) + "\n"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _toml_load(text: str) -> dict[str, Any]:
    import tomllib

    return dict(tomllib.loads(text))


def _toml_dump(values: dict[str, Any]) -> str:
    lines = ["# Backtrail settings; see `backtrail config` for every setting and its meaning."]
    for key, value in sorted(values.items()):
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, (int, float)):
            rendered = repr(value)
        else:
            rendered = json.dumps(str(value), ensure_ascii=False)
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------ facts


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
    table = _table("key", "value", "version", "by", "updated")
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
    table = _table("id", "when", "client", "action", "target", "details")
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


# ----------------------------------------------------------------------- events


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
    """Every audit event in id order. Memory has no audit-log reader yet, so this reads
    through the ledger API (read-only) until it does."""
    memory = app.memory()
    reader = getattr(memory, "list_events", None)
    if reader is None:
        from backtrail.store import Ledger

        cfg = app.config
        ledger = Ledger(
            cfg.ledger_path,
            client="cli",
            busy_timeout_ms=cfg.busy_timeout_ms,
            limits=cfg.limits(),
            synchronous=cfg.synchronous,
        )
        reader = ledger.list_events
    else:
        ledger = None
    try:
        after = 0
        while True:
            page = reader(action=action, target_type=target_type, after_id=after, limit=1000)
            yield from page
            if len(page) < 1000:
                return
            after = page[-1].id
    finally:
        if ledger is not None:
            ledger.close()


# ----------------------------------------------------------------------- doctor


@click.command()
@click.option("--no-model", is_flag=True, help="Do not load the embedding model (faster).")
@JSON_OPTION
@pass_app
def doctor(app: App, no_model: bool, as_json: bool) -> None:
    """Check that everything is installed and healthy.

    Looks at the data directory, the ledger's schema version, the index's health and
    lag, the model files and their sha256, the onnxruntime library, the native-host
    manifest of each browser, and the Claude Desktop configuration. Each problem comes
    with what to do; the exit code is 1 if anything needs fixing.

    \b
    Examples:
      backtrail doctor
      backtrail doctor --json
    """
    checks = doctor_checks.run_checks(app.data_dir, load_model=not no_model)
    failed = [c for c in checks if not c["ok"]]
    if as_json:
        emit_json({"ok": not failed, "checks": checks})
    else:
        table = _table("", "check", "detail")
        for item in checks:
            mark = Text("ok", style="green") if item["ok"] else Text("FAIL", style="bold red")
            detail = Text(clean(item["detail"]))
            if item["fix"]:
                detail.append(f"\nfix: {clean(item['fix'])}", style="yellow")
            table.add_row(mark, item["check"], detail)
        stdout_console().print(table)
        click.echo(
            f"{len(failed)} problem{'s' if len(failed) != 1 else ''} found."
            if failed
            else "Everything looks fine."
        )
    if failed:
        click.get_current_context().exit(EXIT_FAILURE)


COMMANDS: list[click.Command] = [
    search,
    stats,
    import_group,
    export,
    forget,
    index_command,
    reindex,
    config_group,
    facts_group,
    events,
    doctor,
]
