"""Answers a stdio server gives while the MCP SDK is still loading.

Importing the SDK takes 1.5-2 s on a small machine, and a client that searches right
after its handshake (an agent spawning its tools for one task) would wait for all of
it. The stdio runner (:mod:`backtrail.mcp_server.stdio`) therefore hands two requests
that arrive before the SDK is ready to :class:`EarlyAnswers`:

- ``tools/list`` (first page): answered with the SDK's own answer, as an earlier
  server of the same code, settings and protocol version gave it. The runner passes
  every SDK answer to a plain ``tools/list`` through :meth:`EarlyAnswers.keep_tools`,
  which keeps it in the data directory (``Config.mcp_cache_dir``).
- ``tools/call`` of ``search_memory`` or ``find_forgotten_content`` with well-formed
  arguments: answered through :mod:`backtrail.mcp_server.searching`, the code the SDK's
  tools run, and recorded in the call log like any call.

Anything else, and either of these when it cannot be answered here (nothing kept yet,
arguments the SDK would have to coerce or refuse, a failing search), goes to the SDK as
before. Only connections opened with ``initialize`` at a version this module's answers
were checked against (:data:`EARLY_PROTOCOL_VERSIONS`) get early answers; the tests pin
both answers against the SDK's own.

This module does not import the SDK.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import backtrail
from backtrail.mcp_server import identity

if TYPE_CHECKING:
    from backtrail.mcp_server.calllog import CallLog
    from backtrail.mcp_server.settings import McpSettings
    from backtrail.memory import Memory

__all__ = ["EARLY_PROTOCOL_VERSIONS", "EARLY_TOOLS", "EarlyAnswers", "Opening", "early_method"]

logger = logging.getLogger(__name__)

EARLY_PROTOCOL_VERSIONS = ("2025-06-18", "2025-11-25")
"""Handshake versions whose ``tools/call`` results carry ``structuredContent`` the way
this module writes them."""

EARLY_TOOLS = ("search_memory", "find_forgotten_content")
"""The tools a call of which may be answered before the SDK is ready."""

_KEEP_SECONDS = 30 * 86400
"""Kept tool lists nobody has written for this long are removed."""


@dataclass(frozen=True)
class Opening:
    """What the connection's ``initialize`` said: the negotiated protocol version and
    the client's name."""

    protocol: str
    client_name: str | None

    @classmethod
    def of(cls, request: object, answer: Mapping[str, Any] | None) -> Opening | None:
        """The opening of a connection whose first ``request`` got ``answer`` early."""
        if answer is None or not isinstance(request, Mapping) or request.get("method") != (
            "initialize"
        ):
            return None
        info = request["params"]["clientInfo"]  # checked by identity.opening_answer
        return cls(answer["result"]["protocolVersion"], info.get("name"))


def early_method(message: object) -> str | None:
    """``tools/list`` or ``tools/call`` when ``message`` is a request this module might
    answer (decided for certain by :meth:`EarlyAnswers.answer`), else ``None``."""
    if not identity.is_request(message):
        return None
    method = message.get("method")
    params = message.get("params")
    if method == "tools/list" and (params is None or _only_meta(params)):
        return method
    if (
        method == "tools/call"
        and isinstance(params, Mapping)
        and params.get("name") in EARLY_TOOLS
        and set(params) <= {"name", "arguments", "_meta"}
    ):
        return method
    return None


def _only_meta(params: object) -> bool:
    return isinstance(params, Mapping) and set(params) <= {"_meta"}


