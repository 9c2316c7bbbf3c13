"""A cluster class by import path: its servers listen on loopback unless the spec says otherwise
(jobqueue classes: the dashboard only, their scheduler must be reachable from batch jobs), and a
keyword argument it does not take is one line naming it and the class, Dask's own report of the
failure going to the run's log file, not the console."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from flows.runtime.cluster import ClusterConfigError, cluster_class_kwargs, cluster_runner
from flows.spec.cluster import ClusterSection
from tests._ceilings import PROCESS_CEILING_S


def listening() -> set[tuple[str, int]]:
    procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
    out = set()
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except psutil.Error:  # a process that ended meanwhile
            continue
        out |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return out


def test_local_cluster_class_listens_on_loopback_only() -> None:
    section = ClusterSection.model_validate(
        {"class": "distributed.LocalCluster", "kwargs": {"n_workers": 1, "threads_per_worker": 1}}
    )
    before = listening()  # e.g. a cluster another test of this session left running
    with cluster_runner(section) as runner:
        new = listening() - before
        assert runner.address.startswith("tcp://127.0.0.1:")
    assert len(new) >= 3, new  # scheduler, its HTTP server (dashboard), nanny and worker
    assert {ip for ip, _ in new} == {"127.0.0.1"}, new
    assert 8787 not in {port for _, port in new}


def test_jobqueue_class_gets_a_loopback_dashboard_and_keeps_its_scheduler_interface() -> None:
    from dask_jobqueue import SLURMCluster

    kwargs = cluster_class_kwargs(SLURMCluster, {"cores": 1, "memory": "1GB"})
    assert kwargs == {
        "cores": 1,
        "memory": "1GB",
        "scheduler_options": {"dashboard_address": "127.0.0.1:0"},
    }
    before = listening()
    with SLURMCluster(**kwargs) as cluster:  # no workers: no job is submitted
        new = listening() - before
        dashboard = cluster.scheduler_info["services"]["dashboard"]
    assert ("127.0.0.1", dashboard) in new
    assert {ip for ip, port in new if port == dashboard} == {"127.0.0.1"}


@pytest.mark.parametrize(
    ("cls_path", "given", "added"),
    [
        ("distributed.LocalCluster", {}, {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}),
        ("distributed.LocalCluster", {"host": "0.0.0.0", "dashboard_address": ":0"}, {}),
        ("distributed.LocalCluster", {"interface": "lo"}, {"dashboard_address": "127.0.0.1:0"}),
        ("distributed.LocalCluster", {"processes": False}, {
            "dashboard_address": "127.0.0.1:0"}),
        (
            "dask_jobqueue.SLURMCluster",
            {"scheduler_options": {"interface": "ib0"}},
            {"scheduler_options": {"interface": "ib0", "dashboard_address": "127.0.0.1:0"}},
        ),
        ("dask_jobqueue.SLURMCluster", {"scheduler_options": {"dashboard_address": ":9000"}}, {}),
    ],
)  # fmt: skip
def test_the_specs_own_kwargs_win(
    cls_path: str, given: dict[str, Any], added: dict[str, Any]
) -> None:
    from flows.spec.cluster import import_cluster_class

    assert cluster_class_kwargs(import_cluster_class(cls_path), given) == {**given, **added}


def test_a_kwarg_no_worker_takes_is_named_with_the_class() -> None:
    section = ClusterSection.model_validate(
        {
            "class": "distributed.LocalCluster",
            "kwargs": {"n_workers": 1, "processes": False, "n_wrkers": 2},
        }
    )
    with pytest.raises(ClusterConfigError) as err, cluster_runner(section):
        pass  # pragma: no cover - the cluster does not start
    msg = str(err.value)
    assert msg.splitlines() == [msg]
    assert msg.startswith("cluster.class = 'distributed.LocalCluster' did not start")
    assert "takes no argument 'n_wrkers'; remove or rename it in cluster.kwargs" in msg


CONSOLE = textwrap.dedent(
    """
    import sys
    from flows.runtime.cluster import apply_prefect_defaults
    apply_prefect_defaults()  # as the CLI does, before Prefect and Dask are imported
    from flows.runtime.cluster import ClusterConfigError, cluster_runner
    from flows.spec.cluster import ClusterSection

    section = ClusterSection.model_validate(
        {"class": "distributed.LocalCluster", "kwargs": {"n_workers": 1, "n_wrkers": 2}}
    )
    try:
        with cluster_runner(section):
            pass
    except ClusterConfigError as exc:
        print(f"dpaudit: error: {exc}", file=sys.stderr)
    """
)


def test_a_failed_cluster_start_says_one_line_on_the_console(tmp_path: Path) -> None:
    """Worker processes (the kwarg reaches them) and the nanny log their tracebacks: to the log."""
    inherited = ("DPAUDIT_RUN_LOG", "DASK_LOGGING", "PREFECT_LOGGING_CONFIG_PATH")
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    env["DPAUDIT_LOG_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE],
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "takes no argument 'n_wrkers'" in lines[0], lines[0]
    (log,) = tmp_path.glob("dpaudit-*.log")
    text = log.read_text()
    assert "unexpected keyword argument 'n_wrkers'" in text and "distributed.nanny" in text
