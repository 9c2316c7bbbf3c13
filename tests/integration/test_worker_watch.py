"""The worker watch on real local Dask clusters (processes with nannies), without Prefect.

- The only worker leaves for good (its nanny closed with it): what the client waits for is
  cancelled within the grace period, and the watch says which worker was lost.
- A cluster that has not started a worker yet is no alarm (a batch job still queued).
- A worker SIGKILLed and restarted by its nanny within the grace period is no alarm: its task
  is re-run and completes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from distributed import Client, LocalCluster

from flows.runtime.worker_watch import WorkerWatch, track_client
from tests._ceilings import PROCESS_CEILING_S

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _slow(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[tuple[LocalCluster, Client]]:
    with (
        LocalCluster(
            n_workers=request.param,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as c,
        Client(c, set_as_default=False) as client,
    ):
        track_client(client)
        yield c, client


@pytest.mark.parametrize("cluster", [1], indirect=True)
def test_a_cluster_left_without_workers_cancels_what_the_client_waits_for(
    cluster: tuple[LocalCluster, Any],
) -> None:
    c, client = cluster
    (worker,) = client.scheduler_info(n_workers=-1)["workers"]
    future = client.submit(_slow, 3600, pure=False)  # it ends only if cancelled
    with WorkerWatch(2.0, poll_s=0.2) as watch:
        time.sleep(1)
        c.scale(0)  # the worker and its nanny close: nothing restarts it
        t0 = time.monotonic()
        with pytest.raises(Exception, match="all workers lost"):  # the watch's cancellation
            future.result(timeout=PROCESS_CEILING_S)
        took = time.monotonic() - t0
    assert took >= 2.0, took  # not before the grace period
    assert watch.lost is not None
    assert watch.lost.startswith(
        f"the worker of the Dask cluster at {c.scheduler_address} was lost"
    )
    assert f"last: {worker} at " in watch.lost and "grace_s = 2 s" in watch.lost


@pytest.mark.parametrize("cluster", [0], indirect=True)
def test_a_cluster_without_its_first_worker_is_no_alarm(cluster: tuple[LocalCluster, Any]) -> None:
    _, client = cluster
    future = client.submit(_slow, 0, pure=False)
    with WorkerWatch(1.0, poll_s=0.2) as watch:
        time.sleep(4)
    assert watch.lost is None and future.status == "pending"


@pytest.mark.parametrize("cluster", [1], indirect=True)
def test_a_worker_its_nanny_restarts_is_no_alarm(cluster: tuple[LocalCluster, Any]) -> None:
    _, client = cluster
    (pid,) = client.run(os.getpid).values()
    future = client.submit(_slow, 3, pure=False)
    with WorkerWatch(30.0, poll_s=0.2) as watch:
        time.sleep(1)
        os.kill(pid, signal.SIGKILL)  # the only worker: none until the nanny has restarted it
        ran_on = future.result(timeout=PROCESS_CEILING_S)
    assert watch.lost is None
    assert ran_on != pid  # re-run on the worker the nanny started
