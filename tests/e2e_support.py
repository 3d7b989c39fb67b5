"""End-to-end harness: a real headless Chromium running the real Backtrail extension,
talking to the real native host that ``backtrail install`` registered, with pages served
on 127.0.0.1 and the memory read back through ``backtrail mcp`` and the official MCP
client.

This module is what the other ``e2e_*_support`` modules share (the extension's identity,
:class:`Profile`, :func:`wait_for`, :class:`CdpError`). Everything is synchronous (the
tests poll conditions; nothing sleeps to wait):

- :class:`Profile` (here) — one test profile: ``HOME``, a short ``TMPDIR``, the browser's
  ``--user-data-dir`` (the host manifest goes to ``<udd>/NativeMessagingHosts/``) and the
  Backtrail data directory (``config.toml``: embeddings off unless asked for);
  :meth:`Profile.create` runs ``backtrail install``; :meth:`Profile.host_sessions` reads
  the host's log (pid, messages, exit status logged at end of stream, errors).
- :class:`Browser` (``e2e_browser_support``) — Chromium driven over the DevTools protocol
  on ``--remote-debugging-pipe`` (:class:`CdpPipe` in ``e2e_cdp_support``, no
  dependency). ``browser.worker()`` is the extension's service worker once
  ``__backtrail.ready`` (:class:`ServiceWorker`: ``hook(name, *args)``, ``state()``,
  ``wait_connected()``, ``flush()``, ``tab_id(url)``, ``problems()``),
  ``browser.open_tab(url)`` a page (:class:`Tab`: ``evaluate``, ``call``, ``navigate``,
  ``click``, ``fill``, ``select_text``...), ``browser.open_popup()`` the real action
  popup, ``browser.incognito_context()`` an off-the-record context,
  ``browser.host_pids()`` the running hosts, ``browser.close()`` ``Browser.close`` and
  the exit status; :func:`process_alive` and :func:`find_chromium` are there too.
- :class:`PageServer` (``e2e_pages_support``) — HTML pages on 127.0.0.1 (also reachable
  as ``localhost``, a second host name for exclusion tests); it records every request.
- :class:`McpSession` (``e2e_readback_support``) — ``backtrail mcp`` over stdio with the
  official client, run on a background event loop so tests stay synchronous (``call``,
  ``data``, ``search``, ``wait_search``); :func:`store_mentions` — every ledger row whose
  text mentions a string (for "nothing was stored" assertions); :func:`ledger_rows` — a
  read-only query on the ledger.
- :func:`wait_for` (here) — the bounded poll every wait goes through.

Typical use::

    from e2e_browser_support import Browser
    from e2e_pages_support import PageServer
    from e2e_readback_support import McpSession
    from e2e_support import Profile

    profile = Profile.create(tmp_path / "e2e")
    with PageServer() as pages, Browser.launch(profile) as browser, McpSession(profile) as mcp:
        worker = browser.worker()
        worker.wait_connected()
        worker.hook("setSettings", {"capture": {"min_dwell_ms": 300}})
        url = pages.article("/a", "Title", ["Some unusual words."])
        tab = browser.open_tab(url)
        mcp.wait_search("unusual words", lambda results: results, timeout=5)
        browser.close()

Chromium facts this relies on are in the shared notes (chromium-native-messaging.md):
``--load-extension`` works in ``--headless=new``; the host inherits the browser's
environment; Chromium writes under ``$HOME`` even with ``--user-data-dir``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mcp_support import BACKTRAIL

__all__ = [
    "EXTENSION_DIR", "EXTENSION_ID", "EXTENSION_ORIGIN", "CdpError", "wait_for", "Profile",
    "HostSession",
]  # fmt: skip

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
EXTENSION_DIR = ROOT / "extension"
EXTENSION_ID = (EXTENSION_DIR / "EXTENSION_ID").read_text(encoding="utf-8").strip()
EXTENSION_ORIGIN = f"chrome-extension://{EXTENSION_ID}"


class CdpError(RuntimeError):
    """A DevTools command failed, timed out, or the browser went away."""


def wait_for(
    condition: Callable[[], T], timeout: float = 10.0, what: str = "condition",
    interval: float = 0.02,
) -> T:  # fmt: skip
    """Poll ``condition`` until it returns something truthy and return that; fail with
    ``what`` after ``timeout`` seconds. A :class:`CdpError` raised by the condition counts
    as "not yet" (a page between two documents cannot be evaluated)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
        except CdpError as error:
            value, last_error = None, error  # type: ignore[assignment]
        if value:
            return value
        if time.monotonic() > deadline:
            hint = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{hint}")
        time.sleep(interval)


# ---------------------------------------------------------------------- profile


@dataclass(frozen=True)
class HostSession:
    """One native-host process as its log file tells it: ``status`` is the exit status it
    logged at the end of the stream (None: it never got there)."""

    pid: int
    messages: int | None
    status: int | None
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Profile:
    """The directories of one end-to-end run. ``home`` is ``$HOME`` (the launcher that
    ``backtrail install`` writes lives under it), ``tmp`` is ``$TMPDIR`` (a short path
    outside ``root``), ``user_data_dir`` the browser profile and ``data_dir`` Backtrail's
    store."""

    root: Path
    home: Path
    tmp: Path
    user_data_dir: Path
    data_dir: Path

    @classmethod
    def create(
        cls, root: Path, *, embeddings: bool = False, settings: dict[str, Any] | None = None
    ) -> Profile:
        """Make the directories, write the data directory's ``config.toml`` (embeddings
        off by default: the e2e tests are about the pipeline, not the model) and register
        the host with ``backtrail install --browser chromium --user-data-dir ...
        --data-dir ...``."""
        root = Path(root).absolute()
        # Chromium puts a Unix socket under $TMPDIR, and socket paths are limited to 107
        # bytes: pytest's tmp_path is too deep, so TMPDIR is a short directory of its own,
        # removed with the profile object (or at exit).
        tmp = Path(tempfile.mkdtemp(prefix="bt-e2e-"))
        profile = cls(root, root / "home", tmp, root / "udd", root / "data")
        weakref.finalize(profile, shutil.rmtree, tmp, True)
        for folder in (profile.home, profile.user_data_dir, profile.data_dir):
            folder.mkdir(parents=True, exist_ok=True)
        config = {"embeddings": embeddings, **(settings or {})}
        lines = [f"{key} = {json.dumps(value)}" for key, value in config.items()]
        (profile.data_dir / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        done = subprocess.run(
            [BACKTRAIL, "install", "--browser", "chromium",
             "--user-data-dir", str(profile.user_data_dir), "--data-dir", str(profile.data_dir)],
            env=profile.env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"backtrail install failed:\n{done.stdout}{done.stderr}")
        return profile

    @property
    def manifest(self) -> Path:
        """The host manifest ``backtrail install`` wrote for this browser profile."""
        return self.user_data_dir / "NativeMessagingHosts" / "com.backtrail.host.json"

    def env(self) -> dict[str, str]:
        """The environment for the browser (the host inherits it): this ``HOME`` and
        ``TMPDIR``, and no ``BACKTRAIL_*``/``MCP_*`` variable of the caller's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
        env.update({"HOME": str(self.home), "TMPDIR": str(self.tmp),
                    "XDG_CONFIG_HOME": str(self.home / ".config"),
                    "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                    "XDG_CACHE_HOME": str(self.home / ".cache")})  # fmt: skip
        return env

    @property
    def ledger_path(self) -> Path:
        return self.data_dir / "ledger.sqlite3"

    @property
    def host_log_path(self) -> Path:
        return self.data_dir / "logs" / "native-host.log"

    def host_log(self) -> str:
        try:
            return self.host_log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def host_sessions(self) -> dict[int, HostSession]:
        """Every host process of this data directory, from its log file, by pid."""
        started: dict[int, list[str]] = {}
        ended: dict[int, tuple[int, int]] = {}
        line_re = re.compile(r"^\S+ \S+ (\d+) (\w+) (\S+): (.*)$")
        end_re = re.compile(r"session ended after (\d+) message\(s\), status (\d+)")
        for line in self.host_log().splitlines():
            match = line_re.match(line)
            if not match:
                continue
            pid, level, message = int(match.group(1)), match.group(2), match.group(4)
            errors = started.setdefault(pid, [])
            if level in ("ERROR", "CRITICAL"):
                errors.append(message)
            end = end_re.search(message)
            if end:
                ended[pid] = (int(end.group(1)), int(end.group(2)))
        return {
            pid: HostSession(pid, *(ended.get(pid) or (None, None)), tuple(errors))
            for pid, errors in started.items()
        }
