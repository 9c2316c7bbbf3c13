"""A piece of the report computed in a second process while the caller computes the rest:
:func:`beside`.

The report's figures take nearly all of its time and the sections are independent of each other,
so on a machine with a second core :func:`~flows.report.render.render_report` hands about half of
the drawing (the EPL section: its curve and surface figures, and the accuracy section) to a forked
child and draws the other sections meanwhile. The child is forked from the caller, so it inherits the imported
modules and matplotlib's state (rcParams, fonts) and draws exactly the bytes the caller would;
its arguments are never pickled, only its answer is (a section of strings and numbers).

What the child computes must be a pure function of data in memory: a group read lazily from the
store is loaded before the fork (the store's I/O loop lives in a thread of the parent that a
forked child does not have). The child writes nothing to the terminal: the warnings it raises
are sent back with its answer and warned again in the caller. A child that dies without an
answer, or gives none within :data:`CHILD_TIMEOUT_S` once it is asked for, is no error: the
caller stops it and computes the piece itself.

The second process is used only where forking is safe and worth it (:func:`available`): on Linux,
with at least two usable cores, from the main thread of a process that may have children;
everywhere else, and with ``parallel=False``, the piece is computed in the caller when its
result is asked for, as before.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

__all__ = ["Pending", "available", "beside"]

T = TypeVar("T")

#: seconds the caller waits for the child's answer once it needs it (its half of the report
#: takes seconds on an idle machine, minutes on a very loaded one) before drawing it itself
CHILD_TIMEOUT_S = 600.0


def available() -> bool:
    """Whether a forked second process can draw beside this one (Linux, ≥ 2 usable cores, the
    main thread, a process allowed children)."""
    if sys.platform != "linux" or "fork" not in mp.get_all_start_methods():
        return False
    if len(os.sched_getaffinity(0)) < 2:
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    return not mp.current_process().daemon


class Pending(Generic[T]):
    """The result of ``fn(*args)``: computed in a forked child, or on :meth:`result` in the caller."""

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...], parallel: bool) -> None:
        self._fn, self._args = fn, args
        self._proc: Any = None
        self._conn: Connection | None = None
        if parallel:
            ctx = mp.get_context("fork")
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
            proc.start()
            send.close()  # the child holds the only sending end: its death is an EOF here
            self._proc, self._conn = proc, receive

    def result(self) -> T:
        """The value of ``fn(*args)``; its exception is raised here, its warnings warned here."""
        if self._conn is None:
            return self._fn(*self._args)
        try:
            # a child forked from a threaded process could in principle hang on a lock some
            # other thread held at the fork: past the bound it is stopped and its part drawn here
            answer = self._conn.recv() if self._conn.poll(CHILD_TIMEOUT_S) else None
            if answer is None:
                self.cancel()
        except (EOFError, OSError):  # the child died without an answer: compute it here
            answer = None
        finally:
            self._close()
        if answer is None:
            return self._fn(*self._args)
        ok, value, caught = answer
        for message, category, filename, lineno in caught:
            warnings.warn_explicit(message, category, filename, lineno)
        if not ok:
            raise value
        return value

    def cancel(self) -> None:
        """Stop the child (a caller that failed and needs no result)."""
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join()
            self._proc = None


def beside(fn: Callable[..., T], *args: Any, parallel: bool) -> Pending[T]:
    """Start ``fn(*args)`` in a forked child if ``parallel``; else it runs on :meth:`Pending.result`.

    ``args`` must hold their data in memory (a store group loaded, not lazily open)."""
    return Pending(fn, args, parallel)


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The forked child: ``fn(*args)`` and its warnings, or its exception, sent to the parent."""
    with warnings.catch_warnings(record=True) as caught:
        try:
            answer: tuple[bool, Any, Any] = (True, fn(*args), None)
        except BaseException as exc:  # every failure goes back to the parent
            exc.add_note("in the report's second process:\n" + "".join(traceback.format_exc()))
            answer = (False, _picklable(exc), None)
    warned = [(str(w.message), w.category, w.filename, w.lineno) for w in caught]
    try:
        conn.send((answer[0], answer[1], warned))
    except Exception:  # an answer that does not pickle: the parent sees EOF, computes it itself
        pass
    finally:
        conn.close()


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` itself if it survives pickling, else a RuntimeError with its traceback's text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        text = "".join(traceback.format_exception(exc))
        return RuntimeError(f"{type(exc).__name__}: {exc}\n{text}")
