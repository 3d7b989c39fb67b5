"""End-to-end harness: a real headless Chromium running the real Backtrail extension,
talking to the real native host that ``backtrail install`` registered, with pages served
on 127.0.0.1 and the memory read back through ``backtrail mcp`` and the official MCP
client.

Everything here is synchronous (the tests poll conditions; nothing sleeps to wait):

- :class:`Profile` — one test profile: ``HOME``, a short ``TMPDIR``, the browser's
  ``--user-data-dir`` (the host manifest goes to ``<udd>/NativeMessagingHosts/``) and the
  Backtrail data directory (``config.toml``: embeddings off unless asked for);
  :meth:`Profile.create` runs ``backtrail install``; :meth:`Profile.host_sessions` reads
  the host's log (pid, messages, exit status logged at end of stream, errors).
- :class:`Browser` — Chromium driven over the DevTools protocol on
  ``--remote-debugging-pipe`` (:class:`CdpPipe`, no dependency). ``browser.worker()`` is
  the extension's service worker once ``__backtrail.ready`` (:class:`ServiceWorker`:
  ``hook(name, *args)``, ``state()``, ``wait_connected()``, ``flush()``, ``tab_id(url)``,
  ``problems()``), ``browser.open_tab(url)`` a page (:class:`Tab`: ``evaluate``,
  ``call``, ``navigate``, ``click``, ``fill``, ``select_text``...),
  ``browser.open_popup()`` the real action popup, ``browser.incognito_context()`` an
  off-the-record context, ``browser.host_pids()`` the running hosts, ``browser.close()``
  ``Browser.close`` and the exit status.
- :class:`PageServer` — HTML pages on 127.0.0.1 (also reachable as ``localhost``, a
  second host name for exclusion tests); it records every request.
- :class:`McpSession` — ``backtrail mcp`` over stdio with the official client, run on a
  background event loop so tests stay synchronous (``call``, ``data``, ``search``,
  ``wait_search``).
- :func:`store_mentions` — every ledger row whose text mentions a string (for "nothing
  was stored" assertions); :func:`ledger_rows` — a read-only query on the ledger;
  :func:`wait_for` — the bounded poll every wait goes through.

Typical use::

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

import fcntl
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from mcp_support import BACKTRAIL, server_env

__all__ = [
    "EXTENSION_DIR", "EXTENSION_ID", "EXTENSION_ORIGIN", "CHROMIUM_CANDIDATES",
    "ChromiumMissing", "CdpError", "find_chromium", "wait_for", "Profile", "CdpPipe",
    "Session", "ServiceWorker", "Tab", "Browser", "PageServer", "McpSession",
    "store_mentions", "ledger_rows", "process_alive", "HostSession",
]  # fmt: skip

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
EXTENSION_DIR = ROOT / "extension"
EXTENSION_ID = (EXTENSION_DIR / "EXTENSION_ID").read_text(encoding="utf-8").strip()
EXTENSION_ORIGIN = f"chrome-extension://{EXTENSION_ID}"
CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "chromium")
"""Debian's real binary first (``/usr/bin/chromium`` is a wrapper script)."""

CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic",
    "--password-store=basic", "--disable-features=Translate,MediaRouter",
    "--remote-debugging-pipe",
)  # fmt: skip
"""Quiet, offline-safe flags (from the shared notes)."""

_HOST_MODULE = "backtrail.native_host"


class ChromiumMissing(RuntimeError):
    """No Chromium binary on this machine."""


class CdpError(RuntimeError):
    """A DevTools command failed, timed out, or the browser went away."""


def find_chromium() -> str:
    """The Chromium binary to run (``$BACKTRAIL_E2E_CHROMIUM`` overrides)."""
    override = os.environ.get("BACKTRAIL_E2E_CHROMIUM")
    for candidate in ([override] if override else []) + list(CHROMIUM_CANDIDATES):
        found = shutil.which(candidate)
        if found:
            return found
    raise ChromiumMissing(
        "the end-to-end tests need Chromium: run `apt-get install -y chromium` "
        "(or set BACKTRAIL_E2E_CHROMIUM to a Chromium binary)"
    )


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


# ------------------------------------------------------------------------ CDP


