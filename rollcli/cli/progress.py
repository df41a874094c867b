"""Progress on stderr for the long commands (`roll train`, `roll eval`, `roll data episodes`,
bench/learning.py): rich's live bar on a terminal, plain lines where stderr is a file or a
pipe (a log, `nohup`, a scheduler's job output).

A live bar draws nothing off a terminal until it ends: `roll eval ... 2>log` printed
nothing for 69 minutes. `ProgressLines` writes instead a task's line each time it passes
another tenth of its total, and at least every `EVERY_S` seconds the latest state (from a
thread, while nothing is reported: a long training phase), so a log never goes quiet for
minutes. A line holds `done/total`, the rate since the task's first report and the time
left at that rate:

      episodes 20/200 (10%), 1.3/s, eta 2m18s
      step 4/40 (10%), 38.2 s each, eta 22m55s · reward 0.125 · length 41.0
      step 5/40: training, 45s so far
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

EVERY_S = 30.0  # the longest a log goes without a progress line while a command runs
WIDTH = 80  # a line's notes are left out where they would run past this

Report = Callable[[str, int, int], None]  # (task, done, total)


def duration(seconds: float) -> str:
    """A short duration.

    >>> duration(45.2), duration(138), duration(3900)
    ('45s', '2m18s', '1h05m')
    """
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def rate_text(per_s: float, seconds_each: bool = False) -> str:
    """Items per second, or seconds per item when slower than one a second (always, with
    `seconds_each`: a training step's time is what its reader compares).

    >>> rate_text(310.24), rate_text(1 / 38.2), rate_text(2.5, seconds_each=True)
    ('310.2/s', '38.2 s each', '0.4 s each')
    """
    return f"{per_s:.1f}/s" if per_s >= 1 and not seconds_each else f"{1 / per_s:.1f} s each"


@dataclass
class _Task:
    first_t: float  # when the task was first reported, and how far it was then
    first_done: int
    done: int = 0
    total: int = 0
    tenth: int = 0  # the last tenth of the total a line was written for
    notes: Sequence[str] = ()
    seconds_each: bool = False  # the rate as seconds per item, however fast
    eta_s: float | None = None  # the caller's estimate of the time left (at `eta_t`)
    eta_t: float = 0.0


class ProgressLines:
    """Plain progress lines through `write` (one call a line).

    `update(task, done, total)` records a task's state and writes its line when it passes
    another tenth of `total` (with `tenths=True`), or when no line was written for
    `every_s` seconds; `beat()` writes the latest-updated task's line, recomputed now, when
    no line was written for `every_s` seconds (a daemon thread calls it every second unless
    `heartbeat=False`). A task with `total` 0 has no count: its line says how long it has
    run. `notes` follow the line, as many as fit in `width` columns.
    """

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        every_s: float = EVERY_S,
        width: int = WIDTH,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
    ) -> None:
        self.write = write
        self.every_s = every_s
        self.width = width
        self.clock = clock
        self._tasks: dict[str, _Task] = {}
        self._latest: str | None = None
        self._last_line = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat, name="roll-progress", daemon=True)
            self._thread.start()

    def update(
        self,
        task: str,
        done: int,
        total: int,
        *,
        tenths: bool = True,
        notes: Sequence[str] = (),
        seconds_each: bool = False,
        eta_s: float | None = None,
    ) -> None:
        """`eta_s`: the time left as the caller estimates it (a run's: runs/step_eta.py),
        instead of the rate since the task's first report."""
        with self._lock:
            now = self.clock()
            state = self._tasks.get(task)
            if state is None:
                state = self._tasks[task] = _Task(now, done, tenth=_tenth(done, total))
            state.done, state.total, state.notes = done, total, notes
            state.seconds_each = seconds_each
            state.eta_s, state.eta_t = eta_s, now
            self._latest = task
            tenth = _tenth(done, total)
            due = (tenths and tenth > state.tenth) or now - self._last_line >= self.every_s
            state.tenth = max(state.tenth, tenth)
            if due:
                self._emit(task, now)

    def beat(self) -> None:
        """Write the latest state if no line was written for `every_s` seconds."""
        with self._lock:
            now = self.clock()
            if self._latest is not None and now - self._last_line >= self.every_s:
                self._emit(self._latest, now)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def line(self, task: str, now: float | None = None) -> str:
        """The task's line as it stands at `now` (default: the clock's time)."""
        state = self._tasks[task]
        now = self.clock() if now is None else now
        if state.total <= 0:
            text = f"  {task}, {duration(now - state.first_t)} so far"
        else:
            pct = 100 * state.done // state.total
            text = f"  {task} {state.done}/{state.total} ({pct}%)"
            moved, spent = state.done - state.first_done, now - state.first_t
            if moved > 0 and spent > 0:
                per_s = moved / spent
                text += f", {rate_text(per_s, state.seconds_each)}"
                left = (state.total - state.done) / per_s
                if state.eta_s is not None:  # the caller's, counted down since it came
                    left = max(0.0, state.eta_s - (now - state.eta_t))
                if state.done < state.total:
                    text += f", eta {duration(left)}"
        for note in state.notes:
            if len(text) + 3 + len(note) > self.width:
                break
            text += f" · {note}"
        return text

    def _emit(self, task: str, now: float) -> None:
        self.write(self.line(task, now))
        self._last_line = now

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every_s)):
            self.beat()


def _tenth(done: int, total: int) -> int:
    return 10 * done // total if total > 0 else 0


def console_lines(console: Console, **kwargs: Any) -> ProgressLines:
    """`ProgressLines` printed on `console`, each line whole and taken literally."""

    def write(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    return ProgressLines(write, **kwargs)


@contextlib.contextmanager
def progress(console: Console) -> Iterator[Report]:
    """Yields `report(task, done, total)`: a transient rich bar per task on a terminal,
    `ProgressLines` elsewhere (every command's progress goes through here or through
    `cli/display.py`, which does the same for a run)."""
    if not console.is_terminal:
        lines = console_lines(console)
        try:
            yield lines.update
        finally:
            lines.close()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("  {task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def report(task: str, done: int, total: int) -> None:
        if task not in tasks:
            tasks[task] = bar.add_task(task, total=total)
        bar.update(tasks[task], completed=done, total=total)

    with bar:
        yield report
