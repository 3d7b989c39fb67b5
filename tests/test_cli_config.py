"""``backtrail config exclusions``: the README's promise that your own exclusions can be
set from the command line, applied by the real native host the browser talks to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from backtrail.urls import DEFAULT_EXCLUSIONS
from host_client import HostProcess, capture_fields

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0"})
    return subprocess.run([BACKTRAIL, *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def rules(home: Path) -> dict:
    done = run(home, "config", "exclusions", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def capture(host: HostProcess, url: str, visit_id: str) -> dict:
    return host.call("capture_page", **capture_fields(url, "Private words here.",
                                                      visit_id=visit_id))  # fmt: skip


def test_exclusions_set_from_the_cli_are_applied_by_the_native_host(data_home: Path) -> None:
    assert rules(data_home) == {"rules": list(DEFAULT_EXCLUSIONS), "built_in": True}
    added = run(data_home, "config", "exclusions", "add", "Private.Example", "*/drafts/*")
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[-2:] == ["private.example", "*/drafts/*"]
    assert rules(data_home)["built_in"] is False
    with HostProcess(data_home) as host:
        host.hello()
        refused = capture(host, "https://www.private.example/inbox", "v-1")
        assert refused["ok"] is False and refused["error"]["code"] == 9
        assert refused["error"]["details"] == {"rule": "private.example"}
        assert capture(host, "https://blog.example/drafts/x", "v-2")["error"]["code"] == 9
        assert capture(host, "https://blog.example/posts/x", "v-3")["ok"] is True
    removed = run(data_home, "config", "exclusions", "remove", "private.example")
    assert removed.returncode == 0 and "private.example" not in removed.stdout.split()
    with HostProcess(data_home) as host:
        host.hello()
        assert capture(host, "https://www.private.example/inbox", "v-4")["ok"] is True
    assert run(data_home, "config", "exclusions", "reset").returncode == 0
    assert rules(data_home) == {"rules": list(DEFAULT_EXCLUSIONS), "built_in": True}


def test_bad_exclusion_rules_change_nothing_and_say_why(data_home: Path) -> None:
    bad = run(data_home, "config", "exclusions", "add", "fine.example", "not a rule")
    assert bad.returncode == 2 and "contains spaces" in bad.stderr
    assert rules(data_home)["built_in"] is True  # the good rule was not added either
    missing = run(data_home, "config", "exclusions", "remove", "never-added.example")
    assert missing.returncode == 2 and "not an exclusion rule in use" in missing.stderr
    as_setting = run(data_home, "config", "set", "exclusions", "example.com")
    assert as_setting.returncode == 2
    assert "`backtrail config exclusions add example.com`" in as_setting.stderr
