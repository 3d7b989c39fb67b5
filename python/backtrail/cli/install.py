"""``backtrail install`` and ``backtrail uninstall``: register the native-messaging host
with the browsers (the work is in :mod:`backtrail.cli.host_manifests`); uninstall also
takes Backtrail out of Claude Desktop's and Cursor's configuration on request
(:mod:`backtrail.cli.client_config`)."""

from __future__ import annotations

from pathlib import Path

import click

from backtrail.cli import host_manifests as installer
from backtrail.config import Config
from backtrail.errors import InvalidInput

BROWSER_CHOICES = [*installer.BROWSERS, "all"]


def _extension_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        installer.origin_for(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return value


def _fail(error: OSError, system: bool) -> click.ClickException:
    if isinstance(error, PermissionError) and system:
        return click.ClickException(
            f"{error.filename or 'a system directory'} is not writable; system-wide "
            "registration needs administrator rights (e.g. `sudo backtrail install --system`)"
        )
    where = error.filename or "a file"
    return click.ClickException(f"could not write {where}: {error.strerror or error}")


@click.command("install")
@click.option("--browser", type=click.Choice(BROWSER_CHOICES), default="all", show_default=True,
              help="Browser to register with; 'all' registers every one found on this machine.")
@click.option("--extension-id", default=installer.EXTENSION_ID, show_default=True,
              callback=_extension_id,
              help="ID of the Backtrail extension allowed to start the host (the published "
                   "extension's ID is pinned; change it only for a re-keyed build).")
@click.option("--user-data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Register for a browser started with --user-data-dir=DIR (it then looks "
                   "only in DIR/NativeMessagingHosts).")
@click.option("--system", is_flag=True,
              help="Register for every user of this machine (needs administrator rights).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Data directory the host uses (default: $BACKTRAIL_HOME, else the "
                   "per-user data directory).")
@click.option("--server", metavar="URL",
              help="Forward the browser's captures to this Backtrail server (`backtrail mcp "
                   "--http`, https; http only to this machine) instead of keeping them here.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="With --server: the file holding this device's token (from `backtrail "
                   "token add NAME --scope device --out FILE` on the server), mode 600.",
              )  # fmt: skip
def install_command(
    browser: str, extension_id: str, user_data_dir: Path | None, system: bool,
    data_dir: Path | None, server: str | None, token_file: Path | None,
) -> None:  # fmt: skip
    """Register the native-messaging host so the browser extension can reach Backtrail.

    Writes a launcher that runs this Python installation's host, and a host manifest
    (com.backtrail.host.json) where each browser looks for it; on Windows, registry
    keys point to the manifest. No network port is opened.

    With --server and --token-file the host keeps no memory on this computer: it
    forwards what the browser sends to that server, keeping it in an outbox in the data
    directory while the server cannot be reached. Both are recorded as the settings
    server_url and server_token_file of the data directory, and the server is asked
    whether it accepts the token (a warning if it cannot be reached now). To keep the
    memory here again: `backtrail config unset server_url`.

    \b
    Examples:
      backtrail install                       # every browser found, for you
      backtrail install --browser brave
      backtrail install --user-data-dir ~/chromium-test-profile
      sudo backtrail install --system --browser chromium
      backtrail install --data-dir ~/notes/backtrail
      backtrail install --server https://memory.example.com --token-file ~/.backtrail-token
    """
    device = _device_settings(data_dir, server, token_file)
    try:
        report = installer.install(
            browser, extension_id=extension_id, user_data_dir=user_data_dir, system=system,
            data_dir=data_dir,
        )  # fmt: skip
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    except OSError as error:
        raise _fail(error, system) from None
    click.echo(f"Launcher: {report.launcher}")
    for target in report.written:
        click.echo(f"Registered for {target.describe()}")
    for name in report.skipped:
        click.echo(f"Skipped {installer.BROWSER_NAMES[name]}: not found on this machine "
                   f"(use --browser {name} to register anyway)")  # fmt: skip
    if device is not None:
        _record_device(*device)
    click.echo("Reload the extension (or restart the browser), then check with `backtrail doctor`.")


def _device_settings(data_dir: Path | None, server: str | None, token_file: Path | None
                     ) -> tuple[Config, str] | None:  # fmt: skip
    """The settings --server and --token-file make, checked before anything is written,
    with the token; ``None`` without them."""
    if server is None and token_file is None:
        return None
    if server is None or token_file is None:
        raise click.UsageError("--server and --token-file go together")
    changes = {"server_url": server, "server_token_file": token_file.expanduser().absolute()}
    try:
        config = Config.load(data_dir, overrides=changes)
        token = config.server_token()
    except InvalidInput as error:
        raise click.UsageError(f"{error.field} {error.reason}") from None
    return config, token


def _record_device(config: Config, token: str) -> None:
    """Write server_token_file then server_url to the data directory's config file, and
    ask the server whether it takes the token."""
    from backtrail.cli.settings import write_setting
    from backtrail.errors import BacktrailError
    from backtrail.service.server_link import ServerUnavailable, TokenRefused, probe_hello

    write_setting(config.home, "server_token_file", str(config.server_token_file))
    write_setting(config.home, "server_url", config.server_url)
    click.echo(f"Forwarding to {config.server_url} (settings in {config.home})")
    try:
        result = probe_hello(config.server_url, token)
    except TokenRefused as error:
        click.echo(f"Warning: {error.message}", err=True)
    except ServerUnavailable as error:
        click.echo(f"Warning: {error.message}; the host keeps what the browser sends and "
                   "delivers it once the server answers", err=True)  # fmt: skip
    except BacktrailError as error:
        click.echo(f"Warning: {error.message}", err=True)
    else:
        click.echo(f"The server answers and accepts this device's token (server "
                   f"{result.get('host_version', '?')}).")  # fmt: skip


@click.command("uninstall")
@click.option("--browser", type=click.Choice(BROWSER_CHOICES), default="all", show_default=True,
              help="Browser to unregister.")
@click.option("--user-data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Unregister from a browser profile directory given to `install`.")
@click.option("--system", is_flag=True,
              help="Remove the system-wide registration (needs administrator rights).")
@click.option("--claude", is_flag=True,
              help="Also remove the Backtrail entries `backtrail claude-config --write` added "
                   "to Claude Desktop's configuration.")
@click.option("--cursor", is_flag=True,
              help="Also remove the Backtrail entries of Cursor's ~/.cursor/mcp.json.")
@click.option("--config-path", "config_paths", multiple=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Also remove the Backtrail entries of this MCP client configuration file "
                   "(repeatable), e.g. a project's .cursor/mcp.json.")  # fmt: skip
def uninstall_command(
    browser: str, user_data_dir: Path | None, system: bool, claude: bool, cursor: bool,
    config_paths: tuple[Path, ...],
) -> None:  # fmt: skip
    """Remove what `backtrail install` wrote: host manifests, registry keys, the
    launcher once nothing uses it, and the directories install created for them. With
    --claude / --cursor, also the `backtrail mcp` entries of those clients (every other
    entry and setting stays; a file that held nothing else is deleted). Your data is not
    touched: it stays in the data directory until you delete it.

    \b
    Examples:
      backtrail uninstall
      backtrail uninstall --claude --cursor
      backtrail uninstall --browser edge
      backtrail uninstall --user-data-dir ~/chromium-test-profile
    """
    from backtrail.cli import client_config

    try:
        removed = installer.uninstall(browser, user_data_dir=user_data_dir, system=system)
    except OSError as error:
        raise _fail(error, system) from None
    for item in removed:
        click.echo(f"Removed {item}")
    if not removed:
        click.echo("Nothing to remove: the host was not registered there.")
    files = list(config_paths)
    files += [client_config.claude_config_path()] if claude else []
    files += [client_config.cursor_config_path()] if cursor else []
    for path in files:
        try:
            result = client_config.remove_entries(path)
        except (client_config.ConfigFileError, OSError) as error:
            raise click.ClickException(str(error)) from None
        if not result.removed:
            click.echo(f"No Backtrail entry in {path}")
            continue
        names = ", ".join(f"mcpServers.{name}" for name in result.removed)
        done = "deleted the file (nothing else was in it)" if result.deleted else "kept the rest"
        click.echo(f"Removed {names} from {path}; {done}")
        if result.backup_deleted:
            click.echo(f"Removed {path.name}.bak (the copy --write kept, now the same)")


COMMANDS: list[click.Command] = [install_command, uninstall_command]
