"""Shared facts: key/value memory that several AI clients read and write, drop-in
compatible with mcp-memory-bridge.

The same six tools, parameters and answers as mcp-memory-bridge: ``memory_get``
answers ``key = value  (source: <client>, updated: ...)`` and, with
``include_events``, an ``events:`` line followed by one line per event
(``  <time> <client> <action>: <value>``); ``memory_history`` lists every write with its
value, refused compare-and-swap attempts (``cas_fail``, with the value tried) and
deletes in time order, and with ``include_reads`` the gets and searches (with the query)
too; ``memory_search`` returns the ``top_k`` facts nearest in meaning and is a tool
error when embeddings are off. Reads are logged unless ``MCP_LOG_READS=off``. Beyond
it: compare-and-swap on the version (``expected_version``, which cannot come back, so no
A-B-A), create-only (``require_absent``), literal and optionally case-insensitive
prefixes, cursors, and over HTTP an identity the token assigns. Every failure is a
tool error (see docs/mcp.md for the full comparison).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated

from pydantic import BaseModel

from backtrail.errors import BacktrailError, FactNotFound, KeyExists, VersionConflict
from backtrail.mcp_server.arguments import Cursor, Flag, Text, count
from backtrail.mcp_server.formatting import iso, parse_cursor
from backtrail.mcp_server.server import DESTRUCTIVE, OVERWRITES, READ_ONLY, Call, Reply, tool
from backtrail.service import Event, Fact

__all__ = ["Refused", "event_line"]

MAX_LIST = 500
MAX_TOP_K = 50

Key = Annotated[str, Text("The fact's key, e.g. 'user/theme'.", 256)]
ClientId = Annotated[str | None, Text("Who is writing (default: you).", 256)]


class FactOutput(BaseModel):
    fact: Fact | None = None
    events: list[Event] | None = None


class FactsOutput(BaseModel):
    facts: list[Fact]
    next_cursor: str | None = None


class DeleteOutput(BaseModel):
    deleted: bool
    fact: Fact | None = None


class FactHit(BaseModel):
    fact: Fact
    score: float


class FactSearchOutput(BaseModel):
    results: list[FactHit]


class HistoryOutput(BaseModel):
    key: str
    events: list[Event]


class Refused(BacktrailError):
    """A refusal worded as mcp-memory-bridge words it (becomes a tool error)."""

    code = "refused"


_ACTIONS = {"fact.set": "set", "fact.delete": "delete", "fact.read": "get",
            "fact.cas_fail": "cas_fail", "fact.search": "search",
            "facts.list": "list"}  # fmt: skip
_READS = ("fact.read", "fact.search", "facts.list")


def event_line(event: Event) -> str:
    """``<time> <client> <action>: <value>`` (the query, for a search)."""
    details = event.details
    action = _ACTIONS.get(event.action, event.action)
    if event.action == "fact.search":
        shown = details.get("query")
    else:
        shown = details.get("value")
    return f"{iso(event.at)} {event.client} {action}: {shown}"


def _fact_line(fact: Fact) -> str:
    return f"{fact.key} = {fact.value}  (source: {fact.client})"


def _conflict_text(error: VersionConflict) -> str:
    if error.what == "value":
        expected = f"expected value {error.expected!r}"
        actual = (
            "the key does not exist" if error.actual is None else f"actual value {error.actual!r}"
        )
    else:
        expected = f"expected version {error.expected}"
        actual = (
            "the key does not exist" if error.actual is None else f"actual version {error.actual}"
        )
    return f"CAS failed for {error.key!r}: {expected}, {actual}; not written"


@tool("Set a shared fact", OVERWRITES)
async def memory_set(
    call: Call,
    *,
    key: Key,
    value: Annotated[str, Text("The value (text).", 16_384, 0)],
    client_id: ClientId = None,
    expected_value: Annotated[str | None, Text("Compare-and-swap: write only if the value "
                                               "is exactly this.", 16_384, 0)] = None,  # fmt: skip
    require_absent: Annotated[bool, Flag("Create only: refuse if the key exists.")] = False,
    expected_version: Annotated[int | None, count("Compare-and-swap on the version "
                                                  "(no A-B-A).", 10**9)] = None,
) -> Reply[FactOutput]:
    """Store a fact shared with the user's other AI assistants (last write wins unless
    compare-and-swap or create-only). Writes are attributed and kept in its history."""
    if require_absent and (expected_value is not None or expected_version is not None):
        raise Refused("expected_value and require_absent are mutually exclusive")
    writer = call.writer(client_id)
    memory = call.memory
    try:
        fact = await call.acting(writer, memory.set_fact, key, value,
                                 expected_value=expected_value,
                                 expected_version=expected_version,
                                 require_absent=require_absent)  # fmt: skip
    except VersionConflict as error:
        raise Refused(_conflict_text(error)) from None
    except KeyExists as error:
        raise Refused(
            f"key {error.key!r} already exists (version {error.version}); not overwritten"
        ) from None
    text = f"set {fact.key!r} (from {fact.client}, version {fact.version})"
    return Reply(text, FactOutput(fact=fact))


@tool("Get a shared fact", READ_ONLY)
async def memory_get(
    call: Call,
    *,
    key: Key,
    include_events: Annotated[bool, Flag("Also list the key's writes and deletes.")] = False,
) -> Reply[FactOutput]:
    """Read a shared fact by its exact key: value, who wrote it, when, and its version
    (for compare-and-swap)."""
    memory, log = call.memory, call.settings.log_reads
    try:
        fact = await call.blocking(memory.get_fact, key, log=log)
    except FactNotFound:
        raise Refused(f"no fact for key {key!r}") from None
    text = (f"{fact.key} = {fact.value}  (source: {fact.client}, updated: "
            f"{iso(fact.updated_at)}, version: {fact.version})")  # fmt: skip
    events = None
    if include_events:
        events = [e for e in await call.blocking(memory.fact_history, key, limit=1_000)
                  if e.action in ("fact.set", "fact.delete")]  # fmt: skip
        text += "\nevents:\n" + "\n".join(f"  {event_line(e)}" for e in events)
    return Reply(text, FactOutput(fact=fact, events=events))


@tool("List shared facts", READ_ONLY)
async def memory_list(
    call: Call,
    *,
    prefix: Annotated[str, Text("Keys starting with this (exact); empty for all.", 256, 0)] = "",
    case_insensitive: Annotated[bool, Flag("Match the prefix ignoring case.")] = False,
    limit: Annotated[int, count("", MAX_LIST)] = 200,
    cursor: Cursor = None,
) -> Reply[FactsOutput]:
    """List shared facts whose key starts with a prefix, in key order."""
    offset = parse_cursor(cursor)
    facts = await call.blocking(call.memory.list_facts, prefix,
                                  case_insensitive=case_insensitive, limit=limit + 1,
                                  offset=offset)  # fmt: skip
    following = str(offset + limit) if len(facts) > limit else None
    facts = facts[:limit]
    if not facts:
        text = f"(no facts matching prefix {prefix!r})"
    else:
        text = "\n".join(_fact_line(f) for f in facts)
        if following:
            text += f"\n(more: call again with cursor={following!r})"
    return Reply(text, FactsOutput(facts=facts, next_cursor=following))


@tool("Delete a shared fact", DESTRUCTIVE)
async def memory_delete(
    call: Call,
    *,
    key: Key,
    client_id: ClientId = None,
    expected_version: Annotated[int | None, count("Delete only at this version.", 10**9)] = None,
) -> Reply[DeleteOutput]:
    """Delete a shared fact. Deleting a key that does not exist is not an error."""
    writer = call.writer(client_id)
    memory = call.memory

    def delete() -> Fact | None:
        try:
            return memory.delete_fact(key, expected_version=expected_version)
        except FactNotFound:
            return None

    try:
        fact = await call.acting(writer, delete)
    except VersionConflict as error:
        raise Refused(_conflict_text(error)) from None
    if fact is None:
        return Reply(f"nothing to delete for {key!r} (from {writer})", DeleteOutput(deleted=False))
    return Reply(f"deleted {key!r} (from {writer})", DeleteOutput(deleted=True, fact=fact))


@tool("Search shared facts", READ_ONLY)
async def memory_search(
    call: Call,
    *,
    query: Annotated[str, Text("What the fact is about, in any words.")],
    top_k: Annotated[int, count("", MAX_TOP_K)] = 3,
) -> Reply[FactSearchOutput]:
    """Find the shared facts nearest in meaning to the query, best first (needs the
    embedding model)."""
    memory = call.memory
    if not memory.config.embeddings:
        raise Refused("semantic search is disabled (MCP_EMBEDDINGS=off): memory_search needs "
                      "the embedding model; use memory_list to find facts by key")  # fmt: skip
    found = await call.blocking(memory.find_facts, query, top_k=top_k,
                                  log=call.settings.log_reads)  # fmt: skip
    hits = [FactHit(fact=fact, score=round(score, 4)) for fact, score in found]
    if not hits:
        text = f"(no facts match {query!r})"
    else:
        text = "\n".join(f"{_fact_line(h.fact)[:-1]}, score: {h.score:.3f})" for h in hits)
    return Reply(text, FactSearchOutput(results=hits))


@tool("History of a shared fact", READ_ONLY)
async def memory_history(
    call: Call,
    *,
    key: Key,
    include_reads: Annotated[bool, Flag("Also list gets and searches.")] = False,
) -> Reply[HistoryOutput]:
    """A key's writes with their values, refused compare-and-swap attempts and deletes,
    oldest first, each with its client."""
    events = await call.blocking(call.memory.fact_history, key, limit=1_000)
    events = [e for e in events if e.action != "facts.list"]
    if not include_reads:
        events = [e for e in events if e.action not in _READS]
    text = "\n".join(event_line(e) for e in events) or f"(no history for key {key!r})"
    return Reply(text, HistoryOutput(key=key, events=events))
