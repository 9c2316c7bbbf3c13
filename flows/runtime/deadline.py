"""The flow run's timeout (``cluster.timeout_s``) kept where the flow waits for its tasks.

Prefect times a flow out with a ``SIGALRM`` raised in the main thread. The exception lands in
whatever code runs at that moment: inside a garbage-collector callback (Dask's scheduler of a
local cluster has one in the run's process) Python prints "Exception ignored" and goes on, and the
flow runs to its end as if it had no timeout. The waits below keep the same deadline with a clock:
a flow that is past it fails at its next wait with :class:`FlowTimeoutError`, whatever became of
the signal. Prefect's own timeout normally comes first (the waits allow :data:`GRACE_S` more).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: seconds beyond the flow's timeout before a wait gives up (Prefect's own timeout first)
GRACE_S = 2.0


class FlowTimeoutError(TimeoutError):
    """The flow run outlived its timeout (``cluster.timeout_s``)."""


def _timeout_and_elapsed() -> tuple[float, float] | None:
    """The current flow run's timeout and the seconds it has run; None outside a flow run or for
    a flow without a timeout."""
    from prefect.context import FlowRunContext
    from prefect.types._datetime import now

    ctx = FlowRunContext.get()
    timeout = getattr(getattr(ctx, "flow", None), "timeout_seconds", None)
    if ctx is None or timeout is None:
        return None
    return float(timeout), (now("UTC") - ctx.start_time).total_seconds()


def _error(timeout: float, elapsed: float) -> FlowTimeoutError:
    return FlowTimeoutError(
        f"the flow run outlived its timeout of {timeout:g} s (cluster.timeout_s) after "
        f"{elapsed:.0f} s; raise cluster.timeout_s, or give the run more workers"
    )


def seconds_left() -> float | None:
    """Seconds the current flow run may still wait for its tasks (with the grace), at least 0;
    None if it has no timeout."""
    te = _timeout_and_elapsed()
    return None if te is None else max(0.0, te[0] + GRACE_S - te[1])


def check() -> None:
    """Raise :class:`FlowTimeoutError` if the current flow run is past its timeout and grace."""
    te = _timeout_and_elapsed()
    if te is not None and te[1] > te[0] + GRACE_S:
        raise _error(*te)


def as_completed(futures: list[Any]) -> Iterator[Any]:
    """``futures`` (Prefect futures) as they finish, within the flow run's deadline: past it,
    :class:`FlowTimeoutError` instead of the next future."""
    from prefect.futures import as_completed as prefect_as_completed

    check()
    try:
        yield from prefect_as_completed(futures, timeout=seconds_left())
    except TimeoutError as exc:
        te = _timeout_and_elapsed()
        if te is None:  # not the deadline's: re-raise as it came
            raise
        raise _error(*te) from exc
