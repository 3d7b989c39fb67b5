"""The device's outbox (``backtrail.service.outbox.Outbox``) on a real SQLite file: what
is kept survives the process, comes back in the order it was made, one browser profile
per batch within the POST limits, and a message kept twice is kept once."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from backtrail.service.outbox import MAX_BATCH_BYTES, MAX_BATCH_MESSAGES, Outbox, committed


def hello(profile: str) -> dict[str, object]:
    return {"id": "h-1", "type": "hello", "protocol": 1, "profile_id": profile}


def message(ident: str, size: int = 10) -> dict[str, object]:
    return {"id": ident, "type": "note", "content": "x" * size}


def ids(batch: object) -> list[str]:
    assert batch is not None
    return [m["id"] for m in batch.messages]  # type: ignore[attr-defined]


def test_kept_messages_survive_reopening_in_order_and_once(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    outbox = Outbox(path)
    outbox.keep(hello("a"), [message("1"), message("2")])
    outbox.keep(hello("a"), [message("2"), message("3")])  # 2 again: kept once, in place
    outbox.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    outbox = Outbox(path)
    batch = outbox.batch()
    assert ids(batch) == ["1", "2", "3"] and outbox.count() == 3
    assert batch is not None and batch.hello == {"type": "hello", "protocol": 1, "profile_id": "a"}
    outbox.remove(["1", "2"])
    assert ids(outbox.batch()) == ["3"] and outbox.holds("3") and not outbox.holds("1")
    outbox.remove(["3"])
    assert outbox.batch() is None and outbox.count() == 0


def test_a_batch_holds_one_profile_up_to_a_position_within_the_limits(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.sqlite3")
    outbox.keep(hello("a"), [message("a1")])
    outbox.keep(hello("b"), [message("b1")])
    through = outbox.keep(hello("a"), [message("a2"), message("a3")])
    outbox.keep(hello("a"), [message("a4")])
    assert ids(outbox.batch()) == ["a1", "a2", "a3", "a4"]  # the oldest message's profile
    assert ids(outbox.batch("b")) == ["b1"]
    assert ids(outbox.batch("a", through)) == ["a1", "a2", "a3"]
    outbox.keep(hello("c"), [message(f"c{n}") for n in range(MAX_BATCH_MESSAGES + 5)])
    assert len(ids(outbox.batch("c"))) == MAX_BATCH_MESSAGES
    big = MAX_BATCH_BYTES // 2
    outbox.keep(hello("d"), [message("d1", big), message("d2", big), message("d3", 10)])
    assert ids(outbox.batch("d")) == ["d1"]  # two would pass the POST limit
    outbox.remove(["d1"])
    assert ids(outbox.batch("d")) == ["d2", "d3"]
    outbox.close()


def test_only_busy_and_hello_required_answers_leave_a_message_kept() -> None:
    assert committed({"id": "1", "ok": True, "result": {}})
    for code in (14, 16, 18):
        assert committed({"id": "1", "ok": False, "error": {"code": code}})
    for code in (13, 17):
        assert not committed({"id": "1", "ok": False, "error": {"code": code}})
