"""The ledger's facts: versions, compare-and-set by version or value, limits, listing
and deletion."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from backtrail.errors import FactNotFound, InvalidInput, KeyExists, LimitExceeded, VersionConflict
from backtrail.store import Ledger, Limits
from store_support import T0, snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import FakeClock

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


# ------------------------------------------------------------------------- facts


def test_set_fact_starts_at_version_1_and_bumps_on_each_write(
    ledger: Ledger, clock: FakeClock
) -> None:
    created = ledger.set_fact("user/editor", "vim")
    clock.advance(10)
    updated = ledger.set_fact("user/editor", "helix")
    assert (created.version, created.client, created.created_at) == (1, "test", T0)
    assert (updated.version, updated.value, updated.created_at, updated.updated_at) == (
        2, "helix", T0, T0 + 10,
    )  # fmt: skip
    assert ledger.get_fact("user/editor") == updated


def test_cas_by_version_conflict_names_expected_and_actual_versions(ledger: Ledger) -> None:
    ledger.set_fact("counter", "1")
    ledger.set_fact("counter", "2")
    with pytest.raises(VersionConflict) as caught:
        ledger.set_fact("counter", "3", expected_version=1)
    error = caught.value
    assert str(error) == (
        "fact 'counter' was not changed: expected version 1, but the current version is 2"
    )
    assert (error.key, error.expected, error.actual, error.what) == ("counter", 1, 2, "version")
    assert error.to_dict()["code"] == "version_conflict"
    assert ledger.set_fact("counter", "3", expected_version=2).version == 3


def test_cas_by_value_conflict_names_expected_and_actual_values(ledger: Ledger) -> None:
    ledger.set_fact("mode", "draft")
    with pytest.raises(VersionConflict) as caught:
        ledger.set_fact("mode", "final", expected_value="review")
    assert str(caught.value) == (
        "fact 'mode' was not changed: expected value 'review', but the current value is 'draft'"
    )
    assert (caught.value.expected, caught.value.actual) == ("review", "draft")
    assert ledger.set_fact("mode", "final", expected_value="draft").value == "final"


def test_cas_on_a_missing_key_says_the_fact_does_not_exist(ledger: Ledger) -> None:
    with pytest.raises(VersionConflict) as caught:
        ledger.set_fact("ghost", "x", expected_version=3)
    assert str(caught.value) == (
        "fact 'ghost' was not changed: expected version 3, but the fact does not exist"
    )
    assert caught.value.actual is None
    with pytest.raises(VersionConflict, match="expected value 'a', but the fact does not exist"):
        ledger.set_fact("ghost", "x", expected_value="a")


def test_create_only_refuses_an_existing_key(ledger: Ledger) -> None:
    assert ledger.set_fact("lock/owner", "alice", require_absent=True).version == 1
    with pytest.raises(KeyExists) as caught:
        ledger.set_fact("lock/owner", "bob", require_absent=True)
    assert str(caught.value) == (
        "fact 'lock/owner' already exists (version 1); it was not overwritten"
    )
    assert ledger.get_fact("lock/owner").value == "alice"


def test_require_absent_cannot_be_combined_with_expectations(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput) as caught:
        ledger.set_fact("k", "v", expected_value="x", require_absent=True)
    assert str(caught.value) == (
        "invalid require_absent: cannot be combined with expected_value: choose one"
    )
    with pytest.raises(InvalidInput, match="cannot be combined with expected_version"):
        ledger.set_fact("k", "v", expected_version=1, require_absent=True)
    assert ledger.list_facts() == []


def test_expected_value_and_version_may_be_combined_and_both_must_hold(ledger: Ledger) -> None:
    ledger.set_fact("k", "a")
    with pytest.raises(VersionConflict, match="expected value 'b'"):
        ledger.set_fact("k", "c", expected_version=1, expected_value="b")
    assert ledger.set_fact("k", "c", expected_version=1, expected_value="a").version == 2


def test_fact_key_and_value_limits_are_enforced_with_clear_errors(ledger: Ledger) -> None:
    assert ledger.set_fact("k" * 256, "v").key == "k" * 256
    with pytest.raises(LimitExceeded) as caught:
        ledger.set_fact("k" * 257, "v")
    assert str(caught.value) == "key is 257 characters long; the limit is 256 characters"
    assert ledger.set_fact("big", "v" * 16_384).value == "v" * 16_384
    with pytest.raises(LimitExceeded, match="value is 16385 characters long; the limit is 16384"):
        ledger.set_fact("big", "v" * 16_385)
    assert ledger.get_fact("big").version == 1


def test_fact_value_limit_is_configurable(open_ledger: Callable[..., Ledger]) -> None:
    with open_ledger(limits=Limits(max_fact_value_chars=4)) as ledger:
        ledger.set_fact("k", "1234")
        with pytest.raises(LimitExceeded, match="the limit is 4 characters"):
            ledger.set_fact("k", "12345")


def test_list_facts_by_prefix_case_sensitive_and_insensitive(ledger: Ledger) -> None:
    for key in ("Project/a", "project/b", "project/c", "ÄPFEL/x", "äpfel/y", "other"):
        ledger.set_fact(key, "v")
    assert [f.key for f in ledger.list_facts("project/")] == ["project/b", "project/c"]
    assert [f.key for f in ledger.list_facts("PROJECT/", case_insensitive=True)] == [
        "Project/a", "project/b", "project/c",
    ]  # fmt: skip
    assert [f.key for f in ledger.list_facts("äpfel", case_insensitive=True)] == [
        "ÄPFEL/x", "äpfel/y",
    ]  # fmt: skip
    assert [f.key for f in ledger.list_facts("project/", limit=1, offset=1)] == ["project/c"]
    assert len(ledger.list_facts()) == 6
    assert ledger.list_facts("100%_") == []


def test_deleting_a_fact_supports_cas_and_versions_keep_counting(ledger: Ledger) -> None:
    ledger.set_fact("k", "a")
    ledger.set_fact("k", "b")
    with pytest.raises(VersionConflict, match="expected version 1, but the current version is 2"):
        ledger.delete_fact("k", expected_version=1)
    assert ledger.delete_fact("k", expected_version=2).value == "b"
    with pytest.raises(FactNotFound, match="fact 'k' does not exist"):
        ledger.get_fact("k")
    with pytest.raises(FactNotFound):
        ledger.delete_fact("k")
    assert ledger.list_facts() == []
    recreated = ledger.set_fact("k", "c", require_absent=True)
    assert recreated.version == 4  # 1, 2, deleted at 3, re-created at 4
    with pytest.raises(VersionConflict):  # a stale version from before the delete never matches
        ledger.set_fact("k", "d", expected_version=2)


def test_facts_record_the_writing_client(ledger: Ledger) -> None:
    with ledger.acting_as("claude-desktop"):
        fact = ledger.set_fact("k", "v")
    assert fact.client == "claude-desktop"
    assert ledger.set_fact("k", "w").client == "test"
    assert [e.client for e in ledger.fact_history("k")] == ["claude-desktop", "test"]


def test_each_thread_writes_as_its_own_client_while_another_acts_as_a_different_one(
    ledger: Ledger,
) -> None:
    """A server's callers act as their clients at once: one caller's block does not hold
    the others up, and each write is attributed to the client of its own thread."""
    inside, release = threading.Event(), threading.Event()

    def slow_caller() -> None:
        with ledger.acting_as("agent-a"):
            inside.set()
            release.wait(60)
            ledger.set_fact("from-a", "1")

    def other_caller() -> None:
        with ledger.acting_as("agent-b"):
            ledger.set_fact("from-b", "2")

    first = threading.Thread(target=slow_caller)
    first.start()
    assert inside.wait(60)
    second = threading.Thread(target=other_caller)
    second.start()
    second.join(60)  # before the first caller's block ends
    finished_while_a_acted = not second.is_alive()
    release.set()
    first.join(60)
    second.join(60)
    assert finished_while_a_acted
    assert ledger.get_fact("from-b").client == "agent-b"
    assert ledger.get_fact("from-a").client == "agent-a"
    assert ledger.set_fact("after", "3").client == "test"  # the ledger's own, outside both


def test_a_failed_cas_changes_nothing_and_leaves_only_its_attempt_in_the_history(
    ledger: Ledger,
) -> None:
    ledger.set_fact("k", "v")
    before = snapshot(ledger)
    for attempt in (
        lambda: ledger.set_fact("k", "x", expected_version=9),
        lambda: ledger.set_fact("k", "y", expected_value="nope"),
        lambda: ledger.set_fact("k", "z", require_absent=True),
        lambda: ledger.delete_fact("k", expected_version=9),
    ):
        with pytest.raises((VersionConflict, KeyExists)):
            attempt()
    after = snapshot(ledger)
    tried = [e for e in ledger.fact_history("k") if e.action == "fact.cas_fail"]
    assert [e.details["value"] for e in tried] == ["x", "y", "z"]
    assert after["counts"]["events"] == before["counts"]["events"] + 3
    after["counts"]["events"] = before["counts"]["events"]
    assert after == before  # no fact, version or change-feed row moved
