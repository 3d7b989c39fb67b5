"""The ``backtrail mcp`` and ``backtrail claude-config`` commands: flags in, then
:func:`backtrail.mcp_server.main` (which reads the environment too) or the client
configuration of :mod:`backtrail.cli.client_config`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["COMMANDS", "mcp_command", "claude_config_command"]

@click.command("mcp")
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    default=False,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (also: "
    "MCP_TRANSPORT=http). Needs MCP_AUTH_TOKEN or --token-file.",
)
@click.option(
    "--host",
    default=None,
    metavar="ADDRESS",
    help="Address --http listens on; default 127.0.0.1 (MCP_HTTP_HOST). Other "
    "addresses also need --allowed-host. Example: --host 0.0.0.0",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port for --http; default 8765 (MCP_HTTP_PORT); 0 picks a free one and "
    "logs it. Example: --port 9000",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="JSON file of tokens, each with a client_id and a scope (read or write): "
    "the server assigns identities (BACKTRAIL_MCP_TOKEN_FILE). Example: "
    "--token-file ~/.config/backtrail/tokens.json",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Also accept this Host header (repeatable; MCP_ALLOWED_HOSTS is a comma "
    "list). Localhost names are always accepted. Example: --allowed-host mybox.lan:8765",
)
@click.option(
    "--client-id",
    default=None,
    help="Attribute this server's writes and reads to this client (MCP_CLIENT_ID); "
    "default: the name the MCP client sends. Example: --client-id cursor",
)
@click.option(
    "--preload-model",
    is_flag=True,
    default=False,
    help="Load the embedding model right after start, not on the first search "
    "(MCP_PRELOAD_MODEL=1).",
)
@click.option(
    "--lean",
    is_flag=True,
    default=False,
    help="Lean mode: embeddings off, keyword search only, no model in memory (MCP_EMBEDDINGS=off).",
)
@click.option(
    "--log-calls",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append a JSON line per tool call (client, tool, arguments, outcome, "
    "time; no secrets) to this file (MCP_DEBUG_LOG). Example: --log-calls "
    "/tmp/backtrail-calls.jsonl",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory to serve (default: $BACKTRAIL_HOME or the per-user one).",
)
def mcp_command(
    use_http: bool, host: str | None, port: int | None, token_file: Path | None,
    allowed_hosts: tuple[str, ...], client_id: str | None, preload_model: bool, lean: bool,
    log_calls: Path | None, data_dir: Path | None,
) -> None:  # fmt: skip
    """Serve your Backtrail memory to AI assistants over MCP.

    Without options it speaks stdio, which is what Claude Desktop and Cursor launch
    (any number of these servers may share one data directory). With --http one
    long-running server takes any number of clients; it refuses to start without a
    bearer token (exit status 2).

    \b
    Examples:
      backtrail mcp
      backtrail mcp --lean --client-id cursor
      MCP_AUTH_TOKEN=$(cat ~/.backtrail/token) backtrail mcp --http --port 8765
      backtrail mcp --http --token-file tokens.json --allowed-host mybox.lan:8765
    """
    from backtrail import mcp_server

    mcp_server.main(
        data_dir=data_dir, lean=lean, transport="http" if use_http else None, host=host,
        port=port, token_file=token_file, allowed_hosts=allowed_hosts, client_id=client_id,
        preload_model=True if preload_model else None, call_log=log_calls,
        device_endpoint=_device_endpoint,
    )  # fmt: skip


def _device_endpoint(memory: Any, config: Any) -> Any:
    """``POST /host`` (imported only when an HTTP server starts)."""
    from backtrail.native_host import remote

    return remote.endpoint(memory, config)


@click.command("claude-config")
@click.option(
    "--write",
    is_flag=True,
    help="Merge the entry into the configuration file (keeping everything else, "
    "with a .bak copy) instead of printing it.",
)
@click.option(
    "--cursor",
    "for_cursor",
    is_flag=True,
    help="Cursor's ~/.cursor/mcp.json instead of Claude Desktop's file.",
)
@click.option(
    "--config-path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The configuration file to write (default: the client's usual place). "
    "Example: --config-path ./.cursor/mcp.json",
)
@click.option(
    "--name",
    default="backtrail",
    show_default=True,
    help="Name of the server entry under mcpServers. Example: --name memory",
)
@click.option(
    "--client-id",
    default=None,
    help="MCP_CLIENT_ID the client is attributed as (default: claude-desktop, or "
    "cursor with --cursor). Example: --client-id claude-work",
)
@click.option("--lean", is_flag=True, help="Configure lean mode (MCP_EMBEDDINGS=off).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory the client should use (default: this one).",
)
def claude_config_command(
    write: bool, for_cursor: bool, config_path: Path | None, name: str, client_id: str | None,
    lean: bool, data_dir: Path | None,
) -> None:  # fmt: skip
    """Print (or merge) the MCP client entry that launches `backtrail mcp`.

    \b
    Examples:
      backtrail claude-config                 # print the Claude Desktop entry
      backtrail claude-config --write         # add it to claude_desktop_config.json
      backtrail claude-config --cursor --write
      backtrail claude-config --config-path ./.cursor/mcp.json --write --client-id cursor
    """
    from backtrail.cli import client_config as claude_config
    from backtrail.config import data_dir as resolve_data_dir

    home = resolve_data_dir(data_dir or os.environ.get("BACKTRAIL_HOME") or None, create=False)
    client = client_id or ("cursor" if for_cursor else "claude-desktop")
    entry = claude_config.server_entry(data_dir=home, client_id=client, lean=lean)
    if not write:
        click.echo(json.dumps(claude_config.config_document(entry, name), indent=2))
        return
    if config_path is not None:
        path = config_path
    elif for_cursor:
        path = claude_config.cursor_config_path()
    else:
        path = claude_config.claude_config_path()
    try:
        result = claude_config.merge_entry(path, entry, name)
    except (claude_config.ConfigFileError, OSError) as error:
        click.echo(f"backtrail claude-config: {error}", err=True)
        sys.exit(1)
    action = "replaced" if result.replaced else "added"
    backup = f" (previous file saved as {result.backup})" if result.backup else ""
    app = "Cursor" if for_cursor else "Claude Desktop"
    click.echo(f"{action} mcpServers.{name} in {result.path}{backup}.")
    click.echo(f"Restart {app} (quit it fully) so it starts backtrail.")


COMMANDS: list[click.Command] = [mcp_command, claude_config_command]
