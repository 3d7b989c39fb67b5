"""The ``backtrail`` command: exit codes, one-line errors, ``--json`` output, progress,
Ctrl-C, and documentation generated from ``--help``.

The paths that matter run the real console script as a subprocess; the rest use Click's
runner in-process.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import gen_cli_docs
from backtrail.cli import cli
from backtrail.cli.common import EXIT_CODES, Date
from backtrail.cli.progress import Interrupted, ProgressReporter
from backtrail.service import Memory, VisitInfo
from backtrail.store import Ledger
from browser_files import ChromeHistory, chromium_user_data, firefox_root
from helpers import make_config, wait_for

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000

WAL = (
    "Write-ahead logging keeps the database consistent after a crash. Each transaction "
    "appends its changes to the log before the data pages change. Checkpoints copy the "
    "log back into the main file."
)


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """This data directory, no embeddings (fast), nothing else from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0", "COLUMNS": "120"})
    env.update(extra)
    return env


def run(home: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BACKTRAIL, *args],
        env=env_for(home, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def invoke(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env=env_for(home), catch_exceptions=False)


def seed(home: Path) -> None:
    with Memory(make_config(home)) as memory:
        memory.capture_page(
            "https://www.sqlite.org/wal.html",
            text=WAL,
            title="Write-Ahead Logging",
            captured_at=T0,
            visit=VisitInfo(visited_at=T0),
        )
        memory.capture_page(
            "https://bread.example/sourdough",
            text="Feed the starter twice a day.",
            title="Sourdough starter",
            captured_at=T0 + 10,
        )
        memory.set_fact("user.editor", "helix")
        memory.set_fact("user.editor", "neovim", expected_version=1)
        memory.catch_up(vectors=False)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and "Traceback" not in result.stderr
    return lines[0]


# ----------------------------------------------------------------- exit codes


def test_search_prints_results_and_json_that_parses(data_home: Path) -> None:
    seed(data_home)
    text = run(data_home, "search", "checkpoints log")
    assert text.returncode == 0, text.stderr
    assert "Write-Ahead Logging" in text.stdout and "https://www.sqlite.org/wal.html" in text.stdout
    as_json = run(data_home, "search", "checkpoints log", "--json", "--domain", "sqlite.org")
    assert as_json.returncode == 0
    page = json.loads(as_json.stdout)
    assert [r["url"] for r in page["results"]] == ["https://www.sqlite.org/wal.html"]
    assert page["results"][0]["origin"] == "web" and page["mode"] == "bm25"
    assert page["lag"]["text_caught_up"] is True


def test_missing_fact_is_exit_3_with_one_line(data_home: Path) -> None:
    seed(data_home)
    result = run(data_home, "facts", "get", "user.shell")
    assert result.returncode == 3
    assert one_line_error(result) == "Error: fact 'user.shell' does not exist"
    assert result.stdout == ""


def test_invalid_input_is_exit_2(data_home: Path) -> None:
    seed(data_home)
    result = run(data_home, "search", "wal", "--since", "2024-05-01", "--until", "2024-04-01")
    assert result.returncode == 2
    assert "must be later than since" in one_line_error(result)
    bad_date = run(data_home, "search", "wal", "--since", "last tuesday")
    assert bad_date.returncode == 2 and "is not a date" in bad_date.stderr


def test_unknown_browser_profile_is_exit_3_and_says_what_to_do(tmp_path: Path) -> None:
    result = run(tmp_path / "home", "import", "history", "--browser", "firefox", HOME=str(tmp_path))
    assert result.returncode == 3, (result.stdout, result.stderr)
    line = one_line_error(result)
    assert "no firefox profile found" in line and "backtrail import profiles" in line


def test_damaged_ledger_is_exit_6_without_traceback(data_home: Path) -> None:
    data_home.mkdir()
    (data_home / "ledger.sqlite3").write_bytes(b"garbage" * 1000)
    result = run(data_home, "stats")
    assert result.returncode == 6, result.stderr
    one_line_error(result)


def test_exit_codes_are_documented_in_help() -> None:
    result = CliRunner().invoke(cli, ["-h"])
    for code, meaning in EXIT_CODES:
        assert f"{code:>3}  {meaning}" in result.output


# ---------------------------------------------------------------- import, progress


def chrome_home(tmp_path: Path, visits: int) -> Path:
    """A home directory with Chrome's default profile holding ``visits`` visits."""
    root = tmp_path / "user" / ".config" / "google-chrome"
    chromium_user_data(root, {"Default": "Person 1"})
    history = ChromeHistory(root / "Default" / "History")
    for n in range(visits):
        history.add_visit(f"https://site{n % 50}.example/page/{n}", T0 + n, title=f"Page {n}")
    history.close()
    return tmp_path / "user"


def test_import_history_finds_the_profile_reports_progress_and_is_searchable(
    tmp_path: Path, data_home: Path
) -> None:
    home = chrome_home(tmp_path, 30)
    first = run(data_home, "import", "history", "--browser", "chrome", HOME=str(home))
    assert first.returncode == 0, first.stderr
    assert "Imported 30 new visits (30 new pages) from chrome profile 'Person 1'" in first.stdout
    # Not a terminal: plain progress lines, one per finished phase.
    assert "Importing visits: 30/30 (100%)" in first.stderr
    again = run(data_home, "import", "history", "--browser", "chrome", "--json", HOME=str(home))
    report = json.loads(again.stdout)
    assert (report["import"]["added"], report["import"]["skipped"]) == (0, 30)
    assert report["lag"]["text_caught_up"] is True
    found = json.loads(run(data_home, "search", "page 17", "--json").stdout)
    assert found["results"][0]["url"] == "https://site17.example/page/17"


def test_import_profiles_lists_what_is_found(tmp_path: Path, data_home: Path) -> None:
    home = chrome_home(tmp_path, 1)
    firefox_root(
        home / ".mozilla" / "firefox",
        [("default-release", "x.default-release")],
        install_default="x.default-release",
    )
    result = run(data_home, "import", "profiles", "--json", HOME=str(home))
    found = {
        (p["browser"], p["name"], p["default"], p["history"]) for p in json.loads(result.stdout)
    }
    assert found == {("chrome", "Person 1", True, True), ("firefox", "default-release", True, True)}


def test_import_bookmarks_from_a_profile_path(tmp_path: Path, data_home: Path) -> None:
    from browser_files import chrome_bookmarks, url

    profile = tmp_path / "copy" / "Default"
    chrome_bookmarks(profile / "Bookmarks", [url("https://tokio.rs/", "Tokio", T0, ident="4")])
    result = run(data_home, "import", "bookmarks", "--browser", "edge", "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    assert "1 added, 0 updated, 0 removed, 0 unchanged" in result.stdout
    with Memory(make_config(data_home)) as memory:
        assert [b.url for b in memory.list_bookmarks(profile="edge:Default")] == [
            "https://tokio.rs/"
        ]


def test_ctrl_c_stops_an_import_cleanly_and_the_next_run_resumes(
    tmp_path: Path, data_home: Path
) -> None:
    home = chrome_home(tmp_path, 10_000)
    command = [BACKTRAIL, "import", "history", "--browser", "chrome"]
    env = env_for(data_home, HOME=str(home))
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )

    def some_visits_stored() -> bool:
        if not (data_home / "ledger.sqlite3").exists():
            return False
        with Ledger.open(data_home, client="test") as ledger:
            return ledger.stats().counts["visits"] > 0

    try:
        wait_for(some_visits_stored, timeout=120, what="the first batch")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    with Ledger.open(data_home, client="test") as ledger:
        kept = ledger.stats().counts["visits"]
    assert 0 < kept < 10_000
    resumed = run(data_home, "import", "history", "--browser", "chrome", "--json", HOME=str(home))
    report = json.loads(resumed.stdout)["import"]
    assert (report["added"], report["skipped"]) == (10_000 - kept, kept)


def test_progress_lines_without_a_terminal() -> None:
    now = [0.0]
    out = io.StringIO()
    # first_line: no early line in between (test_status covers the heartbeat).
    with ProgressReporter(stream=out, interactive=False, interval=5, first_line=60,
                          clock=lambda: now[0]) as bar:  # fmt: skip
        bar(0, 1000, "text")
        now[0] = 2.0
        bar(200, 1000, "text")  # too soon for a line
        now[0] = 6.0
        bar(600, 1000, "text")
        now[0] = 8.0
        bar(1000, 1000, "text")
    assert out.getvalue().splitlines() == [
        "Indexing text: 600/1,000 (60%), 100/s, ETA 4 s",
        "Indexing text: 1,000/1,000 (100%), 125/s, done in 8 s",
    ]


def test_first_ctrl_c_stops_at_the_next_batch_and_a_second_one_at_once() -> None:
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when started in the background
    out = io.StringIO()
    with ProgressReporter(stream=out, interactive=False) as bar:
        bar(1, 10, "import")
        os.kill(os.getpid(), signal.SIGINT)
        assert bar.stop_requested
        with pytest.raises(Interrupted):
            bar(2, 10, "import")
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert "Stopping after the current batch" in out.getvalue()
    assert signal.getsignal(signal.SIGINT) is before  # restored


# --------------------------------------------------------------- other commands


def test_stats_and_index_and_reindex_report_json(data_home: Path) -> None:
    seed(data_home)
    stats = json.loads(run(data_home, "stats", "--json").stdout)
    assert stats["ledger"]["counts"]["pages"] == 2 and stats["lag"]["text"] == 0
    rebuilt = run(data_home, "reindex", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["lag"]["text_caught_up"] is True
    assert "Indexing text (full scan): 3/3 (100%)" in rebuilt.stderr  # 2 pages, 1 fact
    indexed = json.loads(run(data_home, "index", "--text-only", "--json").stdout)
    assert indexed["lag"]["text"] == 0 and indexed["model"] == "disabled"
    assert "Write-Ahead Logging" in run(data_home, "search", "checkpoints").stdout


def test_forget_asks_unless_told_and_removes_from_search(data_home: Path) -> None:
    seed(data_home)
    refused = run(data_home, "forget", "--domain", "sqlite.org")
    assert refused.returncode == 2 and "add --yes" in one_line_error(refused)
    assert "Write-Ahead Logging" in run(data_home, "search", "checkpoints").stdout
    both = run(data_home, "forget", "--domain", "sqlite.org", "--url", "https://x.example/")
    assert both.returncode == 2
    done = run(data_home, "forget", "--domain", "sqlite.org", "--yes", "--json")
    report = json.loads(done.stdout)
    assert report["selector"] == "domain" and report["counts"]["pages"] == 1
    assert report["index_purged"] is True
    gone = json.loads(run(data_home, "search", "checkpoints", "--json").stdout)
    assert gone["results"] == []


def test_config_set_get_unset_and_refuse_bad_values(data_home: Path) -> None:
    assert invoke(data_home, "config", "set", "search_limit", "7").output == "search_limit = 7\n"
    assert invoke(data_home, "config", "get", "search_limit").output == "7\n"
    assert (data_home / "config.toml").read_text().splitlines()[1:] == ["search_limit = 7"]
    bad = run(data_home, "config", "set", "search_limit", "seven")
    assert bad.returncode == 2 and "invalid search_limit" in one_line_error(bad)
    too_big = run(data_home, "config", "set", "search_limit", "1000")
    assert too_big.returncode == 2
    assert (data_home / "config.toml").read_text().splitlines()[1:] == ["search_limit = 7"]
    assert json.loads(invoke(data_home, "config", "get", "search_limit", "--json").output) == {
        "name": "search_limit",
        "value": 7,
    }
    invoke(data_home, "config", "unset", "search_limit")
    assert invoke(data_home, "config", "get", "search_limit").output == "10\n"
    listed = json.loads(invoke(data_home, "config", "list", "--json").output)
    assert {item["name"] for item in listed} >= {"search_limit", "embeddings", "data_dir"}


def test_facts_and_events_show_who_changed_what(data_home: Path) -> None:
    seed(data_home)
    facts = json.loads(invoke(data_home, "facts", "list", "user.", "--json").output)
    assert [(f["key"], f["value"], f["version"]) for f in facts] == [("user.editor", "neovim", 2)]
    assert invoke(data_home, "facts", "get", "user.editor").output == "neovim\n"
    history = json.loads(invoke(data_home, "facts", "history", "user.editor", "--json").output)
    assert [(e["action"], e["details"]["version"]) for e in history] == [
        ("fact.set", 1),
        ("fact.set", 2),
    ]
    events = json.loads(invoke(data_home, "events", "--action", "fact.set", "--json").output)
    assert len(events) == 2 and all(e["target"] == "user.editor" for e in events)
    assert json.loads(invoke(data_home, "events", "--until", "2001-01-01", "--json").output) == []
    recent = invoke(data_home, "events", "--since", "1d", "--client", "backtrail", "--json")
    assert [e["action"] for e in json.loads(recent.output)][-2:] == ["fact.set", "fact.set"]
    latest = json.loads(invoke(data_home, "events", "--limit", "1", "--json").output)
    assert latest[0]["id"] == max(
        e["id"] for e in json.loads(invoke(data_home, "events", "--json").output)
    )


def test_doctor_reports_every_check_and_fails_when_something_is_wrong(data_home: Path) -> None:
    seed(data_home)
    result = run(data_home, "doctor", "--no-model", "--json")
    report = json.loads(result.stdout)
    names = [c["check"] for c in report["checks"]]
    for name in (
        "data directory",
        "ledger",
        "schema version",
        "index",
        "index lag",
        "onnxruntime library",
        "model files",
    ):
        assert name in names
    assert all(set(c) == {"check", "ok", "detail", "fix"} for c in report["checks"])
    assert result.returncode == (0 if report["ok"] else 1)
    assert all(c["fix"] for c in report["checks"] if not c["ok"])
    ours = {c["check"]: c for c in report["checks"]}
    assert ours["schema version"]["ok"] and ours["index lag"]["ok"]


def test_doctor_checks_the_model_file_sha256(data_home: Path) -> None:
    result = run(data_home, "doctor", "--json", BACKTRAIL_EMBEDDINGS="1")
    checks = {c["check"]: c for c in json.loads(result.stdout)["checks"]}
    from backtrail.indexer.embedding import MODEL_SHA256

    assert checks["model files"]["ok"] and MODEL_SHA256 in checks["model files"]["detail"]
    assert checks["embedder"]["ok"] and "384-dimensional" in checks["embedder"]["detail"]


def test_dates_accept_iso_relative_and_unix_forms() -> None:
    from datetime import datetime, timezone

    fixed = datetime(2024, 5, 10, 15, 30, tzinfo=timezone.utc)
    date = Date(clock=lambda: fixed)
    assert date.convert("2024-05-01T00:00:00+00:00", None, None) == 1_714_521_600
    assert date.convert("7d", None, None) == int(fixed.timestamp()) - 7 * 86_400
    assert date.convert("12h", None, None) == int(fixed.timestamp()) - 12 * 3600
    assert date.convert("1700000000", None, None) == 1_700_000_000
    assert date.convert("yesterday", None, None) == int(
        datetime(2024, 5, 9, tzinfo=timezone.utc).timestamp()
    )
    with pytest.raises(click.BadParameter):
        date.convert("soon", None, None)


def test_untrusted_titles_cannot_drive_the_terminal(data_home: Path) -> None:
    with Memory(make_config(data_home)) as memory:
        memory.capture_page(
            "https://evil.example/",
            text="checkpoints " * 20,
            title="Evil \x1b[31mred\x1b[0m \u202etitle",
        )
        memory.catch_up(vectors=False)
    output = run(data_home, "search", "checkpoints").stdout
    assert "\x1b" not in output and "\u202e" not in output


# ---------------------------------------------------------------- documentation


def all_commands() -> list[tuple[tuple[str, ...], click.Command, click.Context]]:
    return list(gen_cli_docs.walk(cli))


def test_docs_cli_md_is_generated_from_the_current_help() -> None:
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == gen_cli_docs.render(), "run: cd tests && ../.venv/bin/python gen_cli_docs.py"


def test_every_command_and_option_is_documented() -> None:
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    text = docs + readme
    for path, command, ctx in all_commands():
        assert f"`{' '.join(path)}`" in text, f"{' '.join(path)} is not documented"
        for param in command.get_params(ctx):
            for name in [*param.opts, *param.secondary_opts]:
                if name.startswith("-"):
                    assert name in text, f"{' '.join(path)} {name} is not documented"


def test_every_data_command_has_examples_and_json_where_it_reads() -> None:
    readers = {"search", "stats", "profiles", "list", "get", "history", "events", "doctor"}
    for path, command, ctx in all_commands():
        if isinstance(command, click.Group) or path[1] in (
            "mcp",
            "claude-config",
            "install",
            "uninstall",
            "config",
        ):
            continue
        assert "Examples:" in (command.help or ""), f"{' '.join(path)} has no examples"
        options = {name for p in command.get_params(ctx) for name in p.opts}
        if path[-1] in readers:
            assert "--json" in options, f"{' '.join(path)} lacks --json"
        assert "-h" in options and "--help" in options
