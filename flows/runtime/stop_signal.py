"""A run stopped by a signal ends the way Ctrl-C ends it: its staging copy kept, one line that names
the signal.

A batch scheduler stops a job with SIGTERM (Slurm at its time limit or on ``scancel``,
Kubernetes when it evicts a pod, ``kill``), usually to the job's whole process group: the run, its
embedded API server and its Dask workers at once. Without a handler Python ends at once on it (no
line, nothing cleaned up); while a flow runs, Prefect's own handler turns it into a
``TerminationSignal`` and reports the crash to the API, which may already be gone, so the run
would end on a "connection refused" that names neither the signal nor what to do.

:func:`stopping_on` makes a stop signal raise :class:`Stopped` (a ``KeyboardInterrupt``: whatever
stops cleanly on Ctrl-C stops cleanly on it); :func:`stop_signal` finds the signal behind an
exception, Prefect's ``TerminationSignal`` or this module's, anywhere in its chain.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: the signals a job is stopped with (SIGINT is Ctrl-C's own KeyboardInterrupt)
STOP_SIGNALS = (signal.SIGTERM,)


class Stopped(KeyboardInterrupt):
    """The run's process received the stop signal ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


@contextmanager
def stopping_on(signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block, each of ``signals`` raises :class:`Stopped` in the main thread; the
    handlers before it are put back after it. Off the main thread (where Python cannot handle
    signals) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise_stopped) for s in signals}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def stop_signal(exc: BaseException) -> int | None:
    """The stop signal behind ``exc`` — a :class:`Stopped` or Prefect's ``TerminationSignal``
    found in it or in the exceptions it was raised from or while handling — or ``None``."""
    from prefect.exceptions import TerminationSignal

    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Stopped):
            return e.signum
        if isinstance(e, TerminationSignal):
            return int(e.signal)
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
    return None


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15; the number for a signal without a name here."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
