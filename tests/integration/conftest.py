"""Real infrastructure for flow tests: Prefect's test harness and a local Dask cluster of processes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    # the ceiling tests/conftest.py sets for every Prefect API the tests start
    ceiling = int(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
    with prefect_test_harness(server_startup_timeout=ceiling):
        yield


@pytest.fixture(scope="session")
def dask_address() -> Iterator[str]:
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address
