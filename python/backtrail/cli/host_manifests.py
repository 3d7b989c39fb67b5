"""Registering the native-messaging host with Chrome, Chromium, Brave and Edge.

``install`` writes a launcher (a small script that runs this Python with
``-m backtrail.native_host``) and a host manifest ``com.backtrail.host.json`` pointing
at it where each browser looks: a ``NativeMessagingHosts`` directory on Linux and
macOS, a registry key whose default value is the manifest's path on Windows.
``uninstall`` removes what ``install`` wrote, down to the directories it created (the
receipt ``installed.json`` beside the launcher lists them); :func:`doctor_checks`
validates every manifest it finds and completes a real handshake with the host.

Everything that touches the machine is injectable for tests: :class:`Platform` (OS,
home, environment, and a root for system-wide paths) and the :class:`Registry`.

Where browsers look (checked against Chromium's ``chrome_paths.cc`` and the vendors'
documentation; see native-host/README.md):

- Linux, per user: ``$XDG_CONFIG_HOME`` (default ``~/.config``) +
  ``google-chrome`` | ``chromium`` | ``BraveSoftware/Brave-Browser`` |
  ``microsoft-edge``, then ``/NativeMessagingHosts``; with ``--user-data-dir DIR``
  the browser looks in ``DIR/NativeMessagingHosts`` instead.
- Linux, system-wide: ``/etc/opt/chrome``, ``/etc/chromium``, ``/etc/opt/edge`` +
  ``/native-messaging-hosts``. Brave builds are unbranded Chromium here: they read
  ``/etc/chromium/native-messaging-hosts``; ``/etc/opt/brave/native-messaging-hosts``
  (used by several packagers) is written too.
- macOS: ``~/Library/Application Support/<Google/Chrome | Chromium |
  BraveSoftware/Brave-Browser | Microsoft Edge>/NativeMessagingHosts``; system-wide
  ``/Library/Google/Chrome``, ``/Library/Application Support/Chromium``,
  ``/Library/Microsoft/Edge`` (+ ``/NativeMessagingHosts``), Brave as Chromium.
- Windows: ``HKCU`` (``HKLM`` with ``--system``) ``\\Software\\<Google\\Chrome |
  Chromium | BraveSoftware\\Brave-Browser | Microsoft\\Edge>\\NativeMessagingHosts\\
  com.backtrail.host``.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "HOST_NAME", "EXTENSION_ID", "BROWSERS", "Platform", "Registry", "WindowsRegistry",
    "Target", "InstallReport", "install", "uninstall", "targets", "manifest_document",
    "launcher_text", "origin_for", "manifest_problems", "doctor_checks", "handshake",
]  # fmt: skip

HOST_NAME = "com.backtrail.host"
EXTENSION_ID = "eeihccjhkpjgahjachnggfamlbdoeaio"
"""The extension's ID, pinned by the ``"key"`` in extension/manifest.json."""
BROWSERS = ("chrome", "chromium", "brave", "edge")
BROWSER_NAMES = {"chrome": "Google Chrome", "chromium": "Chromium", "brave": "Brave",
                 "edge": "Microsoft Edge"}  # fmt: skip
MANIFEST_FILENAME = f"{HOST_NAME}.json"
RECEIPT_FILENAME = "installed.json"
_ID_RE = re.compile(r"^[a-p]{32}$")
_ORIGIN_RE = re.compile(r"^chrome-extension://([a-p]{32})/$")
_MARK = "Backtrail native-messaging host launcher"

_LINUX_USER = {"chrome": "google-chrome", "chromium": "chromium",
               "brave": "BraveSoftware/Brave-Browser", "edge": "microsoft-edge"}  # fmt: skip
