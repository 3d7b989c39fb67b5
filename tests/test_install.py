"""`backtrail install` / `uninstall` / `doctor_checks` writing into a temporary HOME for
each browser and each OS layout (Linux, macOS, Windows), with the doctor validating
the result and, where the launcher can run here, completing a real handshake with the
host it starts."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from backtrail.cli import cli
from backtrail.cli import host_manifests as install
from backtrail.cli.host_manifests import BROWSERS, EXTENSION_ID, HOST_NAME, Platform

ORIGIN = f"chrome-extension://{EXTENSION_ID}/"


class MemoryRegistry:
    """An in-memory stand-in for the Windows registry, injected into the installer so
    these Linux tests can check the keys it writes (the real one is
    ``install.WindowsRegistry``, which needs ``winreg``)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], str] = {}

    def set_default(self, hive: str, key: str, value: str) -> None:
        self.keys[(hive, key)] = value

    def get_default(self, hive: str, key: str) -> str | None:
        return self.keys.get((hive, key))

    def delete_key(self, hive: str, key: str) -> bool:
        return self.keys.pop((hive, key), None) is not None


@pytest.fixture(autouse=True)
def quiet_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts started by handshakes compute no embeddings."""
    monkeypatch.setenv("BACKTRAIL_EMBEDDINGS", "0")


def platform_for(tmp_path: Path, system: str) -> Platform:
    env = {}
    if system == "win32":
        env = {"LOCALAPPDATA": str(tmp_path / "home" / "AppData" / "Local"),
               "PROGRAMDATA": str(tmp_path / "root" / "ProgramData")}  # fmt: skip
    return Platform(system, tmp_path / "home", env, tmp_path / "root")


USER_DIRS = {
    "linux": {
        "chrome": ".config/google-chrome/NativeMessagingHosts",
        "chromium": ".config/chromium/NativeMessagingHosts",
        "brave": ".config/BraveSoftware/Brave-Browser/NativeMessagingHosts",
        "edge": ".config/microsoft-edge/NativeMessagingHosts",
    },
    "darwin": {
        "chrome": "Library/Application Support/Google/Chrome/NativeMessagingHosts",
        "chromium": "Library/Application Support/Chromium/NativeMessagingHosts",
        "brave": "Library/Application Support/BraveSoftware/Brave-Browser/NativeMessagingHosts",
        "edge": "Library/Application Support/Microsoft Edge/NativeMessagingHosts",
    },
}
WINDOWS_KEYS = {
    "chrome": "Software\\Google\\Chrome\\NativeMessagingHosts\\com.backtrail.host",
    "chromium": "Software\\Chromium\\NativeMessagingHosts\\com.backtrail.host",
    "brave": "Software\\BraveSoftware\\Brave-Browser\\NativeMessagingHosts\\com.backtrail.host",
    "edge": "Software\\Microsoft\\Edge\\NativeMessagingHosts\\com.backtrail.host",
}


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def read_manifest(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------- Linux, macOS


@pytest.mark.parametrize("system", ["linux", "darwin"])
@pytest.mark.parametrize("browser", BROWSERS)
def test_install_writes_the_manifest_where_the_browser_looks_and_doctor_shakes_hands(
    tmp_path: Path, system: str, browser: str
) -> None:
    plat = platform_for(tmp_path, system)
    data_dir = tmp_path / "my data's dir"  # a quote and a space in the launcher
    report = install.install(browser, data_dir=data_dir, python=sys.executable, platform=plat)
    manifest = plat.home / USER_DIRS[system][browser] / f"{HOST_NAME}.json"
    assert [t.manifest for t in report.written] == [manifest]
    document = read_manifest(manifest)
    assert document == {
        "name": HOST_NAME, "description": document["description"],
        "path": str(report.launcher), "type": "stdio", "allowed_origins": [ORIGIN],
    }  # fmt: skip
    assert os.path.isabs(document["path"])
    assert report.launcher.stat().st_mode & stat.S_IXUSR
    assert report.launcher.read_text().startswith("#!/bin/sh\n")
    assert sys.executable in report.launcher.read_text()
    checks = install.doctor_checks(platform=plat, extension_id=EXTENSION_ID)
    assert [c["ok"] for c in checks] == [True, True], checks
    assert checks[1]["check"] == f"host handshake ({report.launcher})"
    assert "speaks protocol 1 and exited cleanly" in checks[1]["detail"]
    assert (data_dir / "ledger.sqlite3").exists()  # the launcher chose the data dir
    assert all(set(c) == {"check", "ok", "detail", "fix"} for c in checks)


def paths_under(root: Path) -> set[str]:
    """Every file and directory below ``root``."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_uninstall_removes_exactly_what_install_wrote(tmp_path: Path, system: str) -> None:
    plat = platform_for(tmp_path, system)
    plat.home.mkdir()
    before = paths_under(tmp_path)
    install.install("all", python=sys.executable, platform=plat)
    assert len(files_under(tmp_path)) == 4 + 2  # manifests, launcher, receipt
    removed = install.uninstall("all", platform=plat)
    assert len(removed) == 5
    # No browser was found, so install created each browser's directory: all gone, and
    # a later `install` does not mistake them for installed browsers.
    assert paths_under(tmp_path) == before
    assert not any(install.browser_present(b, plat) for b in BROWSERS)


