"""URL hygiene: validation, canonical form, secret scrubbing and exclusion rules.

Every URL that enters Backtrail from a browser, a tool argument or an import passes
through here before it is stored or compared:

- :func:`validate_capture_url` accepts only ``http``/``https`` URLs with a host and
  returns them normalised (scheme and host lower-cased, IDN hosts in punycode, default
  port dropped, dot segments resolved, percent-encoding made uniform, spaces and
  non-ASCII characters percent-encoded).
- :func:`scrub_url` additionally removes credentials: the ``user:pass@`` part and query
  (or fragment) parameters that commonly carry secrets (``token``, ``api_key``,
  ``password``, ``sig`` ...). This is the form stored as a page's "original" URL.
- :func:`scrub_title` applies the same removal to every URL inside a text, with or
  without a scheme: Chromium titles a page without ``<title>`` (or a ``.txt`` file)
  with its raw URL, secrets included.
- :func:`canonical_url` is the identity of a page: the scrubbed URL without fragment
  or tracking parameters (``utm_*``, ``fbclid``, ``gclid`` ...), with the
  remaining parameters sorted by name and the path's case kept.
- :func:`is_excluded` / :func:`matching_rule` test a URL against exclusion rules (see
  :class:`ExclusionRules` for the rule syntax and :data:`DEFAULT_EXCLUSIONS`).

Every function raises :class:`~backtrail.errors.InvalidUrl` (never anything else) for a
value it cannot accept, whatever the input: huge strings, control characters, lone
surrogates, malformed hosts or ports, non-string types.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, unquote_plus

from backtrail.errors import InvalidUrl

__all__ = [
    "MAX_URL_LENGTH",
    "CAPTURE_SCHEMES",
    "TRACKING_PARAMS",
    "SECRET_PARAMS",
    "DEFAULT_EXCLUSIONS",
    "ExclusionRules",
    "validate_capture_url",
    "scrub_url",
    "scrub_title",
    "canonical_url",
    "url_host",
    "normalize_domain",
    "site_domain",
    "domain_matches",
    "validate_exclusion_rule",
    "matching_rule",
    "is_excluded",
]

logger = logging.getLogger(__name__)

MAX_URL_LENGTH = 8192
"""Longest URL accepted, in characters, both as given and after normalisation."""

CAPTURE_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

TRACKING_PARAMS = frozenset(
    {
        "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid",
        "ysclid", "igshid", "twclid", "ttclid", "li_fat_id", "mc_eid", "mc_cid", "mkt_tok",
        "_ga", "_gl", "_ke", "s_cid", "ref_src", "ref_url", "wickedid", "rb_clickid",
        "srsltid", "_openstat", "oly_anon_id", "oly_enc_id", "vero_id", "vero_conv",
        "hsctatracking", "trk", "trkcampaign", "spm", "epik", "cmpid", "ncid",
    }
)  # fmt: skip
"""Query parameter names (lower-case) that only track the visitor and never select content."""

_TRACKING_PREFIXES = ("utm_", "pk_", "mtm_", "matomo_", "hsa_", "_hs", "__hs")

SECRET_PARAMS = frozenset(
    {
        "token", "access_token", "refresh_token", "id_token", "auth_token", "oauth_token",
        "oauth_verifier", "key", "api_key", "apikey", "api-key", "password", "passwd",
        "pwd", "pass", "session", "sessionid", "session_id", "sid", "phpsessid",
        "jsessionid", "auth", "authorization", "code", "sig", "signature", "secret",
        "client_secret", "jwt", "credential", "credentials", "ticket", "otp", "csrf",
        "csrf_token", "csrftoken", "xsrf", "x-amz-signature", "x-amz-credential",
        "x-amz-security-token", "x-goog-signature", "x-goog-credential", "awsaccesskeyid",
        "private_token", "access_key", "secret_key", "saml", "samlresponse",
        "samlrequest",
    }
)  # fmt: skip
"""Query parameter names (lower-case) whose values are commonly secrets."""

_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "signature", "apikey", "api_key")

DEFAULT_EXCLUSIONS: tuple[str, ...] = (
    # Extension stores: the extension cannot read them, and they hold nothing to remember.
    "chromewebstore.google.com", "chrome.google.com/webstore*",
    "microsoftedge.microsoft.com/addons*",
    # Identity providers and account pages.
    "accounts.google.com", "myaccount.google.com", "login.microsoftonline.com",
    "login.microsoft.com", "login.live.com", "account.live.com", "account.microsoft.com",
    "appleid.apple.com", "idmsa.apple.com", "iforgot.apple.com", "signin.aws.amazon.com",
    "id.atlassian.com", "login.okta.com", "duosecurity.com", "login.yahoo.com",
    "accounts.firefox.com", "login.gov", "login.salesforce.com", "auth.pingone.*",
    "cloudflareaccess.com", "auth.openai.com", "accounts.spotify.com", "signin.ebay.com",
    "portal.azure.com/signin/*", "*.okta.com/signin/*", "github.com/login*",
    "github.com/session*", "github.com/settings/*",
    # Mail and private messaging.
    "mail.google.com", "outlook.live.com", "outlook.office.com", "outlook.office365.com",
    "mail.yahoo.com", "mail.proton.me", "app.fastmail.com", "mail.aol.com", "mail.zoho.com",
    "app.tuta.com", "mail.tutanota.com", "www.icloud.com/mail*", "app.hey.com",
    "web.whatsapp.com", "messages.google.com", "web.telegram.org",
    # Password managers.
    "passwords.google.com", "passwords.google", "vault.bitwarden.com", "vault.bitwarden.eu",
    "my.1password.com", "my.1password.eu", "lastpass.com/vault*", "app.dashlane.com",
    "keepersecurity.com/vault*", "app.nordpass.com", "pass.proton.me",
    # Payments.
    "checkout.stripe.com", "billing.stripe.com", "dashboard.stripe.com", "pay.google.com",
    "payments.google.com", "paypal.com/*", "www.paypal.com/*", "pay.amazon.com",
    "pay.shopify.com", "checkout.square.site",
    # Sign-in steps on any site: the last path segment names the step.
    "*/login", "*/login/", "*/login.*", "*/login2", "*/login2/", "*/log-in", "*/log-in/",
    "*/logon", "*/logon/", "*/logon.*", "*/signin", "*/signin/", "*/sign-in", "*/sign-in/",
    "*/sign_in", "*/sign_in/", "*/signup", "*/signup/", "*/sign-up", "*/sign-up/",
    "*/u/login*", "*/wp-login.php", "*/wp-admin", "*/wp-admin/*", "*/special:userlogin*",
    "*/special:passwordreset*", "*://*title=special:userlogin*",
    "*://*/ucp.php?*mode=login*",
    # Single sign-on and delegated authorisation endpoints.
    "*/authorize", "*/o/oauth2/*", "*/protocol/openid-connect/auth", "*/adfs/ls*",
    "*/idp/profile/saml2/*", "*/saml/login*", "*/saml/sso*", "*/saml2/sso*",
    # Account recovery and second factors.
    "*/forgot", "*/forgot/", "*/forgot-password*", "*/forgot_password*",
    "*/forgotpassword*", "*/reset-password*", "*/reset_password*", "*/password-reset*",
    "*/password_reset*", "*/request-password-reset*", "*/password/reset*", "*/password/new",
    "*/user/password", "*/account/recover*", "*/account-recovery*", "*/recover/initiate*",
    "*/loginhelp", "*/helpwithlogininfo", "*/sessions/two-factor*", "*/two-factor",
    "*/two-factor/verify*", "*/2fa", "*/2fa/", "*/2fa/verify*", "*/mfa", "*/mfa/",
    "*/mfa/challenge*",
    # Checkout steps of shops: on the shop's own host or under its cart (documentation about
    # checkout is kept; a checkout page anywhere else is known by its card fields).
    "www.*/checkout", "www.*/checkout/", "shop.*/checkout", "store.*/checkout",
    "*/cart/checkout", "*/cart/checkout/", "*/shop/checkout", "*/shop/checkout/",
    "*/store/checkout", "*/basket/checkout", "*/checkout/onepage*", "*/checkout/cart*",
    "*/checkout/shipping*", "*/checkout/pay*", "*/checkout/entry/*", "*/checkouts/*",
    "*/chk/xo*", "*/gp/buy/*",
)  # fmt: skip
"""Exclusion rules applied when the user has configured none.

