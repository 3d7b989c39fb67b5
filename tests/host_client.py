"""A stand-in for the browser: runs the native host as a real subprocess and exchanges
real frames with it (used by the host tests and bench/host_bench.py)."""

from __future__ import annotations

import itertools
import json
import os
import queue
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ORIGIN = "chrome-extension://eeihccjhkpjgahjachnggfamlbdoeaio/"
VISIT_TIME = 1_732_924_800_123  # ms


def frame(message: Any) -> bytes:
    """Length prefix + compact UTF-8 JSON, ``id`` first as the extension writes it."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return struct.pack("<I", len(body)) + body


def hello_fields(profile: str = "profile-1") -> dict[str, Any]:
    return {
        "protocol": 1, "extension_version": "0.1.0",
        "extension_id": "eeihccjhkpjgahjachnggfamlbdoeaio",
        "browser": {"name": "chromium", "version": "156.0"}, "profile_id": profile,
        "capabilities": ["actions", "notify"], "paused": False,
    }  # fmt: skip


def visit(visit_id: str, *, time: int = VISIT_TIME, dwell_ms: int = 5_000) -> dict[str, Any]:
    return {"visit_id": visit_id, "time": time, "tab_id": 7, "window_id": 1,
            "transition": "link", "referrer": None, "dwell_ms": dwell_ms}  # fmt: skip


def capture_fields(
    url: str, body: str, *, visit_id: str, html: bool = False, title: str | None = "A page",
    time: int = VISIT_TIME,
) -> dict[str, Any]:  # fmt: skip
    fields: dict[str, Any] = {
        "url": url, "title": title, "language": "en",
        "content_type": "html" if html else "text",
    }  # fmt: skip
    fields["html" if html else "text"] = body
    fields.update(truncated=False, dedupe_key=f"capture:{visit_id}", captured_time=time + 5_000,
                  visit=visit(visit_id, time=time))  # fmt: skip
    return fields


class HostProcess:
    """``python -m backtrail.native_host`` (or any command) with pipes on both ends.
    Frames from its stdout are parsed on a thread, so every wait is bounded."""

    _ids = itertools.count(1)

    def __init__(
        self,
        home: Path,
        *,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.home = home
        settings = {
            "BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0",
            "BACKTRAIL_INDEXER_DEBOUNCE": "0.05",
        }  # fmt: skip
        environ = {**os.environ, **settings, **(env or {})}
        self.stderr_path = home.parent / f"host-stderr-{os.getpid()}-{id(self)}.txt"
        home.parent.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "backtrail.native_host", ORIGIN],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=environ,
        )  # fmt: skip
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.junk: list[bytes] = []  # bytes on stdout that were not a whole frame
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        out = self.process.stdout
        assert out is not None
        while True:
            header = out.read(4)
            if len(header) < 4:
                if header:
                    self.junk.append(header)
                self.frames.put(None)
                return
            (size,) = struct.unpack("<I", header)
            body = out.read(size)
            if len(body) < size:
                self.junk.append(header + body)
                self.frames.put(None)
                return
            try:
                self.frames.put(json.loads(body.decode("utf-8")))
            except ValueError:
                self.junk.append(header + body)

    # -------------------------------------------------------------- sending

    def send_raw(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(frame(message))

    def new_id(self, prefix: str = "t") -> str:
        return f"{prefix}-{next(self._ids)}"

    def message(self, kind: str, /, ident: str | None = None, **fields: Any) -> dict[str, Any]:
        return {"id": ident or self.new_id(), "type": kind, **fields}

    def recv(self, timeout: float = 60.0) -> dict[str, Any]:
        try:
            answer = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame from the host within {timeout} s") from None
        if answer is None:
            raise AssertionError(f"the host closed stdout; stderr: {self.stderr()[-2000:]}")
        return answer

    def call(self, kind: str, /, timeout: float = 60.0, **fields: Any) -> dict[str, Any]:
        """Send one request and return its response (whose id must match)."""
        message = self.message(kind, **fields)
        self.send(message)
        answer = self.recv(timeout)
        assert answer.get("id") == message["id"], answer
        return answer

    def ok(self, kind: str, /, **fields: Any) -> dict[str, Any]:
        """``call`` that must succeed; returns the result."""
        answer = self.call(kind, **fields)
        assert answer["ok"] is True, answer
        return answer["result"]

    def hello(self, profile: str = "profile-1") -> dict[str, Any]:
        return self.ok("hello", **hello_fields(profile))

    # ------------------------------------------------------------- closing

    def close_stdin(self) -> None:
        stdin = self.process.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    def wait(self, timeout: float = 60.0) -> int:
        """Close stdin (EOF) and wait for the exit status."""
        self.close_stdin()
        try:
            return self.process.wait(timeout)
        finally:
            self._reader.join(timeout)
            self._stderr.close()

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self._stderr.close()

    def __enter__(self) -> HostProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close_stdin()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
