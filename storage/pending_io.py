"""Reads and writes that zarr still runs for a call that was interrupted.

zarr runs every read and write of a store as a coroutine on its own event loop, in a thread of its
own, and the calling thread waits for it. An exception raised in the calling thread while it
waits (the flow's timeout is a ``SIGALRM`` raised in the main thread, a Ctrl-C is another) ends the
wait, not the coroutine: a write of many chunks goes on writing in the background. A store
removed right then is written again, in part, after it was removed. :func:`settle` waits for that
work to end; removing a staged store calls it first (``storage/staging.py``).
"""

from __future__ import annotations

import asyncio

#: seconds :func:`settle` waits at most (a write of one large block takes a few seconds)
SETTLE_S = 60.0


def _loop() -> asyncio.AbstractEventLoop | None:
    from zarr.core import sync

    loop = sync.loop[0]
    return None if loop is None or loop.is_closed() else loop


async def _drain() -> int:
    """Wait until the loop runs nothing but this; the number of tasks it found running first."""
    me = asyncio.current_task()

    def running() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t is not me and not t.done()]

    others = running()
    first = len(others)
    while others:  # what they started may start more
        await asyncio.wait(others)
        others = running()
    return first


def settle(timeout: float = SETTLE_S) -> int | None:
    """Wait until zarr's event loop has finished every read and write it was running; the number
    of them it was running (0: none, or zarr was never used). Past ``timeout`` seconds it gives
    up, leaves them running and returns None."""
    loop = _loop()
    if loop is None:
        return 0
    future = asyncio.run_coroutine_threadsafe(_drain(), loop)
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        return None
