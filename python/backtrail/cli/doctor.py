"""``backtrail doctor``: is everything in place, and if not, what to do."""

from __future__ import annotations

import click
from rich.text import Text

from backtrail.cli import client_config, host_manifests
from backtrail.cli.common import (
    EXIT_FAILURE,
    JSON_OPTION,
    App,
    clean,
    emit_json,
    new_table,
    pass_app,
    stdout_console,
)
from backtrail.config import Config
from backtrail.errors import BacktrailError
from backtrail.service import health

__all__ = ["COMMANDS"]


@click.command()
@click.option("--no-model", is_flag=True, help="Do not load the embedding model (faster).")
@JSON_OPTION
@pass_app
def doctor(app: App, no_model: bool, as_json: bool) -> None:
    """Check that everything is installed and healthy.

    Looks at the data directory, the ledger's schema version (with ledger_url set: that
    the PostgreSQL server answers, and the schema its database holds, creating nothing),
    the index's health and lag, the model files and their sha256, the onnxruntime
    library, the native-host manifest of each browser, and the Claude Desktop
    configuration. Each problem comes with what to do; the exit code is 1 if anything
    needs fixing.

    \b
    Examples:
      backtrail doctor
      backtrail doctor --json
    """
    checks = run_checks(app, load_model=not no_model)
    failed = [c for c in checks if not c["ok"]]
    if as_json:
        emit_json({"ok": not failed, "checks": checks})
    else:
        table = new_table("", "check", "detail")
        for item in checks:
            mark = Text("ok", style="green") if item["ok"] else Text("FAIL", style="bold red")
            detail = Text(clean(item["detail"]))
            if item["fix"]:
                detail.append(f"\nfix: {clean(item['fix'])}", style="yellow")
            table.add_row(mark, item["check"], detail)
        stdout_console().print(table)
        click.echo(
            f"{len(failed)} problem{'s' if len(failed) != 1 else ''} found."
            if failed
            else "Everything looks fine."
        )
    if failed:
        click.get_current_context().exit(EXIT_FAILURE)


def run_checks(app: App, *, load_model: bool = True) -> list[health.Check]:
    """Backtrail's own checks, then the browsers' host manifests and the Claude Desktop
    configuration. A check that fails to run is reported as a failed check, so it never
    hides the others."""
    try:
        config = Config.load(app.data_dir)
    except BacktrailError as error:
        checks = [health.check("settings", False, error.message, "fix or remove the setting named")]
        home = None
    else:
        checks = health.health_checks(
            config, load_model=load_model, say=lambda line: click.echo(line, err=True)
        )
        home = config.home
    suppliers = (
        ("native messaging hosts", lambda: host_manifests.doctor_checks()),
        ("AI client configuration", lambda: client_config.doctor_checks(data_dir=home)),
    )
    for what, supplier in suppliers:
        try:
            checks += supplier()
        except Exception as error:  # a broken check must not hide the others
            checks.append(health.check(what, False, f"checking failed: {error}", "run with -v"))
    return checks


COMMANDS: list[click.Command] = [doctor]
