"""A small, believable memory for the memory page's end-to-end tests and its screenshot:
a week of reading (SQLite, Python, a little baking) with visits, highlights and notes,
written through the service layer into the profile's real store before the browser
starts, then indexed. One page lives on the test's own HTTP server, so opening a result
really loads it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from backtrail.service import Memory, VisitInfo
from e2e_support import Profile

MINUTE = 60
HOUR = 3_600
DAY = 86_400

WAL = (
    "Write-ahead logging keeps the original database file unchanged while a transaction "
    "runs: changes are appended to a separate WAL file, and a checkpoint later copies them "
    "back. Readers keep reading the database while a writer appends, so readers never "
    "block writers and writers never block readers.\n\nA checkpoint runs automatically "
    "when the WAL file reaches about a thousand pages. Applications that want control can "
    "disable automatic checkpoints and run them on their own schedule, for example when "
    "the application is idle."
)
LOCKING = (
    "SQLite uses file locks to let many processes share one database. A writer takes a "
    "RESERVED lock, then PENDING, then EXCLUSIVE while it commits. With write-ahead "
    "logging most of this disappears: only one writer at a time, but readers proceed."
)
CONTEXT = (
    "A context manager is an object that defines what happens on entering and leaving a "
    "with statement. Write one as a class with __enter__ and __exit__, or decorate a "
    "generator function with contextlib.contextmanager: the code before yield runs on "
    "entry and the code after it on exit, even when the block raises."
)
DATACLASS = (
    "The dataclass decorator generates __init__, __repr__ and comparison methods from "
    "class annotations. frozen=True makes instances immutable and hashable; slots=True "
    "saves memory. Use field(default_factory=list) for mutable defaults."
)
STARTER = (
    "A sourdough starter is flour and water colonised by wild yeast and lactic acid "
    "bacteria. Feed it equal weights of flour and water every day; keep it warm overnight "
    "and it doubles within six to eight hours when it is ready to bake with."
)
ASYNCIO = (
    "asyncio runs coroutines on an event loop. await suspends a coroutine until the awaited "
    "future completes; asyncio.gather runs several concurrently. Blocking calls belong in "
    "a thread: asyncio.to_thread hands them to the default executor."
)


@dataclass
class Seeded:
    local_url: str
    local_page_id: int
    wal_url: str
    wal_page_id: int
    wal_visits: int
    wal_highlights: int
    wal_notes: int
    visit_times: list[int]
    """Every seeded visit, unix seconds."""


def seed(profile: Profile, local_url: str, now: int | None = None) -> Seeded:
    """Write the memory into ``profile``'s store (the host is not running yet)."""
    now = int(time.time()) if now is None else now
    reads = [  # (url, title, text, [seconds ago of each visit])
        ("https://sqlite.org/wal.html", "Write-Ahead Logging — SQLite", WAL,
         [26 * HOUR, 25 * HOUR + 40 * MINUTE, 3 * HOUR]),
        ("https://sqlite.org/lockingv3.html", "File Locking And Concurrency In SQLite Version 3",
         LOCKING, [25 * HOUR + 30 * MINUTE]),
        (local_url, "Checkpoints in practice — notes from a talk",
         "A checkpoint copies pages from the write-ahead log back into the database. "
         "Run it when the application is idle to keep the log short.",
         [25 * HOUR + 20 * MINUTE]),
        ("https://docs.python.org/3/library/contextlib.html",
         "contextlib — Utilities for with-statement contexts — Python 3.12 documentation",
         CONTEXT, [2 * HOUR + 10 * MINUTE, 40 * MINUTE]),
        ("https://docs.python.org/3/library/dataclasses.html",
         "dataclasses — Data Classes — Python 3.12 documentation", DATACLASS,
         [2 * HOUR, 4 * DAY]),
        ("https://docs.python.org/3/library/asyncio-task.html",
         "Coroutines and Tasks — Python 3.12 documentation", ASYNCIO, [4 * DAY + 20 * MINUTE]),
        ("https://www.theperfectloaf.example/sourdough-starter",
         "How to Make a Sourdough Starter | The Perfect Loaf", STARTER,
         [6 * DAY, 6 * DAY - 15 * MINUTE]),
    ]  # fmt: skip
    ids: dict[str, int] = {}
    times = [now - ago for _, _, _, agos in reads for ago in agos]
    with Memory.open(str(profile.data_dir), embeddings=False, background_indexing=False) as memory:
        for n, (url, title, text, agos) in enumerate(reads):
            first, *rest = sorted(agos, reverse=True)
            receipt = memory.capture_page(
                url, text=text, title=title, captured_at=now - first,
                visit=VisitInfo(visited_at=now - first, dwell_ms=45_000 + n * 7_000),
            )  # fmt: skip
            ids[url] = receipt.page_id
            for m, ago in enumerate(rest):
                memory.record_visit(url, visited_at=now - ago, dwell_ms=30_000 + m * 5_000,
                                    title=title)  # fmt: skip
        wal = "https://sqlite.org/wal.html"
        memory.add_highlight(
            wal,
            "readers never block writers and writers never block readers",
            note="This is why WAL suits the app.",
            created_at=now - 25 * HOUR,
        )
        memory.add_highlight(wal, "disable automatic checkpoints and run them on their own "
                             "schedule", created_at=now - 3 * HOUR)  # fmt: skip
        memory.add_highlight("https://docs.python.org/3/library/contextlib.html",
                             "the code before yield runs on entry and the code after it on exit",
                             created_at=now - 40 * MINUTE)  # fmt: skip
        memory.add_note("Switch the app's database to WAL and checkpoint when idle.", url=wal,
                        created_at=now - 3 * HOUR + 5 * MINUTE)  # fmt: skip
        memory.add_note("Feed the starter before bed on Friday.",
                        url="https://www.theperfectloaf.example/sourdough-starter",
                        created_at=now - 6 * DAY + 20 * MINUTE)  # fmt: skip
        memory.catch_up(vectors=False)
    return Seeded(local_url, ids[local_url], wal, ids[wal], wal_visits=3, wal_highlights=2,
                  wal_notes=1, visit_times=times)  # fmt: skip
