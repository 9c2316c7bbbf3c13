"""The log of a run: while a flow runs, whatever Prefect, Dask, warnings and the worker processes
print on stderr goes to a log file, and the terminal keeps only the progress line and, at the end,
the one line of the outcome (``dpaudit --debug``: everything stays on the terminal).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


def _stderr_fd() -> int | None:
    """2 if ``sys.stderr`` writes to file descriptor 2 (a real process, not a test runner's buffer)."""
    try:
        return 2 if sys.stderr.fileno() == 2 else None
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None


def _terminal_handlers() -> list[logging.StreamHandler[TextIO]]:
    """The stream handlers of every logger that write to stderr (Prefect's console, Dask's)."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    found = []
    for lg in loggers:
        for h in getattr(lg, "handlers", []):
            if (
                isinstance(h, logging.StreamHandler)
                and not isinstance(h, logging.FileHandler)
                and h.stream in (sys.stderr, sys.__stderr__)
            ):
                found.append(h)
    return found


@contextlib.contextmanager
def captured(log: Path | None, debug: bool = False) -> Iterator[TextIO]:
    """Send stderr to ``log`` for the block; yield the stream that still reaches the terminal.

    At the file-descriptor level too (when stderr is descriptor 2), so processes started in the
    block (Dask workers, an embedded Prefect server) write to the log as well.
    """
    if debug or log is None:
        yield sys.stderr
        return
    terminal = sys.stderr
    with log.open("a", encoding="utf-8", errors="replace", buffering=1) as sink:
        fd = _stderr_fd()
        saved = None
        if fd is not None:
            terminal.flush()
            saved = os.dup(fd)
            os.dup2(sink.fileno(), fd)
            terminal = open(  # closed in the finally below
                saved, "w", encoding=sys.stderr.encoding, errors="replace", closefd=False
            )
        handlers = _terminal_handlers()
        streams = [h.setStream(sink) for h in handlers]
        consoles = [getattr(h, "console", None) for h in handlers]  # Prefect's: a rich Console
        files = [c.file if c is not None else None for c in consoles]
        for c in consoles:
            if c is not None:
                c.file = sink
        try:
            with contextlib.redirect_stderr(sink):
                yield terminal
        finally:
            for h, s, c, f in zip(handlers, streams, consoles, files, strict=True):
                if s is not None:
                    h.setStream(s)
                if c is not None:
                    c.file = f
            if saved is not None:
                terminal.flush()
                sys.stderr.flush()
                os.dup2(saved, fd)  # type: ignore[arg-type]
                terminal.close()
                os.close(saved)
