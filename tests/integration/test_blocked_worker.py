"""A worker whose task holds the GIL for longer than Dask's default TCP timeout stays in the cluster.

Dask's ``distributed.comm.timeouts.tcp`` (30 s) is also the kernel's TCP_USER_TIMEOUT on its
connections. A task that holds the GIL (an exact accounting on a busy machine) keeps the worker
from reading its connection; with data queued for it, the kernel aborts the connection after 30 s,
the scheduler drops the worker, the worker shuts down, and a run with no worker left waits until its
timeout. The clusters a run starts take ``flows.runtime.DASK_TCP_TIMEOUT`` instead; this test holds
a real worker's GIL for about 45 s while 320 MB are queued for it, on a real local cluster.
"""

from __future__ import annotations

import math
import re
import time

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster

from flows import runtime

#: seconds the worker's GIL is held: past Dask's default 30 s, well inside the raised timeout
HOLD_S = 45.0


def _regex_seconds(n: int) -> float:
    t = time.perf_counter()
    re.match(r"(a+)+$", "a" * n + "b")  # backtracks 2^n times, holding the GIL throughout
    return time.perf_counter() - t


def _hold_gil(n: int) -> float:
    return _regex_seconds(n)


def _nbytes(x: np.ndarray) -> int:
    return int(x.nbytes)


@pytest.fixture
def restore_dask_config(monkeypatch: pytest.MonkeyPatch):
    """Dask's default timeout here, and the environment and config as they were after the test."""
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP", "unset")  # restored afterwards
    monkeypatch.delenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP")
    with dask.config.set({"distributed.comm.timeouts.tcp": "30s"}):
        yield


def test_the_runs_cluster_keeps_a_worker_that_holds_the_gil(restore_dask_config) -> None:
    runtime.task_runner("", 1, 2, "4GiB")  # what a run does before its local cluster starts
    tcp = dask.config.get("distributed.comm.timeouts.tcp")
    assert tcp != "30s"

    # the backtracking doubles per character: pick n so that the hold lasts about HOLD_S here
    n0 = 22
    base = max(min(_regex_seconds(n0) for _ in range(3)), 1e-3)
    n = n0 + max(1, math.ceil(math.log2(HOLD_S / base)))
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
        held = client.submit(_hold_gil, n, pure=False)
        time.sleep(2)  # the task has started and holds the worker's GIL
        queued = [
            client.submit(_nbytes, np.full(2_000_000, float(i)), pure=False) for i in range(20)
        ]
        seconds = held.result(timeout=180)
        total = sum(f.result(timeout=180) for f in queued)
        workers = len(client.scheduler_info()["workers"])
    assert seconds > 31.0, f"the GIL was held {seconds:.1f} s, not past Dask's default 30 s"
    assert total == 20 * 16_000_000
    assert workers == 1
