"""Progress of a running flow, reported to whoever listens (the CLI's progress bar).

The listener lives in this module's state, not in the flow's globals, so nothing unpicklable (a live
terminal display holds locks) is ever captured when Prefect ships the flow's context to Dask workers.
"""

from __future__ import annotations

from collections.abc import Callable

Listener = Callable[[int, int, str], None]
_listener: list[Listener] = []


def listen(listener: Listener | None) -> None:
    _listener.clear()
    if listener is not None:
        _listener.append(listener)


def report(done: int, total: int, what: str) -> None:
    for fn in _listener:
        fn(done, total, what)