def test_uninstall_keeps_directories_that_existed_or_hold_something_else(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "linux")
    chrome = plat.home / ".config" / "google-chrome"
    (chrome / "NativeMessagingHosts").mkdir(parents=True)
    data = plat.home / ".local" / "share" / "backtrail"
    install.install("chrome", python=sys.executable, platform=plat)
    (data / "ledger.sqlite3").write_text("the user's data")  # the data directory, meanwhile
    install.uninstall("chrome", platform=plat)
    assert (chrome / "NativeMessagingHosts").is_dir()  # the browser's, not ours
    assert (data / "ledger.sqlite3").read_text() == "the user's data"
    assert not (data / "native-host").exists()


def test_all_registers_only_browsers_found_unless_none_is(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "linux")
    (plat.home / ".config" / "BraveSoftware" / "Brave-Browser").mkdir(parents=True)
    report = install.install("all", python=sys.executable, platform=plat)
    assert [t.browser for t in report.written] == ["brave"]
    assert report.skipped == ["chrome", "chromium", "edge"]
    other = platform_for(tmp_path / "empty", "linux")
    report = install.install("all", python=sys.executable, platform=other)
    assert [t.browser for t in report.written] == list(BROWSERS) and report.skipped == []


def test_xdg_config_home_is_respected(tmp_path: Path) -> None:
    plat = Platform("linux", tmp_path / "home", {"XDG_CONFIG_HOME": str(tmp_path / "cfg")},
                    tmp_path / "root")  # fmt: skip
    report = install.install("edge", python=sys.executable, platform=plat)
    assert report.written[0].manifest == (
        tmp_path / "cfg" / "microsoft-edge" / "NativeMessagingHosts" / f"{HOST_NAME}.json"
    )


def test_a_user_data_dir_gets_its_own_manifest_that_doctor_and_uninstall_find(
    tmp_path: Path,
) -> None:
    plat = platform_for(tmp_path, "linux")
    profile = tmp_path / "chromium-profile"
    install.install("chromium", user_data_dir=profile, python=sys.executable, platform=plat)
    manifest = profile / "NativeMessagingHosts" / f"{HOST_NAME}.json"
    assert read_manifest(manifest)["allowed_origins"] == [ORIGIN]
    checks = install.doctor_checks(platform=plat, handshake_hosts=False)
    assert [(c["check"], c["ok"]) for c in checks] == [
        (f"host manifest for --user-data-dir {profile}", True)
    ]
    assert install.uninstall("all", platform=plat)[0] == str(manifest)
    assert not manifest.exists()


