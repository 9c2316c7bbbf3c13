"""The tasks' retry policy (``flows.audit.tasks.TASK_OPTS``) on Prefect's test harness: a transient error
(an S3 read timing out, a lost connection) gets another attempt and the same result; an error in the
input fails at once, never recomputed."""

from __future__ import annotations

from typing import Any

import pytest

from auditlib.exceptions import InvalidParameterError

pytestmark = pytest.mark.integration


class CommClosedError(OSError):
    """Stands for distributed's error of a connection to a worker lost mid-task."""


def _flaky_flow(first_error: BaseException, fail_times: int) -> tuple[Any, int]:
    from prefect import flow, task

    from flows.audit.tasks import TASK_OPTS

    attempts: list[int] = []

    @task(**{**TASK_OPTS, "retry_delay_seconds": 0, "retry_jitter_factor": None})
    def block(seed: int) -> float:
        attempts.append(seed)
        if len(attempts) <= fail_times:
            raise first_error
        import numpy as np

        return float(np.random.default_rng(seed).normal())

    @flow
    def run() -> float:
        return block(7)

    state = run(return_state=True)
    return state, len(attempts)


@pytest.mark.parametrize(
    "error",
    [TimeoutError("S3 read timed out"), CommClosedError("worker lost"), ConnectionError("reset")],
)
def test_a_transient_error_is_retried_with_the_same_result(
    prefect_harness: None, error: BaseException
) -> None:
    import numpy as np

    state, attempts = _flaky_flow(error, fail_times=1)
    assert state.is_completed(), state.message
    assert attempts == 2
    assert state.result() == float(np.random.default_rng(7).normal())


def test_transient_errors_stop_after_the_stated_retries(prefect_harness: None) -> None:
    from flows.audit.tasks import RETRIES

    state, attempts = _flaky_flow(TimeoutError("S3 read timed out"), fail_times=99)
    assert state.is_failed()
    assert attempts == 1 + RETRIES == 3


@pytest.mark.parametrize(
    "error", [InvalidParameterError("bad audit.replicates = 0"), ValueError("not finite")]
)
def test_an_error_in_the_input_or_the_computation_is_not_retried(
    prefect_harness: None, error: BaseException
) -> None:
    state, attempts = _flaky_flow(error, fail_times=99)
    assert state.is_failed()
    assert attempts == 1
