"""Scheduled audits: deployments with cron schedules on a Prefect server (``dpaudit serve``).

Each spec becomes one deployment of :func:`scheduled_audit` whose parameter is the spec's TOML text
(readable and editable in the Prefect UI). The serving process polls the server and runs each
scheduled or manually triggered run: the audit flow as a subflow on the spec's cluster, into a staging
copy that is published only when complete, exactly like ``dpaudit run``.

``output.store`` and ``output.report`` may contain ``{date}`` (UTC ``YYYYMMDD``) and ``{time}``
(UTC ``HHMMSS``), filled in when a run starts, so that a nightly schedule writes one store per night.
"""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow

from auditlib.exceptions import InvalidParameterError
from flows.runtime import fail_orphaned_task_runs
from flows.spec import AuditSpec, parse_spec

FLOW_NAME = "dpaudit-scheduled-audit"
_PLACEHOLDER = re.compile(r"\{(date|time)\}")


def expand_placeholders(path: str, when: datetime) -> str:
    """Fill ``{date}`` and ``{time}`` (UTC) into an output path; other braces are refused."""
    out = _PLACEHOLDER.sub(
        lambda m: when.strftime("%Y%m%d" if m.group(1) == "date" else "%H%M%S"), path
    )
    if "{" in out or "}" in out:
        raise InvalidParameterError(
            f"output path {path!r} has an unknown placeholder; allowed: {{date}}, {{time}}"
        )
    return out


def has_placeholder(path: str) -> bool:
    return bool(_PLACEHOLDER.search(path))


def check_cron(cron: str, timezone: str) -> None:
    """Refuse a cron string or time zone that Prefect would not schedule."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except Exception as exc:  # pydantic names the problem
        first = str(exc).splitlines()
        detail = first[-1].strip() if first else str(exc)
        raise InvalidParameterError(
            f"invalid --cron {cron!r} / --timezone {timezone!r} ({detail}); use five fields such "
            'as "0 3 * * *" and an IANA zone such as "UTC"'
        ) from None


@flow(
    name=FLOW_NAME,
    flow_run_name="scheduled audit",
    on_failure=[fail_orphaned_task_runs],
    on_crashed=[fail_orphaned_task_runs],
)
def scheduled_audit(spec_toml: str, report: bool = True) -> dict[str, Any]:
    """Run one audit of the spec given as TOML text; publish its store (and report) when complete."""
    from flows import audit
    from flows.runtime import cluster_runner, worker_count
    from storage import store

    spec = parse_spec(tomllib.loads(spec_toml), "deployment spec")
    now = datetime.now(UTC)
    url = expand_placeholders(spec.output.store, now)
    report_path = expand_placeholders(spec.output.report, now) if report else None
    target = store.absolute(url)
    store.check_target(target, spec.output.overwrite)
    run_id = audit.run_id_for(spec)
    staging = store.staging_path(target, run_id)
    with store.exclusive(target):
        store.discard(staging, target)
        store.prepare_remote(target, run_id, overwrite=True)  # check_target agreed
        try:
            with cluster_runner(spec.cluster) as runner:
                sub = audit.audit_flow.with_options(
                    task_runner=runner, timeout_seconds=spec.cluster.timeout_s
                )
                summary = sub(spec, staging, run_id)
            store.set_root_attrs(
                staging,
                {
                    "run_id": run_id,
                    "dask_scheduler": spec.cluster.scheduler
                    or spec.cluster.cluster_class
                    or "LocalCluster",
                    "n_workers": worker_count(spec.cluster),
                    "prefect_api": "server",
                },
            )
            store.finalize(staging)
            store.publish(staging, target)
        except BaseException:
            store.discard(staging, target)
            raise
    if report_path:
        from flows.report.render import render_report

        Path(report_path).parent.mkdir(parents=True, exist_ok=True)
        render_report(url, report_path)
    return {**summary, "store": url, "report": report_path}


def deployment_name(path: Path | None, spec: AuditSpec) -> str:
    return path.stem if path is not None else "default"


def build_deployments(
    specs: list[tuple[Path | None, AuditSpec]], cron: str, timezone: str, report: bool = True
) -> list[Any]:
    """One deployment per spec, scheduled by ``cron`` in ``timezone``."""
    from prefect.deployments.runner import EntrypointType
    from prefect.schedules import Cron

    names = [deployment_name(p, s) for p, s in specs]
    if len(set(names)) != len(names):
        raise InvalidParameterError(
            f"two specs give the same deployment name ({', '.join(names)}); rename a spec file"
        )
    return [
        scheduled_audit.to_deployment(
            name=name,
            schedules=[Cron(cron, timezone=timezone)],
            parameters={"spec_toml": s.to_toml(), "report": report},
            description=s.audit.name,
            tags=["dpaudit"],
            entrypoint_type=EntrypointType.MODULE_PATH,
        )
        for name, (_, s) in zip(names, specs, strict=True)
    ]
