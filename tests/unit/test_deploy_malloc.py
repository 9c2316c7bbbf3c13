"""Every deploy/ recipe that starts Dask workers itself gives them glibc's trim and mmap thresholds
of the workers a run starts (``flows.runtime.dask_malloc``), as ``MALLOC_*`` variables in the
environment of ``dask worker``; and a real ``dask worker`` started that way hands them to its worker
process (without them it gets Dask's 64 KiB trim; the ``DASK_*`` form of them never arrives)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from distributed import Client, LocalCluster

from flows.runtime.dask_malloc import WORKER_MALLOC_THRESHOLD, WORKER_MALLOC_VARS
from flows.spec import load_spec
from tests._ceilings import PROCESS_CEILING_S

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
TRIM, MMAP = "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"
#: what every recipe gives its workers
VARS = {TRIM: "33554432", MMAP: "33554432"}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container.get("env", [])}


def shell_default(var: str) -> str:
    """A shell line that sets ``var`` to the workers' threshold unless it is set already."""
    return f"export {var}=${{{var}:-{VARS[var]}}}"


def test_the_fix_named_to_users_is_the_threshold_a_run_sets() -> None:
    assert WORKER_MALLOC_THRESHOLD == int(VARS[TRIM]) == 32 * 2**20
    assert WORKER_MALLOC_VARS == f"{TRIM}={VARS[TRIM]} {MMAP}={VARS[MMAP]}"
    assert dict(kv.split("=") for kv in WORKER_MALLOC_VARS.split()) == VARS


def test_compose_workers() -> None:
    (doc,) = yaml.safe_load_all((DEPLOY / "compose" / "compose.yaml").read_text())
    env = doc["services"]["dask-worker"]["environment"]
    assert {k: env.get(k) for k in VARS} == VARS
    # the worker's own environment keeps the one every dpaudit service has
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"] == "600s"


def test_kubernetes_workers() -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "daskcluster.yaml").read_text())]
    (cluster,) = [d for d in docs if d and d["kind"] == "DaskCluster"]
    containers = cluster["spec"]["worker"]["spec"]["containers"]
    assert containers
    for container in containers:
        env = env_of(container)
        assert {k: env.get(k) for k in VARS} == VARS, container["name"]


def test_slurm_worker_jobs_before_the_worker_starts() -> None:
    from dask_jobqueue import SLURMCluster

    spec = load_spec(DEPLOY / "slurm" / "spec.toml")
    kwargs = dict(spec.cluster.kwargs or {})
    with SLURMCluster(**kwargs, scheduler_options={"dashboard_address": ":0"}) as cluster:
        script = cluster.job_script()
    start = script.index("distributed.cli.dask_worker")
    for var in VARS:
        line = shell_default(var)
        assert f"{line}\n" in script, var
        assert script.index(line) < start, var


def test_local_sh_after_the_scheduler_before_the_workers() -> None:
    text = (DEPLOY / "local.sh").read_text()
    for var in VARS:
        line = f'export {var}="${{{var}:-{VARS[var]}}}"'
        assert line in text, var
        assert text.index('dask" scheduler') < text.index(line) < text.index('dask" worker'), var


def recipe_lines(recipe: str) -> list[str]:
    """The shell lines of a recipe that set the thresholds."""
    if recipe == "local.sh":
        text = (DEPLOY / "local.sh").read_text()
        return [line for line in text.splitlines() if line.startswith("export MALLOC_")]
    spec = tomllib.loads((DEPLOY / "slurm" / "spec.toml").read_text())
    prologue = spec["cluster"]["kwargs"]["job_script_prologue"]
    return [line for line in prologue if line.startswith("export MALLOC_")]


@pytest.mark.parametrize("recipe", ["local.sh", "slurm"])
@pytest.mark.parametrize("users", [None, "1048576"], ids=["unset", "users-own"])
def test_the_shell_lines_keep_a_users_own_value(recipe: str, users: str | None) -> None:
    """A recipe's lines, run by bash: the workers' thresholds, or a value set before."""
    env = {k: v for k, v in os.environ.items() if k not in VARS}
    if users is not None:
        env[TRIM] = users
    lines = recipe_lines(recipe)
    assert len(lines) == 2
    out = subprocess.run(
        ["bash", "-c", "; ".join(lines) + f'; echo "${TRIM} ${MMAP}"'],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert out == [users or VARS[TRIM], VARS[MMAP]]


# ---- a real `dask worker` (nanny) process


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Client]:
    """A scheduler in this process, with no worker of its own (loopback only)."""
    with (
        LocalCluster(
            n_workers=0,
            processes=False,
            protocol="tcp",
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _worker_thresholds(client: Client, extra_env: dict[str, str]) -> dict[str, Any]:
    """Start ``dask worker`` (a nanny and one worker process) with ``extra_env`` added to a clean
    environment, read its worker's thresholds, and stop it."""

    def _thresholds() -> dict[str, Any]:
        """The thresholds in a worker process's environment: as it runs, and as it was exec'd
        (what glibc read when the process started); run in the worker, pickled by value."""
        import os

        with open("/proc/self/environ", "rb") as f:
            initial = dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        names = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")
        return {
            "environ": tuple(os.environ.get(k) for k in names),
            "exec": tuple(initial.get(k) for k in names),
            "lowercase": initial.get("malloc_trim_threshold_"),
        }

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in VARS and not k.startswith("DASK_DISTRIBUTED__NANNY")
    }
    env.update(extra_env)
    address = str(client.scheduler_info()["address"])
    before = set(client.scheduler_info()["workers"])
    log = tempfile.TemporaryFile()  # what the nanny and its worker log, read if it fails
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "distributed.cli.dask_worker", address,
            "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + PROCESS_CEILING_S
        while not (new := set(client.scheduler_info()["workers"]) - before):
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"dask worker exited: {log.read().decode()[-2000:]}")
            assert time.monotonic() < deadline, "no worker joined"
            time.sleep(0.05)
        (worker,) = new
        return client.run(_thresholds, workers=[worker])[worker]
    finally:
        proc.terminate()  # the nanny stops its worker process
        try:
            proc.wait(timeout=PROCESS_CEILING_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the nanny and its worker
            proc.wait()
        log.close()


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc, /proc: Linux here")
def test_a_dask_worker_given_the_variables_hands_them_to_its_worker(scheduler: Client) -> None:
    got = _worker_thresholds(scheduler, VARS)
    assert got["environ"] == got["exec"] == (VARS[TRIM], VARS[MMAP])


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc, /proc: Linux here")
def test_without_them_a_worker_gets_dasks_trim(scheduler: Client) -> None:
    """The control: Dask's nanny's own 64 KiB trim and no mmap threshold."""
    got = _worker_thresholds(scheduler, {})
    assert got["environ"] == got["exec"] == ("65536", None)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc, /proc: Linux here")
def test_the_dask_config_variable_does_not_set_them(scheduler: Client) -> None:
    """``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_TRIM_THRESHOLD_`` becomes a lowercase
    key of Dask's config: the worker gets ``malloc_trim_threshold_``, which glibc ignores, and
    Dask's 64 KiB trim."""
    var = "DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_TRIM_THRESHOLD_"
    got = _worker_thresholds(scheduler, {var: VARS[TRIM]})
    assert got["exec"] == ("65536", None) and got["lowercase"] == VARS[TRIM]
