"""A generated fuzz of 10,000 stdio messages to one long-lived ``backtrail mcp``: deep
nesting, bad escapes and lone surrogates, wrong types, huge strings, unknown methods and
tools, random arguments to every tool, garbage bytes. Every request gets its answer,
every malformed line an error, and the server keeps serving (a ping after each message
is answered) and ends when stdin closes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mcp_support import seed
from test_mcp_bridge import raw

MESSAGES = 10_000
BATCH = 20
"""Messages sent before a ping: every request among them answered by its id, every
malformed one by an error, and the ping last."""
TOOLS = ["search_browsing", "get_page", "get_timeline", "get_saved", "save_note", "forget",
         "get_status", "get_open_tabs", "summarize_reading", "capture_page", "save_bookmark",
         "organize_tabs", "memory_set", "memory_get", "memory_list", "memory_delete",
         "memory_search", "memory_history"]  # fmt: skip
METHODS = ["ping", "tools/list", "tools/call", "resources/list", "resources/read",
           "resources/templates/list", "prompts/list", "prompts/get", "completion/complete",
           "initialize", "logging/setLevel"]  # fmt: skip

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=4),
    max_leaves=12,
)  # fmt: skip
ids = itertools.count(1_000)


@st.composite
def message(draw: st.DrawFn) -> tuple[bytes, int | None, str | None]:
    """``(line, id, expect)``: the line to send, the id its answer must carry (if it is
    a request we number), and what it must get besides: ``"error"`` (a malformed line),
    ``"answer"`` (any answer: e.g. an id of the wrong type) or nothing (a notification)."""
    kind = draw(st.sampled_from(["garbage", "deep", "escape", "surrogate", "huge", "request",
                                 "tool", "wrong_id", "notification"]))  # fmt: skip
    ident = next(ids)
    if kind == "garbage":
        junk = draw(st.binary(min_size=1, max_size=60).filter(
            lambda b: b"\n" not in b and b"\r" not in b and b.strip() != b""))
        return junk, None, "error"
    if kind == "deep":
        depth = draw(st.integers(65, 3_000))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        return opener * depth + b"1" * (opener != b"[") + closer * depth, None, "error"
    if kind == "escape":
        bad = draw(st.sampled_from([rb"\q", rb"\u12", rb"\x41", "\\", rb"\uZZZZ"]))
        bad = bad.encode() if isinstance(bad, str) else bad
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"x":"' % ident + bad + b'"}}'
        return line, None, "error"
    if kind == "surrogate":
        half = draw(st.integers(0xD800, 0xDFFF))
        tool = draw(st.sampled_from(["memory_set", "save_note", "search_browsing"]))
        arguments = f'{{"key":"k","value":"cut \\u{half:04x}","content":"\\u{half:04x}",' \
                    f'"query":"q\\u{half:04x}"}}'
        line = (f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":'
                f'"{tool}","arguments":{arguments}}}}}')  # fmt: skip
        return line.encode(), ident, "error"
    if kind == "huge":
        size = draw(st.integers(10_000, 300_000))
        field = draw(st.sampled_from(["value", "query", "content", "key"]))
        tool = draw(st.sampled_from(["memory_set", "search_browsing", "save_note", "memory_get"]))
        body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                "params": {"name": tool, "arguments": {"key": "k", field: "x" * size}}}
        return json.dumps(body).encode(), ident, None
    if kind == "request":
        method = draw(st.sampled_from(METHODS) | st.text(max_size=20))
        params = draw(st.dictionaries(st.text(max_size=10), values, max_size=4) | values)
        body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        return json.dumps(body).encode(), ident, None
    if kind == "tool":
        name = draw(st.sampled_from(TOOLS) | st.text(max_size=20))
        arguments = draw(st.dictionaries(
            st.sampled_from(["query", "limit", "id", "url", "key", "value", "kind", "since",
                             "cursor", "vague", "groups", "close", "week", "top_k", "content",
                             "confirm", "domain", "explain", "similar_to"]) | st.text(max_size=8),
            values, max_size=5))  # fmt: skip
        body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        return json.dumps(body).encode(), ident, None
    if kind == "wrong_id":
        wrong = draw(st.floats(allow_nan=False).filter(lambda f: not f.is_integer())
                     | st.lists(st.integers(), max_size=2)
                     | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
        body = {"jsonrpc": "2.0", "id": wrong, "method": "ping"}
        return json.dumps(body).encode(), None, "error"
    method = draw(st.sampled_from(["notifications/initialized", "notifications/cancelled",
                                   "notifications/progress"]) | st.text(max_size=20))
    body = {"jsonrpc": "2.0", "method": method, "params": draw(values)}
    return json.dumps(body).encode(), None, None


def test_ten_thousand_generated_messages_are_each_answered_and_the_server_keeps_serving(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    env = {"BACKTRAIL_MCP_ACTION_WAIT": "0", "BACKTRAIL_MCP_ACTION_CLAIM_WAIT": "0"}
    with raw(tmp_path, **env) as server:
        server.start()
        sentinels = itertools.count(1)
        seen = {"answered": 0, "errors": 0}

        @settings(max_examples=MESSAGES // BATCH, deadline=None, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(st.lists(message(), min_size=BATCH, max_size=BATCH))
        def one(batch: list[tuple[bytes, int | None, str | None]]) -> None:
            for line, _, _ in batch:
                server.send(line)
            ping = -next(sentinels)
            server.send({"jsonrpc": "2.0", "id": ping, "method": "ping"})
            wanted = {ident for _, ident, _ in batch if ident is not None} | {ping}
            nulls = sum(1 for _, ident, expect in batch if expect == "error" and ident is None)
            answers: list[dict[str, Any]] = []

            def waiting() -> bool:
                got = {a.get("id") for a in answers}
                null_errors = sum(1 for a in answers if "error" in a and a.get("id") is None)
                return not wanted <= got or null_errors < nulls

            while waiting():
                found = server.answer()
                assert found.get("jsonrpc") == "2.0" and ("result" in found) != ("error" in found)
                answers.append(found)
            for line, ident, expect in batch:
                if ident is not None:
                    mine = [a for a in answers if a.get("id") == ident]
                    assert len(mine) == 1, line[:80]
                    if expect == "error":
                        assert "error" in mine[0], line[:80]
            seen["answered"] += len(answers) - 1
            seen["errors"] += sum("error" in a for a in answers)

        one()
        assert seen["answered"] >= MESSAGES // 2 and seen["errors"] > 0
        assert server.request(1, "ping")["result"] == {}
        assert server.close() == 0
