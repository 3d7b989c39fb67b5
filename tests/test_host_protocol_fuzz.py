"""Property tests (hypothesis) of the host's frame parser and dispatcher: whatever bytes
or messages arrive, every frame gets exactly one well-formed answer with a frozen code,
nothing raises, and nothing already stored is lost. Then the same through the real
process: ten thousand generated frames (wrong types, unknown types, deep nesting, bad
escapes and bytes, huge strings, bad ids) over its pipes, each answered or refused,
after which the host still serves (``BACKTRAIL_FUZZ_MESSAGES`` / ``_SEED`` change the
run).

A short run by default; ``BACKTRAIL_FUZZ_PROFILE=long`` (used by
``bench/host_bench.py fuzz``) runs many more examples.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backtrail.errors import PageNotFound
from backtrail.native_host.codes import Code
from backtrail.native_host.dispatch import MESSAGE_TYPES, Dispatcher
from backtrail.native_host.framing import (
    MAX_RESPONSE_BYTES,
    FrameReader,
    Inbound,
    decode_request,
    encode_frame,
    valid_id,
)
from backtrail.service import Memory
from helpers import make_config
from host_client import HostProcess, capture_fields, hello_fields, visit

settings.register_profile("short", max_examples=150, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
settings.register_profile("long", max_examples=20_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
PROFILE = os.environ.get("BACKTRAIL_FUZZ_PROFILE", "short")
settings.load_profile(PROFILE)

CODES = {int(code) for code in Code}
SURROGATE = re.compile(r"\\ud[89a-f]", re.IGNORECASE)
KEPT_URL = "https://example.com/kept"

# ---------------------------------------------------------------- strategies

scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "https://example.com/a", "javascript:alert(1)", "file:///etc/x",
                       "data:,x", "chrome://newtab", "\ud800", "x" * 300, "é東🦀",
                       1_732_924_800_123, -1, 2**53, 0])
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12,
)  # fmt: skip
ids = st.from_regex(r"[A-Za-z0-9._:-]{1,64}", fullmatch=True)

TEMPLATES: dict[str, dict[str, Any]] = {
    "hello": hello_fields(),
    "capture_page": capture_fields("https://example.com/p", "<p>body</p>", visit_id="v-1",
                                   html=True),  # fmt: skip
    "visit": {"url": "https://example.com/v", "title": "V", "visit": visit("v-2")},
    "tab_snapshot": {"tabs": [{"tab_id": 1, "window_id": 1, "index": 0,
                               "url": "https://example.com/t", "title": "T", "active": True,
                               "pinned": False, "group_id": None,
                               "last_accessed_time": 1_732_924_800_123}],
                     "time": 1_732_924_800_123},  # fmt: skip
    "tab_event": {"event": "updated", "tab": {"tab_id": 1, "window_id": 1,
                                              "url": "https://example.com/u"},
                  "time": 1_732_924_800_123},  # fmt: skip
    "history_import": {"import_id": "i", "batch": 0, "final": True,
                       "range": {"start_time": 0, "end_time": 1_732_924_800_123},
                       "items": [{"url": "https://example.com/h", "title": None,
                                  "visit_count": 1, "typed_count": 0,
                                  "last_visit_time": 1_732_924_800_123,
                                  "visits": [{"visit_id": "1", "time": 1_732_924_800_123,
                                              "transition": "link",
                                              "referring_visit_id": None}]}]},  # fmt: skip
    "bookmark_upsert": {"bookmarks": [{"browser_id": "5", "parent_id": "1", "index": 0,
                                       "url": "https://example.com/b", "title": "B",
                                       "folder": "Bar", "added_time": None}]},  # fmt: skip
    "bookmark_remove": {"browser_ids": ["5"]},
    "bookmark_import": {"import_id": "b", "batch": 0, "final": True, "total": 0,
                        "bookmarks": []},  # fmt: skip
    "settings_set": {"settings": {"exclusions": {"use_defaults": True, "rules": ["a.example"]}}},
    "settings_get": {},
    "action_result": {"action_id": "a", "ok": True, "result": None, "error": None},
    "highlight": {"dedupe_key": "highlight:1", "url": "https://example.com/h", "title": None,
                  "text": "words", "context": None, "note": None,
                  "time": 1_732_924_800_123},  # fmt: skip
    "note": {"dedupe_key": "note:1", "content": "mine", "url": None, "title": None,
             "time": 1_732_924_800_123},  # fmt: skip
    "pause": {"until_time": None},
    "resume": {},
    "forget": {"url": "https://example.com/p"},
    "skipped": {"rule": "*/login", "time": 1_732_924_800_123},
    "search": {"query": "body", "limit": 5, "cursor": None, "filters": None},
    "status": {},
    "export": {"cursor": None, "kinds": None, "limit": None},
    "recent": {"limit": 5, "offset": 0, "filters": {"domain": "example.com"}},
    "timeline": {"since_time": 0, "until_time": 1_732_924_800_123, "limit": 3, "offset": 0,
                 "utc_offset_minutes": 60},  # fmt: skip
    "page_get": {"url": KEPT_URL, "offset": 0, "max_chars": 100},
    "saved_list": {"kind": "highlight", "limit": 5, "offset": 0, "filters": None},
    "forget_preview": {"url": KEPT_URL},
}
assert set(TEMPLATES) == set(MESSAGE_TYPES)


@st.composite
def mutated(draw: st.DrawFn, kinds: tuple[str, ...] = MESSAGE_TYPES) -> dict[str, Any]:
    """A valid message of a random type, then a few random edits: drop a member, give a
    member (possibly nested) a random value, add an unknown member, or change the type."""
    kind = draw(st.sampled_from(kinds))
    message: dict[str, Any] = {"id": draw(ids), "type": kind,
                               **json.loads(json.dumps(TEMPLATES[kind]))}  # fmt: skip
    for _ in range(draw(st.integers(0, 3))):
        target = message
        while True:
            keys = [k for k in target if k not in ("id",)]
            if not keys:
                break
            key = draw(st.sampled_from(sorted(keys)))
            child = target[key]
            if isinstance(child, dict) and child and draw(st.booleans()):
                target = child
                continue
            if isinstance(child, list) and child and isinstance(child[0], dict) and draw(
                st.booleans()
            ):
                target = child[0]
                continue
            action = draw(st.sampled_from(["drop", "replace", "add"]))
            if action == "drop":
                del target[key]
            elif action == "replace":
                target[key] = draw(json_values)
            else:
                target[draw(st.text(max_size=8))] = draw(json_values)
            break
    return message


def body_of(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8",
                                                                                 "surrogatepass")


# ------------------------------------------------------------- frame parser


def read_all(data: bytes, limit: int = 4096) -> list[Inbound]:
    reader = FrameReader(io.BytesIO(data), max_request_bytes=limit)
    items = []
    while (item := reader.read()) is not None:
        items.append(item)
        if item.fatal:
            break
    return items


def check_inbound(item: Inbound) -> None:
    assert (item.request is None) != (item.error is None)
    if item.error is not None:
        assert int(item.error.code) in CODES
        assert item.error.message
        assert item.id is None or valid_id(item.id)
        encode_frame({"id": item.id, "ok": False, "error": item.error.to_error()})
    else:
        assert isinstance(item.request, dict) and valid_id(item.request["id"])


@given(st.binary(max_size=3_000))
def test_any_bytes_read_as_frames_or_classified_errors(data: bytes) -> None:
    items = read_all(data)
    for item in items:
        check_inbound(item)
    assert all(not item.fatal for item in items[:-1])


frames = st.one_of(
    mutated().map(lambda m: struct.pack("<I", len(body_of(m))) + body_of(m)),
    json_values.map(lambda v: struct.pack("<I", len(body_of(v))) + body_of(v)),
    st.binary(min_size=1, max_size=200).map(lambda b: struct.pack("<I", len(b)) + b),
    st.integers(5_000, 9_000).map(
        lambda n: struct.pack("<I", n) + b'{"id":"big"}' + b" " * (n - 12)
    ),
)  # fmt: skip


@given(st.lists(frames, max_size=8), st.binary(max_size=6))
def test_a_stream_of_frames_gives_one_item_per_frame_until_its_end(
    parts: list[bytes], tail: bytes
) -> None:
    items = read_all(b"".join(parts) + tail)
    for item in items:
        check_inbound(item)
    if not tail:
        assert len(items) == len(parts)
        assert not any(item.fatal for item in items)
    oversize = [item for item in items if item.error and item.error.code == Code.MESSAGE_TOO_LARGE]
    assert all(item.id == "big" for item in oversize)


@given(mutated())
def test_a_valid_message_round_trips_through_a_frame(message: dict[str, Any]) -> None:
    data = encode_frame(message, limit=1 << 24)
    (item,) = read_all(data, limit=len(data))
    expected = json.loads(json.dumps(message))
    if SURROGATE.search(json.dumps(message)):
        return  # unpaired surrogates come back as U+FFFD (tested in test_native_host)
    assert item.request == expected


@given(st.binary(max_size=500))
def test_decoding_never_raises(data: bytes) -> None:
    check_inbound(decode_request(data) if data else decode_request(b" "))


# ---------------------------------------------------------------- dispatcher


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    home: Path = tmp_path_factory.mktemp("fuzz") / "backtrail-home"
    opened = Memory(make_config(home), client="fuzz")
    opened.capture_page(KEPT_URL, text="stored before the fuzzing started")
    try:
        yield opened
    finally:
        opened.close()


def answer(dispatcher: Dispatcher, message: Any) -> dict[str, Any]:
    """Through the real parser, then the dispatcher, checking the response's shape."""
    (item,) = read_all(struct.pack("<I", len(body_of(message))) + body_of(message), 1 << 24)
    response = dispatcher.handle_all([item])[0]
    assert set(response) == ({"id", "ok", "result"} if response["ok"] else {"id", "ok", "error"})
    assert response["id"] == item.id
    if not response["ok"]:
        error = response["error"]
        assert error["code"] in CODES and error["name"] == Code(error["code"]).wire_name
        assert isinstance(error["message"], str) and error["message"]
    assert len(encode_frame(response)) <= MAX_RESPONSE_BYTES + 4
    return response