_LINUX_SYSTEM = {
    "chrome": ["etc/opt/chrome/native-messaging-hosts"],
    "chromium": ["etc/chromium/native-messaging-hosts"],
    "brave": ["etc/chromium/native-messaging-hosts", "etc/opt/brave/native-messaging-hosts"],
    "edge": ["etc/opt/edge/native-messaging-hosts"],
}
_MAC_USER = {"chrome": "Google/Chrome", "chromium": "Chromium",
             "brave": "BraveSoftware/Brave-Browser", "edge": "Microsoft Edge"}  # fmt: skip
_MAC_SYSTEM = {
    "chrome": ["Library/Google/Chrome/NativeMessagingHosts"],
    "chromium": ["Library/Application Support/Chromium/NativeMessagingHosts"],
    "brave": ["Library/Application Support/Chromium/NativeMessagingHosts",
              "Library/Application Support/BraveSoftware/Brave-Browser/NativeMessagingHosts"],
    "edge": ["Library/Microsoft/Edge/NativeMessagingHosts"],
}  # fmt: skip
_WIN_KEYS = {"chrome": "Software\\Google\\Chrome", "chromium": "Software\\Chromium",
             "brave": "Software\\BraveSoftware\\Brave-Browser",
             "edge": "Software\\Microsoft\\Edge"}  # fmt: skip


# ------------------------------------------------------------------ environment


@dataclass(frozen=True)
class Platform:
    """The machine as the installer sees it. ``system`` is ``"linux"``, ``"darwin"``
    or ``"win32"``; ``root`` prefixes system-wide paths (``/`` for real)."""

    system: str
    home: Path
    env: Mapping[str, str] = field(default_factory=dict)
    root: Path = Path("/")

    @classmethod
    def current(cls) -> Platform:
        system = "win32" if sys.platform == "win32" else sys.platform
        system = "linux" if system.startswith(("linux", "freebsd", "openbsd")) else system
        return cls(system, Path.home(), dict(os.environ), Path(os.path.abspath(os.sep)))

    def _env_dir(self, name: str, default: Path) -> Path:
        value = self.env.get(name, "").strip()
        return Path(value) if value and os.path.isabs(value) else default

    @property
    def config_home(self) -> Path:
        return self._env_dir("XDG_CONFIG_HOME", self.home / ".config")

    def launcher_dir(self, system_wide: bool) -> Path:
        """Where the launcher and the install receipt live."""
        if self.system == "win32":
            if system_wide:
                base = self._env_dir("PROGRAMDATA", self.root / "ProgramData")
            else:
                base = self._env_dir("LOCALAPPDATA", self.home / "AppData" / "Local")
            return base / "Backtrail" / "native-host"
        if self.system == "darwin":
            if system_wide:
                return self.root / "Library" / "Application Support" / "Backtrail"
            return self.home / "Library" / "Application Support" / "backtrail" / "native-host"
        if system_wide:
            return self.root / "usr" / "local" / "lib" / "backtrail"
        data = self._env_dir("XDG_DATA_HOME", self.home / ".local" / "share")
        return data / "backtrail" / "native-host"

    @property
    def launcher_name(self) -> str:
        return "backtrail-host.bat" if self.system == "win32" else "backtrail-host"


class Registry(Protocol):
    """The part of the Windows registry the installer uses (``hive``: HKCU or HKLM)."""

    def set_default(self, hive: str, key: str, value: str) -> None: ...

    def get_default(self, hive: str, key: str) -> str | None: ...

    def delete_key(self, hive: str, key: str) -> bool: ...


