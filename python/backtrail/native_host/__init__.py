"""The native-messaging host: the browser extension's bridge to Backtrail, with no open
ports (a thin front end, see docs/architecture.md).

The browser starts ``backtrail-host`` (through the launcher ``backtrail install``
writes) when the extension calls ``chrome.runtime.connectNative("com.backtrail.host")``,
passes the caller's origin as ``argv[1]``, and talks over stdin/stdout in the frames of
``native-host/PROTOCOL.md``. The host answers until stdin ends, then exits 0 within
:data:`EXIT_GRACE_SECONDS` of the answers it still owed: a running indexing pass stops
at a checkpoint or ends with the process, and the next process resumes it.

Modules: ``framing`` (frames and their errors), ``schema`` (field validation),
``dispatch`` (message types to service calls), ``export`` (protocol shapes and paging),
``server`` (the session loop), ``codes`` (frozen error codes), ``logs`` (log file), and
``forward`` (with ``server_url`` set: no ledger, the messages go to a Backtrail server;
PROTOCOL.md section 9).

Settings: everything in :class:`backtrail.config.Config` (``BACKTRAIL_HOME`` chooses
the data directory, ``BACKTRAIL_MAX_REQUEST_BYTES`` the per-message cap), plus
``BACKTRAIL_LOG_LEVEL``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backtrail.config import Config

__all__ = ["EXIT_GRACE_SECONDS", "HOST_NAME", "main", "run"]

HOST_NAME = "com.backtrail.host"
EXIT_GRACE_SECONDS = 1.0
"""After the end of stdin, how long the host waits for a running indexing pass to stop
at a checkpoint before it exits anyway (the pass is resumed by the next process)."""

logger = logging.getLogger(__name__)

_USAGE = """\
backtrail-host is Backtrail's native-messaging host. The browser starts it and talks to
it over stdin/stdout (see native-host/PROTOCOL.md); it is not meant to be run by hand.
Set it up with `backtrail install`, and check it with `backtrail doctor`.
"""


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``backtrail-host``, ``python -m backtrail.native_host``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]) or _interactive():
        sys.stderr.write(_USAGE)
        raise SystemExit(0 if args[:1] in (["-h"], ["--help"]) else 2)
    origin = args[0] if args and args[0].startswith("chrome-extension://") else None
    frames = _claim_stdout()
    raise SystemExit(run(sys.stdin.buffer, frames, origin=origin))


def _interactive() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _claim_stdout() -> IO[bytes]:
    """A private binary handle on the real stdout for frames; file descriptor 1 and
    ``sys.stdout`` then point at stderr, so a stray print can never corrupt a frame."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if sys.platform == "win32":  # pragma: no cover - Windows only
        import msvcrt

        msvcrt.setmode(fd, os.O_BINARY)
        msvcrt.setmode(sys.stdin.fileno(), os.O_BINARY)
    return os.fdopen(fd, "wb")


def max_request_bytes(config: Config | None) -> int:
    """The per-message cap: ``Config.max_request_bytes`` within the browser's 64 MiB
    (the default when the settings could not be loaded)."""
    from backtrail.native_host.framing import DEFAULT_MAX_REQUEST_BYTES, MAX_FRAME_BYTES

    if config is None:
        return DEFAULT_MAX_REQUEST_BYTES
    return min(config.max_request_bytes, MAX_FRAME_BYTES)


def run(
    stdin: IO[bytes],
    stdout: IO[bytes],
    *,
    origin: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Serve one browser session on ``stdin``/``stdout``; returns the exit status.
    When the store cannot be opened the host still answers, with error 14 and the
    reason, so the extension can show it."""
    from backtrail.config import Config
    from backtrail.errors import BacktrailError
    from backtrail.native_host.dispatch import Dispatcher
    from backtrail.native_host.framing import FrameReader, FrameWriter
    from backtrail.native_host.logs import setup_logging
    from backtrail.native_host.server import serve
    from backtrail.service import Memory

    env = os.environ if environ is None else environ
    config: Config | None = None
    memory: Memory | None = None
    failure: str | None = None
    try:
        config = Config.load(environ=env)
    except BacktrailError as error:
        failure = f"Backtrail's settings are invalid: {error.message}"
    setup_logging(config.home if config is not None else None, dict(env))
    logger.info("host started (pid %d) for %s", os.getpid(), origin or "an unknown caller")
    if config is not None and config.server_url:
        return _forward(stdin, stdout, config)
    if config is not None:
        try:
            memory = Memory(config, client="native-host")
            # MCP servers leave the browser's embedding backlog to us while we run.
            memory.announce_host()
        except (BacktrailError, OSError) as error:
            failure = f"the Backtrail store at {config.home} could not be opened: {error}"
    if failure:
        logger.error("%s", failure)
    limit = max_request_bytes(config)
    sync = memory.browser() if memory is not None else None
    dispatcher = Dispatcher(sync, max_request_bytes=limit, failure=failure)
    settled = True
    try:
        status = serve(FrameReader(stdin, limit), FrameWriter(stdout), dispatcher)
        if sync is not None and dispatcher.profile is not None:
            _close_tabs(sync)
    finally:
        if memory is not None:
            settled = memory.close(timeout=EXIT_GRACE_SECONDS)
        logging.shutdown()
    if not settled:
        # The indexing thread is inside a step that cannot be interrupted. Everything
        # acknowledged is in the ledger; the step's work ends with the process, whose
        # end also releases the pass lock, so the next host resumes it, never beside it.
        stdout.flush()
        os._exit(status)
    return status


def _forward(stdin: IO[bytes], stdout: IO[bytes], config: Config) -> int:
    """Serve the session by forwarding to ``config.server_url`` (no ledger is opened)."""
    from backtrail.errors import BacktrailError
    from backtrail.native_host.forward import ForwardingDispatcher
    from backtrail.native_host.framing import FrameReader, FrameWriter
    from backtrail.native_host.server import serve
    from backtrail.service.outbox import MAX_BATCH_BYTES, DeviceLink

    device: DeviceLink | None = None
    failure = None
    try:
        device = DeviceLink(config)
    except Exception as error:  # bad token file, unreadable outbox...: say why to every request
        reason = error.message if isinstance(error, BacktrailError) else str(error)
        failure = (f"this computer cannot forward to the Backtrail server {config.server_url}: "
                   f"{reason}")  # fmt: skip
        logger.error("%s", failure)
        sys.stderr.write(f"backtrail-host: {failure}\n")
    else:
        logger.info("forwarding to %s (%d message(s) kept from before)", config.server_url,
                    device.outbox.count())  # fmt: skip
        device.start()
    # One message must fit in one POST beside its hello.
    limit = min(max_request_bytes(config), MAX_BATCH_BYTES - 64 * 1024)
    dispatcher = ForwardingDispatcher(device, max_request_bytes=limit, failure=failure)
    settled = True
    try:
        status = serve(FrameReader(stdin, limit), FrameWriter(stdout), dispatcher)
    finally:
        if device is not None:
            settled = device.close(timeout=EXIT_GRACE_SECONDS)
        logging.shutdown()
    if not settled:  # a delivery is still out; what it carries stays in the outbox
        stdout.flush()
        os._exit(status)
    return status


def _close_tabs(sync: Any) -> None:
    """The browser closed the port: its tabs are no longer open (``stats`` says so)."""
    from backtrail.errors import BacktrailError

    try:
        removed = sync.session_ended()
        logger.info("session over: %d open tab(s) forgotten", removed)
    except BacktrailError as error:
        logger.warning("could not mark the session's tabs closed: %s", error)