def still_stored(memory: Memory) -> None:
    try:
        memory.get_page(KEPT_URL)
    except PageNotFound:  # pragma: no cover - the property failing
        raise AssertionError("a page stored before the fuzzing was lost") from None


NON_DESTRUCTIVE = tuple(kind for kind in MESSAGE_TYPES if kind != "forget")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(mutated(NON_DESTRUCTIVE), min_size=1, max_size=4), st.booleans())
def test_the_dispatcher_answers_every_message_and_loses_nothing(
    memory: Memory, messages: list[dict[str, Any]], greet: bool
) -> None:
    dispatcher = Dispatcher(memory.browser(), max_request_bytes=1 << 24)
    if greet:
        assert answer(dispatcher, {"id": "h", "type": "hello", **hello_fields()})["ok"]
    for message in messages:
        response = answer(dispatcher, message)
        if not greet and message.get("type") != "hello":
            assert response["ok"] is False  # error 17 (or a malformed message)
        greet = greet or (message.get("type") == "hello" and response["ok"])
    memory.resume_capture()
    still_stored(memory)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(json_values, min_size=1, max_size=4))
def test_arbitrary_json_objects_get_one_answer_each(
    memory: Memory, values: list[Any]
) -> None:
    dispatcher = Dispatcher(memory.browser(), max_request_bytes=1 << 24)
    answer(dispatcher, {"id": "h", "type": "hello", **hello_fields()})
    for n, value in enumerate(values):
        message = value if not isinstance(value, dict) else {"id": f"j{n}", **value}
        answer(dispatcher, message)
    still_stored(memory)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
          max_examples=40 if PROFILE == "short" else 2_000)  # a forget compacts the files
