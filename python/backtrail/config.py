"""Backtrail's settings: one frozen :class:`Config`, a default and a help text per field.

Values come from, lowest precedence first:

1. the defaults below;
2. a config file in the data directory: ``config.toml`` or ``config.json`` (one table /
   object of ``name = value``; a file with an unknown name is refused, so typos show);
3. environment variables ``BACKTRAIL_<NAME>`` (e.g. ``BACKTRAIL_EMBEDDINGS=0``,
   ``BACKTRAIL_MODEL_DIR=~/models/minilm``); booleans accept 1/0, true/false, yes/no,
   on/off; an empty value means "unset" for optional paths;
4. explicit overrides (command-line flags, test fixtures).

The data directory itself is chosen before any of this (it is where the file lives):
an explicit ``data_dir`` override, else ``BACKTRAIL_HOME``, else the platform's per-user
data directory (:func:`backtrail.store.data_dir`).

:data:`SETTINGS` lists every field as ``(name, default, help)``, in the style of
datasette's ``SETTINGS``; front ends print it (``backtrail config``) and a test checks
that every field is documented.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from backtrail.errors import InvalidInput
from backtrail.store import HOME_ENV, LEDGER_FILENAME, Limits, data_dir
from backtrail.store.core import SYNCHRONOUS_MODES
from backtrail.store.postgres import is_postgres_url, redact

__all__ = [
    "Config", "Setting", "SETTINGS", "CONFIG_FILENAMES", "ENV_PREFIX", "HOME_ENV", "data_dir",
    "read_token_file",
]  # fmt: skip

logger = logging.getLogger(__name__)

ENV_PREFIX = "BACKTRAIL_"
CONFIG_FILENAMES = ("config.toml", "config.json")
INDEX_DIRNAME = "index"
MODEL_CACHE_DIRNAME = "model-cache"
INDEXER_LOCK_FILENAME = "indexer.lock"
HOST_LOCK_FILENAME = "host.lock"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _setting(default: Any, help: str, *, minimum: float | None = None) -> Any:
    """A dataclass field carrying its help text (and lower bound) as metadata."""
    return field(default=default, metadata={"help": help, "minimum": minimum})


@dataclass(frozen=True)
class Config:
    """Every setting of Backtrail. Build it with :meth:`load`; ``Config()`` gives the
    defaults (with the data directory resolved from the environment)."""

    # ------------------------------------------------------------------ storage
    data_dir: Path | None = _setting(
        None,
        "Directory holding the ledger, the search index and config.toml. Default: "
        "$BACKTRAIL_HOME, else the platform's per-user data directory.",
    )
    ledger_url: str = _setting(
        "",
        "Where the ledger lives: empty for the SQLite file in the data directory, or a "
        "postgresql://user@host:port/database URL (needs `pip install 'backtrail[postgres]'`; "
        "keep the password in ~/.pgpass or PGPASSWORD, not here). The search index stays "
        "local, in the data directory.",
    )
    busy_timeout_ms: int = _setting(
        10_000,
        "How long a ledger write waits for another process's write (milliseconds) "
        "before failing with StoreBusy.",
        minimum=0,
    )
    synchronous: str = _setting(
        "full",
        "SQLite synchronous mode of the ledger (off, normal, full, extra). 'full' makes "
        "every acknowledged capture survive a power cut.",
    )
    log_reads: bool = _setting(
        False, "Also record reads (page reads, fact reads) in the audit log."
    )

    # ------------------------------------------------------------------ devices
    server_url: str = _setting(
        "",
        "A Backtrail server (`backtrail mcp --http`) this computer's native host forwards "
        "the browser's captures to, e.g. https://memory.example.com; empty keeps the memory "
        "in this data directory. https, or http only to this machine (127.0.0.1, ::1, "
        "localhost). Set with `backtrail install --server URL --token-file PATH`.",
    )
    server_token_file: Path | None = _setting(
        None,
        "File holding this device's token for server_url (made on the server with "
        "`backtrail token add NAME --scope device --out FILE`); readable by you only "
        "(chmod 600).",
    )

    # ------------------------------------------------------------------ limits
    max_text_bytes: int = _setting(
        1_048_576,
        "Main text kept per page version (UTF-8 bytes); longer text is cut on a "
        "character boundary and marked truncated.",
        minimum=1,
    )
    max_capture_bytes: int = _setting(
        16_777_216,
        "Largest HTML or text a capture accepts at all (UTF-8 bytes); larger input is "
        "refused with LimitExceeded instead of being cut.",
        minimum=1,
    )
    max_request_bytes: int = _setting(
        16_777_216,
        "Largest message the native host accepts from the extension (bytes, at most "
        "64 MiB, the browser's own limit); a larger one is refused with error 3.",
        minimum=1024,
    )
    defer_extraction: bool = _setting(
        True,
        "Acknowledge HTML captures once their raw HTML is stored, and extract the main "
        "text in the background indexing pass (keeps the browser's acknowledgements fast; "
        "off: extract before acknowledging).",
    )
    max_fact_key_chars: int = _setting(256, "Longest fact key (characters).", minimum=1)
    max_fact_value_chars: int = _setting(16_384, "Longest fact value (characters).", minimum=1)
    max_note_chars: int = _setting(100_000, "Longest note (characters).", minimum=1)
    max_highlight_chars: int = _setting(
        20_000, "Longest highlighted text, and separately its context (characters).", minimum=1
    )
    max_query_chars: int = _setting(1_000, "Longest search query (characters).", minimum=1)

    # -------------------------------------------------------------- embeddings
    embeddings: bool = _setting(
        True,
        "Compute passage embeddings for semantic (vector/hybrid) search. Off: BM25 only.",
    )
    model_dir: Path | None = _setting(
        None,
        "Directory with model.onnx and tokenizer.json to use instead of the packaged "
        "all-MiniLM-L6-v2.",
    )
    embed_threads: int = _setting(
        0,
        "onnxruntime intra-op threads per session (0: one per core, except in a stdio MCP "
        "server, which embeds one query at a time: one).",
        minimum=0,
    )
    embed_sessions: int = _setting(1, "Parallel onnxruntime sessions in one process.", minimum=1)
    embed_batch_size: int = _setting(
        1,
        "Texts per onnxruntime call (the core sorts them by length). The integer model "
        "scales its activations per call, so at 1 a text's vector never depends on the "
        "texts beside it; one text per call also pads nothing and is the fastest on two "
        "cores (bench/README.md), and a search's query embedding waits least behind "
        "background indexing.",
        minimum=1,
    )

    # ----------------------------------------------------------------- indexing
    index_lock_timeout: float = _setting(
        30.0,
        "Seconds an explicit indexing operation (catch-up command, forget, reindex) "
        "waits for another process's indexing pass.",
        minimum=0,
    )
    background_indexing: bool = _setting(
        True,
        "Long-running processes (native host, MCP servers) index in a background thread "
        "after writes; when off, call catch_up() explicitly.",
    )
    background_vectors: bool = _setting(
        True,
        "The background thread also computes embeddings (the expensive step); when off "
        "it only makes text searchable.",
    )
    defer_vectors_to_host: bool = _setting(
        True,
        "While a native host runs (the browser is open), other long-running processes "
        "(MCP servers) leave embedding the backlog and merging vector segments to it and "
        "embed only up to their own writes, so N assistants do not all spend CPU on the "
        "pages the browser sends; "
        "with no host running they embed as before. Off: every process helps.",
    )
    indexer_debounce: float = _setting(
        0.5,
        "Quiet period (seconds) after a write before the background indexer runs, so "
        "bursts of writes share one index commit.",
        minimum=0,
    )
    indexer_nice: int = _setting(
        10,
        "How much lower the background indexing thread's CPU priority is than its "
        "process's (Linux 'nice' steps, 0-19), so searches and the browser stay responsive "
        "while a backlog is embedded; 0 keeps the same priority. Linux only.",
        minimum=0,
    )
    indexer_max_delay: float = _setting(
        5.0,
        "Under a steady stream of writes the background indexer still runs at least "
        "this often (seconds).",
        minimum=0,
    )
    follow_poll: float = _setting(
        5.0,
        "A server on a PostgreSQL ledger (backtrail mcp --http) follows other nodes' commits "
        "as PostgreSQL notifies them; without a notification it still compares its index "
        "with the ledger this often (seconds).",
        minimum=0.05,
    )
    text_batch_changes: int = _setting(
        2_000, "Ledger changes applied per index commit in the text phase.", minimum=1
    )
    text_batch_bytes: int = _setting(
        33_554_432,
        "Page text staged per index commit before it is committed early (bytes).",
        minimum=1,
    )
    vector_batch_passages: int = _setting(
        64,
        "Passages embedded per index commit in the vector phase (about two seconds of "
        "work on two cores); text indexing gets a turn between batches.",
        minimum=1,
    )
    passage_chars: int = _setting(
        1_000,
        "Target size of a page passage (characters); passages break at paragraph, then "
        "sentence, then word boundaries.",
        minimum=100,
    )
    passage_overlap: int = _setting(
        100,
        "Characters of the previous passage repeated at the start of the next one, so "
        "phrases across a boundary still match.",
        minimum=0,
    )
    max_passages_per_page: int = _setting(
        4_000,
        "Passages indexed per page; text beyond them is stored but not indexed.",
        minimum=1,
    )

    # ------------------------------------------------------------------- search
    search_limit: int = _setting(10, "Results per search page when none is asked for.", minimum=1)
    max_search_limit: int = _setting(100, "Most results one search page returns.", minimum=1)
    max_search_offset: int = _setting(1_000, "Deepest result a cursor may page to.", minimum=0)
    result_chars: int = _setting(
        1_200,
        "Default per-result character budget: snippet plus extra passages of one result.",
        minimum=40,
    )
    snippet_chars: int = _setting(
        300, "Length of one snippet before the per-result budget applies.", minimum=20
    )
    page_read_chars: int = _setting(
        8_000, "Characters get_page returns when no length is given.", minimum=1
    )
    search_fresh_wait: float = _setting(
        2.0,
        "Seconds a search waits to make its client's own recent writes searchable "
        "(read-your-writes; on a server, other clients' and devices' writes never make "
        "a search wait); 0 searches whatever is indexed.",
        minimum=0,
    )
    search_min_similarity: float = _setting(
        0.385,
        "search: a hybrid search whose best matches are all less similar in meaning than "
        "this (in a memory of 10,000 passages; the floor grows with the memory as chance "
        "matches do, like sqrt(ln n)), and none of which holds half the query's words, "
        "answers that nothing matches (0 turns this off; calibrated on the human-written "
        "sets with bench/quality.py --calibrate).",
        minimum=0,
    )
    search_bm25_weight: float = _setting(
        0.1,
        "search: weight of BM25 in hybrid fusion when the best keyword match holds none of "
        "the query's words; it rises to 1 as that match holds more of them, rare words "
        "counting most (the vector signal gets the rest; chosen on the human-written sets "
        "in bench/quality.py).",
        minimum=0,
    )
    search_decay_half_life_days: float = _setting(
        180.0,
        "search: age (days) at which the recency multiplier is halfway to its floor; "
        "0 disables time decay.",
        minimum=0,
    )
    search_decay_floor: float = _setting(0.8, "search: lowest recency multiplier.", minimum=0)
    search_visit_weight: float = _setting(
        0.05, "search: visit boost slope, boost = 1 + w * ln(1 + visits).", minimum=0
    )
    forgotten_bm25_weight: float = _setting(
        0.1,
        "find_forgotten: BM25 weight in fusion when the query's words are missing from "
        "the best keyword matches (vague descriptions rarely share words with the page); "
        "as for search, chosen on the human-written sets in bench/quality.py.",
        minimum=0,
    )
    forgotten_decay_half_life_days: float = _setting(
        30.0,
        "find_forgotten: recency half-life (days); stronger decay than search.",
        minimum=0,
    )
    forgotten_decay_floor: float = _setting(
        0.3, "find_forgotten: lowest recency multiplier.", minimum=0
    )
    forgotten_visit_weight: float = _setting(
        0.15,
        "find_forgotten: visit boost slope; pages read often are remembered first.",
        minimum=0,
    )
    search_duplicate_similarity: float = _setting(
        0.0,
        "search: near-duplicates (vector cosine at least this) of a more relevant result "
        "share its relevance, so recency and visits choose among copies; 0 disables.",
        minimum=0,
    )
    forgotten_duplicate_similarity: float = _setting(
        0.92,
        "find_forgotten: near-duplicates (vector cosine at least this) of a more relevant "
        "page share its relevance, so the copy read recently and often ranks first (copies "
        "with 5% of the words dropped measured cosine 0.92 or more in 99% of pairs); 0 "
        "disables.",
        minimum=0,
    )

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            value = _check(spec.name, getattr(self, spec.name), spec.metadata.get("minimum"))
            object.__setattr__(self, spec.name, value)
        object.__setattr__(self, "data_dir", data_dir(self.data_dir, create=False))
        if self.ledger_url and not is_postgres_url(self.ledger_url):
            raise InvalidInput(
                "ledger_url",
                "must be a postgresql:// URL, or empty for the SQLite file in the data "
                f"directory; got {redact(self.ledger_url)!r:.80}",
            )
        if self.server_url:
            object.__setattr__(self, "server_url", _server_url(self.server_url))
            if self.server_token_file is None:
                raise InvalidInput(
                    "server_token_file",
                    "must be set when server_url is: the file holding this device's token "
                    "(`backtrail install --server URL --token-file PATH` sets both)",
                )
        if self.synchronous not in SYNCHRONOUS_MODES:
            raise InvalidInput(
                "synchronous",
                f"must be one of {', '.join(SYNCHRONOUS_MODES)}, got {self.synchronous!r}",
            )
        if self.passage_overlap * 2 > self.passage_chars:
            raise InvalidInput(
                "passage_overlap", f"must be at most half of passage_chars ({self.passage_chars})"
            )
        for name in ("search_bm25_weight", "forgotten_bm25_weight", "search_decay_floor",
                     "forgotten_decay_floor", "search_duplicate_similarity",
                     "forgotten_duplicate_similarity"):  # fmt: skip
            if getattr(self, name) > 1:
                raise InvalidInput(name, f"must be between 0 and 1, got {getattr(self, name)}")
        if self.search_limit > self.max_search_limit:
            raise InvalidInput("search_limit", "must not exceed max_search_limit")

    # ---------------------------------------------------------------- loading

    @classmethod
    def load(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Config:
        """Defaults < config file in the data directory < ``BACKTRAIL_*`` environment
        variables < ``overrides``. Raises ``InvalidInput`` naming the source of a bad
        or unknown setting."""
        env = os.environ if environ is None else environ
        explicit = data_dir if data_dir is not None else (overrides or {}).get("data_dir")
        home = _data_dir_choice(explicit, env)
        values: dict[str, Any] = {}
        values.update(_read_file(home))
        values.update(_read_environ(env))
        for name, value in (overrides or {}).items():
            values[_known(name, "overrides")] = value
        values["data_dir"] = home
        return cls(**values)

    def replace(self, **changes: Any) -> Config:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- derived

    @property
    def home(self) -> Path:
        """``data_dir``, which ``__post_init__`` always resolves."""
        assert self.data_dir is not None
        return self.data_dir

    @property
    def ledger_path(self) -> Path:
        return self.home / LEDGER_FILENAME

    @property
    def ledger_target(self) -> Path | str:
        """What :class:`~backtrail.store.Ledger` opens: ``ledger_url`` when set, else
        the ledger file."""
        return self.ledger_url or self.ledger_path

    @property
    def index_dir(self) -> Path:
        """The local search index. An index derived from a PostgreSQL ledger has a
        directory of its own per database (named by a digest of the URL without its
        password), so switching ``ledger_url`` never serves another ledger's index."""
        if self.ledger_url:
            digest = hashlib.sha256(redact(self.ledger_url).encode("utf-8")).hexdigest()
            return self.home / f"{INDEX_DIRNAME}-pg-{digest[:12]}"
        return self.home / INDEX_DIRNAME

    @property
    def model_cache_dir(self) -> Path:
        """onnxruntime's optimised graph of the embedding model (rebuildable)."""
        return self.home / MODEL_CACHE_DIRNAME

    @property
    def indexer_lock_path(self) -> Path:
        return self.home / INDEXER_LOCK_FILENAME

    @property
    def host_lock_path(self) -> Path:
        return self.home / HOST_LOCK_FILENAME

    def server_token(self) -> str:
        """The device token in ``server_token_file``, checked: the file exists, this user
        can read it, on POSIX nobody else can, and it holds one token. ``InvalidInput``
        naming the fix otherwise."""
        if self.server_token_file is None:
            raise InvalidInput("server_token_file", "is not set; give --token-file PATH")
        return read_token_file(self.server_token_file)

    def limits(self) -> Limits:
        """The ledger :class:`~backtrail.store.Limits` these settings imply."""
        return Limits(
            max_text_bytes=self.max_text_bytes,
            max_fact_key_chars=self.max_fact_key_chars,
            max_fact_value_chars=self.max_fact_value_chars,
            max_note_chars=self.max_note_chars,
            max_highlight_chars=self.max_highlight_chars,
        )

    def describe(self) -> list[dict[str, Any]]:
        """``[{name, value, default, help}]`` for every setting (JSON-safe values)."""
        return [
            {"name": s.name, "value": _jsonable(getattr(self, s.name), s.name),
             "default": _jsonable(s.default), "help": s.help}
            for s in SETTINGS
        ]  # fmt: skip