class CdpPipe:
    """The DevTools protocol over ``--remote-debugging-pipe``: NUL-terminated JSON,
    commands written to the browser's fd 3, answers and events read from its fd 4. A
    reader thread files answers by id and keeps the latest events (bounded)."""

    def __init__(self, read_fd: int, write_fd: int, max_events: int = 20_000) -> None:
        self._out = os.fdopen(write_fd, "wb", buffering=0)
        self._in = os.fdopen(read_fd, "rb", buffering=0)
        self._lock = threading.Condition()
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._events: deque[dict[str, Any]] = deque(maxlen=max_events)
        self.closed = False
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        try:
            while True:
                chunk = self._in.read(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                *frames, buffer = buffer.split(b"\0")
                messages = [json.loads(frame) for frame in frames if frame]
                with self._lock:
                    for message in messages:
                        if "id" in message:
                            self._answers[message["id"]] = message
                        else:
                            self._events.append(message)
                    self._lock.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                self.closed = True
                self._lock.notify_all()

    def send(
        self, method: str, params: dict[str, Any] | None = None, *,
        session_id: str | None = None, timeout: float = 30.0,
    ) -> dict[str, Any]:  # fmt: skip
        """Run one command and return its ``result``; raise :class:`CdpError` on an
        error answer, a timeout or a closed browser."""
        with self._lock:
            if self.closed:
                raise CdpError(f"{method}: the browser is gone")
            self._next_id += 1
            number = self._next_id
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        try:
            self._out.write(json.dumps(message).encode() + b"\0")
        except OSError as error:
            raise CdpError(f"{method}: cannot write to the browser: {error}") from error
        deadline = time.monotonic() + timeout
        with self._lock:
            while number not in self._answers:
                left = deadline - time.monotonic()
                if self.closed:
                    raise CdpError(f"{method}: the browser closed the pipe")
                if left <= 0:
                    raise CdpError(f"{method}: no answer within {timeout} s")
                self._lock.wait(left)
            answer = self._answers.pop(number)
        if "error" in answer:
            error = answer["error"]
            raise CdpError(f"{method}: {error.get('message')} {error.get('data', '')}".rstrip())
        return answer.get("result", {})

    def events(
        self, method: str | None = None, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The events received so far (oldest first), optionally of one method/session."""
        with self._lock:
            return [
                e for e in self._events
                if (method is None or e.get("method") == method)
                and (session_id is None or e.get("sessionId") == session_id)
            ]  # fmt: skip

    def close(self) -> None:
        for handle in (self._out, self._in):
            try:
                handle.close()
            except OSError:
                pass


class Session:
    """A DevTools session attached to one target (page or service worker)."""

    def __init__(self, browser: Browser, target_id: str, session_id: str) -> None:
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id

    def send(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """A DevTools command in this target."""
        return self.browser.cdp.send(method, params, session_id=self.session_id, timeout=timeout)

    def evaluate(self, expression: str, *, timeout: float = 30.0) -> Any:
        """Evaluate JavaScript here, await it if it is a promise, and return its value as
        JSON (``None`` for undefined). A thrown error raises :class:`CdpError`."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True,
             "userGesture": True, "timeout": int(timeout * 1000)},
            timeout=timeout + 5,
        )  # fmt: skip
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            described = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"JavaScript error: {described}")
        return result.get("result", {}).get("value")

    def call(self, function: str, *args: Any, timeout: float = 30.0) -> Any:
        """Call a JavaScript function (source text) with JSON arguments; its value."""
        rendered = ", ".join(json.dumps(arg) for arg in args)
        return self.evaluate(f"({function})({rendered})", timeout=timeout)


def _describe(remote: dict[str, Any]) -> str:
    """A console argument (a CDP RemoteObject) as text."""
    if "value" in remote:
        return str(remote["value"])
    return str(remote.get("description") or remote.get("type"))


