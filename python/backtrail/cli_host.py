"""Commands of the ``backtrail`` CLI (registered by backtrail.cli)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