class WindowsRegistry:
    """:class:`Registry` on the real registry (``winreg``; Windows only)."""

    @staticmethod
    def _winreg() -> Any:
        import importlib

        return importlib.import_module("winreg")

    def _hive(self, hive: str) -> Any:
        winreg = self._winreg()
        return {"HKCU": winreg.HKEY_CURRENT_USER, "HKLM": winreg.HKEY_LOCAL_MACHINE}[hive]

    def set_default(self, hive: str, key: str, value: str) -> None:
        winreg = self._winreg()
        with winreg.CreateKey(self._hive(hive), key) as handle:
            winreg.SetValueEx(handle, "", 0, winreg.REG_SZ, value)

    def get_default(self, hive: str, key: str) -> str | None:
        winreg = self._winreg()
        try:
            with winreg.OpenKey(self._hive(hive), key) as handle:
                value, _ = winreg.QueryValueEx(handle, "")
        except OSError:
            return None
        return value if isinstance(value, str) else None

    def delete_key(self, hive: str, key: str) -> bool:
        winreg = self._winreg()
        try:
            winreg.DeleteKey(self._hive(hive), key)
        except OSError:
            return False
        return True


# ---------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """One place a browser looks for the host: a manifest file, plus on Windows the
    registry key (``hive\\key``) that points to it."""

    browser: str
    manifest: Path
    scope: str  # "user" | "system" | "profile"
    hive: str | None = None
    key: str | None = None

    def describe(self) -> str:
        where = f"{self.hive}\\{self.key}" if self.key else str(self.manifest)
        return f"{BROWSER_NAMES[self.browser]} ({self.scope}): {where}"


def _browsers(choice: str | Iterable[str]) -> list[str]:
    if isinstance(choice, str):
        chosen = list(BROWSERS) if choice == "all" else [choice]
    else:
        chosen = list(choice)
    unknown = [b for b in chosen if b not in BROWSERS]
    if unknown:
        raise ValueError(f"unknown browser {unknown[0]!r}; choose from {', '.join(BROWSERS)}")
    return chosen


def targets(
    browsers: str | Iterable[str],
    platform: Platform,
    *,
    system: bool = False,
    user_data_dir: Path | None = None,
) -> list[Target]:
    """Where the manifests for ``browsers`` go."""
    chosen = _browsers(browsers)
    if user_data_dir is not None:  # one directory, whichever browser uses it
        path = Path(user_data_dir).expanduser().absolute()
        return [Target(chosen[0], path / "NativeMessagingHosts" / MANIFEST_FILENAME, "profile")]
    out: list[Target] = []
    for browser in chosen:
        if platform.system == "win32":
            hive = "HKLM" if system else "HKCU"
            folder = platform.launcher_dir(system) / browser
            key = f"{_WIN_KEYS[browser]}\\NativeMessagingHosts\\{HOST_NAME}"
            scope = "system" if system else "user"
            out.append(Target(browser, folder / MANIFEST_FILENAME, scope, hive, key))
        else:
            for folder in _folders(browser, platform, system):
                out.append(Target(browser, folder / MANIFEST_FILENAME,
                                  "system" if system else "user"))  # fmt: skip
    return out


def _folders(browser: str, platform: Platform, system: bool) -> list[Path]:
    if platform.system == "darwin":
        if system:
            return [platform.root / p for p in _MAC_SYSTEM[browser]]
        support = platform.home / "Library" / "Application Support"
        return [support / _MAC_USER[browser] / "NativeMessagingHosts"]
    if system:
        return [platform.root / p for p in _LINUX_SYSTEM[browser]]
    return [platform.config_home / _LINUX_USER[browser] / "NativeMessagingHosts"]


def browser_present(browser: str, platform: Platform) -> bool:
    """Whether the browser has a per-user profile directory (Linux and macOS)."""
    if platform.system == "win32":
        return True
    return _folders(browser, platform, False)[0].parent.is_dir()


# ---------------------------------------------------------------------- content


def origin_for(extension_id: str) -> str:
    """``chrome-extension://<id>/`` (trailing slash, no wildcard)."""
    if not isinstance(extension_id, str) or not _ID_RE.match(extension_id):
        raise ValueError(
            f"{extension_id!r} is not an extension ID (32 letters from a to p, as shown on "
            "chrome://extensions)"
        )
    return f"chrome-extension://{extension_id}/"


