"""The ``backtrail`` command line (a front end): one group of thin commands that call the
service and print.

Each command group has its module, named in :data:`COMMAND_MODULES` and imported only
when one of its commands runs: :mod:`.search` (search, stats), :mod:`.imports`,
:mod:`.export`, :mod:`.forget`, :mod:`.index` (index, reindex), :mod:`.settings`
(config), :mod:`.audit` (facts, events), :mod:`.doctor`, :mod:`.mcp` (mcp,
claude-config), :mod:`.tokens` (token) and :mod:`.install` (install, uninstall). What
they share is in :mod:`.common`; setting up the browsers and AI clients is in
:mod:`.host_manifests` and :mod:`.client_config`; ``make run`` is :mod:`.demo`.

This module owns the global options (``--data-dir``, ``-v``), logging, and turning
errors into one line on standard error with a documented exit code (see
:data:`backtrail.cli.common.EXIT_CODES`); tracebacks are printed only with ``-v``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import click

from backtrail.cli.common import (
    EXIT_CODES,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    App,
    error_line,
    exit_code_for,
)

_EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES)
_LOG_FORMAT = "backtrail: %(levelname)s: %(message)s"
_verbosity = 0

#: Which module defines each command. Modules are imported only when one of their
#: commands runs (or help lists them), so `backtrail mcp` — started by every AI client —
#: does not pay for the data commands' imports.
COMMAND_MODULES: dict[str, str] = {
    "search": "backtrail.cli.search",
    "stats": "backtrail.cli.search",
    "recent": "backtrail.cli.browse",
    "show": "backtrail.cli.browse",
    "import": "backtrail.cli.imports",
    "export": "backtrail.cli.export",
    "forget": "backtrail.cli.forget",
    "index": "backtrail.cli.index",
    "reindex": "backtrail.cli.index",
    "config": "backtrail.cli.settings",
    "facts": "backtrail.cli.audit",
    "events": "backtrail.cli.audit",
    "doctor": "backtrail.cli.doctor",
    "mcp": "backtrail.cli.mcp",
    "claude-config": "backtrail.cli.mcp",
    "token": "backtrail.cli.tokens",
    "install": "backtrail.cli.install",
    "uninstall": "backtrail.cli.install",
}


class LazyGroup(click.Group):
    """A group whose commands are imported from :data:`COMMAND_MODULES` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(module_name)
        return next((c for c in module.COMMANDS if c.name == cmd_name), None)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_EPILOG,
)
@click.version_option(package_name="backtrail")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory to use (default: $BACKTRAIL_HOME, else the per-user data directory).",
)
@click.option(
    "-v", "--verbose", count=True, help="More logging on stderr (-vv: debug); show tracebacks."
)
@click.pass_context
def cli(ctx: click.Context, data_dir: Path | None, verbose: int) -> None:
    """Backtrail: a local-first memory of what you read, shared with your AI assistants.

    \b
    First steps:
      backtrail install                            register the browser extension's host
      backtrail import history --browser chrome    bring in the history you already have
      backtrail search "sqlite write-ahead log"    find what you read
      backtrail doctor                             check that everything is in place

    Run `backtrail COMMAND -h` for a command's options and examples.
    """
    global _verbosity
    _verbosity = verbose
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format=_LOG_FORMAT, stream=sys.stderr, force=True)
    if data_dir is not None:
        from backtrail.config import HOME_ENV

        # Every command module (and every process a command starts) then uses it.
        os.environ[HOME_ENV] = str(data_dir.expanduser().absolute())
    app = App(data_dir=data_dir, verbose=verbose)
    ctx.obj = app
    ctx.call_on_close(app.close)


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point: run the command, map errors to exit codes."""
    try:
        result = cli.main(args=argv, prog_name="backtrail", standalone_mode=False)
    except click.exceptions.Abort as abort:
        if isinstance(abort.__cause__, KeyboardInterrupt):
            click.echo("Error: interrupted; run the same command again to resume", err=True)
            return EXIT_INTERRUPTED
        click.echo("Aborted.", err=True)
        return EXIT_FAILURE
    except BrokenPipeError:  # e.g. `backtrail events | head`
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more gets written
        return 0
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.exceptions.Exit as done:
        return done.exit_code
    except KeyboardInterrupt:  # outside Click's own handling (during start-up)
        click.echo("Error: interrupted; run the same command again to resume", err=True)
        return EXIT_INTERRUPTED
    except Exception as error:  # every other error: one line, no traceback unless -v
        if _verbosity:
            traceback.print_exc()
        click.echo(f"Error: {error_line(error)}", err=True)
        return exit_code_for(error)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
