"""Constants and helpers shared by the ledger tests (``test_store_*.py``): the fake clock's
start, a text long enough to version, and a snapshot of what a failed call must not change."""

from __future__ import annotations

from typing import Any

from backtrail.store import Ledger

T0 = 1_700_000_000  # the fake clock's start
LONG_TEXT = " ".join(
    f"Paragraph {n} discusses how write-ahead logging keeps the database consistent."
    for n in range(40)
)


def snapshot(ledger: Ledger) -> dict[str, Any]:
    """Everything a failed call must leave untouched."""
    stats = ledger.stats()
    return {
        "counts": stats.counts,
        "max_change_seq": stats.max_change_seq,
        "facts": [(f.key, f.value, f.version) for f in ledger.list_facts()],
        "pages": [(p.canonical_url, p.visit_count, p.current_version) for p in ledger.list_pages()],
    }
