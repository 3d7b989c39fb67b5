"""Launching, driving and closing the end-to-end harness's headless Chromium with the
extension loaded, and finding the native-host processes it starts."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from e2e_cdp_support import CdpPipe, ServiceWorker, Session, Tab
from e2e_support import EXTENSION_DIR, EXTENSION_ORIGIN, CdpError, Profile, wait_for

__all__ = ["CHROMIUM_CANDIDATES", "ChromiumMissing", "find_chromium", "Browser", "process_alive"]

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
        try:
            self.worker().call("(o) => chrome.action.openPopup(o)", options)
        except CdpError as error:
            # Headless Chromium under load can leave no window focused, and openPopup
            # wants one: focus a normal window (as a person's click would) and try again.
            if "active browser window" not in str(error):
                raise
            self.worker().call(
                "async () => { const w = await chrome.windows.getLastFocused("
                "{windowTypes: ['normal']}); await chrome.windows.update(w.id, "
                "{focused: true}); }"
            )
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


def axe_script() -> str:
    """axe-core's browser build, from npm into extension/node_modules (a devDependency:
    CI starts from a clean clone, so it is installed here when missing)."""
    script = EXTENSION_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("the axe-core checks need npm (apt-get install -y npm)")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=EXTENSION_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm ci failed: {done.stdout}{done.stderr}")
    return script.read_text(encoding="utf-8")


def axe_violations(page: Tab, script: str) -> list[dict[str, Any]]:
    """The serious and critical axe-core violations on ``page`` (injected over DevTools,
    which the extension pages' CSP does not govern)."""
    page.evaluate(script + ";true")
    found: list[dict[str, Any]] = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => n.html).slice(0, 3)})))"
    )
    return found
