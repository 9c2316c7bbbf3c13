"""How a ``dpaudit`` command ends badly: the exit codes, the one line on stderr, the log file that
keeps the full trace of a failure, and ``--debug``.

Every failure ends in exactly one ``dpaudit: error: ...`` line: exit 2 for bad input (nothing was
written), exit 1 for a failure midway. The traceback of a failure midway goes to a log file the line
names (``$DPAUDIT_LOG_DIR``, default ``<temp dir>/dpaudit-<user>``); ``dpaudit --debug`` prints it
on stderr instead.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from contextvars import ContextVar
from pathlib import Path
from typing import NoReturn

import typer

from flows.runtime.runlog import ENV_DIR, log_dir, new_log

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1

#: where the log files of failed runs go (default: a directory in the system's temp dir)
LOG_DIR_ENV = ENV_DIR
#: set while ``--debug`` is on (read by the run's log: :mod:`flows.runtime.runlog`)
DEBUG_ENV = "DPAUDIT_DEBUG"


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr naming the problem, and the exit code (2: bad input, 1: failed run);
    with ``--debug``, the traceback of the exception being handled first, if any."""
    if debug_mode() and sys.exc_info()[1] is not None:
        traceback.print_exc()
    line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    typer.echo(f"dpaudit: error: {line}", err=True)
    if not debug_mode():
        # the line is the last word: nothing a thread of the run still winding down prints
        # comes after it (zarr's own thread ending a read the failure interrupted, whose store
        # is then removed: storage/pending_io.py waits for those before removing)
        warnings.simplefilter("ignore")
    raise typer.Exit(code)


#: ``dpaudit --debug``, set by the app's callback on every invocation
_DEBUG: ContextVar[bool] = ContextVar("dpaudit_debug", default=False)


def set_debug(on: bool) -> None:
    _DEBUG.set(on)
    if on:  # read by flows.runtime.runlog: with --debug, Prefect's and Dask's logging stay on the terminal
        os.environ[DEBUG_ENV] = "1"
    else:
        os.environ.pop(DEBUG_ENV, None)


def debug_mode() -> bool:
    """Whether ``dpaudit --debug`` was given."""
    return _DEBUG.get()


def append_trace(log: Path | None, exc: BaseException) -> None:
    """Append the traceback of ``exc`` to ``log`` (and, with ``--debug``, print it on stderr)."""
    text = "".join(traceback.format_exception(exc))
    if debug_mode():
        print(text, file=sys.stderr, end="")
    if log is not None:
        try:
            with log.open("a", encoding="utf-8") as fh:
                fh.write(f"\n--- dpaudit: the failure ---\n{text}")
        except OSError:
            pass


def where_logged(log: Path | None) -> str:
    """The end of the one error line: where the full trace is."""
    if debug_mode():
        return "the trace is above"
    if log is None:
        return f"no log could be written in {str(log_dir())!r}; run with --debug for the trace"
    return f"the full log is in {log}"


def fail_with_trace(what: str, message: str, exc: BaseException) -> NoReturn:
    """A failure midway: the trace of ``exc`` in a new log file, one line naming it, exit 1."""
    log = None if debug_mode() else new_log(what)
    append_trace(log, exc)
    fail(f"{message.rstrip('.')}; {where_logged(log)}", EXIT_FAILED)
