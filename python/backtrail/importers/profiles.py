"""Where browsers keep their profiles, on Linux, macOS and Windows.

Chromium-family browsers (Chrome, Chromium, Brave, Edge) keep a *user data directory*
holding one directory per profile (``Default``, ``Profile 1``...) and a ``Local State``
JSON file naming them (``profile.info_cache``) and the one used last
(``profile.last_used``). Each profile directory holds ``History`` (SQLite) and
``Bookmarks`` (JSON).

Firefox keeps a ``profiles.ini`` in its root directory listing each profile's
``Name`` and ``Path`` (relative to the root when ``IsRelative=1``); the profile the
installed Firefox opens by default is the ``Default=`` of an ``[Install…]`` section,
else the profile marked ``Default=1``. Each profile directory holds ``places.sqlite``
(history and bookmarks).

Every function takes the platform, home directory and environment as parameters
(defaulting to the running system's), so discovery is tested on all three systems.
"""

from __future__ import annotations

import configparser
import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from backtrail.errors import InvalidInput, NotFound, short_repr

__all__ = [
    "BROWSERS",
    "CHROMIUM_BROWSERS",
    "Profile",
    "ProfileNotFound",
    "browser_roots",
    "find_profiles",
    "resolve_profile",
]

logger = logging.getLogger(__name__)

CHROMIUM_BROWSERS = ("chrome", "chromium", "brave", "edge")
BROWSERS = (*CHROMIUM_BROWSERS, "firefox")

# Per browser: (Linux paths under $XDG_CONFIG_HOME or ~/.config, other Linux paths under
# ~, macOS paths under ~/Library/Application Support, Windows paths under %LOCALAPPDATA%
# (Chromium family) or %APPDATA% (Firefox)).
_LINUX_CONFIG = {
    "chrome": ["google-chrome"],
    "chromium": ["chromium"],
    "brave": ["BraveSoftware/Brave-Browser"],
    "edge": ["microsoft-edge"],
    "firefox": ["mozilla/firefox"],
}
_LINUX_HOME = {
    "chrome": [".var/app/com.google.Chrome/config/google-chrome"],
    "chromium": ["snap/chromium/common/chromium", ".var/app/org.chromium.Chromium/config/chromium"],
    "brave": [
        "snap/brave/current/.config/BraveSoftware/Brave-Browser",
        ".var/app/com.brave.Browser/config/BraveSoftware/Brave-Browser",
    ],
    "edge": [".var/app/com.microsoft.Edge/config/microsoft-edge"],
    "firefox": [
        ".mozilla/firefox",
        "snap/firefox/common/.mozilla/firefox",
        ".var/app/org.mozilla.firefox/.mozilla/firefox",
    ],
}
_MACOS = {
    "chrome": ["Google/Chrome"],
    "chromium": ["Chromium"],
    "brave": ["BraveSoftware/Brave-Browser"],
    "edge": ["Microsoft Edge"],
    "firefox": ["Firefox"],
}
_WINDOWS = {
    "chrome": ["Google/Chrome/User Data"],
    "chromium": ["Chromium/User Data"],
    "brave": ["BraveSoftware/Brave-Browser/User Data"],
    "edge": ["Microsoft/Edge/User Data"],
    "firefox": ["Mozilla/Firefox"],
}
_CHROMIUM_SKIP = frozenset({"System Profile", "Guest Profile"})


class ProfileNotFound(NotFound):
    """No profile of the browser matches (or the browser keeps no profile here)."""

    code = "profile_not_found"
    kind = "browser profile"

    def __init__(self, browser: str, wanted: str | None, searched: list[Path]) -> None:
        where = ", ".join(str(path) for path in searched) or "nowhere"
        if wanted is None:
            message = f"no {browser} profile found (looked in {where})"
        else:
            message = f"no {browser} profile {short_repr(wanted)} (looked in {where})"
        super().__init__(wanted or browser)
        self.message = message
        self.args = (message,)
        self.browser = browser
        self.wanted = wanted


@dataclass(frozen=True)
class Profile:
    """One browser profile: ``name`` as the browser shows it, ``directory`` on disk."""

    browser: str
    name: str
    directory: Path
    default: bool = False

    @property
    def is_firefox(self) -> bool:
        return self.browser == "firefox"

    @property
    def key(self) -> str:
        """``browser:directory-name``: how imports label this profile in the ledger."""
        return f"{self.browser}:{self.directory.name}"

    @property
    def history_file(self) -> Path:
        return self.directory / ("places.sqlite" if self.is_firefox else "History")

    @property
    def bookmarks_file(self) -> Path:
        return self.directory / ("places.sqlite" if self.is_firefox else "Bookmarks")


def browser_roots(
    browser: str,
    *,
    platform: str | None = None,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Path]:
    """Directories where ``browser`` may keep its profiles on ``platform`` (existing or
    not), most usual first."""
    _check_browser(browser)
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    env = os.environ if environ is None else environ
    if platform == "win32":
        if browser == "firefox":
            base = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
        else:
            base = Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
        return [base / relative for relative in _WINDOWS[browser]]
    if platform == "darwin":
        support = home / "Library" / "Application Support"
        return [support / relative for relative in _MACOS[browser]]
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    roots = [config / relative for relative in _LINUX_CONFIG[browser]]
    if browser == "firefox":  # ~/.mozilla/firefox is still the usual place
        roots.insert(0, home / _LINUX_HOME["firefox"][0])
        roots += [home / relative for relative in _LINUX_HOME["firefox"][1:]]
    else:
        roots += [home / relative for relative in _LINUX_HOME[browser]]
    return roots