class Setting(NamedTuple):
    """One documented setting: its name, default and help text."""

    name: str
    default: Any
    help: str


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(spec.name, spec.default, spec.metadata["help"]) for spec in dataclasses.fields(Config)
)
_TYPES: dict[str, str] = {spec.name: str(spec.type) for spec in dataclasses.fields(Config)}


# ------------------------------------------------------------------- validation


def _check(name: str, value: Any, minimum: float | None) -> Any:
    kind = _TYPES[name]
    if kind == "Path | None":
        if value is None or value == "":
            return None
        if not isinstance(value, (str, os.PathLike)):
            raise InvalidInput(name, f"must be a path, not {type(value).__name__}")
        return Path(value).expanduser()
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidInput(name, f"must be true or false, not {type(value).__name__}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise InvalidInput(name, f"must be a string, not {type(value).__name__}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(name, f"must be an integer, not {type(value).__name__}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(name, f"must be a number, not {type(value).__name__}")
        if not math.isfinite(value):
            raise InvalidInput(name, f"must be a finite number, got {value}")
        value = float(value)
    if minimum is not None and value < minimum:
        raise InvalidInput(name, f"must be at least {minimum:g}, got {value}")
    return value


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "::1"})


def _server_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an https URL, or http to this machine."""
    from ipaddress import ip_address
    from urllib.parse import urlsplit

    def bad(reason: str) -> InvalidInput:
        return InvalidInput("server_url", f"{reason}; got {url!r:.100}")

    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as error:
        raise bad(f"is not a URL ({error})") from None
    if parts.scheme not in ("https", "http") or not host:
        raise bad("must be an https:// address such as https://memory.example.com")
    if parts.username is not None or parts.password is not None:
        raise bad("must not hold a user name or password (the token file authenticates)")
    if parts.query or parts.fragment:
        raise bad("must not have a ?query or #fragment")
    if parts.scheme == "http":
        try:
            loopback = ip_address(host).is_loopback
        except ValueError:
            loopback = host.lower() in _LOOPBACK_NAMES
        if not loopback:
            raise bad("must use https:// (plain http only to this machine: 127.0.0.1, "
                      "::1 or localhost), so the token and your pages travel encrypted")
    path = parts.path.rstrip("/")
    if path.endswith(("/mcp", "/host")):
        raise bad("must be the server's base address, without /mcp or /host")
    return f"{parts.scheme}://{parts.netloc}{path}"


def read_token_file(path: Path) -> str:
    """The one token held in ``path`` (surrounding whitespace ignored); ``InvalidInput``
    saying what to do when the file is missing, unreadable, readable by others (POSIX)
    or does not hold one token."""
    import stat

    name = "server_token_file"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InvalidInput(name, f"{path} does not exist; make the token on the server "
                           "(`backtrail token add NAME --scope device --out FILE`) and copy "
                           "it here") from None  # fmt: skip
    except OSError as error:
        raise InvalidInput(name, f"{path} cannot be read: {error.strerror or error}") from None
    if not stat.S_ISREG(mode):
        raise InvalidInput(name, f"{path} is not a file")
    if os.name == "posix" and mode & 0o077:
        raise InvalidInput(name, f"{path} can be read by other users (mode "
                           f"{stat.S_IMODE(mode):o}); run `chmod 600 {path}`")  # fmt: skip
    try:
        text = path.read_bytes().decode("utf-8").strip()
    except PermissionError:
        raise InvalidInput(name, f"{path} cannot be read by this user; make it yours "
                           f"(`chown $USER {path}`) with mode 600") from None  # fmt: skip
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInput(name, f"{path} cannot be read: {error}") from None
    if not text or len(text) > 4096 or not (text.isascii() and text.isprintable()) \
            or any(c.isspace() for c in text):  # fmt: skip
        raise InvalidInput(name, f"{path} must hold one token on one line (as `backtrail "
                           "token add --out` writes it)")  # fmt: skip
    return text


def _known(name: object, source: str) -> str:
    if not isinstance(name, str) or name not in _TYPES:
        raise InvalidInput(
            f"setting {name!r:.60} (from {source})",
            "unknown setting; see `backtrail config` for the list",
        )
    return name


def _parse_text(name: str, text: str, source: str) -> Any:
    """A setting's value from its text form (environment variables)."""
    kind = _TYPES[name]
    raw = text.strip()
    try:
        if kind == "bool":
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise ValueError("expected 1/0, true/false, yes/no or on/off")
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as error:
        raise InvalidInput(
            f"{name} (from {source})", f"{raw!r:.60} is not valid: {error}"
        ) from None
    return raw if kind == "str" else (raw or None)


