"""Real infrastructure for flow tests: Prefect's test harness and local Dask clusters of two workers
(processes, or threads of this process)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    # the ceiling tests/conftest.py sets for every Prefect API the tests start
    ceiling = int(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
    with prefect_test_harness(server_startup_timeout=ceiling):
        yield


@contextmanager
def two_workers(*, processes: bool) -> Iterator[str]:
    """The scheduler address of a local Dask cluster of two one-thread workers: worker processes
    (with the malloc thresholds of the workers a run starts, ``flows.runtime.dask_malloc``), or
    threads of this process."""
    from distributed import LocalCluster

    from flows.runtime.dask_malloc import apply_malloc_defaults

    if processes:
        apply_malloc_defaults()

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="session")
def dask_address() -> Iterator[str]:
    with two_workers(processes=True) as address:
        yield address


@pytest.fixture(scope="module")
def inproc_dask() -> Iterator[str]:
    """A Dask cluster of threads in this process (in-process comms, no sockets to lose)."""
    with two_workers(processes=False) as address:
        yield address
