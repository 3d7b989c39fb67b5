"""``backtrail token``: the bearer tokens kept in the ledger, which every
``backtrail mcp --http`` node on it checks on each request."""

from __future__ import annotations

import os
from pathlib import Path

import click

from backtrail.cli.common import (
    JSON_OPTION,
    App,
    emit_json,
    new_table,
    pass_app,
    stdout_console,
    when,
)

__all__ = ["COMMANDS"]

_SCOPES = ("device", "read", "write")


@click.group("token")
def token_group() -> None:
    """Make, list and revoke the tokens servers accept (kept in the ledger).

    Every `backtrail mcp --http` node on this ledger checks a presented token here on
    each request: a new token works at once, a revoked one is refused at once, on every
    node. The ledger keeps only each token's SHA-256 digest. Scopes: `write` (every MCP
    tool), `read` (MCP tools that change nothing), `device` (only POST /host: a
    computer's browser capturing into the server, and its popup's search).

    \b
    Examples:
      backtrail token add laptop --scope device --out laptop.token
      backtrail token add claude-work --scope write
      backtrail token list
      backtrail token revoke laptop
    """


@token_group.command("add")
@click.argument("client_id")
@click.option(
    "--scope",
    type=click.Choice(_SCOPES),
    required=True,
    help="What the token allows: device (POST /host only), read or write (MCP tools).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the token to this new file (mode 600) instead of printing it. "
    "Example: --out laptop.token",
)
@pass_app
def token_add(app: App, client_id: str, scope: str, out: Path | None) -> None:
    """Make a token for CLIENT_ID; it is shown (or written) once, never again.

    CLIENT_ID is what the audit log attributes the token's writes to: 1-64 letters,
    digits or ._:@/+-.

    \b
    Examples:
      backtrail token add laptop --scope device --out ~/laptop.token
      backtrail token add dashboard --scope read
    """
    if out is not None and out.exists():
        raise click.UsageError(f"{out} exists; choose a new file for the token")
    made = app.memory().add_token(client_id, scope=scope)
    if out is None:
        click.echo(made.token)
    else:
        _write_secret(out, made.token + "\n")
    click.echo(
        f"token for {client_id} (scope {scope}, digest {made.record.digest[:12]}) "
        + (f"written to {out}" if out is not None else "printed above; it is not shown again"),
        err=True,
    )


def _write_secret(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)


@token_group.command("list")
@click.option("--active", "active_only", is_flag=True, help="Leave out revoked tokens.")
@JSON_OPTION
@pass_app
def token_list(app: App, active_only: bool, as_json: bool) -> None:
    """List the tokens: client, scope, digest prefix, when made and revoked.

    \b
    Examples:
      backtrail token list
      backtrail token list --active --json
    """
    tokens = app.memory().list_tokens(include_revoked=not active_only)
    if as_json:
        emit_json(tokens)
        return
    if not tokens:
        click.echo("No tokens. Make one with: backtrail token add CLIENT_ID --scope device")
        return
    table = new_table("client", "scope", "digest", "created", "revoked")
    for token in tokens:
        table.add_row(token.client_id, token.scope, token.digest[:12], when(token.created_at),
                      when(token.revoked_at) if token.revoked_at is not None else "")  # fmt: skip
    stdout_console().print(table)


@token_group.command("revoke")
@click.argument("which")
@pass_app
def token_revoke(app: App, which: str) -> None:
    """Revoke the tokens of client WHICH, or the token whose digest starts with WHICH.

    Every node refuses a revoked token from its next request on.

    \b
    Examples:
      backtrail token revoke laptop
      backtrail token revoke 3f9a1c0e77b2
    """
    revoked = app.memory().revoke_tokens(which)
    for token in revoked:
        click.echo(f"revoked {token.client_id} ({token.scope}, digest {token.digest[:12]})")


COMMANDS: list[click.Command] = [token_group]