class ServiceWorker(Session):
    """The extension's service worker, with its ``globalThis.__backtrail`` test hook."""

    def hook(self, name: str, *args: Any, timeout: float = 30.0) -> Any:
        """Call ``__backtrail.<name>(...args)`` and return its (awaited) value, e.g.
        ``hook("setSettings", {"capture": {"min_dwell_ms": 300}})``,
        ``hook("saveSelection", tab_id, "text")``, ``hook("flush", 10000)``."""
        return self.call(f"(...a) => globalThis.__backtrail.{name}(...a)", *args, timeout=timeout)

    def problems(self) -> list[str]:
        """Console warnings/errors and uncaught exceptions of the worker so far (the
        extension reports failures as ``console.warn("Backtrail:", error)``)."""
        out = []
        for event in self.browser.cdp.events(session_id=self.session_id):
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled" and params.get("type") in (
                "warning",
                "error",
                "assert",
            ):
                out.append(" ".join(_describe(arg) for arg in params.get("args", [])))
            elif event.get("method") == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                out.append(
                    details.get("exception", {}).get("description") or details.get("text", "")
                )
        return out

    def state(self) -> dict[str, Any]:
        """``__backtrail.state()``: connection, queue, stats, settings."""
        return self.hook("state")

    def wait_connected(self, timeout: float = 20.0) -> dict[str, Any]:
        """Wait until the extension has a host connection (hello answered)."""
        return wait_for(
            lambda: (state := self.state())["status"] == "connected" and state,
            timeout, "the extension to connect to the native host",
        )  # fmt: skip

    def flush(self, timeout: float = 15.0) -> None:
        """Wait until every queued message was acknowledged by the host."""
        left = self.hook("flush", int(timeout * 1000), timeout=timeout + 5)
        if left:
            raise AssertionError(f"{left} message(s) still queued: {self.hook('queueEntries')}")

    def tabs(self) -> list[dict[str, Any]]:
        """``chrome.tabs.query({})`` as the extension sees it (no incognito tabs)."""
        return self.evaluate("chrome.tabs.query({})")

    def tab_id(self, url: str, timeout: float = 10.0) -> int:
        """The ``chrome.tabs`` id of the one tab showing ``url`` (use distinct URLs)."""

        def find() -> int | None:
            ids = [t["id"] for t in self.tabs() if t.get("url") == url]
            if len(ids) > 1:
                raise AssertionError(f"{len(ids)} tabs show {url}; use distinct URLs")
            return ids[0] if ids else None

        return wait_for(find, timeout, f"a tab showing {url}")


class Tab(Session):
    """A page target (a tab, a window, or the extension's popup)."""

    def url(self) -> str:
        return self.evaluate("location.href")

    def navigate(self, url: str, *, wait: bool = True, timeout: float = 15.0) -> None:
        """Go to ``url`` (a normal, browser-initiated navigation)."""
        self.send("Page.navigate", {"url": url})
        if wait:
            self.wait_loaded(url, timeout)

    def wait_loaded(self, url: str | None = None, timeout: float = 15.0) -> None:
        """Wait until the document (at ``url``, if given) has finished loading."""
        expression = "[location.href, document.readyState]"
        wait_for(
            lambda: (here := self.evaluate(expression)) and here[1] == "complete"
            and (url is None or here[0] == url),
            timeout, f"{url or 'the page'} to load",
        )  # fmt: skip

    def wait_selector(self, selector: str, timeout: float = 10.0) -> None:
        wait_for(lambda: self.call("(s) => !!document.querySelector(s)", selector), timeout,
                 f"{selector} in {self.target_id}")  # fmt: skip

    def text(self, selector: str) -> str | None:
        """The text content of the first element matching ``selector`` (None: none)."""
        return self.call("(s) => document.querySelector(s)?.textContent ?? null", selector)

    def texts(self, selector: str) -> list[str]:
        """The text content of every element matching ``selector``."""
        return self.call("(s) => [...document.querySelectorAll(s)].map(e => e.textContent)",
                         selector)  # fmt: skip

    def fill(self, selector: str, value: str) -> None:
        """Set an input's value as typing would (fires ``input``)."""
        self.call(
            "(s, v) => { const e = document.querySelector(s); e.focus(); e.value = v;"
            " e.dispatchEvent(new Event('input', {bubbles: true})); }",
            selector, value,
        )  # fmt: skip

    def click(self, selector: str) -> None:
        self.call("(s) => document.querySelector(s).click()", selector)

    def select_text(self, selector: str, text: str) -> None:
        """Select ``text`` inside the first text node of ``selector`` (a user's drag)."""
        found = self.call(
            "(s, t) => { const n = document.querySelector(s).firstChild;"
            " const at = n.data.indexOf(t); if (at < 0) return false;"
            " const r = document.createRange(); r.setStart(n, at); r.setEnd(n, at + t.length);"
            " const sel = getSelection(); sel.removeAllRanges(); sel.addRange(r);"
            " return sel.toString(); }",
            selector, text,
        )  # fmt: skip
        if found != text:
            raise AssertionError(f"could not select {text!r} in {selector}")

    def bring_to_front(self) -> None:
        self.send("Page.bringToFront")

    def close(self) -> None:
        """Close this tab (the browser fires tabs.onRemoved)."""
        try:
            self.browser.cdp.send("Target.closeTarget", {"targetId": self.target_id})
        except CdpError:
            pass  # already gone


