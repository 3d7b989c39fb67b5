"""Claude Desktop and Cursor configuration: the entry that launches ``backtrail mcp``,
merging it into the client's JSON file, and checks for ``backtrail doctor``.

Both clients read ``{"mcpServers": {"<name>": {"command", "args", "env"}}}``: Claude
Desktop from ``claude_desktop_config.json`` in its per-user application directory,
Cursor from ``~/.cursor/mcp.json`` (or ``.cursor/mcp.json`` in a project). Merging keeps
every other server and setting, writes a ``.bak`` copy of the previous file and
replaces the file atomically; a file that is not valid JSON is never overwritten.
:func:`remove_entries` takes Backtrail's entries out again (``backtrail uninstall
--claude --cursor``), leaving the rest of the file as it was: a file that held nothing
else is deleted, and so is a ``.bak`` that holds nothing but what is left.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "claude_config_path", "cursor_config_path", "server_entry", "config_document",
    "merge_entry", "MergeResult", "ConfigFileError", "doctor_checks", "DEFAULT_NAME",
    "remove_entries", "RemoveResult",
]  # fmt: skip

DEFAULT_NAME = "backtrail"


class ConfigFileError(Exception):
    """The client's configuration file cannot be read or written safely."""


def claude_config_path(platform: str | None = None, home: Path | None = None) -> Path:
    """Where Claude Desktop reads its configuration on this platform."""
    system = platform or sys.platform
    base = home if home is not None else Path.home()
    if system == "darwin":
        return base / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if system.startswith("win"):
        appdata = os.environ.get("APPDATA")
        root = Path(appdata) if appdata and home is None else base / "AppData" / "Roaming"
        return root / "Claude" / "claude_desktop_config.json"
    config_home = os.environ.get("XDG_CONFIG_HOME")
    root = Path(config_home) if config_home and home is None else base / ".config"
    return root / "Claude" / "claude_desktop_config.json"


def cursor_config_path(home: Path | None = None) -> Path:
    """Cursor's global MCP configuration."""
    return (home if home is not None else Path.home()) / ".cursor" / "mcp.json"


def _launcher() -> tuple[str, list[str]]:
    """The command that starts ``backtrail mcp`` with this installation."""
    scripts = Path(sys.executable).parent
    for name in ("backtrail", "backtrail.exe"):
        candidate = scripts / name
        if candidate.is_file():
            return str(candidate.absolute()), ["mcp"]
    found = shutil.which("backtrail")
    if found:
        return str(Path(found).absolute()), ["mcp"]
    return str(Path(sys.executable).absolute()), ["-m", "backtrail.mcp_server"]


def server_entry(
    *,
    data_dir: Path | None = None,
    client_id: str | None = "claude-desktop",
    lean: bool = False,
) -> dict[str, Any]:
    """The ``mcpServers`` entry: absolute command (hosts do not search PATH reliably),
    ``args``, and ``env`` naming the data directory and the client."""
    command, args = _launcher()
    env: dict[str, str] = {}
    if data_dir is not None:
        env["BACKTRAIL_HOME"] = str(Path(data_dir).expanduser().absolute())
    if client_id:
        env["MCP_CLIENT_ID"] = client_id
    if lean:
        env["MCP_EMBEDDINGS"] = "off"
    return {"command": command, "args": args, "env": env}


def config_document(entry: dict[str, Any], name: str = DEFAULT_NAME) -> dict[str, Any]:
    """A whole configuration file holding only this server."""
    return {"mcpServers": {name: entry}}


