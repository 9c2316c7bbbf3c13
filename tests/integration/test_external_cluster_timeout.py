"""`dpaudit run --scheduler ADDRESS` joining a separately started `dask scheduler` and `dask worker`:
processes left at Dask's 30 s TCP timeout (``distributed.comm.timeouts.tcp``) are named in one
warning line with the fix, before the flow runs; a cluster started as docs/deploy.md asks gets none.

The runs are cut short (``cluster.timeout_s = 1``): the check comes before the flow, and a flow on a
30 s cluster would itself risk the lost worker the warning is about on a busy machine."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._ceilings import PROCESS_CEILING_S
from tests.integration._processes import Workers, dask_scheduler, dpaudit
from tests.integration._specs import tiny_spec, to_toml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TCP_VAR = "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"


#: (the scheduler's setting, the worker's setting)
SETTINGS = [("default", "default"), ("600s", "default"), ("600s", "600s")]


def env_with(setting: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", TCP_VAR)}
    if setting != "default":
        env[TCP_VAR] = setting
    return env


@pytest.fixture(params=SETTINGS, ids=["-".join(p) for p in SETTINGS])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """A `dask scheduler` and one `dask worker`, each at Dask's default TCP timeout or at 600 s;
    their settings and the scheduler's address."""
    scheduler_setting, worker_setting = request.param
    where = tmp_path / "cluster"
    where.mkdir()
    with dask_scheduler(env_with(scheduler_setting), where) as address:
        workers = Workers(address, env_with(worker_setting), where)
        try:
            workers.start(1)  # waits until the scheduler has it
            yield scheduler_setting, worker_setting, address
        finally:
            workers.close()


def test_joining_a_cluster_at_the_default_tcp_timeout_warns_once(
    prefect_harness: None, cluster: tuple[str, str, str], tmp_path: Path
) -> None:
    from prefect.settings import PREFECT_API_URL

    scheduler_setting, worker_setting, address = cluster
    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "DPAUDIT_LOG_DIR": str(tmp_path / "logs"),
    }
    spec = tmp_path / "spec.toml"
    spec.write_text(to_toml(tiny_spec(cluster={"timeout_s": 1})))
    cmd = [*dpaudit(), "run", str(spec), "--store", "a.zarr", "--no-report", "--scheduler", address]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr[-3000:]  # the flow outlived cluster.timeout_s
    assert lines[-1].startswith("dpaudit: error: the run failed: "), done.stderr
    warnings = [line for line in lines if "warning" in line.lower()]
    if (scheduler_setting, worker_setting) == ("600s", "600s"):
        assert lines == lines[-1:], done.stderr  # the error line only
        return
    assert lines == [*warnings, lines[-1]] and len(warnings) == 1, done.stderr
    who = (
        f"the Dask scheduler at {address} and its workers (1 of 1) keep"
        if scheduler_setting == "default"
        else f"the workers (1 of 1) of the Dask scheduler at {address} keep"
    )
    assert warnings[0] == (
        f"dpaudit: warning: {who} Dask's 30 s TCP timeout (distributed.comm.timeouts.tcp): a "
        "worker whose task holds the GIL longer on a busy machine is dropped; start the "
        "scheduler and workers with DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP=600s"
    )