# ------------------------------------------------------------------------ browser


class Browser:
    """A headless Chromium with the extension loaded, for one :class:`Profile`.
    Use :meth:`launch`; close with :meth:`close` (also on ``with`` exit)."""

    def __init__(self, profile: Profile, process: subprocess.Popen[bytes], cdp: CdpPipe) -> None:
        self.profile = profile
        self.process = process
        self.cdp = cdp
        self._worker: ServiceWorker | None = None

    @classmethod
    def launch(
        cls, profile: Profile, *, extension_dir: Path = EXTENSION_DIR,
        extra_args: Sequence[str] = (), env: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Browser:  # fmt: skip
        """Start Chromium with ``--load-extension`` on the profile's user-data-dir, with
        the profile's environment plus ``env`` (the host inherits it, e.g.
        ``{"BACKTRAIL_LOG_LEVEL": "DEBUG"}``); return once DevTools answers."""
        binary = find_chromium()
        command_read, command_write = os.pipe()
        event_read, event_write = os.pipe()
        # Move the child's ends above 9 first, so placing them at 3 and 4 clobbers nothing.
        child_in = fcntl.fcntl(command_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(event_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(command_read)
        os.close(event_write)

        def wire_pipe() -> None:  # runs in the child, before exec
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        args = [
            binary, *CHROMIUM_FLAGS,
            f"--user-data-dir={profile.user_data_dir}",
            f"--load-extension={extension_dir}", f"--disable-extensions-except={extension_dir}",
            *extra_args, "about:blank",
        ]  # fmt: skip
        log = open(profile.root / "chromium.log", "ab")  # the child keeps its own copy
        try:
            process = subprocess.Popen(
                args, env={**profile.env(), **(env or {})}, cwd=profile.tmp,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                pass_fds=(3, 4), preexec_fn=wire_pipe, start_new_session=True,
            )  # fmt: skip
        finally:
            log.close()
            os.close(child_in)
            os.close(child_out)
        browser = cls(profile, process, CdpPipe(event_read, command_write))
        try:
            browser.cdp.send("Browser.getVersion", timeout=timeout)
        except CdpError:
            browser.kill()
            raise
        return browser

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    # -------------------------------------------------------------- targets

    def targets(self, kind: str | None = None) -> list[dict[str, Any]]:
        """``Target.getTargets`` (every browser context), optionally of one type."""
        infos = self.cdp.send("Target.getTargets")["targetInfos"]
        return [t for t in infos if kind is None or t["type"] == kind]

    def attach(self, target_id: str, cls: type[Session] = Session) -> Any:
        """A session on a target (flat mode)."""
        result = self.cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        return cls(self, target_id, result["sessionId"])

    def worker(self, timeout: float = 30.0) -> ServiceWorker:
        """The extension's service worker once its script has run (``__backtrail.ready``);
        re-attached if the worker was restarted."""
        if self._worker is not None:
            try:
                if self._worker.evaluate("globalThis.__backtrail?.ready === true"):
                    return self._worker
            except CdpError:
                pass
        script = f"{EXTENSION_ORIGIN}/src/background.js"

        def attached() -> ServiceWorker | None:
            found = [t for t in self.targets("service_worker") if t["url"] == script]
            if not found:
                return None
            worker = self.attach(found[0]["targetId"], ServiceWorker)
            worker.send("Runtime.enable")  # console messages and exceptions: problems()
            ready = wait_for(lambda: worker.evaluate("globalThis.__backtrail?.ready === true"),
                             timeout, "the service worker's __backtrail hook")  # fmt: skip
            return worker if ready else None

        self._worker = wait_for(attached, timeout, "the extension's service worker")
        return self._worker

    def open_tab(
        self, url: str, *, new_window: bool = True, context_id: str | None = None,
        wait: bool = True, timeout: float = 15.0,
    ) -> Tab:  # fmt: skip
        """Open ``url`` in a new tab (by default in its own window, so every page opened
        stays visible), optionally in a browser context from :meth:`incognito_context`."""
        params: dict[str, Any] = {"url": url, "newWindow": new_window}
        if context_id:
            params["browserContextId"] = context_id
        target_id = self.cdp.send("Target.createTarget", params)["targetId"]
        tab: Tab = self.attach(target_id, Tab)
        if wait:
            tab.wait_loaded(url, timeout)
        return tab

    def tab_for(self, url: str, timeout: float = 10.0) -> Tab:
        """Attach to the one page target whose URL is ``url`` (opened by the extension or
        by ``chrome.windows.create``)."""

        def find() -> str | None:
            ids = [t["targetId"] for t in self.targets("page") if t["url"] == url]
            return ids[0] if len(ids) == 1 else None

        return self.attach(wait_for(find, timeout, f"one page target at {url}"), Tab)

    def incognito_context(self) -> str:
        """A new off-the-record browser context (``Target.createBrowserContext``), the
        DevTools way to an incognito window; pass it to :meth:`open_tab`."""
        return self.cdp.send("Target.createBrowserContext")["browserContextId"]

    def close_context(self, context_id: str) -> None:
        """Dispose of a browser context from :meth:`incognito_context` (closes its tabs)."""
        self.cdp.send("Target.disposeBrowserContext", {"browserContextId": context_id})

    def extension_page(self, path: str, **kwargs: Any) -> Tab:
        """Open one of the extension's pages in a tab, e.g. ``src/ui/options.html``."""
        return self.open_tab(f"{EXTENSION_ORIGIN}/{path}", **kwargs)

    def open_popup(self, window_id: int | None = None, timeout: float = 10.0) -> Tab:
        """Open the real action popup (``chrome.action.openPopup``) over a window (the
        focused one by default) and attach to it once its page has loaded."""
        url = f"{EXTENSION_ORIGIN}/src/ui/popup.html"
        before = {t["targetId"] for t in self.targets("page") if t["url"] == url}
        options = {} if window_id is None else {"windowId": window_id}
        self.worker().call("(o) => chrome.action.openPopup(o)", options)

        def find() -> str | None:
            new = [t["targetId"] for t in self.targets("page")
                   if t["url"] == url and t["targetId"] not in before]  # fmt: skip
            return new[0] if new else None

        popup: Tab = self.attach(wait_for(find, timeout, "the action popup"), Tab)
        popup.wait_loaded(url, timeout)
        return popup

    # ---------------------------------------------------------------- host

    def host_pids(self) -> list[int]:
        """Running native-host processes started by this browser (its descendants)."""
        return [pid for pid in _descendants(self.pid) if _HOST_MODULE in _cmdline(pid)]

    def wait_host(self, timeout: float = 20.0) -> int:
        """The pid of the one running host process."""

        def single() -> int | None:
            pids = self.host_pids()
            return pids[0] if len(pids) == 1 else None

        return wait_for(single, timeout, "exactly one native-host process")

    # ---------------------------------------------------------------- close

    def close(self, timeout: float = 20.0) -> int:
        """``Browser.close``, then wait for the browser to exit; returns its exit status.
        Kills the browser's process group if it does not exit in time."""
        if self.process.poll() is None:
            try:
                self.cdp.send("Browser.close", timeout=timeout)
            except CdpError:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.cdp.close()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the browser's own process group (started with a new session)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)
        self.cdp.close()


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return int(fields[1]), fields[0]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat and stat[1] != "Z":
                children.setdefault(stat[0], []).append(int(entry))
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie counts as gone)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[1] != "Z"


# ------------------------------------------------------------------------ pages


class PageServer:
    """HTML pages on ``http://127.0.0.1:<port>/`` from a background thread. The same
    pages answer as ``http://localhost:<port>/`` (a second host name). ``requests``
    lists ``(host header, path)`` of every request served."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.requests: list[tuple[str, str]] = []
        self.held: dict[str, threading.Event] = {}
        pages, requests, held = self.pages, self.requests, self.held

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                requests.append((self.headers.get("Host", ""), path))
                content_type, body = pages.get(path, ("text/plain", b""))
                self.send_response(200 if path in pages else 404)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if path in held:  # the document commits, then stays loading until released
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    held[path].wait(60)
                    body = body[len(body) // 2 :]
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="pages", daemon=True)
        self._thread.start()

    def __enter__(self) -> PageServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def add(self, path: str, html: str, content_type: str = "text/html; charset=utf-8") -> str:
        """Serve ``html`` at ``path``; returns its 127.0.0.1 URL."""
        self.pages[path] = (content_type, html.encode("utf-8"))
        return self.url(path)

    def article(
        self, path: str, title: str, paragraphs: Iterable[str], *, script: str = "",
        host: str = "127.0.0.1",
    ) -> str:  # fmt: skip
        """Serve a small article (``<h1>`` + ``<p id="p0">``...) at ``path``; returns its
        URL on ``host``. ``script`` is inlined at the end of the body."""
        body = "\n".join(f'<p id="p{i}">{escape(text)}</p>' for i, text in enumerate(paragraphs))
        tail = f"<script>{script}</script>" if script else ""
        self.add(path, (
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
            f"</title></head><body><main><article><h1>{escape(title)}</h1>\n{body}\n"
            f"</article></main>{tail}</body></html>"
        ))  # fmt: skip
        return self.url(path, host)

    def hold(self, path: str) -> threading.Event:
        """Send only the first half of ``path`` until the returned event is set (at most a
        minute): the document commits and its tab stays loading meanwhile."""
        self.held[path] = threading.Event()
        return self.held[path]

    def served(self, path: str) -> list[str]:
        """The Host headers of the requests for ``path`` so far."""
        return [host for host, served in list(self.requests) if served == path]


# ------------------------------------------------------------------------ MCP


class McpSession:
    """``backtrail mcp`` (stdio, lean) on the profile's data directory, driven by the
    official MCP client on a background event loop; every method blocks."""

    def __init__(self, data_dir: Profile | Path, **env: str) -> None:
        self.data_dir = data_dir.data_dir if isinstance(data_dir, Profile) else Path(data_dir)
        self.env = env
        self._stack = ExitStack()
        self.client: Any = None

    def __enter__(self) -> McpSession:
        from anyio.from_thread import start_blocking_portal
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=BACKTRAIL, args=["mcp"],
                                       env=server_env(self.data_dir, **self.env))  # fmt: skip
        try:
            self.portal = self._stack.enter_context(start_blocking_portal("asyncio"))
            self.client = self._stack.enter_context(
                self.portal.wrap_async_context_manager(Client(params, mode="legacy"))
            )
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def call(self, tool: str, **arguments: Any) -> Any:
        """The raw ``CallToolResult`` of one tool call."""
        return self.portal.call(self.client.call_tool, tool, arguments)

    def data(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A tool's structured content; fails on a tool error."""
        result = self.call(tool, **arguments)
        if result.is_error:
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            raise AssertionError(f"{tool}({arguments}) failed: {text}")
        return result.structured_content

    def text(self, tool: str, **arguments: Any) -> str:
        """A tool's text (where web text and titles are); fails on a tool error."""
        result = self.call(tool, **arguments)
        joined = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            raise AssertionError(f"{tool}({arguments}) failed: {joined}")
        return joined

    def search(self, query: str, **arguments: Any) -> list[dict[str, Any]]:
        """``search_browsing`` results."""
        return self.data("search_browsing", query=query, **arguments)["results"]

    def wait_search(
        self, query: str, predicate: Callable[[list[dict[str, Any]]], Any] = bool,
        timeout: float = 10.0, **arguments: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Search until ``predicate(results)`` holds; returns those results."""
        found: list[list[dict[str, Any]]] = []

        def check() -> bool:
            results = self.search(query, **arguments)
            found[:] = [results]
            return bool(predicate(results))

        wait_for(check, timeout, f"search_browsing({query!r}) to match", interval=0.1)
        return found[0]


# ------------------------------------------------------------------------ ledger


def store_mentions(data_dir: Path, needle: str) -> dict[str, int]:
    """``{table.column: rows}`` for every text column of the ledger containing
    ``needle`` (read-only; an empty dict means the store never heard of it)."""
    path = Path(data_dir) / "ledger.sqlite3"
    if not path.exists():
        return {}
    found: dict[str, int] = {}
    with _readonly(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in db.execute(f'PRAGMA table_info("{table}")').fetchall():
                name, kind = column[1], (column[2] or "").upper()
                if kind not in ("TEXT", "BLOB", ""):
                    continue
                (count,) = db.execute(
                    f'SELECT count(*) FROM "{table}" WHERE instr(CAST("{name}" AS TEXT), ?) > 0',
                    (needle,),
                ).fetchone()
                if count:
                    found[f"{table}.{name}"] = count
    return found


def ledger_rows(data_dir: Path, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Rows of a read-only query on the ledger (the source of truth), as dicts."""
    with _readonly(Path(data_dir) / "ledger.sqlite3") as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(sql, tuple(params))]


@contextmanager
def _readonly(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        yield db
    finally:
        db.close()
