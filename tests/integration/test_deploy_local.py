"""`deploy/local.sh` as a user runs it, on ports of its own (`DPAUDIT_PREFECT_PORT`,
`DPAUDIT_DASK_PORT`): the Prefect server answers there and its UI is told that API address (not
Prefect's default 4200, where the UI would say it cannot connect), and the Dask scheduler and
worker it starts keep a busy worker's connections (a 600 s TCP timeout, no warning to a run)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from flows.runtime.dask_tcp import tcp_timeout_warning
from tests._ceilings import PREFECT_START_CEILING_S, PROCESS_CEILING_S
from tests.integration._processes import free_port, wait_workers
from tests.integration.test_serve import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
]

LOCAL_SH = Path(__file__).resolve().parents[2] / "deploy" / "local.sh"


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the script's process group (the server, scheduler and workers it started), then
    SIGKILL what is left of it once the script has ended or after 30 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            continue


def test_local_sh_on_its_own_ports(tmp_path: Path) -> None:
    import httpx

    prefect_port, dask_port = free_port(), free_port()
    while dask_port == prefect_port:
        dask_port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PREFECT_API_URL", "PREFECT_UI_", "DASK_DISTRIBUTED__COMM__"))
    }
    env.update(
        VIRTUAL_ENV=str(Path(sys.executable).parent.parent),  # the script's bin/prefect, bin/dask
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        DPAUDIT_PREFECT_PORT=str(prefect_port),
        DPAUDIT_DASK_PORT=str(dask_port),
        DPAUDIT_WORKER_MEMORY="1GiB",
    )
    log = (tmp_path / "local.log").open("wb")
    proc = subprocess.Popen(
        ["bash", str(LOCAL_SH), "1"], cwd=tmp_path, env=env, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{prefect_port}"
        http = httpx.Client(base_url=base, timeout=10)
        wait_for(
            "the server",
            lambda: http.get("/api/health").status_code == 200,
            PREFECT_START_CEILING_S,
            [proc],
        )
        settings = wait_for(
            "the UI settings",
            lambda: http.get("/ui-settings").json(),
            PREFECT_START_CEILING_S,
            [proc],
        )
        assert settings["api_url"] == f"{base}/api", settings
        address = f"tcp://127.0.0.1:{dask_port}"
        wait_for(
            "the scheduler", lambda: wait_workers(address, 1) is not None, PROCESS_CEILING_S, [proc]
        )

        def tcp() -> object:  # in the scheduler and the worker
            import dask

            return dask.config.get("distributed.comm.timeouts.tcp")

        from distributed import Client

        with Client(address, timeout=30, set_as_default=False) as client:
            assert client.run_on_scheduler(tcp) == "600s"
            assert list(client.run(tcp).values()) == ["600s"]
        assert tcp_timeout_warning(address) is None  # what a run joining it checks
    finally:
        stop_group(proc)
        log.close()