def test_one_user_data_dir_registered_for_two_browsers_is_removed_once(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "linux")
    profile = tmp_path / "profile"
    for browser in ("chrome", "edge"):
        report = install.install(browser, user_data_dir=profile, python=sys.executable,
                                 platform=plat)  # fmt: skip
    receipt = json.loads((report.launcher.parent / "installed.json").read_text())
    assert [t["manifest"] for t in receipt["targets"]] == [
        str(profile / "NativeMessagingHosts" / f"{HOST_NAME}.json")
    ]
    removed = install.uninstall("all", user_data_dir=profile, platform=plat)
    assert removed == [str(profile / "NativeMessagingHosts" / f"{HOST_NAME}.json"),
                       str(report.launcher)]  # fmt: skip


def test_system_wide_install_covers_brave_in_both_directories_and_keeps_shared_files(
    tmp_path: Path,
) -> None:
    plat = platform_for(tmp_path, "linux")
    install.install("all", system=True, python=sys.executable, platform=plat)
    root = tmp_path / "root"
    expected = {
        f"etc/opt/chrome/native-messaging-hosts/{HOST_NAME}.json",
        f"etc/chromium/native-messaging-hosts/{HOST_NAME}.json",
        f"etc/opt/brave/native-messaging-hosts/{HOST_NAME}.json",
        f"etc/opt/edge/native-messaging-hosts/{HOST_NAME}.json",
        "usr/local/lib/backtrail/backtrail-host", "usr/local/lib/backtrail/installed.json",
    }  # fmt: skip
    assert files_under(root) == expected
    install.uninstall("brave", system=True, platform=plat)
    assert f"etc/chromium/native-messaging-hosts/{HOST_NAME}.json" in files_under(root)
    assert f"etc/opt/brave/native-messaging-hosts/{HOST_NAME}.json" not in files_under(root)
    install.uninstall("all", system=True, platform=plat)
    assert files_under(root) == set()


def test_macos_system_wide_directories(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "darwin")
    report = install.install(["chrome", "edge"], system=True, python=sys.executable,
                             platform=plat)  # fmt: skip
    assert [str(t.manifest.relative_to(tmp_path / "root")) for t in report.written] == [
        f"Library/Google/Chrome/NativeMessagingHosts/{HOST_NAME}.json",
        f"Library/Microsoft/Edge/NativeMessagingHosts/{HOST_NAME}.json",
    ]


# --------------------------------------------------------------------- Windows


@pytest.mark.parametrize("system_wide", [False, True], ids=["HKCU", "HKLM"])
def test_windows_registry_keys_point_to_the_manifests(tmp_path: Path, system_wide: bool) -> None:
    plat = platform_for(tmp_path, "win32")
    registry = MemoryRegistry()
    python = "C:\\Program Files\\Python311\\python.exe"
    report = install.install("all", system=system_wide, data_dir=Path("D:/backtrail"),
                             python=python, platform=plat, registry=registry)  # fmt: skip
    hive = "HKLM" if system_wide else "HKCU"
    assert set(registry.keys) == {(hive, key) for key in WINDOWS_KEYS.values()}
    for target in report.written:
        assert registry.keys[(hive, WINDOWS_KEYS[target.browser])] == str(target.manifest)
        assert read_manifest(target.manifest)["path"] == str(report.launcher)
    launcher = report.launcher.read_bytes().decode()
    assert report.launcher.name == "backtrail-host.bat"
    assert launcher.startswith("@echo off\r\n")
    assert f'"{python}" -m backtrail.native_host %*\r\n' in launcher
    assert 'set "BACKTRAIL_HOME=' in launcher
    # The .bat cannot run here, so doctor checks the manifests without a handshake.
    checks = install.doctor_checks(platform=plat, registry=registry, handshake_hosts=False)
    assert len(checks) == 4 and all(c["ok"] for c in checks), checks
    install.uninstall("all", system=system_wide, platform=plat, registry=registry)
    assert registry.keys == {}
    assert not report.launcher.exists()


