"""A flow's timeout holds when Prefect's alarm is lost (flows/runtime/deadline.py).

Prefect raises its timeout from a ``SIGALRM`` in the main thread; raised inside a finalizer (or a
garbage-collector callback, as Dask's scheduler installs), Python prints "Exception ignored" and
the flow goes on. The control flow below shows the loss is real: it waits for its task the plain
way and completes long after its one-second timeout. The same flow waiting through
``deadline.as_completed`` fails with ``FlowTimeoutError`` at the deadline and its grace.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prefect import flow, task
from prefect.task_runners import ThreadPoolTaskRunner

from flows.runtime import deadline
from flows.runtime.worker_watch import failed_before_the_loss

pytestmark = pytest.mark.integration

#: seconds the task runs: beyond the flow's 1 s timeout and the deadline's grace
TASK_S = deadline.GRACE_S + 3.0


class _SwallowsTheAlarm:
    """Its finalizer sleeps through the flow's timeout: the alarm's exception is raised inside it,
    where Python can only print it."""

    def __del__(self) -> None:
        time.sleep(1.5)


@task
def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _flow(wait_with_deadline: bool) -> Any:
    @flow(timeout_seconds=1, task_runner=ThreadPoolTaskRunner(max_workers=1))
    def sleeper() -> str:
        _SwallowsTheAlarm()  # collected at once: its finalizer runs here
        futures = [_sleep.submit(TASK_S)]
        if wait_with_deadline:
            for f in deadline.as_completed(futures):
                f.result()
        else:
            for f in futures:
                f.result()
        return "completed"

    return sleeper


def test_a_lost_alarm_is_caught_by_the_deadline(prefect_harness: None) -> None:
    t0 = time.monotonic()
    control = _flow(wait_with_deadline=False)(return_state=True)
    assert control.is_completed()  # Prefect's timeout was lost: the flow ran its whole course
    assert time.monotonic() - t0 >= TASK_S

    state = _flow(wait_with_deadline=True)(return_state=True)
    assert state.is_failed()  # the wait gave up: had it waited for the task, the flow completes
    exc = state.result(raise_on_failure=False)
    assert isinstance(exc, deadline.FlowTimeoutError), repr(exc)
    assert "outlived its timeout of 1 s (cluster.timeout_s)" in str(exc)


def test_seconds_left_outside_a_flow_is_none() -> None:
    assert deadline.seconds_left() is None
    deadline.check()  # no flow, no deadline: nothing raised


def test_a_task_that_killed_its_workers_is_the_cause_not_the_loss() -> None:
    """When every worker is gone and the flow failed, the flow's own ``KilledWorker`` is reported
    (the watch cancelled the other tasks only after it); a cancelled wait means the loss."""
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    assert failed_before_the_loss(KilledWorker("simulate_blocks-1", None, 2))
    assert not failed_before_the_loss(FutureCancelledError("k", "all workers lost"))
    assert not failed_before_the_loss(RuntimeError("other"))
