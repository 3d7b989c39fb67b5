"""``backtrail config``: list, read and change settings (the data directory's config file),
and ``backtrail config exclusions``: the pages never captured (kept in the ledger, so
every process and browser applies them)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from backtrail.cli.common import (
    JSON_OPTION,
    App,
    emit_json,
    jsonable,
    new_table,
    pass_app,
    stdout_console,
)
from backtrail.config import CONFIG_FILENAMES, ENV_PREFIX, SETTINGS, Config
from backtrail.errors import InvalidInput

__all__ = ["COMMANDS"]


@click.group("config", invoke_without_command=True)
@click.pass_context
def config_group(ctx: click.Context) -> None:
    """Show and change settings (stored in config.toml in the data directory), and the
    pages never captured (`backtrail config exclusions`).

    Environment variables BACKTRAIL_<NAME> override the file for one run.

    \b
    Examples:
      backtrail config                      # every setting with its value and help
      backtrail config get search_limit
      backtrail config set embeddings false
      backtrail config unset embeddings
      backtrail config exclusions add bank.example.com
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(config_list)


class _SettingName(click.Choice):
    """A setting's name; ``exclusions`` gets a pointer to where they are set."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "exclusions":
            self.fail("exclusions are rules, not one setting: see `backtrail config exclusions "
                      "--help` (e.g. `backtrail config exclusions add example.com`)", param, ctx)
        return super().convert(value, param, ctx)


@config_group.command("list")
@JSON_OPTION
@pass_app
def config_list(app: App, as_json: bool = False) -> None:
    """Every setting: value, default and what it does."""
    described = app.config.describe()
    if as_json:
        emit_json(described)
        return
    table = new_table("setting", "value", "default", "meaning")
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
@click.argument("name", type=_SettingName([s.name for s in SETTINGS]), metavar="NAME")
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
    "name", type=_SettingName([s.name for s in SETTINGS if s.name != "data_dir"]), metavar="NAME"
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
    write_setting(home, name, jsonable(getattr(parsed, name)))
    click.echo(f"{name} = {_show(jsonable(getattr(parsed, name)))}")
    overridden = f"{ENV_PREFIX}{name.upper()}"
    if overridden in os.environ:
        click.echo(f"Note: {overridden} is set and overrides this while it is.", err=True)


@config_group.command("unset")
@click.argument(
    "name", type=_SettingName([s.name for s in SETTINGS if s.name != "data_dir"]), metavar="NAME"
)
@pass_app
def config_unset(app: App, name: str) -> None:
    """Remove setting NAME from the config file (back to its default)."""
    home = app.config.home
    write_setting(home, name, None)
    click.echo(f"{name} = {_show(jsonable(getattr(Config.load(home), name)))} (default)")


@config_group.group("exclusions", invoke_without_command=True)
@JSON_OPTION
@click.pass_context
def exclusions_group(ctx: click.Context, as_json: bool) -> None:
    """Pages Backtrail never captures: the rules every browser, the native host and every
    MCP server apply (stored in the ledger). Until you change them they are the built-in
    list of sign-in, mail, banking, password-manager and checkout pages; `add` starts
    from that list. The extension's options page keeps the browser's own list as well,
    and both apply.

    \b
    Rules (case-insensitive):
      example.com                  the site and its subdomains
      login.*  *.example.com       a host pattern
      */private/*                  a pattern over host and path
      https://example.com/x/*      a pattern over the whole address

    \b
    Examples:
      backtrail config exclusions                  # the rules in force
      backtrail config exclusions add bank.example.com '*/checkout*'
      backtrail config exclusions remove bank.example.com
      backtrail config exclusions reset            # back to the built-in list
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(exclusions_list, as_json=as_json)


@exclusions_group.command("list")
@JSON_OPTION
@pass_app
def exclusions_list(app: App, as_json: bool = False) -> None:
    """The exclusion rules in force, one per line."""
    _show_exclusions(app.memory().capture_settings(), as_json)


@exclusions_group.command("add")
@click.argument("rules", nargs=-1, required=True, metavar="RULE...")
@JSON_OPTION
@pass_app
def exclusions_add(app: App, rules: tuple[str, ...], as_json: bool) -> None:
    """Never capture pages matching RULE (nothing changes if one rule is invalid)."""
    memory = app.memory()
    current = memory.capture_settings().exclusions
    _show_exclusions(memory.set_exclusions([*current, *rules]), as_json)


@exclusions_group.command("remove")
@click.argument("rules", nargs=-1, required=True, metavar="RULE...")
@JSON_OPTION
@pass_app
def exclusions_remove(app: App, rules: tuple[str, ...], as_json: bool) -> None:
    """Capture pages matching RULE again (a built-in rule too)."""
    memory = app.memory()
    settings = memory.capture_settings()
    for rule in rules:
        settings = memory.remove_exclusion(rule)
    _show_exclusions(settings, as_json)


@exclusions_group.command("reset")
@JSON_OPTION
@pass_app
def exclusions_reset(app: App, as_json: bool) -> None:
    """Back to the built-in list."""
    _show_exclusions(app.memory().set_exclusions(None), as_json)


def _show_exclusions(settings: Any, as_json: bool) -> None:
    if as_json:
        emit_json({"rules": settings.exclusions, "built_in": settings.default_exclusions})
        return
    for rule in settings.exclusions:
        click.echo(rule)
    which = "the built-in list" if settings.default_exclusions else "your list"
    click.echo(f"({len(settings.exclusions)} rules: {which})", err=True)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "(none)" if value is None else str(value)


def write_setting(home: Path, name: str, value: Any) -> None:
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


COMMANDS: list[click.Command] = [config_group]