def find_profiles(
    browser: str | None = None,
    *,
    platform: str | None = None,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Profile]:
    """Every profile found of ``browser`` (or of every browser), default profiles first."""
    browsers = BROWSERS if browser is None else (browser,)
    found: list[Profile] = []
    for name in browsers:
        for root in browser_roots(name, platform=platform, home=home, environ=environ):
            if not root.is_dir():
                continue
            profiles = (
                _firefox_profiles(root) if name == "firefox" else _chromium_profiles(name, root)
            )
            found += sorted(profiles, key=lambda p: (not p.default, p.name.lower()))
    return found


def resolve_profile(
    browser: str,
    wanted: str | os.PathLike[str] | None = None,
    *,
    platform: str | None = None,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Profile:
    """The profile ``wanted`` of ``browser``: a profile directory path, or a profile's
    name or directory name (case-insensitive); by default the browser's default
    profile. Raises :class:`ProfileNotFound`."""
    _check_browser(browser)
    if wanted is not None:
        path = Path(wanted).expanduser()
        if path.is_dir() and (os.sep in str(wanted) or "/" in str(wanted) or path.is_absolute()):
            return Profile(browser, path.name, path.resolve(), default=False)
    profiles = find_profiles(browser, platform=platform, home=home, environ=environ)
    searched = [
        root
        for root in browser_roots(browser, platform=platform, home=home, environ=environ)
        if root.is_dir()
    ] or browser_roots(browser, platform=platform, home=home, environ=environ)[:1]
    if wanted is None:
        if not profiles:
            raise ProfileNotFound(browser, None, searched)
        return profiles[0]
    text = str(wanted).casefold()
    for profile in profiles:
        if text in (profile.name.casefold(), profile.directory.name.casefold()):
            return profile
    raise ProfileNotFound(browser, str(wanted), searched)


# ------------------------------------------------------------------ chromium


def _chromium_profiles(browser: str, root: Path) -> list[Profile]:
    names, last_used = _local_state(root / "Local State")
    candidates = set(names)
    try:
        candidates.update(
            child.name
            for child in root.iterdir()
            if child.is_dir() and (child.name == "Default" or child.name.startswith("Profile "))
        )
    except OSError as error:
        logger.warning("cannot list %s: %s", root, error)
    default = last_used if last_used in candidates else "Default"
    profiles = []
    for directory_name in candidates - _CHROMIUM_SKIP:
        directory = root / directory_name
        if not ((directory / "History").is_file() or (directory / "Bookmarks").is_file()):
            continue
        display = names.get(directory_name) or directory_name
        profiles.append(Profile(browser, display, directory, directory_name == default))
    return profiles


def _local_state(path: Path) -> tuple[dict[str, str], str | None]:
    """``({directory: display name}, last used directory)`` from ``Local State``."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as error:
        logger.warning("ignoring unreadable %s: %s", path, error)
        return {}, None
    section = state.get("profile") if isinstance(state, dict) else None
    if not isinstance(section, dict):
        return {}, None
    cache = section.get("info_cache")
    names: dict[str, str] = {}
    if isinstance(cache, dict):
        for directory, info in cache.items():
            name = info.get("name") if isinstance(info, dict) else None
            names[str(directory)] = name if isinstance(name, str) and name else str(directory)
    last_used = section.get("last_used")
    return names, last_used if isinstance(last_used, str) else None


# ------------------------------------------------------------------- firefox


def _firefox_profiles(root: Path) -> list[Profile]:
    ini = root / "profiles.ini"
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(ini, encoding="utf-8")
    except (OSError, configparser.Error) as error:
        logger.warning("ignoring unreadable %s: %s", ini, error)
    install_default = next(
        (parser[s].get("Default") for s in parser.sections() if s.startswith("Install")), None
    )
    profiles: list[Profile] = []
    marked_default: Path | None = None
    for section in parser.sections():
        if not section.startswith("Profile") or "Path" not in parser[section]:
            continue
        entry = parser[section]
        relative = entry.get("IsRelative", "1").strip() != "0"
        path = root / entry["Path"] if relative else Path(entry["Path"])
        if entry.get("Default", "0").strip() == "1":
            marked_default = path
        profiles.append(Profile("firefox", entry.get("Name") or path.name, path))
    if not profiles:  # no profiles.ini: any directory holding places.sqlite
        found = [*root.glob("*/places.sqlite"), *root.glob("Profiles/*/places.sqlite")]
        for candidate in sorted(found):
            profiles.append(Profile("firefox", candidate.parent.name, candidate.parent))
    default = root / install_default if install_default else marked_default
    if default is None and profiles:
        default = profiles[0].directory
    return [
        Profile(p.browser, p.name, p.directory, default is not None and p.directory == default)
        for p in profiles
        if p.directory.is_dir()
    ]


def _check_browser(browser: str) -> None:
    if browser not in BROWSERS:
        raise InvalidInput("browser", f"must be one of {', '.join(BROWSERS)}, got {browser!r:.40}")
