"""A thread beside a ``with`` block: started inside it, asked to stop and waited for as it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType


class BackgroundThread:
    """Base of the context managers that run one daemon thread during their ``with`` block.

    The subclass's ``__enter__`` starts the thread (:meth:`_start_thread`), whose loop waits on
    ``_stop``; leaving the block sets ``_stop`` and waits for the thread at most
    :meth:`_join_timeout` seconds (a daemon thread still running then dies with the process)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _start_thread(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def _join_timeout(self) -> float:
        """Seconds to wait for the thread as the block ends."""
        return 10.0

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._join_timeout())
