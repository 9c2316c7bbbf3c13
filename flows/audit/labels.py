"""How an audit's flow runs are labelled in Prefect: tags to filter runs by (allocation, release,
population, neighbour relation, the spec's ``audit.tags``) and a flow run name that says what was
audited. Pure functions of the spec, plus the flow-run-name callable Prefect calls at run time."""

from __future__ import annotations

from typing import Any

from auditlib.allocations import allocation_label
from flows.spec.sections import GEOMETRIC_RELEASES, STRATIFIED_RELEASES

#: every flow run of dpaudit carries this tag (so do ``dpaudit serve``'s deployments)
PROJECT_TAG = "dpaudit"


def uses_allocation(spec: Any) -> bool:
    """Whether the release's noise comes from the allocation (not Flaxman's/003's own ε)."""
    return spec.release.kind not in (*GEOMETRIC_RELEASES, *STRATIFIED_RELEASES)


def audit_tags(spec: Any) -> list[str]:
    """``dpaudit``, ``allocation:<id>`` (releases that use one), ``release:<kind>``,
    ``population:<kind>``, ``neighbours:<relation>``, then ``audit.tags``; no repeats."""
    derived = [PROJECT_TAG]
    if uses_allocation(spec):
        derived.append(f"allocation:{allocation_label(spec.audit.allocation)}")
    derived += [
        f"release:{spec.release.kind}",
        f"population:{spec.population.kind}",
        f"neighbours:{spec.audit.neighbours}",
    ]
    return list(dict.fromkeys([*derived, *spec.audit.tags]))


def audit_subject(spec: Any) -> str:
    """What an audit audits, in a few words, e.g. ``allocation dhcp_20220825_paper persons/US on
    synthetic, add_remove`` or ``gdpc ε=0.1 on flaxman, add_remove``."""
    a, r = spec.audit, spec.release
    if uses_allocation(spec):
        what = f"{r.kind} {allocation_label(a.allocation)} {a.universe}/{a.region}"
    else:
        what = f"{r.kind} ε={r.epsilon:g}"
    return f"{what} on {spec.population.kind}, {a.neighbours}"


def audit_run_name(spec: Any, run_id: str) -> str:
    """The audit flow run's name: ``audit <subject> · <run id>`` (the run id last, as before)."""
    return f"audit {audit_subject(spec)} · {run_id}"


def audit_flow_run_name() -> str:
    """``flow_run_name`` of the audit flow: its name from the run's own parameters."""
    from prefect.runtime import flow_run

    params = flow_run.parameters
    spec, run_id = params.get("spec"), str(params.get("run_id", ""))
    if spec is None or isinstance(spec, dict):  # not an AuditSpec (never so from dpaudit)
        return f"audit {run_id}"
    return audit_run_name(spec, run_id)


def retag_current_run(spec: Any) -> None:
    """Set the running flow run's derived tags to ``spec``'s (a run started from a deployment
    inherits the deployment's tags: parameters edited in the UI may audit something else)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    derived = ("allocation:", "release:", "population:", "neighbours:")
    current = [t for t in (flow_run.tags or []) if not t.startswith(derived)]
    wanted = list(dict.fromkeys([*audit_tags(spec), *current]))
    if wanted != list(flow_run.tags or []):
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, tags=wanted)