@dataclass(frozen=True)
class MergeResult:
    path: Path
    created: bool
    replaced: bool
    backup: Path | None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ConfigFileError(f"cannot read {path}: {error}") from None
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ConfigFileError(
            f"{path} is not valid JSON ({error}); fix or move it, then try again"
        ) from None
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path} must hold a JSON object")
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace the file at ``path`` with ``data`` atomically."""
    fd, temp = tempfile.mkstemp(prefix=".backtrail-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def merge_entry(path: Path, entry: dict[str, Any], name: str = DEFAULT_NAME) -> MergeResult:
    """Put ``entry`` under ``mcpServers[name]`` in the file at ``path``, keeping the rest."""
    current = _read(path)
    data = dict(current or {})
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigFileError(f"{path}: mcpServers must be a JSON object")
    replaced = name in servers
    data["mcpServers"] = {**servers, name: entry}
    backup = None
    path.parent.mkdir(parents=True, exist_ok=True)
    if current is not None:
        backup = path.with_name(path.name + ".bak")
        shutil.copy2(path, backup)
    _write_json(path, data)
    return MergeResult(path, current is None, replaced, backup)


@dataclass(frozen=True)
class RemoveResult:
    """What :func:`remove_entries` did to one file: the entries it removed, whether it
    deleted the file (nothing else was in it) and the ``.bak`` copy (which held nothing
    but what is left)."""

    path: Path
    removed: list[str]
    deleted: bool
    backup_deleted: bool


def _without_ours(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        return data, []
    ours = [name for name, entry in servers.items() if _is_ours(entry)]
    kept = {name: entry for name, entry in servers.items() if name not in ours}
    return {**data, "mcpServers": kept}, ours


def _empty(data: dict[str, Any]) -> bool:
    return all(key == "mcpServers" and value == {} for key, value in data.items())


def remove_entries(path: Path) -> RemoveResult:
    """Remove every ``mcpServers`` entry that starts ``backtrail mcp`` from the file at
    ``path``, keeping everything else; a file that is not valid JSON is left alone
    (``ConfigFileError``)."""
    current = _read(path)
    if current is None:
        return RemoveResult(path, [], False, False)
    remaining, ours = _without_ours(current)
    if not ours:
        return RemoveResult(path, [], False, False)
    backup = path.with_name(path.name + ".bak")
    try:
        saved = _read(backup)
    except ConfigFileError:
        saved = None  # not ours to judge: kept
    stripped = None if saved is None else _without_ours(saved)[0]
    redundant = stripped is not None and (
        stripped == remaining or (_empty(stripped) and _empty(remaining))
    )
    if redundant:
        backup.unlink()
    if _empty(remaining):
        path.unlink()
        _remove_empty_parents(path.parent)
    else:
        _write_json(path, remaining)
    return RemoveResult(path, ours, _empty(remaining), redundant)


def _remove_empty_parents(folder: Path) -> None:
    """Remove ``folder`` and its parents while they are empty (``--write`` made them for
    a file that is gone now), never the home directory or above it."""
    home = Path.home().absolute()
    folder = folder.absolute()
    while folder != home and home in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty: something else lives there
        folder = folder.parent


# --------------------------------------------------------------------- doctor


def _check(check: str, ok: bool, detail: str, fix: str | None = None) -> dict[str, Any]:
    return {"check": check, "ok": ok, "detail": detail, "fix": None if ok else fix}


def _is_ours(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    args = [str(a) for a in entry.get("args") or []]
    command = Path(str(entry.get("command", ""))).name.lower()
    return ("mcp" in args and command.startswith("backtrail")) or "backtrail.mcp_server" in args


def doctor_checks(
    config_path: Path | None = None, data_dir: Path | None = None
) -> list[dict[str, Any]]:
    """Checks of the Claude Desktop configuration: the file, a Backtrail entry, its
    command, and that it uses this data directory. Each is ``{"check", "ok", "detail",
    "fix"}`` (``fix`` is a command or instruction, ``None`` when ok)."""
    path = config_path if config_path is not None else claude_config_path()
    write = "backtrail claude-config --write"
    try:
        data = _read(path)
    except ConfigFileError as error:
        return [_check("Claude Desktop configuration", False, str(error),
                       f"repair {path}, then run: {write}")]  # fmt: skip
    if data is None:
        return [_check("Claude Desktop configuration", False, f"no file at {path}", write)]
    checks = [_check("Claude Desktop configuration", True, f"{path} is valid JSON")]
    servers = data.get("mcpServers")
    servers = servers if isinstance(servers, dict) else {}
    ours = {name: entry for name, entry in servers.items() if _is_ours(entry)}
    if not ours:
        missing = f"no mcpServers entry runs backtrail mcp in {path}"
        checks.append(_check("Backtrail in Claude Desktop", False, missing, write))
        return checks
    name, entry = next(iter(ours.items()))
    checks.append(_check("Backtrail in Claude Desktop", True, f"entry {name!r}"))
    command = Path(str(entry.get("command", "")))
    runnable = command.is_absolute() and command.is_file() and os.access(command, os.X_OK)
    problem = "" if runnable else " is not an executable file (use an absolute path)"
    checks.append(
        _check("Claude Desktop can start backtrail", runnable, f"command {command}{problem}", write)
    )
    if data_dir is not None:
        env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
        configured = env.get("BACKTRAIL_HOME")
        same = (
            configured is not None
            and Path(configured).expanduser().absolute() == Path(data_dir).absolute()
        )
        same = same or (configured is None and os.environ.get("BACKTRAIL_HOME") is None)
        checks.append(_check(
            "Claude Desktop uses this data directory", same,
            f"BACKTRAIL_HOME={configured or '(default)'}; this data directory is {data_dir}",
            f"{write} (from a shell where BACKTRAIL_HOME is {data_dir})",
        ))  # fmt: skip
    return checks