def _data_dir_choice(explicit: object, env: Mapping[str, str]) -> Path:
    if explicit not in (None, ""):
        if not isinstance(explicit, (str, os.PathLike)):
            raise InvalidInput("data_dir", f"must be a path, not {type(explicit).__name__}")
        return data_dir(explicit, create=False)
    return data_dir(env.get(HOME_ENV) or None, create=False)


def _read_environ(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in _TYPES:
        if name == "data_dir":
            continue  # BACKTRAIL_HOME, handled by the data directory lookup
        key = ENV_PREFIX + name.upper()
        if key in env:
            values[name] = _parse_text(name, env[key], key)
    return values


def _read_file(home: Path) -> dict[str, Any]:
    for filename in CONFIG_FILENAMES:
        path = home / filename
        if path.is_file():
            return _parse_file(path)
    return {}


def _parse_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
        if path.suffix == ".toml":
            data: Any = _toml_loads(raw.decode("utf-8"), path)
        else:
            data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InvalidInput(f"config file {path}", f"cannot be read: {error}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"config file {path}", "must hold one table of settings")
    values = {_known(name, str(path)): value for name, value in data.items()}
    if "data_dir" in values:
        raise InvalidInput(
            f"data_dir (from {path})",
            f"cannot be set in the file that lives in it; use {HOME_ENV} or --data-dir",
        )
    logger.debug("settings read from %s: %s", path, sorted(values))
    return values


def _toml_loads(text: str, path: Path) -> Any:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        raise InvalidInput(
            f"config file {path}", "TOML needs Python 3.11 or later; use config.json"
        ) from None
    return tomllib.loads(text)


def _jsonable(value: Any, name: str = "") -> Any:
    if name == "ledger_url" and value:
        return redact(value)
    return str(value) if isinstance(value, Path) else value