def manifest_document(launcher: Path, extension_id: str = EXTENSION_ID) -> dict[str, Any]:
    return {
        "name": HOST_NAME,
        "description": "Backtrail: a local memory of what you read",
        "path": str(launcher),
        "type": "stdio",
        "allowed_origins": [origin_for(extension_id)],
    }


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def launcher_text(python: str, data_dir: Path | None, system: str) -> str:
    """The launcher script: runs ``python -m backtrail.native_host`` with the browser's
    arguments, with ``BACKTRAIL_HOME`` set when a data directory was chosen."""
    if system == "win32":
        lines = ["@echo off", f"rem {_MARK}, written by `backtrail install`."]
        if data_dir is not None:
            lines.append(f'set "BACKTRAIL_HOME={data_dir}"')
        lines.append(f'"{python}" -m backtrail.native_host %*')
        return "\r\n".join(lines) + "\r\n"
    lines = [
        "#!/bin/sh",
        f"# {_MARK}, written by `backtrail install`.",
        "# Run `backtrail install` again rather than editing it.",
    ]
    if data_dir is not None:
        lines += [f"BACKTRAIL_HOME={_sh_quote(str(data_dir))}", "export BACKTRAIL_HOME"]
    lines.append(f'exec {_sh_quote(python)} -m backtrail.native_host "$@"')
    return "\n".join(lines) + "\n"


def _missing(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: Iterable[str | Path]) -> None:
    """Remove each directory that is empty, deepest first."""
    for folder in sorted({str(f) for f in folders}, key=lambda f: -len(Path(f).parts)):
        try:
            os.rmdir(folder)
        except OSError:
            pass  # not empty (something else lives there), or already gone


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(temporary, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


# ---------------------------------------------------------------------- install


@dataclass
class InstallReport:
    """What :func:`install` wrote (``written``) and which browsers it left out because
    they are not on this machine (``skipped``)."""

    launcher: Path
    written: list[Target]
    skipped: list[str]


def install(
    browsers: str | Iterable[str] = "all",
    *,
    extension_id: str = EXTENSION_ID,
    user_data_dir: Path | None = None,
    system: bool = False,
    data_dir: Path | None = None,
    python: str | None = None,
    platform: Platform | None = None,
    registry: Registry | None = None,
) -> InstallReport:
    """Write the launcher and the manifests (and registry keys on Windows). With
    ``"all"`` and per-user scope, browsers without a profile directory are skipped
    unless none is found (then every browser is registered)."""
    plat = platform or Platform.current()
    origin_for(extension_id)  # validate before writing anything
    if user_data_dir is not None and plat.system == "win32":
        raise ValueError("--user-data-dir has no effect on Windows: browsers read the "
                         "registry there, whatever the profile directory")  # fmt: skip
    chosen = _browsers(browsers)
    skipped: list[str] = []
    if browsers == "all" and not system and user_data_dir is None:
        present = [b for b in chosen if browser_present(b, plat)]
        skipped = [b for b in chosen if b not in present]
        chosen = present or chosen
        skipped = skipped if present else []
    launcher = plat.launcher_dir(system) / plat.launcher_name
    home = None if data_dir is None else Path(data_dir).expanduser().absolute()
    created = {"": _missing(launcher.parent)}
    _write(launcher, launcher_text(python or sys.executable, home, plat.system), 0o755)
    document = json.dumps(manifest_document(launcher, extension_id), indent=2) + "\n"
    written = targets(chosen, plat, system=system, user_data_dir=user_data_dir)
    for target in written:
        created[str(target.manifest)] = _missing(target.manifest.parent)
        _write(target.manifest, document, 0o644)
        if target.key is not None:
            assert target.hive is not None
            (registry or WindowsRegistry()).set_default(target.hive, target.key,
                                                        str(target.manifest))  # fmt: skip
    _record(launcher.parent, written, created=created)
    return InstallReport(launcher, written, skipped)


def _receipt_data(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / RECEIPT_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _receipt(folder: Path) -> list[dict[str, Any]]:
    entries = _receipt_data(folder).get("targets")
    entries = entries if isinstance(entries, list) else []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("manifest"), str)]


