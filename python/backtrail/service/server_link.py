"""The link from a device to a Backtrail server: batches of native-host messages
``POST``-ed to ``{server_url}/host`` with the device's token (docs/deploy.md, "Devices
that forward to a server").

The body is a JSON array of request messages (native-host/PROTOCOL.md section 3), the
answer a JSON array of their response frames in the same order. :class:`ServerLink`
sends one batch and says plainly why one was not answered (:class:`ServerUnavailable`,
:class:`TokenRefused`); :func:`server_checks` is what ``backtrail doctor`` and
``backtrail install --server`` ask. TLS certificates are verified (the operating
system's trust store, through httpx2); redirects are not followed, so the token never
goes anywhere but the configured address.
"""

from __future__ import annotations

import json
import logging
import ssl
import uuid
from typing import TYPE_CHECKING, Any

from backtrail import __version__
from backtrail.errors import BacktrailError

if TYPE_CHECKING:
    import httpx2

    from backtrail.config import Config

__all__ = [
    "HOST_PATH", "ServerLink", "ServerUnavailable", "TokenRefused", "probe_hello",
    "server_checks",
]  # fmt: skip

logger = logging.getLogger(__name__)

HOST_PATH = "/host"
"""The capture endpoint beside ``/mcp`` on ``backtrail mcp --http``."""
CONNECT_SECONDS = 5.0
"""How long connecting may take before the server counts as unreachable."""
ANSWER_SECONDS = 25.0
"""How long a batch may take to be answered (the host owes the browser an answer
within 30 s)."""


class ServerUnavailable(BacktrailError):
    """The server did not answer a batch: nothing in it may be taken as committed.
    ``reason`` is ``unreachable``, ``tls``, ``timeout``, ``http`` (a status other than
    200: ``status``) or ``bad_answer``; ``retry_after`` is the server's Retry-After in
    seconds, when it gave one."""

    code = "server_unavailable"

    def __init__(self, message: str, reason: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason, "status": self.status}


class TokenRefused(ServerUnavailable):
    """The server answered 401 or 403: it does not accept this device's token (unknown,
    revoked, or not of scope ``device``)."""

    code = "token_refused"


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= 3600 else None


class ServerLink:
    """One server, one token, one HTTP connection pool (thread-safe)."""

    def __init__(self, url: str, token: str, *, client: httpx2.Client | None = None) -> None:
        import httpx2

        self.url = url
        self.endpoint = url + HOST_PATH
        self._client = client or httpx2.Client(
            timeout=httpx2.Timeout(ANSWER_SECONDS, connect=CONNECT_SECONDS),
            headers={"Authorization": f"Bearer {token}",
                     "User-Agent": f"backtrail-host/{__version__}"},
            follow_redirects=False,
        )  # fmt: skip

    def close(self) -> None:
        self._client.close()

    def post(self, messages: list[dict[str, Any]], *, timeout: float = ANSWER_SECONDS
             ) -> list[dict[str, Any]]:  # fmt: skip
        """The server's responses to ``messages``, in order, within ``timeout`` seconds;
        raises :class:`ServerUnavailable` (or :class:`TokenRefused`) when it gave none."""
        body = json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        answer = self._send(body, timeout)
        status = answer.status_code
        if status in (401, 403):
            raise TokenRefused(
                f"the Backtrail server at {self.url} refused this device's token (HTTP "
                f"{status}{_said(answer)}): make a new one there with `backtrail token add "
                "NAME --scope device` and run `backtrail install --server URL --token-file "
                "PATH` again; nothing is lost meanwhile", "token", status=status,
            )  # fmt: skip
        if status != 200:
            where = f" to {answer.headers.get('location')}" if 300 <= status < 400 else ""
            raise ServerUnavailable(
                f"the Backtrail server at {self.url} answered HTTP {status}{where}"
                f"{_said(answer)}", "http", status=status,
                retry_after=_retry_after(answer.headers.get("retry-after")),
            )  # fmt: skip
        try:
            responses = json.loads(answer.content.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            responses = None
        if not _matches(responses, messages):
            raise ServerUnavailable(
                f"the Backtrail server at {self.url} answered something that is not the "
                f"responses to the {len(messages)} message(s) sent (is {self.endpoint} a "
                "Backtrail server of this version?)", "bad_answer", status=status,
            )  # fmt: skip
        return responses  # type: ignore[return-value]

    def _send(self, body: bytes, timeout: float) -> httpx2.Response:
        import httpx2

        try:
            return self._client.post(
                self.endpoint, content=body, headers={"Content-Type": "application/json"},
                timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_SECONDS)),
            )  # fmt: skip
        except httpx2.TimeoutException as error:
            kind = "connect" if isinstance(error, httpx2.ConnectTimeout) else "answer"
            raise ServerUnavailable(
                f"the Backtrail server at {self.url} did not {kind} in time", "timeout"
            ) from None
        except httpx2.HTTPError as error:
            cause = _root(error)
            if isinstance(cause, ssl.SSLError):
                raise ServerUnavailable(
                    f"the TLS connection to {self.url} failed ({_reason(cause)}); check the "
                    "address and that its certificate is valid for it", "tls",
                ) from None  # fmt: skip
            raise ServerUnavailable(
                f"the Backtrail server at {self.url} cannot be reached ({_reason(cause)})",
                "unreachable",
            ) from None


