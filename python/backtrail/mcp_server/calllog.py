"""The forensic call log: one JSON line per tool call, to a file the user chose.

MCP hosts swallow a server's stderr, so when a client misbehaves the only record of
what it asked for is the server's own. Each line holds the time, the calling client,
the tool, its arguments (long strings cut, anything named like a secret replaced), the
outcome and the duration. Tokens never reach tool arguments (they travel in HTTP
headers), and argument names that look like credentials are redacted anyway.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CallLog"]

logger = logging.getLogger(__name__)

_SECRET_WORDS = ("token", "secret", "password", "passwd", "api_key", "apikey", "authorization")
_MAX_STRING = 300
_MAX_ITEMS = 20


def _safe(value: Any, name: str = "") -> Any:
    if any(word in name.lower() for word in _SECRET_WORDS):
        return "[redacted]"
    if isinstance(value, str):
        if len(value) > _MAX_STRING:
            return value[:_MAX_STRING] + f"…[{len(value)} chars]"
        return value
    if isinstance(value, Mapping):
        return {str(k): _safe(v, str(k)) for k, v in list(value.items())[:_MAX_ITEMS]}
    if isinstance(value, (list, tuple)):
        return [_safe(v, name) for v in value[:_MAX_ITEMS]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return repr(value)[:_MAX_STRING]


class CallLog:
    """Append-only JSON-lines log of tool calls (file created with mode 0600)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8")

    def record(
        self,
        *,
        client: str,
        tool: str,
        arguments: Mapping[str, Any],
        ok: bool,
        outcome: str,
        seconds: float,
        result_chars: int = 0,
        transport: str = "stdio",
    ) -> None:
        entry = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "client": client,
            "transport": transport,
            "tool": tool,
            "arguments": _safe(dict(arguments)),
            "ok": ok,
            "outcome": outcome[:_MAX_STRING],
            "ms": round(seconds * 1000, 1),
            "result_chars": result_chars,
        }
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        with self._lock:
            try:
                self._file.write(line + "\n")
                self._file.flush()
            except (OSError, ValueError) as error:  # the log must never break a call
                logger.warning("could not write the call log %s: %s", self.path, error)

    def close(self) -> None:
        with self._lock:
            self._file.close()
