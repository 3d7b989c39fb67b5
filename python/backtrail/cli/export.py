"""``backtrail export``: everything in the memory, as JSON Lines or one HTML file."""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from backtrail.cli.common import (
    App,
    pass_app,
)
from backtrail.cli.progress import ProgressReporter
from backtrail.service import export as exporting

__all__ = ["COMMANDS"]


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
    with ProgressReporter() as progress:
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


COMMANDS: list[click.Command] = [export]
