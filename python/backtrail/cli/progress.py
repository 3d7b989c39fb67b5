"""Progress of long work (imports, indexing, the embedding backlog, exports).

A :class:`ProgressReporter` is a progress callback ``(done, total, phase)``, the shape
:meth:`Memory.catch_up` and the importers call before a phase's first batch and after
each committed one. On a terminal it draws a rich progress bar per phase with counts,
rate and ETA; otherwise it writes a plain line once a phase has run for ``first_line``
seconds (half a second), then every ``interval`` seconds (5 s) even while one batch
takes longer, and one when a phase ends, so logs stay readable and a long step never
looks stuck.

Ctrl-C stops cleanly: inside ``with ProgressReporter(...)`` the first Ctrl-C only asks
to stop, and the next callback (which runs right after a batch was committed) raises
:class:`Interrupted`. Everything committed so far stays, and because imports are
idempotent and the indexer resumes from its watermark, running the command again
continues where it stopped. A second Ctrl-C stops at once (``KeyboardInterrupt``); that
is still safe (transactions roll back), only the current batch is lost.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from backtrail.errors import BacktrailError

__all__ = ["PHASES", "Interrupted", "ProgressReporter", "format_duration"]

PHASES: Mapping[str, str] = {
    "import": "Importing visits",
    "facts": "Importing facts",
    "pages": "Importing pages and items",
    "capture": "Storing pages",
    "extract": "Extracting page text",
    "text": "Indexing text",
    "vectors": "Embedding passages",
    "rebuild-text": "Indexing text (full scan)",
    "export": "Exporting",
}
"""Human labels of the phases reported by the importers, the indexer and the exporter."""


class Interrupted(BacktrailError):
    """The user pressed Ctrl-C; the work committed so far is kept."""

    code = "interrupted"

    def __init__(self) -> None:
        super().__init__(
            "interrupted: the work done so far is kept; run the same command again to resume"
        )


def format_duration(seconds: float | None) -> str:
    """``"42 s"``, ``"3 min 5 s"``, ``"2 h 10 min"``; ``"?"`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


class _RateColumn(ProgressColumn):
    """Items per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f}/s", style="progress.data.speed")


@dataclass
class _Phase:
    label: str
    started: float
    start_done: int
    last_line: float
    done: int = 0
    total: int = 0
    finished: bool = False
    task: TaskID | None = None
    lines: int = 0


class ProgressReporter:
    """A progress callback; use as a context manager (see the module doc).

    ``interactive`` defaults to whether ``stream`` (standard error) is a terminal;
    ``enabled=False`` reports nothing but still handles Ctrl-C.
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        interactive: bool | None = None,
        enabled: bool = True,
        interval: float = 5.0,
        first_line: float = 0.5,
        labels: Mapping[str, str] = PHASES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._console = Console(file=self._stream, highlight=False)
        if interactive is None:
            interactive = self._console.is_terminal
        self.interactive = interactive and enabled
        self.enabled = enabled
        self._interval = interval
        self._first_line = first_line
        self._labels = labels
        self._clock = clock
        self._phases: dict[str, _Phase] = {}
        self._progress: Progress | None = None
        self._previous_handler: Any = None
        self._handling = False
        self.stop_requested = False
        self._lock = threading.RLock()  # the heartbeat thread writes lines too
        self._closed = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> ProgressReporter:
        if self.interactive:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                _RateColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self._console,
            )
            self._progress.start()
        elif self.enabled:
            self._closed.clear()
            self._heartbeat = threading.Thread(
                target=self._beat, name="backtrail-progress", daemon=True
            )
            self._heartbeat.start()
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGINT, self._on_interrupt)
            self._handling = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._handling:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._handling = False
        self._closed.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        elif exc_type is None:
            with self._lock:
                for name, phase in self._phases.items():
                    if not phase.finished:
                        self._line(name, phase, final=True)

    def _beat(self) -> None:
        """Off a terminal: a line for the running phase when its first batch takes longer
        than ``first_line`` seconds, and every ``interval`` seconds while no batch ends."""
        while not self._closed.wait(min(0.25, self._first_line, self._interval)):
            with self._lock:
                now = self._clock()
                for name, phase in self._phases.items():
                    if phase.finished:
                        continue
                    wait = self._interval if phase.lines else self._first_line
                    if now - phase.last_line >= wait:
                        self._line(name, phase, final=False)

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_requested:
            raise KeyboardInterrupt
        self.stop_requested = True
        self.say("Stopping after the current batch… (press Ctrl-C again to stop at once)")

    # ------------------------------------------------------------- reporting

    def check(self) -> None:
        """Raise :class:`Interrupted` if Ctrl-C was pressed (call between steps)."""
        if self.stop_requested:
            raise Interrupted

    def say(self, message: str) -> None:
        """Print a message to the progress stream without breaking the bar."""
        if self._progress is not None:
            self._progress.console.print(Text(message))
        else:
            with self._lock:
                self._write(message)

    def __call__(self, done: int, total: int, phase: str) -> None:
        self.check()
        if not self.enabled or (total <= 0 and done <= 0 and phase not in self._phases):
            return  # nothing to do in this phase: no bar, no line
        with self._lock:
            self._update(done, total, phase)

    def _update(self, done: int, total: int, phase: str) -> None:
        now = self._clock()
        current = self._phases.get(phase)
        if current is None:
            label = self._labels.get(phase, phase)
            current = _Phase(label, now, done, last_line=now)
            self._phases[phase] = current
            if self._progress is not None:
                current.task = self._progress.add_task(label, total=max(total, done))
        current.done, current.total = done, max(total, done)
        if current.finished and done < current.total:  # the estimate grew
            current.finished = False
        if self._progress is not None and current.task is not None:
            self._progress.update(current.task, completed=done, total=current.total)
            current.finished = done >= current.total > 0
            return
        if done >= current.total and not current.finished:
            self._line(phase, current, final=True)
        elif now - current.last_line >= self._interval:
            self._line(phase, current, final=False)

    def _line(self, name: str, phase: _Phase, *, final: bool) -> None:
        now = self._clock()
        phase.last_line = now
        phase.lines += 1
        elapsed = now - phase.started
        rate = (phase.done - phase.start_done) / elapsed if elapsed > 0 else None
        pct = 100.0 * phase.done / phase.total if phase.total else 100.0
        parts = [f"{phase.label}: {phase.done:,}/{phase.total:,} ({pct:.0f}%)"]
        if rate:
            parts.append(f"{rate:,.0f}/s")
        if final:
            phase.finished = True
            ended = "done in" if phase.done >= phase.total else "stopped after"
            parts.append(f"{ended} {format_duration(elapsed)}")
        elif rate:
            parts.append(f"ETA {format_duration((phase.total - phase.done) / rate)}")
        self._write(", ".join(parts))

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()
