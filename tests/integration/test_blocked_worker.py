"""A worker whose task holds the GIL for longer than Dask's default TCP timeout stays in the cluster.

Dask's ``distributed.comm.timeouts.tcp`` (30 s) is also the kernel's TCP_USER_TIMEOUT on its
connections. A task that holds the GIL (an exact accounting on a busy machine) keeps the worker
from reading its connection; with data queued for it, the kernel aborts the connection after 30 s,
the scheduler drops the worker, the worker shuts down, and a run with no worker left waits until its
timeout. The clusters a run starts take ``flows.runtime.dask_tcp.DASK_TCP_TIMEOUT`` instead; this test holds
a real worker's GIL for about 45 s while 320 MB are queued for it, on a real local cluster.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster

from flows.runtime import cluster as runtime
from tests._ceilings import PROCESS_CEILING_S

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: seconds the worker's GIL is held: past Dask's default 30 s, well inside the raised timeout
HOLD_S = 45


def _hold_gil(seconds: int, started: str) -> float:
    """C's ``sleep`` called through :class:`ctypes.PyDLL`, which keeps the GIL for the call: the
    worker's other threads (its connections) wait, with no CPU used."""
    Path(started).touch()  # what the test waits for before it queues data for this worker
    t = time.perf_counter()
    ctypes.PyDLL(None).sleep(seconds)
    return time.perf_counter() - t


def _nbytes(x: np.ndarray) -> int:
    return int(x.nbytes)


@pytest.fixture
def restore_dask_config(monkeypatch: pytest.MonkeyPatch):
    """Dask's default timeout here, and the environment and config as they were after the test."""
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP", "unset")  # restored afterwards
    monkeypatch.delenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP")
    with dask.config.set({"distributed.comm.timeouts.tcp": "30s"}):
        yield


def test_the_runs_cluster_keeps_a_worker_that_holds_the_gil(
    restore_dask_config, tmp_path: Path
) -> None:
    runtime.task_runner("", 1, 2, "4GiB")  # what a run does before its local cluster starts
    tcp = dask.config.get("distributed.comm.timeouts.tcp")
    assert tcp != "30s"

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as client,
    ):
        started = tmp_path / "started"
        held = client.submit(_hold_gil, HOLD_S, str(started), pure=False)
        deadline = time.monotonic() + PROCESS_CEILING_S
        while not started.exists():  # the task has started and holds the worker's GIL
            assert time.monotonic() < deadline, "the task did not start in 300 s"
            time.sleep(0.05)
        queued = [
            client.submit(_nbytes, np.full(2_000_000, float(i)), pure=False) for i in range(20)
        ]
        seconds = held.result(timeout=PROCESS_CEILING_S)
        total = sum(f.result(timeout=PROCESS_CEILING_S) for f in queued)
        workers = len(client.scheduler_info()["workers"])
        assert total == 20 * 16_000_000
        assert workers == 1
    assert seconds > 31.0, f"the GIL was held {seconds:.1f} s, not past Dask's default 30 s"