@given(mutated(("forget",)))
def test_forget_messages_are_answered_and_only_forget_what_they_name(
    memory: Memory, message: dict[str, Any]
) -> None:
    dispatcher = Dispatcher(memory.browser(), max_request_bytes=1 << 24)
    answer(dispatcher, {"id": "h", "type": "hello", **hello_fields()})
    response = answer(dispatcher, message)
    if response["ok"]:  # it may have named the kept page: store it again
        assert response["result"]["selector"] in ("url", "domain", "time_range", "everything")
        memory.capture_page(KEPT_URL, text="stored before the fuzzing started")
    still_stored(memory)


# ------------------------------------------------------- the real process, in bulk

PROCESS_MESSAGES = int(os.environ.get("BACKTRAIL_FUZZ_MESSAGES", "10000"))
PROCESS_LIMIT = 256 * 1024  # the host's per-message cap in this run (BACKTRAIL_MAX_REQUEST_BYTES)
JUNK_VALUES: list[Any] = [None, True, False, 0, -1, 2**64, 1.5, -0.0, "", "x" * 70, "é東🦀",
                          "\ud800", [], {}, [None], {"": None}, "javascript:alert(1)"]  # fmt: skip


def _junk(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and roll < 0.3:
        return {rng.choice(["url", "", "id", "type", "é", "x" * 9]): _junk(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}  # fmt: skip
    if roll < 0.4:
        return "".join(rng.choice("ab\\\"\n\t\u0000é🦀/") for _ in range(rng.randint(0, 40)))
    return rng.choice(JUNK_VALUES)


def _mutate(rng: random.Random, message: dict[str, Any]) -> None:
    """Drop a member, give one (possibly nested) a wrong value, or add an unknown one."""
    target: Any = message
    while True:
        keys = sorted(k for k in target if k != "id")
        if not keys:
            return
        key = rng.choice(keys)
        child = target[key]
        if isinstance(child, dict) and child and rng.random() < 0.5:
            target = child
            continue
        if isinstance(child, list) and child and isinstance(child[0], dict) and rng.random() < 0.5:
            target = child[0]
            continue
        action = rng.random()
        if action < 0.3:
            del target[key]
        elif action < 0.8:
            target[key] = _junk(rng)
        else:
            target[rng.choice(["extra", "Type", "ID", "__proto__"])] = _junk(rng)
        return


def _body(rng: random.Random, n: int) -> tuple[bytes, str | None]:
    """One generated frame body and the id its answer must carry (``None``: any id the
    host could recover, or none)."""
    ident = f"f{n}"
    kind = rng.choice(NON_DESTRUCTIVE)
    message: dict[str, Any] = {"id": ident, "type": kind,
                               **json.loads(json.dumps(TEMPLATES[kind]))}  # fmt: skip
    roll = rng.random()
    if roll < 0.45:  # wrong types, missing and unknown members
        for _ in range(rng.randint(1, 3)):
            _mutate(rng, message)
        return body_of(message), ident
    if roll < 0.55:  # unknown or mistyped message types
        message["type"] = rng.choice(["", "Hello", "capture", "drop_table", 7, None, ["visit"],
                                      "x" * 300, "search\u0000"])  # fmt: skip
        return body_of(message), ident
    if roll < 0.63:  # deep nesting, below and far beyond the parser's recursion limit
        depth = rng.choice([65, 200, 5_000, 100_000])
        nested = b"[" * depth + b"]" * depth
        return b'{"id":"' + ident.encode() + b'","type":"visit","url":' + nested + b"}", None
    if roll < 0.71:  # bad escapes and bad bytes
        bad = rng.choice([b'"\\x41"', b'"\\u12"', b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\',
                          b'"\xff\xfe"', b'"\xc3"', b'"\xed\xa0\x80"', b"'single'", b"NaN",
                          b'"tab\there"'])  # fmt: skip
        return b'{"id":"' + ident.encode() + b'","type":"note","content":' + bad + b"}", None
    if roll < 0.79:  # huge strings, under and over the host's cap
        size = rng.choice([9_000, 120_000, PROCESS_LIMIT + 1, 2 * PROCESS_LIMIT])
        field = rng.choice(["url", "title", "text", "query", "content"])
        message[field] = rng.choice("aé/%") * size
        return body_of(message), None if len(body_of(message)) > PROCESS_LIMIT else ident
    if roll < 0.87:  # ids that are missing, invalid, or of the wrong type
        message["id"] = rng.choice([None, 7, "", "x" * 65, "spa ce", ["f"], {"id": "f"}])
        return body_of(message), None
    if roll < 0.92:  # JSON that is not an object
        return body_of(_junk(rng)) if rng.random() < 0.5 else b"[1,2,3]", None
    return body_of(message), ident  # a valid message among the bad ones


def test_the_host_process_answers_ten_thousand_generated_messages_and_keeps_serving(
    tmp_path: Path,
) -> None:
    rng = random.Random(int(os.environ.get("BACKTRAIL_FUZZ_SEED", "20261201")))
    env = {"BACKTRAIL_MAX_REQUEST_BYTES": str(PROCESS_LIMIT)}
    with HostProcess(tmp_path / "home", env=env) as host:
        host.hello()
        host.ok("capture_page", **capture_fields(KEPT_URL, "stored before the fuzzing",
                                                 visit_id="kept"))  # fmt: skip
        codes: Counter[str] = Counter()
        sent = 0
        while sent < PROCESS_MESSAGES:
            chunk = [_body(rng, n) for n in range(sent, min(sent + 500, PROCESS_MESSAGES))]
            host.send_raw(b"".join(struct.pack("<I", len(b)) + b for b, _ in chunk))
            for body, ident in chunk:
                reply = host.recv(timeout=120)
                if ident is not None:
                    assert reply["id"] == ident, (reply, body[:200])
                else:
                    assert reply["id"] is None or body.startswith(b'{"id":"' + reply["id"].encode())
                if reply["ok"]:
                    codes["ok"] += 1
                    continue
                error = reply["error"]
                assert error["code"] in CODES and error["name"] == Code(error["code"]).wire_name
                assert isinstance(error["message"], str) and error["message"]
                codes[error["name"]] += 1
            sent += len(chunk)
        assert sum(codes.values()) == PROCESS_MESSAGES and host.junk == []
        # still serving: state is restored, a new capture is stored and found, nothing lost
        host.ok("resume")
        host.ok("settings_set", settings={"exclusions": {"use_defaults": True, "rules": []}})
        host.ok("capture_page", **capture_fields("https://example.com/after", "a quokka after",
                                                 visit_id="after"))  # fmt: skip
        found = [r["url"] for r in host.ok("search", query="quokka")["results"]]
        assert found == ["https://example.com/after"]
        kept = [r["url"] for r in host.ok("search", query="fuzzing")["results"]]
        assert kept == [KEPT_URL]
        assert host.wait() == 0
    for name in ("ok", "invalid_json", "invalid_utf8", "unknown_type", "message_too_large",
                 "wrong_field_type", "missing_field"):  # fmt: skip
        assert codes[name] > 0, (name, codes)
