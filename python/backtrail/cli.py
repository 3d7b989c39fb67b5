"""The ``backtrail`` command: one group, thin commands that call the service and print.

Commands live in a few modules by subject and are registered here:
``cli_data`` (search, stats, import, export, forget, reindex, config, facts, events,
doctor), ``cli_mcp`` (mcp, claude-config) and ``cli_host`` (install, uninstall).
"""

from __future__ import annotations

import click

from backtrail import cli_data, cli_host, cli_mcp


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="backtrail")
def cli() -> None:
    """Backtrail: a local-first memory of what you read, shared with your AI assistants."""


for module in (cli_data, cli_mcp, cli_host):
    for command in module.COMMANDS:
        cli.add_command(command)


def main() -> None:
    """Console-script entry point."""
    cli()
