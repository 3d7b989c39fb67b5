"""Settings of the MCP front end, and the environment variables that set them.

Backtrail's own ``BACKTRAIL_MCP_*`` names come first; the names mcp-memory-bridge uses
(``MCP_*``) work too, so its Claude Desktop and Cursor configurations can be reused as
they are. Command-line flags override both. Nothing here imports the MCP SDK.

========================================  ==========================================
Variable                                  Meaning
========================================  ==========================================
``BACKTRAIL_MCP_CLIENT_ID``,              Who this server's writes and reads are
``MCP_CLIENT_ID``                         attributed to (default: ``mcp:<client name>``
                                          from the client's handshake).
``MCP_TRANSPORT``                         ``stdio`` (default) or ``http``.
``MCP_HTTP_HOST``, ``MCP_HTTP_PORT``      Where ``--http`` listens (127.0.0.1:8765).
``BACKTRAIL_MCP_AUTH_TOKEN``,             The bearer token HTTP clients must send.
``MCP_AUTH_TOKEN``
``BACKTRAIL_MCP_TOKEN_FILE``              JSON file of tokens, each with a client id
                                          and a scope (read or write).
``MCP_ALLOWED_HOSTS``                     Extra Host header values to accept (comma
                                          separated; localhost names always pass).
``BACKTRAIL_MCP_PRELOAD_MODEL``,          ``1``: load the embedding model right after
``MCP_PRELOAD_MODEL``                     start instead of on the first search.
``BACKTRAIL_MCP_CALL_LOG``,               A file to append a forensic record of every
``MCP_DEBUG_LOG``                         tool call to (JSON lines, no secrets).
``BACKTRAIL_MCP_ACTION_WAIT``             Seconds a browser-action tool waits for the
                                          browser's outcome (default 15).
``BACKTRAIL_MCP_ACTION_CLAIM_WAIT``       Seconds it waits for a browser to pick the
                                          action up at all (default 3).
``BACKTRAIL_MCP_ACTION_TTL``              Seconds an action stays deliverable before it
                                          expires (default 120).
``MCP_ENABLE_DEMO_TOOLS``,                ``1``: also register ``lock_hold``, the
``BACKTRAIL_MCP_DEMO_TOOLS``              write-lock contention demo.
``MCP_EMBEDDINGS``                        ``off``: lean mode, BM25 only, no model.
``MCP_SQLITE_BUSY_TIMEOUT``               Ledger busy timeout (milliseconds).
``MCP_LOG_READS``,                        ``off``: fact reads and searches are not
``BACKTRAIL_MCP_LOG_READS``               recorded (default on, as mcp-memory-bridge);
                                          ``on`` also records page reads.
========================================  ==========================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["McpSettings", "config_overrides", "DEFAULT_PORT", "env_flag"]

DEFAULT_PORT = 8765
DEFAULT_ACTION_WAIT = 15.0
DEFAULT_ACTION_CLAIM_WAIT = 3.0
DEFAULT_ACTION_TTL = 120
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return value.strip()
    return None


def env_flag(env: Mapping[str, str], *names: str) -> bool | None:
    """A boolean environment variable (1/0, true/false, yes/no, on/off), or ``None``."""
    raw = _first(env, *names)
    if raw is None:
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError(f"{names[0]} must be on or off (1/0, true/false, yes/no), not {raw!r}")


@dataclass(frozen=True)
class McpSettings:
    """How the MCP server runs. ``client_id`` ``None`` means: name each client after
    the ``clientInfo`` it sends in its handshake."""

    transport: str = "stdio"
    client_id: str | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    auth_token: str | None = field(default=None, repr=False)
    token_file: Path | None = None
    allowed_hosts: tuple[str, ...] = ()
    preload_model: bool = False
    call_log: Path | None = None
    action_wait: float = DEFAULT_ACTION_WAIT
    action_claim_wait: float = DEFAULT_ACTION_CLAIM_WAIT
    action_ttl: int = DEFAULT_ACTION_TTL
    demo_tools: bool = False
    log_reads: bool = True
    """Record fact reads and searches in the audit log (mcp-memory-bridge's default)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> McpSettings:
        """Settings from the environment, then ``overrides`` that are not ``None``."""
        env = os.environ if environ is None else environ
        port = _first(env, "BACKTRAIL_MCP_PORT", "MCP_HTTP_PORT")
        try:
            port_number = int(port) if port is not None else DEFAULT_PORT
        except ValueError:
            raise ValueError(f"MCP_HTTP_PORT must be a port number, not {port!r}") from None
        hosts = _first(env, "BACKTRAIL_MCP_ALLOWED_HOSTS", "MCP_ALLOWED_HOSTS") or ""
        token_file = _first(env, "BACKTRAIL_MCP_TOKEN_FILE")
        call_log = _first(env, "BACKTRAIL_MCP_CALL_LOG", "MCP_DEBUG_LOG")
        transport = (_first(env, "BACKTRAIL_MCP_TRANSPORT", "MCP_TRANSPORT") or "stdio").lower()
        values: dict[str, Any] = {
            "transport": "http" if transport in ("http", "streamable-http") else "stdio",
            "client_id": _first(env, "BACKTRAIL_MCP_CLIENT_ID", "MCP_CLIENT_ID"),
            "host": _first(env, "BACKTRAIL_MCP_HOST", "MCP_HTTP_HOST") or "127.0.0.1",
            "port": port_number,
            "auth_token": _first(env, "BACKTRAIL_MCP_AUTH_TOKEN", "MCP_AUTH_TOKEN"),
            "token_file": Path(token_file).expanduser() if token_file else None,
            "allowed_hosts": tuple(h.strip() for h in hosts.split(",") if h.strip()),
            "preload_model": bool(
                env_flag(env, "BACKTRAIL_MCP_PRELOAD_MODEL", "MCP_PRELOAD_MODEL")
            ),
            "call_log": Path(call_log).expanduser() if call_log else None,
            "action_wait": _seconds(env, "BACKTRAIL_MCP_ACTION_WAIT", DEFAULT_ACTION_WAIT),
            "action_claim_wait": _seconds(
                env, "BACKTRAIL_MCP_ACTION_CLAIM_WAIT", DEFAULT_ACTION_CLAIM_WAIT
            ),
            "action_ttl": max(1, int(_seconds(env, "BACKTRAIL_MCP_ACTION_TTL",
                                              DEFAULT_ACTION_TTL))),  # fmt: skip
            "demo_tools": bool(
                env_flag(env, "BACKTRAIL_MCP_DEMO_TOOLS", "MCP_ENABLE_DEMO_TOOLS")
            ),
            "log_reads": env_flag(env, "BACKTRAIL_MCP_LOG_READS", "MCP_LOG_READS") is not False,
        }
        for name, value in overrides.items():
            if value is not None and value != ():
                values[name] = value
        return cls(**values)


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _first(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not 0 <= value <= 3_600:
        raise ValueError(f"{name} must be from 0 to 3600 seconds, not {raw!r}")
    return value


def config_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Backtrail settings implied by mcp-memory-bridge's variables: ``MCP_EMBEDDINGS``
    (off -> ``embeddings=False``), ``MCP_SQLITE_BUSY_TIMEOUT`` (-> ``busy_timeout_ms``),
    ``MCP_LOG_READS`` (-> ``log_reads``)."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    embeddings = env_flag(env, "MCP_EMBEDDINGS")
    if embeddings is not None:
        out["embeddings"] = embeddings
    busy = _first(env, "MCP_SQLITE_BUSY_TIMEOUT")
    if busy is not None:
        try:
            out["busy_timeout_ms"] = int(busy)
        except ValueError:
            raise ValueError(
                f"MCP_SQLITE_BUSY_TIMEOUT must be milliseconds, not {busy!r}"
            ) from None
    reads = env_flag(env, "BACKTRAIL_MCP_LOG_READS", "MCP_LOG_READS")
    if reads is not None:
        out["log_reads"] = reads
    return out
