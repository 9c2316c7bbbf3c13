"""Scheduled audits: deployments with cron schedules on a Prefect server (``dpaudit serve``).

Each spec becomes one deployment of :func:`scheduled_audit` whose parameters are the spec's
sections, typed by their pydantic models: the Prefect UI's run form shows each key with its type,
bounds and meaning, and a run started there with edited values is checked like a spec file (a bad
value ends the run at once, Failed, with the CLI's one-line message). The serving process polls the server and runs each
scheduled or manually triggered run: the audit flow as a subflow on the spec's cluster, into a staging
copy that is published only when complete, exactly like ``dpaudit run``; a run whose cluster has
no worker left for ``cluster.lost_workers_grace_s`` fails then, Failed with the lost workers named
(flows/runtime/worker_watch.py), and leaves no store.

``output.store`` and ``output.report`` may contain ``{date}`` (UTC ``YYYYMMDD``) and ``{time}``
(UTC ``HHMMSS``), filled in when a run starts, so that a nightly schedule writes one store per night.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow
from pydantic import BaseModel

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.runtime.cluster import fail_orphaned_task_runs
from flows.spec import AuditSpec, parse_spec
from flows.spec.cluster import ClusterSection
from flows.spec.epl_section import EPLSection
from flows.spec.mpl_section import MPLSection
from flows.spec.sections import (
    AccountingSection,
    AuditSection,
    OutputSection,
    PopulationSection,
    ReleaseSection,
    SimulationSection,
)

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


#: the spec's sections, in order: the deployed flow's parameters (one typed form field group each)
SECTIONS = tuple(AuditSpec.model_fields)


def spec_parameters(spec: AuditSpec) -> dict[str, Any]:
    """A spec as the deployed flow's parameters: one JSON object per section."""
    data = spec.model_dump(mode="json")
    return {name: data[name] for name in SECTIONS}


def spec_from_parameters(sections: dict[str, Any], origin: str) -> AuditSpec:
    """The spec of a run's parameters (section models, or the JSON objects the API sends), checked
    exactly like a spec file; :class:`SpecError` with the CLI's one-line message otherwise."""
    data = {
        name: v.model_dump(mode="json") if isinstance(v, BaseModel) else v
        for name, v in sections.items()
        if v is not None
    }
    return parse_spec(data, origin)


def scheduled_run_name() -> str:
    """``scheduled audit <what> · <run id>`` from the run's parameters (as the audit's own name)."""
    from prefect.runtime import flow_run

    from flows.audit.flow import run_id_for
    from flows.audit.labels import audit_run_name

    params = {k: v for k, v in flow_run.parameters.items() if k in SECTIONS}
    try:
        spec = spec_from_parameters(params, "parameters")
    except DPAuditError:
        return "scheduled audit (invalid parameters)"
    return f"scheduled {audit_run_name(spec, run_id_for(spec))}"