def _dirs(value: object) -> list[str]:
    return [d for d in value if isinstance(d, str)] if isinstance(value, list) else []


def _record(
    folder: Path,
    written: Sequence[Target],
    removed: Sequence[Target] = (),
    *,
    created: Mapping[str, Sequence[Path]] | None = None,
) -> None:
    """Keep the list of manifests written (so uninstall and doctor find custom
    ``--user-data-dir`` ones) and the directories install created for each (``created``:
    by manifest path, ``""`` for the launcher's), so uninstall removes them too."""
    created = created or {}
    gone = {(t.browser, str(t.manifest)) for t in removed if t.scope != "profile"}
    gone_dirs = {str(t.manifest) for t in removed if t.scope == "profile"}
    entries = [
        e for e in _receipt(folder)
        if (e.get("browser"), e["manifest"]) not in gone and e["manifest"] not in gone_dirs
    ]
    known = {(e.get("browser"), e["manifest"]) for e in entries}
    known |= {(None, e["manifest"]) for e in entries if e.get("scope") == "profile"}
    entries += [
        {"browser": t.browser, "scope": t.scope, "manifest": str(t.manifest), "hive": t.hive,
         "key": t.key, "dirs": [str(d) for d in created.get(str(t.manifest), ())]}
        for t in written
        if (t.browser, str(t.manifest)) not in known
        and not (t.scope == "profile" and (None, str(t.manifest)) in known)
    ]  # fmt: skip
    launcher_dirs = _dirs(_receipt_data(folder).get("dirs"))
    launcher_dirs += [str(d) for d in created.get("", ()) if str(d) not in launcher_dirs]
    if entries:
        document = {"version": 1, "targets": entries, "dirs": launcher_dirs}
        _write(folder / RECEIPT_FILENAME, json.dumps(document, indent=2) + "\n", 0o644)
    elif (folder / RECEIPT_FILENAME).exists():
        (folder / RECEIPT_FILENAME).unlink()


def _recorded(folder: Path) -> list[Target]:
    out = []
    for entry in _receipt(folder):
        browser = entry.get("browser")
        if browser in BROWSERS:
            out.append(Target(browser, Path(entry["manifest"]), str(entry.get("scope")),
                              entry.get("hive"), entry.get("key")))  # fmt: skip
    return out


def uninstall(
    browsers: str | Iterable[str] = "all",
    *,
    user_data_dir: Path | None = None,
    system: bool = False,
    platform: Platform | None = None,
    registry: Registry | None = None,
) -> list[str]:
    """Remove the manifests (and registry keys) of ``browsers`` in the chosen scope,
    plus ``--user-data-dir`` ones install recorded; then the launcher, once no manifest
    it wrote is left; and the directories install created for them, when empty. Returns
    the files and registry keys removed. A file another browser's install still uses
    (Brave and Chromium share one system-wide) is kept."""
    plat = platform or Platform.current()
    chosen = _browsers(browsers)
    folder = plat.launcher_dir(system)
    candidates = targets(chosen, plat, system=system, user_data_dir=user_data_dir)
    if user_data_dir is None:
        candidates += [t for t in _recorded(folder) if t.browser in chosen and t.scope == "profile"]
    made = {e["manifest"]: _dirs(e.get("dirs")) for e in _receipt(folder)}
    launcher_dirs = _dirs(_receipt_data(folder).get("dirs"))
    _record(folder, [], candidates)
    still_used = {entry["manifest"] for entry in _receipt(folder)}
    removed: list[str] = []
    emptied: list[str] = []
    for target in candidates:
        if target.key is not None and target.hive is not None:
            if (registry or WindowsRegistry()).delete_key(target.hive, target.key):
                removed.append(f"{target.hive}\\{target.key}")
        if str(target.manifest) not in still_used and _remove(target.manifest):
            removed.append(str(target.manifest))
            emptied += made.get(str(target.manifest), ())
    launcher = folder / plat.launcher_name
    if not _receipt(folder) and launcher.exists() and _MARK in _read(launcher):
        launcher.unlink()
        removed.append(str(launcher))
        emptied += [str(folder), *launcher_dirs]
    _remove_empty(emptied)  # those install created, once nothing else lives there
    return removed


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _remove(path: Path) -> bool:
    """Delete a manifest file named for our host (nothing else is touched)."""
    if path.name != MANIFEST_FILENAME or not path.is_file():
        return False
    path.unlink()
    return True