def _arguments(tool: str, arguments: object) -> dict[str, Any] | None:
    """The whole arguments of a call of ``tool`` (defaults filled in) when each given
    one already has its declared type, so the SDK would pass them on unchanged; else
    ``None``."""
    from backtrail.mcp_server.searching import FORGOTTEN_LIMIT, SEARCH_KINDS, SEARCH_LIMIT

    if tool == "search_memory":
        defaults: dict[str, Any] = {"query": None, "limit": SEARCH_LIMIT, "since": None,
                                    "until": None, "domains": None, "kinds": None,
                                    "cursor": None}  # fmt: skip
    else:
        defaults = {"description": None, "limit": FORGOTTEN_LIMIT}
    if not isinstance(arguments, Mapping) or not set(arguments) <= set(defaults):
        return None
    args = {**defaults, **arguments}

    def plain_int(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def strings(value: object, allowed: tuple[str, ...] | None = None) -> bool:
        return isinstance(value, list) and all(
            isinstance(v, str) and (allowed is None or v in allowed) for v in value
        )

    if tool == "find_forgotten_content":
        ok = isinstance(args["description"], str) and plain_int(args["limit"])
        return args if ok else None
    ok = (
        isinstance(args["query"], str)
        and plain_int(args["limit"])
        and all(args[k] is None or isinstance(args[k], str) or plain_int(args[k])
                for k in ("since", "until"))  # fmt: skip
        and (args["domains"] is None or strings(args["domains"]))
        and (args["kinds"] is None or strings(args["kinds"], SEARCH_KINDS))
        and (args["cursor"] is None or isinstance(args["cursor"], str))
    )
    return args if ok else None


class EarlyAnswers:
    """The early answers of one stdio server (see the module docstring)."""

    def __init__(
        self,
        memory: Callable[[], Memory],
        settings: McpSettings,
        cache_dir: Path,
        call_log: CallLog | None = None,
    ) -> None:
        self._memory = memory
        self._settings = settings
        self._cache_dir = cache_dir
        self._call_log = call_log

    @functools.cached_property
    def _fingerprint(self) -> str:
        return _fingerprint(self._settings)

    def answer(self, message: Mapping[str, Any], opening: Opening | None) -> dict[str, Any] | None:
        """The JSON-RPC response to ``message``, or ``None`` to leave it to the SDK."""
        if opening is None or opening.protocol not in EARLY_PROTOCOL_VERSIONS:
            return None
        method = early_method(message)
        if method == "tools/list":
            result = self._kept_tools(opening.protocol)
        elif method == "tools/call":
            params = message["params"]
            result = self._call(params["name"], params.get("arguments"), opening)
        else:
            result = None
        return None if result is None else {"jsonrpc": "2.0", "id": message["id"], "result": result}

    # ------------------------------------------------------------- tools/list

    def _tools_path(self, protocol: str) -> Path:
        return self._cache_dir / f"tools-{self._fingerprint}-{protocol}.json"

    def _kept_tools(self, protocol: str) -> dict[str, Any] | None:
        try:
            result = json.loads(self._tools_path(protocol).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return None
        if "nextCursor" in result:
            return None
        return result

    def keep_tools(self, protocol: str, result: object) -> None:
        """Keep the SDK's ``result`` for a plain ``tools/list`` at ``protocol``."""
        if protocol not in EARLY_PROTOCOL_VERSIONS or not isinstance(result, dict):
            return
        if not isinstance(result.get("tools"), list) or "nextCursor" in result:
            return
        if self._kept_tools(protocol) == result:
            return
        path = self._tools_path(protocol)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, path)
            _prune(path.parent, keep=path)
        except OSError as error:  # only the next start's speed is lost
            logger.warning("could not keep the tool list in %s: %s", path.parent, error)

    # --------------------------------------------------------------- tools/call

    def _call(self, tool: str, arguments: object, opening: Opening) -> dict[str, Any] | None:
        args = _arguments(tool, {} if arguments is None else arguments)
        if args is None:
            return None
        from backtrail.mcp_server import searching

        work = searching.search_memory if tool == "search_memory" else searching.find_forgotten
        started = time.perf_counter()
        try:
            text, data = work(self._memory(), **args)
        except Exception as error:  # the SDK runs it again and reports it its own way
            logger.info("early %s failed (%s); the SDK answers it", tool, error)
            return None
        if self._call_log is not None:
            self._call_log.record(
                client=self._client(opening), tool=tool, arguments=args, ok=True,
                outcome="ok", seconds=time.perf_counter() - started, result_chars=len(text),
                transport="stdio",
            )  # fmt: skip
        return {
            "content": [{"text": text, "type": "text"}],
            "isError": False,
            "structuredContent": data.model_dump(mode="json"),
        }

    def _client(self, opening: Opening) -> str:
        """Who the call log names (as :meth:`server.Runtime.caller` does)."""
        return self._settings.client_id or identity.client_label(opening.client_name)


def _fingerprint(settings: McpSettings) -> str:
    """Names the code and settings a tool list was made by: Backtrail's and the SDK's
    versions, the settings, and the size and time of every module of the package."""
    from importlib import metadata

    digest = hashlib.sha256()
    try:
        sdk = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        sdk = "?"
    digest.update(f"{backtrail.__version__}\0{sdk}\0{settings!r}\0".encode())
    root = Path(backtrail.__file__).parent
    for path in sorted(root.rglob("*.py")):
        try:
            stat = path.stat()
        except OSError:
            continue
        digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:20]


def _prune(directory: Path, keep: Path) -> None:
    cutoff = time.time() - _KEEP_SECONDS
    for path in directory.glob("tools-*.json"):
        try:
            if path != keep and path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass
