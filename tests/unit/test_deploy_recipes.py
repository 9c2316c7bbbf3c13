"""The deploy/ recipes, checked without Docker, Kubernetes or Slurm: structure, loopback binding,
credentials from the environment, and specs that dpaudit accepts."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from flows.audit.scheduled import check_cron
from flows.spec import load_spec as _load_spec
from flows.spec.model import AuditSpec

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
#: the spec each recipe starts
RECIPE_SPECS = ("compose/nightly.toml", "kubernetes/spec.toml", "slurm/spec.toml")


@functools.cache
def load_spec(path: Path) -> AuditSpec:
    """A recipe's spec, loaded once (a full-US production spec plans the spine when it loads)."""
    return _load_spec(path)


def load_yaml(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_compose_services_ports_and_credentials() -> None:
    (doc,) = load_yaml(DEPLOY / "compose" / "compose.yaml")
    services = doc["services"]
    assert set(services) == {
        "postgres",
        "prefect-server",
        "dask-scheduler",
        "dask-worker",
        "runner",
    }
    for name, svc in services.items():
        for dep in svc.get("depends_on", []):
            assert dep in services, (name, dep)
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)  # published on loopback only
    assert "ports" not in services["postgres"]  # the database is reachable from the network only
    env = services["prefect-server"]["environment"]
    url = env["PREFECT_SERVER_DATABASE_CONNECTION_URL"]
    assert url.startswith("postgresql+asyncpg://prefect:${POSTGRES_PASSWORD:?")
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD"
    )
    assert services["prefect-server"]["command"][:3] == ["prefect", "server", "start"]
    # every dpaudit process reports to the server and writes to the one results volume
    for name in ("dask-scheduler", "dask-worker", "runner"):
        svc = services[name]
        assert svc["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api", name
        assert any(str(v).startswith("results:/results") for v in svc["volumes"]), name
    worker = services["dask-worker"]["command"]
    assert worker[:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    runner = services["runner"]["command"]
    assert runner[:2] == ["dpaudit", "serve"]
    check_cron(runner[runner.index("--cron") + 1], runner[runner.index("--timezone") + 1])
    mount = next(v for v in services["runner"]["volumes"] if v.endswith(":ro"))
    spec = load_spec(DEPLOY / "compose" / mount.split(":")[0])
    assert urlparse(spec.cluster.scheduler).hostname == "dask-scheduler"
    assert spec.output.store.startswith("/results/") and "{date}" in spec.output.store


def test_kubernetes_dask_operator_manifests() -> None:
    docs = {d["kind"]: d for d in load_yaml(DEPLOY / "kubernetes" / "daskcluster.yaml")}
    assert set(docs) == {"DaskCluster", "DaskAutoscaler", "PersistentVolumeClaim"}
    cluster = docs["DaskCluster"]
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    name = cluster["metadata"]["name"]
    assert docs["DaskAutoscaler"]["spec"]["cluster"] == name
    sched = cluster["spec"]["scheduler"]
    assert sched["service"]["type"] == "ClusterIP"
    assert sched["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    (worker,) = cluster["spec"]["worker"]["spec"]["containers"]
    assert worker["args"][:2] == ["dask", "worker"]
    assert {e["name"] for e in worker["env"]} == {
        "PREFECT_API_URL",
        "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_MMAP_THRESHOLD_",
    }
    claim = docs["PersistentVolumeClaim"]["metadata"]["name"]
    volumes = cluster["spec"]["worker"]["spec"]["volumes"]
    assert volumes[0]["persistentVolumeClaim"]["claimName"] == claim
    # the spec points at the operator's scheduler service, "<cluster>-scheduler"
    spec = load_spec(DEPLOY / "kubernetes" / "spec.toml")
    assert urlparse(spec.cluster.scheduler).hostname.startswith(f"{name}-scheduler.")  # type: ignore[union-attr]
    (runner,) = load_yaml(DEPLOY / "kubernetes" / "runner.yaml")
    args = runner["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["dpaudit", "serve"]
    check_cron(args[args.index("--cron") + 1], args[args.index("--timezone") + 1])
    (values,) = load_yaml(DEPLOY / "kubernetes" / "prefect-server-values.yaml")
    db = next(
        e for e in values["server"]["env"] if e["name"] == "PREFECT_SERVER_DATABASE_CONNECTION_URL"
    )
    assert "secretKeyRef" in db["valueFrom"]  # from a Secret, never in the values file
    assert values["service"]["type"] == "ClusterIP"


def test_slurm_spec_renders_a_job_script() -> None:
    spec = load_spec(DEPLOY / "slurm" / "spec.toml")
    c = spec.cluster
    assert c.cluster_class == "dask_jobqueue.SLURMCluster" and c.adapt is not None
    from dask_jobqueue import SLURMCluster

    kwargs = dict(c.kwargs or {})
    with SLURMCluster(**kwargs, scheduler_options={"dashboard_address": ":0"}) as cluster:
        script = cluster.job_script()
    assert "#SBATCH -p normal" in script and "#SBATCH -A census-audit" in script
    assert "#SBATCH -t 04:00:00" in script and "#SBATCH --nodes=1" in script
    assert "source /shared/dpaudit/.venv/bin/activate" in script
    assert re.search(r"--nthreads 1 .*--memory-limit 8\.00GiB", script)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script", ["local.sh", "slurm/dpaudit.sbatch"])
def test_shell_recipes_parse(script: str) -> None:
    path = DEPLOY / script
    subprocess.run(["bash", "-n", str(path)], check=True)
    text = path.read_text()
    if script == "local.sh":
        assert 'HOST="${DPAUDIT_BIND:-127.0.0.1}"' in text
        assert text.count('--host "$HOST"') == 2  # the server and the scheduler bind $HOST


def test_no_credentials_in_recipes() -> None:
    """Secrets are only referenced (${VAR}, <placeholder>, a Secret), never written down."""
    key = re.compile(
        r"(?im)^[\s-]*\"?(\w*(?:password|secret|token|api_key)\w*)\"?\s*[:=]\s*(\S.*)$"
    )
    userinfo = re.compile(r"://[^/@\s:]+:([^@\s]+)@")
    checked = 0
    for path in DEPLOY.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text()
        for m in key.finditer(text):
            checked += 1
            if m.group(1) == "secretKeyRef":  # Kubernetes reads it from a Secret
                continue
            assert m.group(2).strip("\"'").startswith(("${", "<")), (path.name, m[0])
        for m in userinfo.finditer(text):
            checked += 1
            assert m.group(1).startswith(("${", "<")), (path.name, m[0])
    assert checked >= 3  # the compose database password (twice) and the Kubernetes Secret example


def test_every_recipe_starts_the_same_production_audit() -> None:
    """compose, Kubernetes and Slurm run one audit: the PL94-171 production allocation's sparse
    TopDown over every spine state; only where it writes and the cluster differ."""
    specs = [load_spec(DEPLOY / p) for p in RECIPE_SPECS]
    audits = [s.model_dump(exclude={"output", "cluster"}) for s in specs]
    assert audits[1:] == audits[:1] * 2
    spec = specs[0]
    assert spec.audit.allocation == "pl94_2021_production" and spec.release.kind == "topdown"
    assert spec.population.kind == "spine" and spec.population.attributes == "pl94_production"
    assert spec.population.spine_states == "all"
    # each worker holds the largest state's TopDown (4.1 GB measured, benchmarks/README.md)
    (doc,) = load_yaml(DEPLOY / "compose" / "compose.yaml")
    worker = doc["services"]["dask-worker"]["command"]
    assert worker[worker.index("--memory-limit") + 1] == "8GiB"
    assert 'memory = "8GiB"' in (DEPLOY / "slurm" / "spec.toml").read_text()