def _root(error: BaseException) -> BaseException:
    """The TLS error behind ``error`` if there is one, else the deepest cause."""
    for _ in range(20):
        following = error.__cause__ or error.__context__
        if isinstance(error, ssl.SSLError) or following is None:
            break
        error = following
    return error


def _reason(error: BaseException) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        return error.verify_message or "certificate verify failed"
    if isinstance(error, ssl.SSLError):
        return error.reason or str(error)
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error)[:200] or type(error).__name__


def _said(answer: httpx2.Response) -> str:
    """``: <the server's own message>`` from a JSON error body, when it gave one."""
    try:
        data = json.loads(answer.content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f": {message[:300]}" if isinstance(message, str) and message else ""


def _matches(responses: object, messages: list[dict[str, Any]]) -> bool:
    return (
        isinstance(responses, list)
        and len(responses) == len(messages)
        and all(
            isinstance(r, dict) and r.get("id") == m.get("id") and isinstance(r.get("ok"), bool)
            for r, m in zip(responses, messages, strict=True)
        )
    )


# ------------------------------------------------------------------ checking


def probe_hello(url: str, token: str) -> dict[str, Any]:
    """Say ``hello`` to the server as a device would; its result. Raises
    :class:`ServerUnavailable` / :class:`TokenRefused`, or ``BacktrailError`` when the
    server refused the hello itself."""
    hello = {
        "id": f"check-{uuid.uuid4()}", "type": "hello", "protocol": 1,
        "extension_version": __version__, "extension_id": "eeihccjhkpjgahjachnggfamlbdoeaio",
        "browser": {"name": "unknown", "version": None}, "profile_id": "backtrail-check",
        "capabilities": [], "paused": False,
    }  # fmt: skip
    link = ServerLink(url, token)
    try:
        (answer,) = link.post([hello])
    finally:
        link.close()
    if not answer["ok"]:
        message = (answer.get("error") or {}).get("message", "no reason given")
        raise BacktrailError(f"the Backtrail server at {url} refused hello: {message}")
    return answer.get("result") or {}


def server_checks(config: Config) -> list[dict[str, Any]]:
    """``backtrail doctor``'s checks of a configured server: the token file, then that
    the server answers over TLS and accepts the token (a real ``hello``)."""
    from backtrail.service.health import check

    url = config.server_url
    try:
        token = config.server_token()
    except BacktrailError as error:
        return [check("device token", False, error.message,
                      "fix the token file named (or set server_token_file)")]  # fmt: skip
    checks = [check("device token", True, f"{config.server_token_file}")]
    try:
        result = probe_hello(url, token)
    except TokenRefused as error:
        checks.append(check("server", False, error.message,
                            "make a new device token on the server and install it"))  # fmt: skip
    except ServerUnavailable as error:
        fix = ("check the server's address and certificate" if error.reason == "tls"
               else "check that the server runs and this computer can reach it; captures "
               "wait in the host's outbox meanwhile")  # fmt: skip
        checks.append(check("server", False, error.message, fix))
    except BacktrailError as error:
        checks.append(check("server", False, error.message, "update Backtrail on both sides"))
    else:
        how = "over TLS" if url.startswith("https:") else "over plain http on this machine"
        checks.append(check(
            "server", True, f"{url} answers {how} and accepts this device's token "
            f"(server {result.get('host_version', '?')})",
        ))  # fmt: skip
    return checks