@flow(
    name=FLOW_NAME,
    flow_run_name=scheduled_run_name,
    validate_parameters=False,  # checked as a spec file is, with the CLI's messages
    on_failure=[fail_orphaned_task_runs],
    on_crashed=[fail_orphaned_task_runs],
)
def scheduled_audit(
    audit: AuditSection,
    population: PopulationSection,
    release: ReleaseSection,
    simulation: SimulationSection,
    epl: EPLSection,
    accounting: AccountingSection,
    mpl: MPLSection,
    output: OutputSection,
    cluster: ClusterSection,
    report: bool = True,
) -> Any:
    """Run one audit of the spec given section by section; publish its store (and report) when
    complete, with its artifacts (at-a-glance table, store and ``verify``, report link).

    Args:
        audit: what is audited: the allocation, universe, region, neighbour relation, replicates,
            seed, and the run's extra tags.
        population: the population the releases are simulated on.
        release: the release under audit.
        simulation: which queries and cells are simulated, and their post-processing.
        epl: the empirical privacy loss estimate.
        accounting: the exact accounting; headline_delta is the δ of the at-a-glance table.
        mpl: maximum privacy loss lower bounds (opt-in).
        output: the store and report; {date} and {time} (UTC) are filled in when the run starts.
        cluster: where the tasks run.
        report: write the HTML report.
    """
    from prefect import get_run_logger, tags
    from prefect.states import Failed

    from flows.audit import flow as audit_mod
    from flows.audit.artifacts import audit_artifacts, publish
    from flows.audit.labels import audit_tags, retag_current_run
    from flows.runtime.cluster import cluster_runner, worker_count
    from flows.runtime.worker_watch import run_watched
    from storage.result_store import ResultStore

    sections = dict(zip(SECTIONS, (audit, population, release, simulation, epl, accounting, mpl,
                                   output, cluster), strict=True))  # fmt: skip
    try:
        spec = spec_from_parameters(sections, f"parameters of deployment {_deployment()!r}")
        now = datetime.now(UTC)
        url = expand_placeholders(spec.output.store, now)
        report_path = expand_placeholders(spec.output.report, now) if report else None
        target = ResultStore.at(url)
        # checked at the resolved path, its messages naming it so
        ResultStore.at(target.url).check_target(spec.output.overwrite)
        if report_path:
            from storage.files import check_file_target

            # a nightly report replaces the last one, as before; never a FIFO, device or socket
            check_file_target(report_path, True, "output.report")
    except DPAuditError as exc:  # refused before anything is written, as the CLI refuses it
        return Failed(message=f"dpaudit: error: {one_line(str(exc))}")
    retag_current_run(spec)
    run_id = audit_mod.run_id_for(spec)
    staging = target.staged(run_id)
    with target.exclusive():
        target.discard(staging)  # a failed run's copy, or what its last writes left (no store)
        staging.make_room()  # anything else there is not dpaudit's: refused, not touched
        target.prepare_remote(run_id, overwrite=True)  # check_target agreed
        try:
            logger = get_run_logger()

            def warn(message: str) -> None:  # in the run's logs in the UI
                logger.warning("%s", message)

            with cluster_runner(spec.cluster, warn) as runner, tags(*audit_tags(spec)):
                sub = audit_mod.audit_flow.with_options(
                    task_runner=runner, timeout_seconds=spec.cluster.timeout_s
                )
                # a cluster with no worker left fails the run in cluster.lost_workers_grace_s
                summary = run_watched(sub, (spec, staging, run_id), spec.cluster).result()
            staging.set_root_attrs(
                {
                    "run_id": run_id,
                    "dask_scheduler": spec.cluster.scheduler
                    or spec.cluster.cluster_class
                    or "LocalCluster",
                    "n_workers": worker_count(spec.cluster),
                    "prefect_api": "server",
                },
            )
            staging.finalize()
            target.publish(staging)
        except BaseException:
            target.discard(staging)
            raise
    if report_path:
        from flows.report.render import render_report

        Path(report_path).parent.mkdir(parents=True, exist_ok=True)
        render_report(target, report_path)
    try:
        publish(audit_artifacts(target, run_id, report_path, spec.output.report_url))
    except Exception as exc:  # the store and report are written: say so, do not fail the run
        from prefect import get_run_logger

        get_run_logger().warning("artifacts not created: %s: %s", type(exc).__name__, exc)
    return {**summary, "store": url, "report": report_path}


def one_line(message: str) -> str:
    """A message on one line, as ``dpaudit: error:`` prints it."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def _deployment() -> str:
    from prefect.runtime import deployment

    return str(deployment.name or "scheduled audit")


def deployment_name(path: Path | None, spec: AuditSpec) -> str:
    return path.stem if path is not None else "default"


def build_deployments(
    specs: list[tuple[Path | None, AuditSpec]], cron: str, timezone: str, report: bool = True
) -> list[Any]:
    """One deployment per spec, scheduled by ``cron`` in ``timezone``."""
    from prefect.deployments.runner import EntrypointType
    from prefect.schedules import Cron

    from flows.audit.labels import audit_tags

    names = [deployment_name(p, s) for p, s in specs]
    if len(set(names)) != len(names):
        raise InvalidParameterError(
            f"two specs give the same deployment name ({', '.join(names)}); rename a spec file"
        )
    return [
        scheduled_audit.to_deployment(
            name=name,
            schedules=[Cron(cron, timezone=timezone)],
            parameters={**spec_parameters(s), "report": report},
            description=s.audit.name,
            tags=audit_tags(s),
            entrypoint_type=EntrypointType.MODULE_PATH,
            enforce_parameter_schema=False,  # the run checks them, with the CLI's messages
        )
        for name, (_, s) in zip(names, specs, strict=True)
    ]
