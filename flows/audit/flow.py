"""The audit flow: simulate releases per (state, geolevel) on Dask, then EPL and exact accounting.

Fan-out: the blocks still to do packed into ``workers × cluster.tasks_per_worker`` simulation tasks
(``flows/audit/batching.py``: a Prefect task costs ~0.25 CPU-s on Dask, so tasks are coarse; TopDown:
batches of whole states, then the nation), the EPL of each geolevel in batches of its state blocks
(after the batches holding that level's blocks) combined by one task per level, the accounting of
all levels composed (submitted first), and the per-level work that is cheap beside a task (each
level's accounting and MPL, the EPL of a level of one batch) in at most one task per worker
(``level_groups``). Simulation tasks write their
own Zarr regions, block by block; EPL and accounting return small summaries that the flow writes
as whole groups."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
from prefect import flow
from prefect.futures import PrefectFuture

import auditlib
from auditlib.allocations import allocation_label, load_allocation
from flows.audit import spine_share, tasks
from flows.audit.claims import claims_dataset, published_levels, tests_run
from flows.audit.labels import audit_flow_run_name
from flows.audit.stages import (
    results_of,
    submit_accounting,
    submit_claims,
    submit_epl,
    submit_mpl,
    wait_all,
    write_groups,
)
from flows.audit.submit import submit_simulation
from flows.experiments.chunked import run_id_of
from flows.experiments.mpl_coverage import mpl_dataset, written_accounting
from flows.runtime import deadline
from flows.runtime.cluster import fail_orphaned_task_runs, planned_workers
from flows.spec import AuditSpec
from flows.spec.audit_plan import AuditPlan
from flows.spec.digests import content_addressed, path_free
from flows.spec.plan import make_plan
from flows.spec.toml_writer import dump_toml
from storage import schema as S
from storage.result_store import ResultStore


def run_id_for(spec: AuditSpec) -> str:
    """A stable id of the run: a hash of the validated spec's sections that determine the results.

    Where the store goes (``output``) and on how many workers it runs (``cluster``) do not change a
    single stored value, so they do not change the id: a killed run resumes under another
    ``--overwrite`` or worker count, and a different computation never resumes into this one.
    Nor do ``audit.tags`` (labels of its flow runs), nor where the files the spec names are: an
    allocation file, a table and published runs' files count by their content
    (:mod:`flows.spec.digests`).
    """
    data = spec.model_dump(mode="json")
    data.pop("output", None)
    data.pop("cluster", None)
    data["audit"].pop("tags", None)  # labels in the Prefect UI only
    content_addressed(data)  # allocation files and tables: their content counts, not their paths
    return run_id_of(data)


def software_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("dpaudit", "numpy", "scipy", "xarray", "zarr", "dask", "distributed", "prefect"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def source_commit() -> str:
    """The git commit of the dpaudit source the run used ("unknown" outside a git checkout)."""
    import subprocess
    from pathlib import Path

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def eps_grid_for(spec: AuditSpec, alloc: Any = None) -> np.ndarray:
    """A common ε grid wide enough for every level's (ε, δ) curve down to the smallest δ;
    ``alloc``: the spec's allocation if loaded already (the plan's)."""
    from auditlib.accounting import bureau_epsilon

    if alloc is None:
        alloc = load_allocation(spec.audit.allocation)
    a = spec.audit
    rhos = [
        float(alloc.rho(a.universe, a.region, g)) for g in alloc.geolevels(a.universe, a.region)
    ]
    top = float(bureau_epsilon(max(rhos), min(spec.accounting.deltas)))
    return np.linspace(0.0, top * 1.05, spec.accounting.eps_grid_points)


@flow(
    name="dpaudit-audit",
    flow_run_name=audit_flow_run_name,  # "audit <what> · <run id>"
    validate_parameters=False,
    on_failure=[fail_orphaned_task_runs],
    on_crashed=[fail_orphaned_task_runs],
)
def audit_flow(spec: AuditSpec, store: ResultStore | str, run_id: str) -> dict[str, Any]:
    """Run one audit into the (new) ``store`` (or the store at a URL); return a small summary."""
    store = ResultStore.of(store)
    t0 = time.perf_counter()
    commit = source_commit()  # the checkout's commit as the run starts: the code that runs
    plan = make_plan(spec)
    with spine_share.shared(plan) as plan:  # the spine (if any) generated once, on every worker
        return _audit(spec, store, run_id, plan, t0, commit)


def _audit(
    spec: AuditSpec, store: ResultStore, run_id: str, plan: AuditPlan, t0: float, commit: str
) -> dict[str, Any]:
    release = plan.strategy
    done = store.resume_point(run_id)  # blocks finished by an interrupted run of this spec
    if done is None:
        _create_template(store, spec, plan, run_id, commit)
        done = set()
    else:  # the staging copy names the code of every run that wrote into it, as it is resumed
        store.set_root_attrs(resumed_commits(store.root_attrs(), commit))
    # exact accounting of the declared allocation and MPL: they need no simulation, so one worker
    # can run them while the others simulate
    grid = eps_grid_for(spec, plan.allocation) if release.accounted else np.zeros(0)
    workers = planned_workers(spec.cluster)
    accts = submit_accounting(spec, store, plan, grid, workers)
    mpls = submit_mpl(spec, store, plan, workers)
    empty_todo = [e for e in plan.empty if tuple(e) not in done]
    futures: list[PrefectFuture[Any]] = [
        tasks.write_empty_blocks.with_options(task_run_name="write empty regions").submit(
            store, plan, empty_todo
        )
        for _ in ([1] if empty_todo else [])
    ]
    todo = [b for b in plan.blocks if (b.state, b.level) not in done]
    sims = submit_simulation(store, plan, todo, workers, spec.cluster.tasks_per_worker)
    pub_levels = published_levels(spec, plan) if release.published else []
    pieces, epls, composed = submit_epl(spec, store, plan, sims, pub_levels, workers)
    n_tests = tests_run(spec, plan, pub_levels)
    claims_todo = release.accounted and not store.group_complete(S.CLAIMS)
    claims = submit_claims(spec, store, plan, sims, pub_levels, n_tests) if claims_todo else []
    unique_sims = {id(f): f for fs in sims.values() for f in fs}  # a TopDown state spans levels
    futures = [*futures, *unique_sims.values(), *pieces, *epls, *composed, *accts, *mpls, *claims]
    named = {"epl": pieces + epls + composed, "accounting": accts, "mpl": mpls, "claims": claims}
    wait_all(
        store, futures, unique_sims, named, {(b.state, b.level) for b in todo}, len(plan.blocks)
    )
    acct_ds = write_groups(spec, store, plan, epls, composed, accts, grid)
    if claims_todo:
        acc = acct_ds if accts else written_accounting(store)
        assert acc is not None  # written above, or by the run this one resumes
        results: list[Any] = [f.result() for f in claims]  # a verdict, or a list of them
        published = (
            {r["geolevel"]: r for x in results for r in (x if isinstance(x, list) else [x])}
            if release.published
            else None
        )
        store.write_group(S.CLAIMS, claims_dataset(spec, acc, published, n_tests))
    release.finish(store, plan)  # every block is written: kept histograms go, the kind's groups
    if mpls:
        acc = acct_ds if accts else written_accounting(store)  # its certified curves
        store.write_group(S.MPL, mpl_dataset(results_of(mpls), spec, acc))
    deadline.check()  # a timeout whose signal was lost fails the run here, before it is stamped
    wall = time.perf_counter() - t0
    store.set_root_attrs(
        {
            "software": json.dumps(software_versions()),
            "wall_time_s": round(wall, 3),
        },
    )
    return {
        "run_id": run_id,
        "blocks": len(plan.blocks),
        "resumed_blocks": len(plan.blocks) - len(todo),
        "residuals": release.stored_residuals(store, plan),
        "wall_time_s": wall,
    }


def resumed_commits(attrs: Mapping[str, Any], commit: str) -> dict[str, Any]:
    """The provenance attributes of a staging copy resumed by code at ``commit``: its
    ``source_commit`` stays the commit its first run started on (a copy from before that was
    stamped at creation gets this one), and a different commit is added to ``resumed_commits``."""
    first = str(attrs.get("source_commit") or "")
    if not first:
        return {"source_commit": commit}
    later = [str(c) for c in attrs.get("resumed_commits") or []]
    if commit != first and commit not in later:
        return {"resumed_commits": [*later, commit]}
    return {}


def _create_template(
    store: ResultStore, spec: AuditSpec, plan: AuditPlan, run_id: str, commit: str
) -> None:
    release = plan.strategy
    alloc = (
        plan.allocation if plan.allocation is not None else load_allocation(spec.audit.allocation)
    )
    label = allocation_label(spec.audit.allocation)  # an allocation file: name and digest, no path
    stored_spec = path_free(spec.model_dump(mode="json"))
    store.create_residual_template(
        **plan.template_layout(),
        # TopDown: a state's replicates in ranges of tasks, each range whole chunks of the store
        replicate_chunk=spec.cluster.replicates_per_task if release.replicate_ranges else None,
        attrs={
            "dpaudit_version": auditlib.__version__,
            "run_id": run_id,
            "spec_toml": dump_toml(stored_spec),
            "allocation_id": label if release.accounted else "",
            "allocation_source": release.source(spec, alloc, label),
            "neighbours": spec.audit.neighbours,
            "universe": spec.audit.universe,
            "region": spec.audit.region,
            "seed": spec.audit.seed,
            "release": spec.release.kind,
            "release_epsilon": None if release.accounted else spec.release.epsilon,
            **({"published_runs": plan.replicates} if release.published else {}),
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "source_commit": commit,  # the code as the run starts: a staging copy names it too
        },
    )
