"""What a run shows on its console: a progress bar on a terminal, and at the end the one line of
the outcome (what Prefect, Dask and the workers print goes to the run's log file instead:
:mod:`flows.runtime.runlog`; ``dpaudit --debug``: everything stays on the terminal).

A run whose output is not a terminal (``dpaudit run > run.log 2>&1``, cron, CI) has no progress
bar: it prints one plain line per stage on stdout instead (:class:`StageLog`), e.g.
``dpaudit: 12:01:03 simulate: 12/12 blocks done (40 s)``, at most :data:`WIDTH` columns.
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from typing import Any, TextIO

#: the widest line a logged run prints (a longer message goes on indented continuation lines)
WIDTH = 80
#: seconds between two lines of a logged run's progress within a stage (blocks simulated so far)
PROGRESS_EVERY_S = 30.0


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def logged_output(terminal: TextIO | None = None) -> bool:
    """Whether the run prints its stages as lines on stdout: unless stdout and ``terminal`` (the
    stream of the progress bar, default stderr) are both terminals."""
    return not (_isatty(sys.stdout) and _isatty(terminal or sys.stderr))


def progress_bar(terminal: TextIO) -> Any:
    """The progress display of a run on ``terminal`` (a ``rich.progress.Progress``, a context
    manager): a bar that leaves nothing behind, shown only if ``terminal`` is a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=terminal),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
        disable=not _isatty(terminal),  # a file or pipe: no bar (a logged run has its lines)
    )


def stage_lines(message: str, clock: float | None = None) -> list[str]:
    """``message`` as the lines of a logged run: ``dpaudit: HH:MM:SS message``, wrapped at
    :data:`WIDTH` columns (a long path is broken), continuation lines indented under the message."""
    prefix = f"dpaudit: {time.strftime('%H:%M:%S', time.localtime(clock))} "
    text = " ".join(message.split())  # one line, whatever the message held
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=prefix,
        subsequent_indent=" " * len(prefix),
        break_on_hyphens=False,
    ) or [prefix.rstrip()]


class StageLog:
    """The listener of a logged run (:mod:`flows.runtime.progress`): each stage as its lines on stdout,
    and within a stage the progress (``blocks simulated 5/12, tasks 1/9``) at most every
    :data:`PROGRESS_EVERY_S` seconds. Thread-safe: progress comes from a polling thread too.

    ``held``: the lines wait (with the time they were said) until :meth:`release` — a run holds
    them until its flow runs on its cluster, so that bad input found on the way (a cluster that
    cannot start) still ends in the one error line and nothing on stdout (:meth:`drop`).
    """

    def __init__(self, every_s: float = PROGRESS_EVERY_S, held: bool = False) -> None:
        self._lock = threading.Lock()
        self._every = every_s
        self._last = time.monotonic()
        self._what = ""
        self._held: list[str] | None = [] if held else None

    def stage(self, message: str) -> None:
        with self._lock:
            self._last = time.monotonic()
            self._emit(stage_lines(message))

    def progress(self, done: int, total: int, what: str) -> None:
        with self._lock:
            if what == self._what or time.monotonic() - self._last < self._every:
                return
            self._last, self._what = time.monotonic(), what
            self._emit(stage_lines(what))

    def release(self) -> None:
        """Print the held lines; print the next ones as they come."""
        with self._lock:
            held, self._held = self._held, None
            if held:
                _write(held)

    def drop(self) -> None:
        """Forget the held lines (the run ends in an error line instead)."""
        with self._lock:
            if self._held is not None:
                self._held.clear()

    def _emit(self, lines: list[str]) -> None:
        if self._held is not None:
            self._held.extend(lines)
        else:
            _write(lines)


def _write(lines: list[str]) -> None:
    """``lines`` on stdout, flushed (stderr may share the file)."""
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