def test_windows_refuses_a_user_data_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no effect on Windows"):
        install.install(
            "chrome", user_data_dir=tmp_path / "p", python="python.exe",
            platform=platform_for(tmp_path, "win32"), registry=MemoryRegistry(),
        )  # fmt: skip


# ----------------------------------------------------------------------- doctor


def write_manifest(plat: Platform, browser: str, document: Any) -> Path:
    path = plat.home / USER_DIRS["linux"][browser] / f"{HOST_NAME}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def launcher_file(tmp_path: Path, mode: int = 0o755) -> Path:
    launcher = tmp_path / "launcher"
    launcher.write_text("#!/bin/sh\nexit 3\n")
    launcher.chmod(mode)
    return launcher


def good(launcher: Path) -> dict[str, Any]:
    return install.manifest_document(launcher)


BROKEN = [
    ("{not json", "is not valid JSON"),
    ({"name": "com.other.host"}, "has name 'com.other.host', not 'com.backtrail.host'"),
    ({"path": "relative/launcher"}, "is not absolute"),
    ({"path": "/nonexistent/backtrail-host"}, "which does not exist"),
    ({"type": "sockets"}, "has type 'sockets', not 'stdio'"),
    ({"allowed_origins": ["chrome-extension://*/"]}, "malformed origin"),
    ({"allowed_origins": [f"chrome-extension://{EXTENSION_ID}"]}, "malformed origin"),
    ({"allowed_origins": [f"chrome-extension://{'b' * 32}/"]}, "does not allow the Backtrail"),
    ({"allowed_origins": []}, "has no allowed_origins list"),
]


@pytest.mark.parametrize(("change", "problem"), BROKEN, ids=[p for _, p in BROKEN])
def test_doctor_says_what_is_wrong_with_a_manifest(
    tmp_path: Path, change: Any, problem: str
) -> None:
    plat = platform_for(tmp_path, "linux")
    document = change if isinstance(change, str) else {**good(launcher_file(tmp_path)), **change}
    path = write_manifest(plat, "chrome", document)
    (check,) = install.doctor_checks(platform=plat, extension_id=EXTENSION_ID)
    assert check["check"] == "Google Chrome host manifest (user)"
    assert check["ok"] is False
    assert str(path) in check["detail"] and problem in check["detail"]
    assert check["fix"] == "run `backtrail install` again to rewrite it"


def test_doctor_flags_a_launcher_that_is_not_executable(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "linux")
    write_manifest(plat, "edge", good(launcher_file(tmp_path, 0o644)))
    (check,) = install.doctor_checks(platform=plat)
    assert check["ok"] is False and "is not executable" in check["detail"]


def test_doctor_without_any_manifest_says_to_install(tmp_path: Path) -> None:
    (check,) = install.doctor_checks(platform=platform_for(tmp_path, "linux"))
    assert check == {
        "check": "host manifest", "ok": False,
        "detail": "no browser has the Backtrail host registered, so the extension shows "
                  "'host not installed'",
        "fix": "run `backtrail install` (add --browser or --user-data-dir to choose where)",
    }  # fmt: skip


def test_doctor_reports_a_host_that_fails_to_start(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "linux")
    launcher = launcher_file(tmp_path)  # exits 3 without a word
    write_manifest(plat, "chromium", good(launcher))
    manifest_check, handshake = install.doctor_checks(platform=plat, timeout=20)
    assert manifest_check["ok"] is True
    assert handshake["ok"] is False
    assert handshake["detail"] == "the host exited with status 3 and sent no answer"
    assert "backtrail install" in handshake["fix"]


def test_doctor_reports_a_moved_interpreter(tmp_path: Path) -> None:
    plat = platform_for(tmp_path, "linux")
    install.install("chrome", python=str(tmp_path / "gone" / "python"), platform=plat)
    handshake = install.doctor_checks(platform=plat)[-1]
    assert handshake["ok"] is False and "exited with status 127" in handshake["detail"]


