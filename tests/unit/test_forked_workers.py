"""A local cluster started by dpaudit (``runtime.cluster.forked_workers``) forks its workers from
one process that has already imported what their tasks need, and stops that process with the
cluster; a user's own choice of start method is kept."""

from __future__ import annotations

import os
import sys
from multiprocessing import forkserver
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from flows.runtime.cluster import _START_METHOD_ENV, forked_workers

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="forkserver start method: Linux here"
)


def _worker_state() -> tuple[bool, int]:
    return "flows.audit.tasks" in sys.modules, os.getppid()


def _cluster() -> LocalCluster:
    return LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )  # fmt: skip


def test_workers_are_forked_preloaded_and_the_server_stops_with_the_cluster() -> None:
    with forked_workers(), _cluster() as cluster, Client(cluster) as client:
        (preloaded, parent), *_ = client.run(_worker_state).values()
        server = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
        assert preloaded  # imported before the worker existed: inherited from its parent
        assert server is not None and parent == server != os.getpid()  # by the forkserver
    assert forkserver._forkserver._forkserver_pid is None  # type: ignore[attr-defined]


def test_a_start_method_set_by_the_user_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_START_METHOD_ENV, "spawn")
    with forked_workers(), _cluster() as cluster, Client(cluster) as client:
        (_, parent), *_ = client.run(_worker_state).values()
        assert parent == os.getpid()  # spawned by its nanny, here


def test_the_server_is_ended_without_unwinding_its_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Its end does not wait for the server's interpreter to unwind (atexit, module teardown:
    ≈ 0.9 s with Prefect and Dask imported): a probe preloaded beside the workers' modules
    records a normal exit, and none is recorded. Without the signal the probe writes the
    server's pid (multiprocessing's own stop closes a pipe and waits for a normal exit)."""
    marker = tmp_path / "exits.txt"
    monkeypatch.setenv("DPAUDIT_TEST_FORKSERVER_EXIT", str(marker))
    server = forkserver._forkserver
    monkeypatch.setattr(server, "_preload_modules", ["tests.unit._forkserver_exit_probe"])
    with forked_workers(), _cluster() as cluster, Client(cluster) as client:
        (_, parent), *_ = client.run(_worker_state).values()
        assert parent == server._forkserver_pid  # type: ignore[attr-defined]
        assert client.run(lambda: "tests.unit._forkserver_exit_probe" in sys.modules)
    assert server._forkserver_pid is None  # type: ignore[attr-defined]  # stopped and reaped
    exits = marker.read_text().split() if marker.exists() else []
    assert str(parent) not in exits, exits