# ----------------------------------------------------------------------- doctor


def manifest_problems(path: Path, extension_id: str | None = None) -> tuple[list[str], dict]:
    """What is wrong with the manifest at ``path`` (empty when nothing), and its data."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        return [f"cannot be read ({error.strerror or error})"], {}
    except ValueError as error:
        return [f"is not valid JSON ({error})"], {}
    if not isinstance(data, dict):
        return ["is not a JSON object"], {}
    problems = []
    if path.name != MANIFEST_FILENAME:
        problems.append(f"is named {path.name}, not {MANIFEST_FILENAME}")
    if data.get("name") != HOST_NAME:
        problems.append(f"has name {data.get('name')!r}, not {HOST_NAME!r}")
    if data.get("type") != "stdio":
        problems.append(f"has type {data.get('type')!r}, not 'stdio'")
    launcher = data.get("path")
    if not isinstance(launcher, str) or not os.path.isabs(launcher):
        problems.append(f"has path {launcher!r}, which is not absolute")
    elif not os.path.isfile(launcher):
        problems.append(f"points to {launcher}, which does not exist")
    elif not launcher.lower().endswith((".bat", ".exe")) and not os.access(launcher, os.X_OK):
        problems.append(f"points to {launcher}, which is not executable")
    origins = data.get("allowed_origins")
    if not isinstance(origins, list) or not origins:
        problems.append("has no allowed_origins list")
    else:
        bad = [o for o in origins if not isinstance(o, str) or not _ORIGIN_RE.match(o)]
        if bad:
            problems.append(f"has a malformed origin {bad[0]!r} (expected "
                            "chrome-extension://<32 letters a-p>/)")  # fmt: skip
        elif extension_id is not None and origin_for(extension_id) not in origins:
            problems.append(f"does not allow the Backtrail extension ({origin_for(extension_id)})")
    return problems, data


def _check(name: str, ok: bool, detail: str, fix: str | None = None) -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail, "fix": None if ok else fix}


def _found(plat: Platform, registry: Registry | None, extra: Iterable[Path]) -> list[Target]:
    """Every manifest location with something in it (files, or registry keys)."""
    seen: dict[str, Target] = {}
    candidates = targets("all", plat) + targets("all", plat, system=True)
    candidates += _recorded(plat.launcher_dir(False)) + _recorded(plat.launcher_dir(True))
    candidates += [t for d in extra for t in targets("chromium", plat, user_data_dir=d)]
    for target in candidates:
        if target.key is not None and target.hive is not None:
            value = (registry or WindowsRegistry()).get_default(target.hive, target.key)
            if value is None:
                continue
            target = Target(target.browser, Path(value), target.scope, target.hive, target.key)
        elif not target.manifest.exists():
            continue
        seen.setdefault(f"{target.browser}|{target.hive}|{target.manifest}", target)
    return list(seen.values())


def doctor_checks(
    *,
    extension_id: str | None = None,
    user_data_dirs: Iterable[Path] = (),
    handshake_hosts: bool = True,
    timeout: float = 30.0,
    platform: Platform | None = None,
    registry: Registry | None = None,
) -> list[dict[str, Any]]:
    """Check every host manifest found (per user, system-wide, recorded
    ``--user-data-dir`` ones and ``user_data_dirs``) and complete a handshake with each
    launcher they point to. Each check is ``{"check", "ok", "detail", "fix"}``."""
    plat = platform or Platform.current()
    checks: list[dict[str, Any]] = []
    launchers: dict[str, str] = {}
    for target in _found(plat, registry, user_data_dirs):
        problems, data = manifest_problems(target.manifest, extension_id)
        name = (f"host manifest for --user-data-dir {target.manifest.parent.parent}"
                if target.scope == "profile"
                else f"{BROWSER_NAMES[target.browser]} host manifest ({target.scope})")  # fmt: skip
        where = f"{target.hive}\\{target.key} -> {target.manifest}" if target.key else str(
            target.manifest
        )
        if problems:
            checks.append(_check(name, False, f"{where} " + "; ".join(problems),
                                 "run `backtrail install` again to rewrite it"))  # fmt: skip
            continue
        origins = ", ".join(data["allowed_origins"])
        checks.append(_check(name, True, f"{where} allows {origins}"))
        launchers.setdefault(data["path"], data["allowed_origins"][0])
    if not checks:
        checks.append(_check(
            "host manifest", False,
            "no browser has the Backtrail host registered, so the extension shows "
            "'host not installed'",
            "run `backtrail install` (add --browser or --user-data-dir to choose where)",
        ))  # fmt: skip
    if handshake_hosts:
        for launcher, origin in launchers.items():
            ok, detail = handshake(launcher, origin, timeout=timeout)
            checks.append(_check(f"host handshake ({launcher})", ok, detail,
                                 "run `backtrail install` again; if it still fails, read the "
                                 "host log named above"))  # fmt: skip
    return checks


def handshake(launcher: str, origin: str, *, timeout: float = 30.0) -> tuple[bool, str]:
    """Start the host as the browser would, send ``hello``, read the answer, close
    stdin and expect a clean exit. ``(ok, what happened in plain words)``."""
    hello = {
        "id": "doctor-1", "type": "hello", "protocol": 1, "extension_version": "doctor",
        "extension_id": origin.split("/")[2], "browser": {"name": "doctor", "version": None},
        "profile_id": "doctor", "capabilities": [], "paused": False,
    }  # fmt: skip
    body = json.dumps(hello).encode("utf-8")
    command = [launcher, origin]
    if launcher.lower().endswith(".bat"):
        command = ["cmd.exe", "/d", "/c", launcher, origin]
    try:
        process = subprocess.run(
            command, input=struct.pack("<I", len(body)) + body, capture_output=True,
            timeout=timeout, cwd=os.path.dirname(launcher), check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, f"the host did not answer hello within {timeout:g} s"
    except OSError as error:
        return False, f"the launcher could not be started: {error.strerror or error}"
    answer, reason = _first_frame(process.stdout)
    stderr = process.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
    tail = f" (stderr: {' | '.join(stderr)})" if stderr else ""
    if answer is None:
        return False, f"the host exited with status {process.returncode} and {reason}{tail}"
    if not answer.get("ok"):
        message = (answer.get("error") or {}).get("message", "no message")
        return False, f"the host refused hello: {message}"
    if process.returncode != 0:
        return False, f"the host answered but exited with status {process.returncode}{tail}"
    result = answer.get("result") or {}
    return True, (f"host {result.get('host_version')} speaks protocol {result.get('protocol')} "
                  "and exited cleanly")  # fmt: skip


def _first_frame(data: bytes) -> tuple[dict[str, Any] | None, str]:
    if len(data) < 4:
        return None, "sent no answer"
    (size,) = struct.unpack("<I", data[:4])
    body = data[4 : 4 + size]
    if len(body) < size:
        return None, "sent a cut-off answer"
    try:
        answer = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "sent something that is not a JSON frame (is stdout polluted?)"
    return (answer, "") if isinstance(answer, dict) else (None, "sent a non-object frame")
