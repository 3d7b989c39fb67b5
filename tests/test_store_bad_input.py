"""Input hygiene: every bad argument raises a clear error and changes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from backtrail.errors import InvalidInput, InvalidUrl, LimitExceeded
from backtrail.store import Ledger, TabInput
from store_support import T0, snapshot

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")

# ---------------------------------------------------------------------- bad input

BAD_CALLS: list[tuple[str, Callable[[Ledger], object], type[Exception], str]] = [
    ("url type", lambda db: db.capture_page(123, text="x"), InvalidUrl,
     "must be a string, not int"),
    ("js url", lambda db: db.capture_page("javascript:alert(1)", text="x"), InvalidUrl, "scheme"),
    ("bytes text", lambda db: db.capture_page("https://e.com/", text=b"x"), InvalidInput,
     "invalid text: must be a string, not bytes"),
    ("surrogate text", lambda db: db.capture_page("https://e.com/", text="a\ud800"), InvalidInput,
     "invalid text: contains invalid Unicode (a lone surrogate at index 1)"),
    ("title type", lambda db: db.capture_page("https://e.com/", text="x", title=5), InvalidInput,
     "invalid title: must be a string, not int"),
    ("float time", lambda db: db.capture_page("https://e.com/", text="x", captured_at=1.5),
     InvalidInput, "must be an integer (unix seconds), not float"),
    ("negative time", lambda db: db.capture_page("https://e.com/", text="x", captured_at=-1),
     InvalidInput, "must not be negative"),
    ("ms time", lambda db: db.capture_page("https://e.com/", text="x", captured_at=T0 * 1000),
     InvalidInput, "it looks like milliseconds"),
    ("language type", lambda db: db.capture_page("https://e.com/", text="x", language=["en"]),
     InvalidInput, "invalid language: must be a string, not list"),
    ("undecodable bytes", lambda db: db.set_fact("k", b"\xff".decode("utf-8", "surrogateescape")),
     InvalidInput, "invalid value: contains invalid Unicode (a lone surrogate at index 0)"),
    ("visit time", lambda db: db.record_visit("https://e.com/", visited_at="yesterday"),
     InvalidInput, "invalid visited_at: must be an integer"),
    ("bool tab", lambda db: db.record_visit("https://e.com/", visited_at=T0, tab_id=True),
     InvalidInput, "invalid tab_id: must be an integer, not bool"),
    ("negative dwell", lambda db: db.record_visit("https://e.com/", visited_at=T0, dwell_ms=-5),
     InvalidInput, "invalid dwell_ms: must be between 0"),
    ("source newline", lambda db: db.record_visit("https://e.com/", visited_at=T0, source="a\nb"),
     InvalidInput, "must not contain control characters"),
    ("long highlight", lambda db: db.add_highlight("https://e.com/", "x" * 20_001), LimitExceeded,
     "text is 20001 characters long; the limit is 20000 characters"),
    ("empty highlight", lambda db: db.add_highlight("https://e.com/", "  "), InvalidInput,
     "invalid text: must not be empty"),
    ("nul note", lambda db: db.add_note("a\x00b"), InvalidInput, "must not contain NUL"),
    ("long note", lambda db: db.add_note("x" * 100_001), LimitExceeded, "the limit is 100000"),
    ("note url", lambda db: db.add_note("n", url="data:,x"), InvalidUrl, "has scheme 'data'"),
    ("empty key", lambda db: db.set_fact("", "v"), InvalidInput, "invalid key: must not be empty"),
    ("key type", lambda db: db.set_fact(7, "v"), InvalidInput, "must be a string, not int"),
    ("key newline", lambda db: db.set_fact("a\nb", "v"), InvalidInput, "control characters"),
    ("value type", lambda db: db.set_fact("k", 5), InvalidInput, "invalid value: must be a string"),
    ("value surrogate", lambda db: db.set_fact("k", "\udfff"), InvalidInput, "lone surrogate"),
    ("version type", lambda db: db.set_fact("k", "v", expected_version="1"), InvalidInput,
     "invalid expected_version: must be an integer, not str"),
    ("version zero", lambda db: db.set_fact("k", "v", expected_version=0), InvalidInput,
     "must be between 1"),
    ("bookmark url", lambda db: db.upsert_bookmark("b", "file:///etc/passwd"), InvalidUrl, "file"),
    ("tabs type", lambda db: db.snapshot_tabs("tabs"), InvalidInput, "must be a list of tabs"),
    ("tab active", lambda db: db.snapshot_tabs([TabInput(1, 1, active="yes")]), InvalidInput,
     "invalid tabs[0].active: must be true or false, not str"),
    ("visits type", lambda db: db.import_visits({"url": "x"}), InvalidInput, "must be a list"),
    ("limit zero", lambda db: db.list_facts(limit=0), InvalidInput, "invalid limit"),
    ("forget url", lambda db: db.forget(url="about:blank"), InvalidUrl, "has scheme 'about'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
def test_bad_input_raises_a_clear_error_and_changes_nothing(
    ledger: Ledger, call: Callable[[Ledger], object], error: type[Exception], message: str
) -> None:
    ledger.capture_page("https://e.com/", text="existing", title="Existing")
    ledger.set_fact("k", "v")
    ledger.record_visit("https://e.com/", visited_at=T0)
    before = snapshot(ledger)
    with pytest.raises(error) as caught:
        call(ledger)
    assert message in str(caught.value)
    assert snapshot(ledger) == before
    assert ledger.get_page("https://e.com/", with_text=True).text == "existing"
