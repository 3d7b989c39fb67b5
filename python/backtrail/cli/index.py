"""``backtrail index`` and ``backtrail reindex``: bring the search index up to the ledger, or
rebuild it from the ledger."""

from __future__ import annotations

from typing import Any

import click

from backtrail.cli.common import (
    JSON_OPTION,
    App,
    emit_json,
    lag_text,
    pass_app,
)
from backtrail.cli.progress import ProgressReporter

__all__ = ["COMMANDS"]


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
    with ProgressReporter() as progress:
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
    with ProgressReporter() as progress:
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
    click.echo(f"Index: {lag_text(lag, model)}.")
    if model.startswith("not used: "):
        click.echo(f"This process writes no embeddings: {model.removeprefix('not used: ')}.")
    elif model != "disabled" and not lag.vectors_caught_up and lag.ledger_seq:
        reason = "" if model in ("ready", "not loaded") else f" (model: {model})"
        click.echo(f"Embeddings are not complete{reason}; `backtrail index` continues them.")


COMMANDS: list[click.Command] = [index_command, reindex]
