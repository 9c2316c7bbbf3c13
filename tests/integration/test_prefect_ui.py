"""What a person watching the Prefect UI sees, read back through the API of a real `prefect server`
(SQLite in a temporary PREFECT_HOME): a `dpaudit serve` deployment's typed parameter form, its
triggered run's tags, name and artifacts (at-a-glance table, store with `verify`, report link), an
edited bad value refused with the CLI's message, the alerts of ``deploy/alerts.py`` (a failed and a
late run, delivered to a webhook), and `dpaudit run`'s own flow run alike."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests._ceilings import PROCESS_CEILING_S
from tests.integration._specs import tiny_spec, to_toml
from tests.integration.test_serve import free_port, start_prefect_server, stop, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = tiny_spec(
    audit={"seed": 43, "tags": ["nightly", "team-a"]},
    output={"store": "runs/ui-{date}.zarr", "report": "runs/ui-{date}.html"},
    cluster={"n_workers": 1},
)
CLI_SPEC = tiny_spec(
    audit={"seed": 44, "neighbours": "bounded"},
    output={"store": "cli/audit.zarr", "report": "cli/audit.html"},
    cluster={"n_workers": 1},
)
TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def _check_table_against_store(rows: list[dict[str, str]], store: Path) -> None:
    """Each level's Bureau ε and exact ε in the table are the store's, at accounting.headline_delta."""
    import xarray as xr

    acc = xr.open_zarr(store, group="accounting", consolidated=True, chunks=None)
    j = [float(d) for d in acc["delta"].values].index(1e-10)  # the spec's default headline δ
    levels = [str(g) for g in acc["geolevel"].values]
    assert [r["level"] for r in rows] == levels
    for i, r in enumerate(rows):
        bureau = float(acc["eps_bureau"].values[i, j])
        assert math.isclose(float(r["Bureau ε"]), bureau, rel_tol=1e-3), (r, bureau)
        lo, hi = (float(acc[v].values[i, j]) for v in ("eps_exact_lower", "eps_exact_upper"))
        exact = float(r["exact ε"].split()[0].strip("[],"))
        assert lo * (1 - 1e-3) <= exact <= hi * (1 + 1e-3), (r, lo, hi)
        assert set(r) >= {"EPL (interval)", "EPL floor", "EPL status", "MPL bound"}


class Webhook(BaseHTTPRequestHandler):
    """Where the alerts go: each POSTed JSON body is kept."""

    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


ALERTS = """
import sys
from prefect.blocks.notifications import CustomWebhookNotificationBlock
CustomWebhookNotificationBlock(
    name="dpaudit-alerts", url=sys.argv[1], json_data={"subject": "{{subject}}", "body": "{{body}}"},
    allow_private_urls=True,
).save("dpaudit-alerts")
sys.path.insert(0, sys.argv[2])
from alerts import create_alerts
print(create_alerts("custom-webhook/dpaudit-alerts"))
"""


def test_prefect_ui_artifacts_tags_form_and_refusal(tmp_path: Path) -> None:
    import httpx

    hook = ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{hook.server_address[1]}/alert"

    bindir = Path(sys.executable).parent
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    (tmp_path / "nightly.toml").write_text(to_toml(SPEC))
    log_server = (tmp_path / "server.log").open("wb")
    log_serve = (tmp_path / "serve.log").open("wb")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        server = start_prefect_server(
            tmp_path, procs, log_server, port,
            PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS="5",  # (default 15 s)
            PREFECT_UI_API_URL=api,  # the UI's API on this port, not Prefect's 4200 (deploy/local.sh)
        )  # fmt: skip
        env, http = server.env, server.http
        ui = httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=10).json()
        assert ui["api_url"] == api  # what the UI in a browser connects to
        served_env = {**env, "PREFECT_API_URL": api}
        serving = subprocess.Popen(
            [str(bindir / "dpaudit"), "serve", "nightly.toml", "--cron", "0 3 * * *"],
            cwd=tmp_path, env=served_env, stdout=log_serve, stderr=subprocess.STDOUT,
        )  # fmt: skip
        procs.append(serving)

        def deployment() -> dict[str, Any] | None:
            found = [d for d in http.post("/deployments/filter", json={}).json()]
            return found[0] if found else None

        dep = wait_for("the deployment", deployment, PROCESS_CEILING_S, procs)

        # the run form: one typed field group per spec section, bounds and meanings included
        schema = dep["parameter_openapi_schema"]
        assert list(schema["properties"]) == [
            *("audit", "population", "release", "simulation", "epl", "accounting", "mpl"),
            *("output", "cluster", "report"),
        ]
        audit_def = schema["definitions"]["AuditSection"]["properties"]
        assert audit_def["replicates"]["type"] == "integer"
        assert audit_def["replicates"]["exclusiveMinimum"] == 0
        assert "simulated releases" in audit_def["replicates"]["description"]
        assert audit_def["neighbours"]["enum"] == ["add_remove", "bounded"]
        assert audit_def["tags"]["items"]["type"] == "string"
        assert "headline" in schema["definitions"]["AccountingSection"]["properties"][
            "headline_delta"
        ].get("description", "")
        assert dep["parameters"]["audit"]["seed"] == 43
        assert {"dpaudit", "release:allocation", "nightly"} <= set(dep["tags"])

        # alerts: a notification block (a webhook) and the two automations of deploy/alerts.py
        deploy_dir = Path(__file__).resolve().parents[2] / "deploy"
        made = subprocess.run(
            [sys.executable, "-c", ALERTS, hook_url, str(deploy_dir)],
            cwd=tmp_path, env=served_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr[-3000:]

        def create(parameters: dict[str, Any]) -> dict[str, Any]:
            def go() -> dict[str, Any]:
                r = http.post(
                    f"/deployments/{dep['id']}/create_flow_run", json={"parameters": parameters}
                )
                r.raise_for_status()  # retried while SQLite is busy
                return dict(r.json())

            return dict(wait_for("a flow run to be created", go, PROCESS_CEILING_S, procs))

        def finished(run: dict[str, Any], timeout: float) -> dict[str, Any]:
            def done() -> dict[str, Any] | None:
                fr = http.get(f"/flow_runs/{run['id']}").json()
                return fr if fr["state_type"] in TERMINAL else None

            return dict(wait_for(f"flow run {run['id']}", done, timeout, procs))

        # a value edited in the form that the spec refuses: the run fails at once, with the CLI's line
        bad_release = {**dep["parameters"]["release"], "kind": "gdpc"}
        bad = finished(create({"release": bad_release}), 120)
        assert bad["state_type"] == "FAILED"
        bad_toml = to_toml({**SPEC, "release": {"kind": "gdpc"}})
        (tmp_path / "bad.toml").write_text(bad_toml)
        cli = subprocess.run(
            [str(bindir / "dpaudit"), "run", "bad.toml"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S,
        )  # fmt: skip
        assert cli.returncode == 2
        cli_line = cli.stderr.strip().splitlines()[-1]
        assert cli_line.startswith("dpaudit: error: invalid spec 'bad.toml': ")
        detail = cli_line.removeprefix("dpaudit: error: invalid spec 'bad.toml': ")
        message = bad["state"]["message"]
        assert message == f"dpaudit: error: invalid parameters of deployment 'nightly': {detail}"
        assert not (tmp_path / "runs").exists()  # nothing written

        def alert(what: str) -> dict[str, Any] | None:
            found = [a for a in Webhook.received if what in a["subject"]]
            return found[0] if found else None

        failed = wait_for(
            "the failure alert", lambda: alert(f"{bad['name']} failed"), PROCESS_CEILING_S, procs
        )
        assert message in failed["body"] and "deployment: nightly" in failed["body"]

        # a good run: tags, names and artifacts
        fr = finished(create({}), 400)
        assert fr["state_type"] == "COMPLETED", (tmp_path / "serve.log").read_text()[-3000:]
        expected_tags = {
            "dpaudit",
            "allocation:dhcp_20220825_paper",
            "release:allocation",
            "population:synthetic",
            "neighbours:add_remove",
            "nightly",
            "team-a",
        }
        assert expected_tags <= set(fr["tags"])
        subs = http.post(
            "/flow_runs/filter", json={"flow_runs": {"parent_flow_run_id": {"any_": [fr["id"]]}}}
        ).json()
        assert len(subs) == 1 and expected_tags <= set(subs[0]["tags"])
        run_id = fr["name"].rsplit(" · ", 1)[-1]
        assert fr["name"] == (
            "scheduled audit allocation dhcp_20220825_paper persons/US on synthetic, add_remove"
            f" · {run_id}"
        )
        assert subs[0]["name"] == fr["name"].removeprefix("scheduled ")
        stores = sorted((tmp_path / "runs").glob("ui-*.zarr"))
        assert len(stores) == 1
        import zarr

        assert zarr.open_group(str(stores[0]), mode="r").attrs["run_id"] == run_id

        arts = http.post(
            "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [fr["id"]]}}}
        ).json()
        by_key = {a["key"]: a for a in arts}
        assert set(by_key) == {
            f"audit-{run_id}-at-a-glance",
            f"audit-{run_id}-store",
            f"audit-{run_id}-report",
        }
        table = by_key[f"audit-{run_id}-at-a-glance"]
        assert table["type"] == "table"
        assert "δ = 1e-10" in table["description"]
        _check_table_against_store(json.loads(table["data"]), stores[0])
        store_md = by_key[f"audit-{run_id}-store"]["data"]
        assert str(stores[0].resolve()) in store_md or stores[0].name in store_md
        assert "verify: ok" in store_md
        report = sorted((tmp_path / "runs").glob("ui-*.html"))[0]
        # not served (no output.report_url): its path and how to open it, no file:// link that a
        # browser refuses from the UI (tests/unit/test_report_link.py follows a served one)
        report_md = by_key[f"audit-{run_id}-report"]["data"]
        assert str(report.resolve()) in report_md and "file:" not in report_md
        assert "output.report_url" in report_md
        stop(serving)
        procs.remove(serving)

        # a scheduled run that nobody picks up (the serving process is gone) turns Late: alerted
        from datetime import UTC, datetime, timedelta

        past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
        late = http.post(
            f"/deployments/{dep['id']}/create_flow_run",
            json={"state": {"type": "SCHEDULED", "state_details": {"scheduled_time": past}}},
        ).json()
        late_alert = wait_for(
            "the late alert", lambda: alert(f"{late['name']} is late"), 120, procs
        )
        assert "deployment: nightly" in late_alert["body"]

        # `dpaudit run` against the same server: its audit flow run is tagged, named and annotated
        (tmp_path / "cli.toml").write_text(to_toml(CLI_SPEC))
        out = subprocess.run(
            [str(bindir / "dpaudit"), "run", "cli.toml"],
            cwd=tmp_path, env=served_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        fr_id = str(
            zarr.open_group(str(tmp_path / "cli/audit.zarr"), mode="r").attrs["prefect_flow_run_id"]
        )
        cli_run = http.get(f"/flow_runs/{fr_id}").json()
        assert {"dpaudit", "neighbours:bounded", "population:synthetic"} <= set(cli_run["tags"])
        cli_id = cli_run["name"].rsplit(" · ", 1)[-1]
        assert cli_run["name"].startswith("audit allocation dhcp_20220825_paper persons/US")
        arts = http.post(
            "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [fr_id]}}}
        ).json()
        assert {a["key"] for a in arts} == {
            f"audit-{cli_id}-at-a-glance",
            f"audit-{cli_id}-store",
            f"audit-{cli_id}-report",
        }
        rows = json.loads(next(a for a in arts if a["type"] == "table")["data"])
        _check_table_against_store(rows, tmp_path / "cli/audit.zarr")
    finally:
        hook.shutdown()
        for p in reversed(procs):
            stop(p)
        log_server.close()
        log_serve.close()