Host rules name the hosts of identity providers, mail, password managers and payments,
never a whole family such as every ``secure.*`` or ``auth.*`` host. Path rules match a
whole last path segment that names a sign-in, recovery or checkout *step* (``/login``,
``/login/``, ``/login.php``, ``/sign_in``; ``/checkout`` on a shop's ``www.``, ``shop.``
or ``store.`` host or under its ``/cart/``), or a segment prefix that only such a step
has (``/forgot-password...``), never a substring: documentation about authentication,
signing, checkout or payments (``topics/auth/``, ``signing.html``, ``git-checkout``,
``javax/security/auth/login/``, ``docs.stripe.com/payments/checkout``) is what this
memory's users read.
``tests/data`` holds what the rules are measured on: the real documentation corpus of
the benchmark (none excluded) and real sign-in, recovery, mail, password-manager and
checkout URLs (all excluded). Sign-in and checkout pages no list knows are caught by the
extension, which does not capture a page whose DOM holds a password field or a
payment-card field.
``localhost`` and ``127.0.0.1`` are deliberately *not* excluded: local documentation
servers are worth remembering. Browser-internal pages (``chrome:``, ``about:``...) never
reach these rules: they fail :func:`validate_capture_url`.
"""

_MAX_RULE_LENGTH = 1024
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_C0_AND_SPACE = "".join(chr(code) for code in range(0x21))
_STRIPPED_INSIDE = re.compile(r"[\t\n\r]")
_HOST_LABEL_RE = re.compile(r"^[a-z0-9_](?:[a-z0-9_\-]*[a-z0-9_])?$")
_HEX = "0123456789ABCDEFabcdef"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = frozenset("!$&'()*+,;=")
_PATH_SAFE = _UNRESERVED | _SUB_DELIMS | frozenset(":@/")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_USERINFO_SAFE = _UNRESERVED | _SUB_DELIMS | frozenset(":")


@dataclass(frozen=True)
class _Url:
    """A parsed, normalised http(s) URL."""

    scheme: str
    userinfo: str | None
    host: str
    port: int | None
    path: str
    query: str | None
    fragment: str | None

    def render(self, *, userinfo: bool = True, fragment: bool = True) -> str:
        out = [self.scheme, "://"]
        if userinfo and self.userinfo is not None:
            out += [self.userinfo, "@"]
        out.append(self.host)
        if self.port is not None:
            out += [":", str(self.port)]
        out.append(self.path)
        if self.query is not None:
            out += ["?", self.query]
        if fragment and self.fragment is not None:
            out += ["#", self.fragment]
        return "".join(out)


# -------------------------------------------------------------------------- parsing


def _parse(url: object, field: str = "url") -> _Url:
    """Parse and normalise a URL. Strings are memoised: an import or a capture burst
    parses the same URLs many times (exclusion check, canonical form, referrer)."""
    if type(url) is str:
        return _parse_str(url, field)
    return _parse_uncached(url, field)


@functools.lru_cache(maxsize=8192)
def _parse_str(url: str, field: str) -> _Url:
    return _parse_uncached(url, field)


def _parse_uncached(url: object, field: str = "url") -> _Url:
    if not isinstance(url, str):
        raise InvalidUrl(url, f"must be a string, not {type(url).__name__}", field)
    if len(url) > MAX_URL_LENGTH:
        raise InvalidUrl(
            url, f"is {len(url)} characters long; the limit is {MAX_URL_LENGTH}", field
        )
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidUrl(url, "contains invalid Unicode (a lone surrogate)", field) from None
    # As browsers do (WHATWG URL): trim C0 controls and spaces, drop tabs and newlines.
    text = _STRIPPED_INSIDE.sub("", url.strip(_C0_AND_SPACE))
    if not text:
        raise InvalidUrl(url, "is empty", field)
    if _CONTROL_RE.search(text):
        raise InvalidUrl(url, "contains control characters", field)
    match = _SCHEME_RE.match(text)
    if match is None:
        raise InvalidUrl(url, "has no scheme; only http and https URLs can be captured", field)
    scheme = match.group(1).lower()
    if scheme not in CAPTURE_SCHEMES:
        raise InvalidUrl(
            url, f"has scheme {scheme!r}; only http and https URLs can be captured", field
        )
    rest = text[match.end() :]
    head, sep, tail = _split_first(rest, "?#")
    rest = head.replace("\\", "/") + sep + tail
    if not rest.startswith("//"):
        raise InvalidUrl(url, "has no host", field)
    rest = rest[2:]
    authority, sep, tail = _split_first(rest, "/?#")
    remainder = sep + tail
    userinfo, host, port = _parse_authority(url, authority, field)
    fragment: str | None = None
    if "#" in remainder:
        remainder, fragment = remainder.split("#", 1)
    query: str | None = None
    if "?" in remainder:
        remainder, query = remainder.split("?", 1)
    path = _remove_dot_segments(_normalize_component(remainder, _PATH_SAFE)) or "/"
    parsed = _Url(
        scheme=scheme,
        userinfo=userinfo,
        host=host,
        port=None if port == _DEFAULT_PORTS[scheme] else port,
        path=path,
        query=_normalize_component(query, _QUERY_SAFE) if query is not None else None,
        fragment=_normalize_component(fragment, _QUERY_SAFE) if fragment is not None else None,
    )
    rendered = parsed.render()
    if len(rendered) > MAX_URL_LENGTH:
        raise InvalidUrl(
            url,
            f"is {len(rendered)} characters long once percent-encoded; "
            f"the limit is {MAX_URL_LENGTH}",
            field,
        )
    return parsed


def _split_first(text: str, chars: str) -> tuple[str, str, str]:
    """Split at the first of ``chars``: (before, separator, after)."""
    for index, char in enumerate(text):
        if char in chars:
            return text[:index], char, text[index + 1 :]
    return text, "", ""


def _parse_authority(url: str, authority: str, field: str) -> tuple[str | None, str, int | None]:
    userinfo: str | None = None
    if "@" in authority:
        raw_userinfo, authority = authority.rsplit("@", 1)
        userinfo = _normalize_component(raw_userinfo, _USERINFO_SAFE)
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise InvalidUrl(url, "has an unclosed IPv6 address bracket", field)
        host = _normalize_ipv6(url, authority[1:end], field)
        port_text = authority[end + 1 :]
        if port_text and not port_text.startswith(":"):
            raise InvalidUrl(url, "has characters after the IPv6 address", field)
        port_text = port_text[1:]
    else:
        host_text, _, port_text = authority.partition(":")
        host = _normalize_host(url, host_text, field)
    return userinfo, host, _parse_port(url, port_text, field)


def _parse_port(url: str, text: str, field: str) -> int | None:
    if text == "":
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 5 or int(text) > 65535:
        raise InvalidUrl(url, f"has an invalid port {text[:20]!r}", field)
    return int(text)


def _normalize_ipv6(url: str, text: str, field: str) -> str:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise InvalidUrl(url, "has an invalid IPv6 address", field) from None
    return f"[{address.compressed}]"


def _normalize_host(url: str, text: str, field: str) -> str:
    try:
        host = unquote(text, errors="strict") if "%" in text else text
    except UnicodeDecodeError:
        raise InvalidUrl(url, "has an invalid host", field) from None
    if not host:
        raise InvalidUrl(url, "has no host", field)
    host = host.rstrip(".").lower()
    if not host or any(char in host for char in " <>\"'`{}|\\^%/?#@:[]") or _CONTROL_RE.search(
        host
    ):
        raise InvalidUrl(url, "has an invalid host", field)
    if not host.isascii():
        host = _idna_encode(url, host, field)
    labels = host.split(".")
    if all(label.isdigit() for label in labels) and len(labels) == 4:
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise InvalidUrl(url, "has an invalid IPv4 address", field) from None
    if len(host) > 253:
        raise InvalidUrl(url, "has a host longer than 253 characters", field)
    for label in labels:
        if not label or len(label) > 63 or not _HOST_LABEL_RE.match(label):
            raise InvalidUrl(url, "has an invalid host", field)
    return host


def _idna_encode(url: str, host: str, field: str) -> str:
    """Encode an internationalised host name to punycode (UTS #46 when available)."""
    try:
        import idna  # optional: UTS #46 is better than the IDNA 2003 codec

        return idna.encode(host, uts46=True).decode("ascii")
    except ImportError:
        pass
    except Exception:  # idna raises several error types; fall back to the codec
        logger.debug("idna could not encode host; trying the IDNA 2003 codec")
    try:
        return host.encode("idna").decode("ascii").lower()
    except (UnicodeError, ValueError):
        raise InvalidUrl(url, "has an invalid internationalised host name", field) from None


def _normalize_component(text: str, safe: frozenset[str]) -> str:
    """Uniform percent-encoding (RFC 3986 6.2.2): upper-case escapes, decode unreserved
    characters, encode everything outside ``safe`` (spaces, non-ASCII, stray ``%``)."""
    out: list[str] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char == "%":
            escape = text[index + 1 : index + 3]
            if len(escape) == 2 and escape[0] in _HEX and escape[1] in _HEX:
                decoded = chr(int(escape, 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + escape.upper())
                index += 3
                continue
            out.append("%25")
        elif char in safe:
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
        index += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4, as browsers apply it to http(s) paths."""
    if "." not in path:
        return path
    segments = path.split("/")
    output: list[str] = []
    for segment in segments[1:]:
        if segment == ".":
            continue
        if segment == "..":
            if output:
                output.pop()
            continue
        output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")
    return "/" + "/".join(output)


# ------------------------------------------------------------------------ parameters


def _param_name(pair: str) -> str:
    name = pair.split("=", 1)[0]
    try:
        return unquote_plus(name).lower()
    except Exception:  # a malformed escape must not crash
        return name.lower()


def _is_secret(name: str) -> bool:
    return name in SECRET_PARAMS or name.endswith(_SECRET_SUFFIXES)


def _is_tracking(name: str) -> bool:
    return name in TRACKING_PARAMS or name.startswith(_TRACKING_PREFIXES)


def _filter_params(query: str | None, *, tracking: bool, sort: bool) -> str | None:
    if query is None:
        return None
    pairs = [pair for pair in query.split("&") if pair]
    kept = [
        pair
        for pair in pairs
        if not _is_secret(_param_name(pair)) and not (tracking and _is_tracking(_param_name(pair)))
    ]
    if sort:
        kept.sort(key=_param_name)  # stable: repeated names keep their order
    return "&".join(kept) if kept else None


def _scrub_path(path: str) -> str:
    """Drop ``;jsessionid=...`` style session parameters embedded in path segments."""
    if ";" not in path:
        return path
    segments = []
    for segment in path.split("/"):
        head, *params = segment.split(";")
        kept = [param for param in params if not _is_secret(_param_name(param))]
        segments.append(";".join([head, *kept]))
    return "/".join(segments)


def _scrub(parsed: _Url) -> _Url:
    fragment = parsed.fragment
    if fragment is not None and "=" in fragment:
        # OAuth implicit flows put tokens in the fragment: treat it as parameters.
        fragment = _filter_params(fragment.lstrip("!/?"), tracking=False, sort=False)
    return _Url(
        scheme=parsed.scheme,
        userinfo=None,
        host=parsed.host,
        port=parsed.port,
        path=_scrub_path(parsed.path),
        query=_filter_params(parsed.query, tracking=False, sort=False),
        fragment=fragment,
    )


# --------------------------------------------------------------------------- public


def validate_capture_url(url: object) -> str:
    """Return ``url`` normalised if it can be captured, else raise ``InvalidUrl``.

    Only ``http`` and ``https`` URLs with a valid host are accepted; ``javascript:``,
    ``data:``, ``file:``, ``chrome:``, ``about:``, ``blob:`` and every other scheme are
    refused with a message naming the scheme. Longer than :data:`MAX_URL_LENGTH`
    characters (as given or once percent-encoded) is refused too.
    """
    return _parse(url).render()


def scrub_url(url: object) -> str:
    """The normalised URL without credentials: userinfo and secret-bearing parameters
    (query, fragment and ``;param`` path parameters) are removed; the rest is kept."""
    return _scrub(_parse(url)).render()


_URLISH_RE = re.compile(r"[^\s\"'<>()\[\]{}]+")
_SCHEMED_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def scrub_title(text: str) -> str:
    """``text`` with every URL in it scrubbed as :func:`scrub_url` scrubs URLs (userinfo,
    secret query, fragment and ``;param`` path parameters), whether or not it has a
    scheme (``127.0.0.1:8000/a.txt?token=x`` too). Anything else is kept as it is: a
    run of text changes only when a secret is removed from it."""
    if not any(mark in text for mark in "?#;@"):
        return text
    return _URLISH_RE.sub(lambda match: _scrub_urlish(match.group(0)), text)


def _without_secrets(params: str) -> str:
    pairs = params.split("&")
    kept = [pair for pair in pairs if not (pair and _is_secret(_param_name(pair)))]
    return params if len(kept) == len(pairs) else "&".join(pair for pair in kept if pair)


def _scrub_urlish(token: str) -> str:
    scheme = _SCHEMED_RE.match(token)
    head = token[: scheme.end()] if scheme else ""
    rest = token[len(head) :]
    authority = len(_split_first(rest, "/?#")[0])
    at = rest.rfind("@", 0, authority)
    if at >= 0 and (scheme or ":" in rest[:at]):  # user:password@ (an address stays)
        rest = rest[at + 1 :]
    rest, hashed, fragment = rest.partition("#")
    path, asked, query = rest.partition("?")
    out = head + _scrub_path(path)
    if asked:
        kept = _without_secrets(query)
        out += f"?{query}" if kept == query else f"?{kept}" if kept else ""
    if hashed:
        body = fragment.lstrip("!/?") if "=" in fragment else fragment
        kept = _without_secrets(body) if "=" in fragment else fragment
        out += f"#{fragment}" if kept == body else f"#{kept}" if kept else ""
    return out


def canonical_url(url: object) -> str:
    """The identity of a page: scrubbed, no fragment, no default port, no tracking
    parameters, remaining parameters sorted by name (stable), path case kept."""
    scrubbed = _scrub(_parse(url))
    canonical = _Url(
        scheme=scrubbed.scheme,
        userinfo=None,
        host=scrubbed.host,
        port=scrubbed.port,
        path=scrubbed.path,
        query=_filter_params(scrubbed.query, tracking=True, sort=True),
        fragment=None,
    )
    return canonical.render(fragment=False)


def url_host(url: object) -> str:
    """The host of a capturable URL: lower-case, punycode, no port (IPv6 in brackets)."""
    return _parse(url).host


def normalize_domain(domain: object) -> str:
    """A user-supplied domain as stored hosts spell it: ``"Bücher.DE."`` ->
    ``"xn--bcher-kva.de"``. A full URL is accepted and reduced to its host; a leading
    ``*.`` or ``.`` is ignored."""
    if not isinstance(domain, str):
        raise InvalidUrl(domain, f"must be a string, not {type(domain).__name__}", "domain")
    text = domain.strip()
    if "://" in text:
        return _parse(text, "domain").host
    if text.startswith("*."):
        text = text[2:]
    text = text.lstrip(".")
    if "/" in text or "@" in text:
        raise InvalidUrl(domain, "is not a domain name", "domain")
    return _parse(f"http://{text}/", "domain").host


@functools.cache
def _public_suffixes() -> Any:
    """The Public Suffix List snapshot shipped in the ``publicsuffixlist`` wheel (read
    once, offline). Only listed suffixes count: an unlisted top-level name such as
    ``localhost`` or an intranet's ``corp`` is not taken for a public one."""
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList(accept_unknown=False)


def site_domain(domain: object) -> str:
    """A domain that names someone's sites, as :func:`normalize_domain` spells it;
    ``InvalidUrl`` for a public suffix of the Public Suffix List (``org``, ``co.uk``,
    ``github.io``...), under which anyone can register a name, so it names every site
    under it rather than one."""
    name = normalize_domain(domain)
    if not name.startswith("[") and _public_suffixes().is_public(name):
        raise InvalidUrl(domain, f"{name!r} is a public suffix: it covers every site "
                         f"registered under it; name one site, such as example.{name}",
                         "domain")  # fmt: skip
    return name


def registrable_domain(host: str) -> str | None:
    """The part of a normalised ``host`` someone registered, by the Public Suffix List
    (``docs.python.org`` -> ``python.org``, ``a.b.github.io`` -> ``b.github.io``);
    ``None`` for a public suffix itself or a name under no listed suffix."""
    found = _public_suffixes().privatesuffix(host)
    return str(found) if found else None


def domain_matches(host: str, domain: str) -> bool:
    """True if ``host`` is ``domain`` or one of its subdomains (both already normalised)."""
    return host == domain or host.endswith("." + domain)


# ------------------------------------------------------------------------ exclusions


@dataclass(frozen=True)
class _Rule:
    text: str
    kind: str  # "domain" | "host_glob" | "path_glob" | "url_glob"
    value: str
    pattern: re.Pattern[str] | None


class ExclusionRules:
    """A compiled list of exclusion rules. Rule syntax (case-insensitive):

    - ``example.com`` — that host and all its subdomains.
    - ``login.*``, ``*.example.com`` — a host glob; ``*`` matches any run of characters.
    - ``*/login*``, ``github.com/settings/*`` — a glob over ``host/path`` (no scheme,
      port, query or fragment) of the canonical URL.
    - ``https://example.com/private/*`` — a glob over the whole canonical URL.
    """

    def __init__(self, rules: Iterable[str]) -> None:
        self._rules = tuple(_compile_rule(validate_exclusion_rule(rule)) for rule in rules)

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(rule.text for rule in self._rules)

    def match(self, url: object) -> str | None:
        """The first rule that ``url`` matches, or ``None``; ``InvalidUrl`` if invalid."""
        canonical = canonical_url(url)
        parsed = _parse(canonical)
        host_path = parsed.host + parsed.path
        for rule in self._rules:
            if rule.kind == "domain":
                hit = domain_matches(parsed.host, rule.value)
            else:
                assert rule.pattern is not None
                subject = {"host_glob": parsed.host, "path_glob": host_path}.get(
                    rule.kind, canonical
                )
                hit = rule.pattern.fullmatch(subject) is not None
            if hit:
                return rule.text
        return None


def validate_exclusion_rule(rule: object) -> str:
    """Check a rule and return it normalised (trimmed, lower-case, IDN in punycode)."""
    if not isinstance(rule, str):
        raise InvalidUrl(rule, f"must be a string, not {type(rule).__name__}", "exclusion rule")
    text = rule.strip()
    if not text:
        raise InvalidUrl(rule, "is empty", "exclusion rule")
    if len(text) > _MAX_RULE_LENGTH:
        raise InvalidUrl(
            rule, f"is longer than {_MAX_RULE_LENGTH} characters", "exclusion rule"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidUrl(rule, "contains invalid Unicode", "exclusion rule") from None
    if _CONTROL_RE.search(text) or " " in text:
        raise InvalidUrl(rule, "contains spaces or control characters", "exclusion rule")
    if "*" not in text and "/" not in text:
        return normalize_domain(text)
    if "*" not in text and "://" in text:
        return canonical_url(text)
    return text.lower() if text.isascii() else _idna_glob(rule, text)


def _idna_glob(rule: str, text: str) -> str:
    host, slash, rest = text.partition("/")
    labels = []
    for label in host.split("."):
        if label.isascii():
            labels.append(label.lower())
        else:
            labels.append(_idna_encode(rule, label, "exclusion rule"))
    return ".".join(labels) + slash + _normalize_component(rest, _QUERY_SAFE | {"*"})


def _compile_rule(text: str) -> _Rule:
    if "*" not in text and "/" not in text:
        return _Rule(text, "domain", text, None)
    pattern = re.compile(".*".join(re.escape(part) for part in text.split("*")), re.IGNORECASE)
    if "://" in text:
        return _Rule(text, "url_glob", text, pattern)
    if "/" in text:
        return _Rule(text, "path_glob", text, pattern)
    return _Rule(text, "host_glob", text, pattern)


@lru_cache(maxsize=32)
def _compiled(rules: tuple[str, ...]) -> ExclusionRules:
    return ExclusionRules(rules)


def _as_rules(rules: ExclusionRules | Iterable[str] | None) -> ExclusionRules:
    if rules is None:
        return _compiled(DEFAULT_EXCLUSIONS)
    if isinstance(rules, ExclusionRules):
        return rules
    if isinstance(rules, str):
        raise InvalidUrl(rules, "must be a list of rules, not one string", "exclusion rules")
    return _compiled(tuple(rules))


def matching_rule(url: object, rules: ExclusionRules | Iterable[str] | None = None) -> str | None:
    """The first rule in ``rules`` (default :data:`DEFAULT_EXCLUSIONS`) that ``url``
    matches, or ``None``. Raises ``InvalidUrl`` for a URL that cannot be captured."""
    return _as_rules(rules).match(url)


def is_excluded(url: object, rules: ExclusionRules | Iterable[str] | None = None) -> bool:
    """True if ``url`` must not be captured: it matches a rule (default
    :data:`DEFAULT_EXCLUSIONS`), or it is not a capturable URL at all. Never raises for a
    bad URL; raises ``InvalidUrl`` only for malformed rules."""
    compiled = _as_rules(rules)
    try:
        return compiled.match(url) is not None
    except InvalidUrl:
        return True
