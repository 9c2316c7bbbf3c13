"""The check every size-bound test makes: refused at once, allocating almost nothing."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from auditlib.exceptions import InvalidParameterError

PEAK_BYTES = 8 * 2**20  # what "no allocation attempted" allows: a few MB of bookkeeping


def refused(fn: Callable[[], Any], *fragments: str, peak_bytes: int = PEAK_BYTES) -> str:
    """Run ``fn``; it must raise InvalidParameterError within a second of this process's CPU time
    (not wall time: a busy machine leaves the verdict alone), allocating at most ``peak_bytes``
    (``tracemalloc`` sees numpy's buffers), with every fragment in the message. Returns the
    message."""
    tracemalloc.start()
    t0 = time.process_time()
    try:
        with pytest.raises(InvalidParameterError) as e:
            fn()
        elapsed = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(e.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    assert elapsed < 1.0, f"refused after {elapsed:.2f} CPU s"
    assert peak < peak_bytes, f"{peak / 2**20:.1f} MB allocated before refusing"
    return msg
