"""Shared facts: key/value memory that several AI clients read and write, drop-in
compatible with mcp-memory-bridge.

Same tools, parameters and result texts as mcp-memory-bridge (``memory_get`` answers
``key = value  (source: <client>, ...)``, a failed compare-and-swap says ``CAS failed``
and names the expected and the actual value, create-only refuses an existing key, the
two are mutually exclusive, keys are limited to 256 and values to 16384 characters by
default), and every failure is a tool result with ``isError``. Beyond it:

- ``memory_list`` prefixes are case-sensitive and literal (``%`` and ``_`` are plain
  characters); ``case_insensitive=true`` asks for the other behaviour;
- compare-and-swap can use the version counter (``expected_version``), which, unlike a
  value, cannot come back to an old state (no A-B-A);
- ``memory_search`` works without the embedding model (keyword search), and semantic
  when the model is on;
- over HTTP with a token file the server, not the ``client_id`` argument, decides who
  wrote, and reads are attributed to the calling client too.

The audit log never stores values (so forgetting really forgets), so ``memory_history``
and ``include_events`` list versions and sizes instead of old values.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from backtrail.errors import BacktrailError, FactNotFound, InvalidInput, KeyExists, VersionConflict
from backtrail.mcp_server.formatting import iso, parse_cursor
from backtrail.mcp_server.server import DESTRUCTIVE, OVERWRITES, READ_ONLY, Caller, Reply, Runtime
from backtrail.service import Event, Fact

__all__ = ["register"]

MAX_LIST = 500

Key = Annotated[str, Field(description="The fact's key, e.g. 'user/theme' or 'project/deadline'.")]
ClientId = Annotated[
    str | None,
    Field(description="Who is writing (recorded with the fact). Usually leave it out: the "
          "server knows who you are."),
]  # fmt: skip


class FactOutput(BaseModel):
    fact: Fact | None
    events: list[Event] | None = None


class FactsOutput(BaseModel):
    facts: list[Fact]
    next_cursor: str | None


class DeleteOutput(BaseModel):
    deleted: bool
    fact: Fact | None


class FactHit(BaseModel):
    fact: Fact
    score: float


class FactSearchOutput(BaseModel):
    query: str
    mode: str
    results: list[FactHit]


class HistoryOutput(BaseModel):
    key: str
    events: list[Event]


def _action(event: Event) -> str:
    return {"fact.set": "set", "fact.delete": "delete", "fact.read": "get",
            "facts.list": "list"}.get(event.action, event.action)  # fmt: skip


def _event_line(event: Event) -> str:
    details = event.details
    extra = []
    if "version" in details:
        extra.append(f"version {details['version']}")
    if details.get("created"):
        extra.append("created")
    if "chars" in details:
        extra.append(f"{details['chars']} chars")
    return f"{iso(event.at)} {event.client} {_action(event)}: {', '.join(extra) or '-'}"


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


class Refused(BacktrailError):
    """A refusal worded as mcp-memory-bridge words it (becomes an ``isError`` result)."""

    code = "refused"


def register(server: MCPServer, rt: Runtime) -> None:
    @server.tool(annotations=OVERWRITES, title="Set a shared fact")
    async def memory_set(
        key: Key,
        value: Annotated[
            str, Field(description="The value to store (text, up to 16384 characters).")
        ],
        ctx: Context,
        client_id: ClientId = None,
        expected_value: Annotated[
            str | None,
            Field(description="Compare-and-swap: write only if the current value is exactly this."),
        ] = None,
        require_absent: Annotated[
            bool, Field(description="Create only: refuse if the key already exists.")
        ] = False,
        expected_version: Annotated[
            int | None,
            Field(
                description="Compare-and-swap on the version number from memory_get (safer "
                "than expected_value: a version never comes back)."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, FactOutput]:
        """Store a fact shared with the user's other AI assistants (last write wins,
        unless you use compare-and-swap: expected_value or expected_version, or create-only:
        require_absent). Every write is attributed and kept in the key's history."""
        args = {"key": key, "value": value, "client_id": client_id,
                "expected_value": expected_value, "require_absent": require_absent,
                "expected_version": expected_version}  # fmt: skip

        async def work(caller: Caller) -> Reply:
            if require_absent and (expected_value is not None or expected_version is not None):
                raise Refused("expected_value and require_absent are mutually exclusive")
            writer = rt.writer_for(caller, client_id)

            def write() -> Fact:
                with rt.memory.acting_as(writer):
                    return rt.memory.set_fact(
                        key, value, expected_value=expected_value,
                        expected_version=expected_version, require_absent=require_absent,
                    )  # fmt: skip

            try:
                fact = await rt.blocking(write)
            except VersionConflict as error:
                raise Refused(_conflict_text(error)) from None
            except KeyExists as error:
                raise Refused(
                    f"key {error.key!r} already exists (version {error.version}); not overwritten"
                ) from None
            text = f"set {fact.key!r} (from {fact.client}, version {fact.version})"
            return Reply(text, FactOutput(fact=fact))

        return await rt.run(ctx, "memory_set", args, work, writes=True)

    @server.tool(annotations=READ_ONLY, title="Get a shared fact")
    async def memory_get(
        key: Key,
        ctx: Context,
        include_events: Annotated[
            bool, Field(description="Also list the key's history (who changed it, when).")
        ] = False,
    ) -> Annotated[CallToolResult, FactOutput]:
        """Read a shared fact by its exact key: its value, who wrote it, when, and its
        version (for compare-and-swap)."""
        args = {"key": key, "include_events": include_events}

        async def work(caller: Caller) -> Reply:
            def read() -> tuple[Fact, list[Event] | None]:
                with rt.memory.acting_as(caller.client):
                    fact = rt.memory.get_fact(key)
                events = rt.memory.fact_history(key) if include_events else None
                return fact, events

            try:
                fact, events = await rt.blocking(read)
            except FactNotFound:
                raise Refused(f"no fact for key {key!r}") from None
            text = (
                f"{fact.key} = {fact.value}  (source: {fact.client}, updated: "
                f"{iso(fact.updated_at)}, version: {fact.version})"
            )
            if events is not None:
                writes = [e for e in events if e.action != "fact.read"]
                text += "\nevents:\n" + "\n".join(f"  {_event_line(e)}" for e in writes)
            return Reply(text, FactOutput(fact=fact, events=events))

        return await rt.run(ctx, "memory_get", args, work)

    @server.tool(annotations=READ_ONLY, title="List shared facts")
    async def memory_list(
        ctx: Context,
        prefix: Annotated[
            str,
            Field(
                description="Only keys starting with this (exact, case-sensitive); empty for all."
            ),
        ] = "",
        case_insensitive: Annotated[
            bool, Field(description="Match the prefix ignoring case.")
        ] = False,
        limit: Annotated[int, Field(description=f"Facts per answer (1-{MAX_LIST}).")] = 200,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous answer.")
        ] = None,
    ) -> Annotated[CallToolResult, FactsOutput]:
        """List shared facts whose key starts with a prefix, in key order."""
        args = {"prefix": prefix, "case_insensitive": case_insensitive, "limit": limit,
                "cursor": cursor}  # fmt: skip

        async def work(caller: Caller) -> Reply:
            if not 1 <= limit <= MAX_LIST:
                raise InvalidInput("limit", f"must be from 1 to {MAX_LIST}, got {limit}")
            offset = parse_cursor(cursor)

            def read() -> list[Fact]:
                with rt.memory.acting_as(caller.client):
                    return rt.memory.list_facts(prefix, case_insensitive=case_insensitive,
                                                limit=limit + 1, offset=offset)  # fmt: skip

            facts = await rt.blocking(read)
            following = str(offset + limit) if len(facts) > limit else None
            facts = facts[:limit]
            if not facts:
                text = f"(no facts matching prefix {prefix!r})"
            else:
                text = "\n".join(_fact_line(f) for f in facts)
                if following:
                    text += f"\n(more: call again with cursor={following!r})"
            return Reply(text, FactsOutput(facts=facts, next_cursor=following))

        return await rt.run(ctx, "memory_list", args, work)

    @server.tool(annotations=DESTRUCTIVE, title="Delete a shared fact")
    async def memory_delete(
        key: Key,
        ctx: Context,
        client_id: ClientId = None,
        expected_version: Annotated[
            int | None, Field(description="Delete only if the fact is still at this version.")
        ] = None,
    ) -> Annotated[CallToolResult, DeleteOutput]:
        """Delete a shared fact. Deleting a key that does not exist is not an error."""
        args = {"key": key, "client_id": client_id, "expected_version": expected_version}

        async def work(caller: Caller) -> Reply:
            writer = rt.writer_for(caller, client_id)

            def delete() -> Fact | None:
                with rt.memory.acting_as(writer):
                    try:
                        return rt.memory.delete_fact(key, expected_version=expected_version)
                    except FactNotFound:
                        return None

            try:
                fact = await rt.blocking(delete)
            except VersionConflict as error:
                raise Refused(_conflict_text(error)) from None
            if fact is None:
                return Reply(f"nothing to delete for {key!r} (from {writer})",
                             DeleteOutput(deleted=False, fact=None))  # fmt: skip
            return Reply(f"deleted {key!r} (from {writer})", DeleteOutput(deleted=True, fact=fact))

        return await rt.run(ctx, "memory_delete", args, work, writes=True)

    @server.tool(annotations=READ_ONLY, title="Search shared facts")
    async def memory_search(
        query: Annotated[str, Field(description="What the fact is about, in any words.")],
        ctx: Context,
        top_k: Annotated[int, Field(description="How many facts (1-20).")] = 3,
    ) -> Annotated[CallToolResult, FactSearchOutput]:
        """Find shared facts by meaning (semantic when the embedding model is on, by
        keywords otherwise), best first."""
        args = {"query": query, "top_k": top_k}

        async def work(caller: Caller) -> Reply:
            if not 1 <= top_k <= 20:
                raise InvalidInput("top_k", f"must be from 1 to 20, got {top_k}")

            def search() -> tuple[str, list[FactHit]]:
                memory = rt.memory
                page = memory.search_facts(query, limit=top_k)
                hits = []
                with memory.acting_as(caller.client):
                    for result in page.results:
                        try:
                            hits.append(FactHit(fact=memory.get_fact(result.title or ""),
                                                score=result.score))  # fmt: skip
                        except (FactNotFound, InvalidInput):
                            continue
                return page.mode, hits

            mode, hits = await rt.blocking(search)
            if not hits:
                text = f"(no facts match {query!r})"
            else:
                text = "\n".join(f"{_fact_line(h.fact)[:-1]}, score: {h.score:.3f})" for h in hits)
            return Reply(text, FactSearchOutput(query=query, mode=mode, results=hits))

        return await rt.run(ctx, "memory_search", args, work)

    @server.tool(annotations=READ_ONLY, title="History of a shared fact")
    async def memory_history(
        key: Key,
        ctx: Context,
        include_reads: Annotated[
            bool, Field(description="Also list reads (recorded when read logging is on).")
        ] = False,
    ) -> Annotated[CallToolResult, HistoryOutput]:
        """Who set, changed, deleted (and, with include_reads, read) a key and when,
        oldest first, with the version each write produced."""
        args = {"key": key, "include_reads": include_reads}

        async def work(caller: Caller) -> Reply:
            events = await rt.blocking(rt.memory.fact_history, key, limit=1_000)
            if not include_reads:
                events = [e for e in events if e.action != "fact.read"]
            text = "\n".join(_event_line(e) for e in events) or f"(no history for key {key!r})"
            return Reply(text, HistoryOutput(key=key, events=events))

        return await rt.run(ctx, "memory_history", args, work)
