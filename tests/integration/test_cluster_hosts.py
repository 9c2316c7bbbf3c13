"""The deploy recipes' production audit on a cluster of separately started processes on hosts of
their own: a Prefect server on the submitting host, a Dask scheduler on a second host and one
worker on each of two more, each host a network namespace with its own address on one bridge (the
traffic stays on this machine). The run is the recipes' spec (`deploy/compose/nightly.toml`) cut
to one small state and one replicate; it publishes a store that verifies, a report, and a flow
run the server records as completed."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._hosts import can_make_hosts, cluster_on_hosts
from tests.integration._processes import dpaudit, own_environment
from tests.integration._specs import to_toml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def recipe_spec(tmp_path: Path, scheduler: str) -> Path:
    """The recipes' production audit on ST13 of the seed-7 spine (247 k people), one replicate,
    small EPL and accounting settings, no MPL, written to ``tmp_path``."""
    spec = tomllib.loads((DEPLOY / "compose" / "nightly.toml").read_text())
    spec["audit"].update(replicates=1, seed=11)
    spec["population"].update(spine_states=["ST13"], seed=7)
    spec["epl"] = {"n_boot": 20, "n_null": 20}
    spec["accounting"] = {"deltas": [1e-10], "eps_grid_points": 20, "composed": False}
    spec["mpl"] = {"enabled": False}
    spec["output"] = {"store": "hosts.zarr", "report": "hosts.html"}
    spec["cluster"] = {"scheduler": scheduler, "timeout_s": PROCESS_CEILING_S}
    path = tmp_path / "hosts.toml"
    path.write_text(to_toml(spec))
    return path


def test_the_recipes_audit_on_separately_started_hosts(tmp_path: Path) -> None:
    why = can_make_hosts()
    if why:
        pytest.skip(why)
    env = {k: v for k, v in own_environment().items() if k != "PREFECT_API_URL"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(DEPLOY.parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    env["DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"] = "600s"  # as the recipes start them
    with cluster_on_hosts(tmp_path, env, workers=2, timeout=PROCESS_CEILING_S) as cluster:
        net, http, scheduler = cluster.hosts, cluster.http, cluster.scheduler
        assert [w.rsplit(":", 1)[0] for w in cluster.workers] == [
            f"tcp://{net['w1'][1]}",
            f"tcp://{net['w2'][1]}",
        ]  # each on its own host
        env["PREFECT_API_URL"] = cluster.api  # the run reports to the server
        spec = recipe_spec(tmp_path, scheduler)
        with (tmp_path / "run.log").open("wb") as log:
            run = subprocess.run(
                [*dpaudit(), "run", str(spec)], cwd=tmp_path, env=env, stdout=log,
                stderr=subprocess.STDOUT, timeout=PROCESS_CEILING_S,
            )  # fmt: skip
        text = (tmp_path / "run.log").read_text()
        assert run.returncode == 0, text[-3000:]
        url = str(tmp_path / "hosts.zarr")
        verified = subprocess.run(
            [*dpaudit(), "verify", url], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=PROCESS_CEILING_S,
        )  # fmt: skip
        assert verified.returncode == 0, verified.stdout + verified.stderr
        attrs = store.root_attrs(url)
        assert attrs["dask_scheduler"] == scheduler and int(attrs["n_workers"]) == 2
        assert (tmp_path / "hosts.html").stat().st_size > 0
        runs = http.post("/flow_runs/filter", json={"limit": 10}).json()
        assert [r["state_type"] for r in runs] == ["COMPLETED"], runs
        tasks = http.post("/task_runs/filter", json={"limit": 200}).json()
        names = {t["name"].split(" ")[0] for t in tasks}
        assert "production" in names, sorted(names)  # the sparse TopDown ran on the workers
