"""Every deploy/ recipe that starts a Dask scheduler or workers itself gives them a 600 s TCP
timeout (``distributed.comm.timeouts.tcp``): at Dask's 30 s a worker whose task holds the GIL
longer on a busy machine is dropped, and a run that joins such a cluster cannot change it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flows.runtime.dask_tcp import DASK_TCP_TIMEOUT, TCP_TIMEOUT_FIX
from flows.spec import load_spec

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VAR = "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container.get("env", [])}


def test_the_fix_named_to_users_is_the_timeout_a_run_sets() -> None:
    assert TCP_TIMEOUT_FIX == f"{VAR}={DASK_TCP_TIMEOUT}" and DASK_TCP_TIMEOUT == "600s"


def test_compose_scheduler_and_workers() -> None:
    (doc,) = yaml.safe_load_all((DEPLOY / "compose" / "compose.yaml").read_text())
    for name in ("dask-scheduler", "dask-worker"):
        assert doc["services"][name]["environment"][VAR] == DASK_TCP_TIMEOUT, name


def test_kubernetes_scheduler_and_workers() -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "daskcluster.yaml").read_text())]
    (cluster,) = [d for d in docs if d and d["kind"] == "DaskCluster"]
    for role in ("scheduler", "worker"):
        for container in cluster["spec"][role]["spec"]["containers"]:
            assert env_of(container).get(VAR) == DASK_TCP_TIMEOUT, role


def test_slurm_worker_jobs_and_the_flow_job() -> None:
    from dask_jobqueue import SLURMCluster

    spec = load_spec(DEPLOY / "slurm" / "spec.toml")
    kwargs = dict(spec.cluster.kwargs or {})
    with SLURMCluster(**kwargs, scheduler_options={"dashboard_address": ":0"}) as cluster:
        script = cluster.job_script()
    assert f"export {TCP_TIMEOUT_FIX}\n" in script  # before the worker starts
    assert script.index(f"export {VAR}") < script.index("distributed.cli.dask_worker")
    sbatch = (DEPLOY / "slurm" / "dpaudit.sbatch").read_text()
    assert f'export {VAR}="${{{VAR}:-{DASK_TCP_TIMEOUT}}}"\n' in sbatch


def test_local_sh_before_the_scheduler_starts() -> None:
    text = (DEPLOY / "local.sh").read_text()
    line = f'export {VAR}="${{{VAR}:-{DASK_TCP_TIMEOUT}}}"'
    assert line in text
    assert text.index(line) < text.index('dask" scheduler')
