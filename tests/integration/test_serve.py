"""`dpaudit serve` against a real `prefect server` (SQLite in a temporary PREFECT_HOME): the deployment
and its cron schedule are registered, a triggered run reaches COMPLETED and writes its store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from tests._ceilings import PREFECT_START_CEILING_S, PROCESS_CEILING_S
from tests.integration._processes import free_port
from tests.integration._specs import tiny_spec, to_toml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = to_toml(
    tiny_spec(
        audit={"seed": 41},
        output={"store": "runs/nightly-{date}.zarr", "report": "runs/nightly-{date}.html"},
        cluster={"n_workers": 1},
    )
)


def wait_for(what: str, check: Any, timeout: float, procs: list[subprocess.Popen[bytes]]) -> Any:
    t0 = time.monotonic()
    last = "no answer"
    while time.monotonic() - t0 < timeout:
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{p.args!r} exited with {p.returncode} while waiting: {what}")
        try:
            out = check()
        except Exception as exc:  # not up yet
            last, out = f"{type(exc).__name__}: {exc}"[:500], None
        if out:
            return out
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last})")


def stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


@dataclass(frozen=True)
class PrefectServer:
    """A running ``prefect server``: its API URL, the environment it runs in (this process's
    without PREFECT_API_URL, its settings added) and a client of its API."""

    api: str
    env: dict[str, str]
    http: Any


def start_prefect_server(
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
    log: IO[bytes],
    port: int | None = None,
    **settings: str,
) -> PrefectServer:
    """``prefect server start`` on ``port`` (a free one if None) of 127.0.0.1, its home in
    ``tmp_path``, its output to ``log``, ``settings`` added to its environment; appended to
    ``procs`` (the caller stops them) and returned once healthy."""
    import httpx

    port = free_port() if port is None else port
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        **settings,
    )
    prefect = Path(sys.executable).with_name("prefect")
    server = subprocess.Popen(
        [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    procs.append(server)
    http = httpx.Client(base_url=api, timeout=10)
    wait_for(
        "the server", lambda: http.get("/health").status_code == 200, PREFECT_START_CEILING_S, procs
    )
    return PrefectServer(api, env, http)


def test_serve_registers_a_cron_deployment_and_runs_it(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    (tmp_path / "nightly.toml").write_text(SPEC)
    log_server = (tmp_path / "server.log").open("wb")
    log_serve = (tmp_path / "serve.log").open("wb")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        server = start_prefect_server(tmp_path, procs, log_server)
        api, env, http = server.api, server.env, server.http

        serve_env = {**env, "PREFECT_API_URL": api}
        exe = bindir / "dpaudit"
        serving = subprocess.Popen(
            [str(exe), "serve", "nightly.toml", "--cron", "0 3 * * *", "--no-report"],
            cwd=tmp_path, env=serve_env, stdout=log_serve, stderr=subprocess.STDOUT,
        )  # fmt: skip
        procs.append(serving)

        def deployment() -> dict[str, Any] | None:
            r = http.post("/deployments/filter", json={})
            found = [d for d in r.json() if d["name"] == "nightly"]
            return found[0] if found else None

        dep = wait_for("the deployment", deployment, PROCESS_CEILING_S, procs)
        assert [s["schedule"]["cron"] for s in dep["schedules"]] == ["0 3 * * *"]
        assert [s["schedule"]["timezone"] for s in dep["schedules"]] == ["UTC"]
        assert dep["schedules"][0]["active"] is True
        assert dep["parameters"]["audit"]["seed"] == 41
        assert dep["parameters"]["report"] is False
        flow = http.get(f"/flows/{dep['flow_id']}").json()
        assert flow["name"] == "dpaudit-scheduled-audit"

        def trigger() -> dict[str, Any] | None:
            r = http.post(f"/deployments/{dep['id']}/create_flow_run", json={})
            r.raise_for_status()  # retried while SQLite is busy
            return dict(r.json())

        run = wait_for("a triggered run to be created", trigger, PROCESS_CEILING_S, procs)

        def finished() -> dict[str, Any] | None:
            r = http.get(f"/flow_runs/{run['id']}")
            r.raise_for_status()
            fr = r.json()
            return (
                fr if fr["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None
            )

        fr = wait_for("the triggered run", finished, PROCESS_CEILING_S, procs)
        assert fr["state_type"] == "COMPLETED", (tmp_path / "serve.log").read_text()[-3000:]
        stores = sorted(p.name for p in (tmp_path / "runs").iterdir())
        assert len(stores) == 1 and stores[0].startswith("nightly-20"), stores
        import zarr

        attrs = zarr.open_group(str(tmp_path / "runs" / stores[0]), mode="r").attrs
        assert attrs["prefect_api"] == "server" and attrs["dask_scheduler"] == "LocalCluster"
        # the audit ran as a subflow of the scheduled run, and nothing was left Running
        subs = http.post(
            "/flow_runs/filter",
            json={"flow_runs": {"parent_flow_run_id": {"any_": [run["id"]]}}},
        ).json()
        assert [s["state_type"] for s in subs] == ["COMPLETED"]
    finally:
        for p in reversed(procs):
            stop(p)
        log_server.close()
        log_serve.close()
