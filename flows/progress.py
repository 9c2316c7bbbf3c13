"""Progress of a running flow, reported to whoever listens (the CLI's progress bar).

The listener lives in this module's state, not in the flow's globals, so nothing unpicklable (a live
terminal display holds locks) is ever captured when Prefect ships the flow's context to Dask workers.

A simulation task holds a batch of blocks, so the audit's progress counts blocks as their
done-markers land in the store (:class:`BlockProgress` polls them), plus the other tasks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

Listener = Callable[[int, int, str], None]
_listener: list[Listener] = []

#: seconds between two looks at the store's block done-markers (one look: ~0.06 CPU-s on the
#: full-US spine store's 312 regions)
POLL_S = 5.0


def listen(listener: Listener | None) -> None:
    _listener.clear()
    if listener is not None:
        _listener.append(listener)


def report(done: int, total: int, what: str) -> None:
    for fn in _listener:
        fn(done, total, what)


class BlockProgress:
    """Reports ``blocks simulated k/n, tasks j/m`` while a flow waits for its tasks.

    ``count_blocks()`` says how many of the ``n_blocks`` blocks are finished (it reads the store);
    a background thread asks it every :data:`POLL_S` seconds while listeners are attached and
    simulation tasks (``n_sim`` of them) are running, and :meth:`task_done` counts finished tasks
    (a finished simulation task also re-reads the blocks). An error reading the store only skips
    that update.
    """

    def __init__(
        self, count_blocks: Callable[[], int], n_blocks: int, n_sim: int, n_other: int
    ) -> None:
        self._count = count_blocks
        self.n_blocks, self.n_sim, self.n_other = n_blocks, n_sim, n_other
        self.blocks = self.other = self.sims = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BlockProgress:
        if _listener and self.n_blocks:
            self._thread = threading.Thread(target=self._poll, name="block-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S) and self.sims < self.n_sim:
            self._refresh()

    def _refresh(self) -> None:
        if not _listener:
            return
        try:
            n = self._count()
        except Exception:  # a chunk being written right now: try again next time
            return
        with self._lock:
            self.blocks = max(self.blocks, min(n, self.n_blocks))
            self._report()

    def task_done(self, sim: bool) -> None:
        if sim:
            self.sims += 1
            self._refresh()
        with self._lock:
            self.other += 0 if sim else 1
            self._report()

    def _report(self) -> None:
        what = f"blocks simulated {self.blocks}/{self.n_blocks}, tasks {self.other}/{self.n_other}"
        report(self.blocks + self.other, self.n_blocks + self.n_other, what)