def test_extension_ids_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an extension ID"):
        install.install("chrome", extension_id="not-an-id",
                        platform=platform_for(tmp_path, "linux"))  # fmt: skip
    assert install.origin_for("a" * 32) == f"chrome-extension://{'a' * 32}/"


# -------------------------------------------------------------------------- CLI


def test_cli_install_and_uninstall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--browser", "chromium", "--data-dir",
                                 str(tmp_path / "data")])  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest = home / ".config/chromium/NativeMessagingHosts" / f"{HOST_NAME}.json"
    assert f"Registered for Chromium (user): {manifest}" in result.output
    assert "backtrail doctor" in result.output
    bad = runner.invoke(cli, ["install", "--extension-id", "xyz"])
    assert bad.exit_code == 2 and "not an extension ID" in bad.output
    result = runner.invoke(cli, ["uninstall"])
    assert result.exit_code == 0 and f"Removed {manifest}" in result.output
    assert "Nothing to remove" in runner.invoke(cli, ["uninstall"]).output


def test_cli_help_shows_every_option_with_examples() -> None:
    text = CliRunner().invoke(cli, ["install", "--help"]).output
    for option in ("--browser", "--extension-id", "--user-data-dir", "--system", "--data-dir"):
        assert option in text
    assert "backtrail install --user-data-dir" in text and EXTENSION_ID in text
    assert "backtrail uninstall --browser edge" in CliRunner().invoke(
        cli, ["uninstall", "--help"]).output  # fmt: skip


def run_backtrail(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``backtrail`` command with ``home`` as HOME (no XDG or Backtrail
    variables), as a user's shell would run it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "BACKTRAIL_", "MCP_"))}  # fmt: skip
    env["HOME"] = str(home)
    command = [str(Path(sys.executable).parent / "backtrail"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def test_uninstall_leaves_nothing_behind_that_install_and_claude_config_wrote(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "chromium").mkdir(parents=True)  # a browser is installed
    before = paths_under(home)
    writes = (["install"], ["claude-config", "--write"], ["claude-config", "--cursor", "--write"])
    for args in writes:
        done = run_backtrail(home, *args)
        assert done.returncode == 0, done.stderr
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    cursor = home / ".cursor" / "mcp.json"
    manifest = home / ".config" / "chromium" / "NativeMessagingHosts" / f"{HOST_NAME}.json"
    assert claude.is_file() and cursor.is_file() and manifest.is_file()
    done = run_backtrail(home, "uninstall", "--claude", "--cursor")
    assert done.returncode == 0, done.stderr
    assert f"Removed {manifest}" in done.stdout
    assert f"Removed mcpServers.backtrail from {claude}; deleted the file" in done.stdout
    assert paths_under(home) == before
    again = run_backtrail(home, "uninstall", "--claude")
    assert "Nothing to remove" in again.stdout and "No Backtrail entry" in again.stdout


def test_uninstall_keeps_the_other_servers_of_a_client_configuration(tmp_path: Path) -> None:
    home = tmp_path / "home"
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    theirs = {"mcpServers": {"files": {"command": "/usr/bin/mcp-files", "args": []}},
              "globalShortcut": "Ctrl+Space"}  # fmt: skip
    claude.write_text(json.dumps(theirs), encoding="utf-8")
    for _ in range(2):  # twice: the .bak then holds Backtrail's entry too
        assert run_backtrail(home, "claude-config", "--write").returncode == 0
    assert set(read_manifest(claude)["mcpServers"]) == {"files", "backtrail"}
    backup = claude.with_name(claude.name + ".bak")
    assert backup.is_file()
    done = run_backtrail(home, "uninstall", "--claude")
    assert done.returncode == 0, done.stderr
    assert read_manifest(claude) == theirs
    assert not backup.exists()  # it held nothing but what is left
    claude.write_text("{not json", encoding="utf-8")
    broken = run_backtrail(home, "uninstall", "--claude")
    assert broken.returncode == 1 and "not valid JSON" in broken.stderr
    assert claude.read_text(encoding="utf-8") == "{not json"  # never overwritten
