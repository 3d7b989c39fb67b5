"""The DevTools protocol for the end-to-end harness: the pipe to Chromium and the sessions
on its targets (the extension's service worker, pages and the popup)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from e2e_support import CdpError, wait_for

if TYPE_CHECKING:
    from e2e_browser_support import Browser

__all__ = ["CdpPipe", "Session", "ServiceWorker", "Tab"]


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


_KEYS = {"Tab": (9, ""), "Enter": (13, "\r"), "Escape": (27, ""), "ArrowUp": (38, ""),
         "ArrowDown": (40, "")}  # fmt: skip
"""Virtual key code and typed text of the keys :meth:`Tab.press` knows."""


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

    def press(self, key: str, *, shift: bool = False) -> None:
        """Press and release one key as a keyboard would (``Input.dispatchKeyEvent``):
        ``"Tab"``, ``"Enter"``, ``"ArrowDown"``, ``"ArrowUp"``, ``"Escape"``."""
        code, text = _KEYS[key]
        base = {"key": key, "code": key, "windowsVirtualKeyCode": code,
                "modifiers": 8 if shift else 0}  # fmt: skip
        down = {**base, "type": "keyDown", **({"text": text} if text else {})}
        self.send("Input.dispatchKeyEvent", down)
        try:
            self.send("Input.dispatchKeyEvent", {**base, "type": "keyUp"})
        except CdpError:
            if self.target_id in {t["targetId"] for t in self.browser.targets()}:
                raise  # else the key closed the page (a popup opening a link): done

    def type_text(self, text: str) -> None:
        """Type ``text`` into the focused element (``Input.insertText``)."""
        self.send("Input.insertText", {"text": text})

    def focused(self) -> dict[str, Any]:
        """The focused element: its tag, id, class and, for a link, href."""
        return self.evaluate(
            "(() => { const e = document.activeElement; return e && {tag: e.tagName,"
            " id: e.id, className: e.className, href: e.href ?? null}; })()"
        )

    def bring_to_front(self) -> None:
        self.send("Page.bringToFront")

    def close(self) -> None:
        """Close this tab (the browser fires tabs.onRemoved)."""
        try:
            self.browser.cdp.send("Target.closeTarget", {"targetId": self.target_id})
        except CdpError:
            pass  # already gone
