"""Generate ``docs/cli.md`` from the ``backtrail`` command's own ``--help`` texts.

Run it after changing a command (``test_cli.py`` fails while the file is out of date)::

    cd tests && ../.venv/bin/python gen_cli_docs.py

It documents the installed package, like the test suite.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from backtrail.cli import cli

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = 100
HEADER = """\
# `backtrail` command reference

Generated from `backtrail --help` by `tests/gen_cli_docs.py`; do not edit by hand.
"""


def walk(
    command: click.Command,
    path: tuple[str, ...] = ("backtrail",),
    parent: click.Context | None = None,
) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every command with its full name and a context to render its help, depth first."""
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(command, info_name=path[-1], parent=parent, **settings)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, (*path, name), ctx)


def render() -> str:
    parts = [HEADER]
    for path, command, ctx in walk(cli):
        level = "#" * min(len(path) + 1, 4)
        parts.append(f"\n{level} `{' '.join(path)}`\n\n```text\n{command.get_help(ctx)}\n```\n")
    return "".join(parts)


def main() -> int:
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {DOCS}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
