"""The audit flow: simulate releases per (state, geolevel) on Dask, then EPL and exact accounting.

Fan-out: the blocks still to do packed into ``workers × cluster.tasks_per_worker`` simulation tasks
(``flows/batching.py``: a Prefect task costs ~0.25 CPU-s on Dask, so tasks are coarse; TopDown:
batches of whole states, then the nation), one EPL task per geolevel (after the batches holding
that level's blocks), one accounting task per geolevel plus one for all levels composed (submitted
first). Simulation tasks write their own Zarr regions, block by block; EPL and accounting return
small summaries that the flow writes as whole groups."""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
from prefect import flow
from prefect.futures import PrefectFuture, as_completed, wait

import auditlib
from auditlib.allocations import allocation_label, load_allocation
from flows import kept_histograms, progress, spine_share, tasks
from flows.batching import batch_blocks, batch_label, n_batches, pack
from flows.chunked import run_id_of
from flows.claims import claims_dataset, post_processed, published_levels, tests_run
from flows.groups import (
    ALPHA_GRID,
    accounting_dataset,
    accuracy_dataset,
    calibration_delta_for,
    composed_epl_vars,
    epl_dataset,
)
from flows.labels import audit_flow_run_name
from flows.mpl import mpl_dataset, mpl_task_settings, written_accounting
from flows.production import (
    PRODUCTION_GROUP,
    drop_state_histograms,
    production_dataset,
    stored_residuals,
)
from flows.production_tasks import submit_production
from flows.runtime import fail_orphaned_task_runs, planned_workers
from flows.spec import AuditSpec
from flows.spec.digests import content_addressed, path_free
from flows.spec.plan import AuditPlan, Block, make_plan
from flows.spec.sections import GEOMETRIC_RELEASES
from flows.spec.toml_writer import dump_toml
from storage import schema as S
from storage import store
from storage.residuals import replicate_ranges


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


def eps_grid_for(spec: AuditSpec) -> np.ndarray:
    """A common ε grid wide enough for every level's (ε, δ) curve down to the smallest δ."""
    from auditlib.accounting import bureau_epsilon

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
def audit_flow(spec: AuditSpec, url: str, run_id: str) -> dict[str, Any]:
    """Run one audit into the (new) store at ``url``; return a small summary."""
    t0 = time.perf_counter()
    plan = make_plan(spec)
    with spine_share.shared(plan) as plan:  # the spine (if any) generated once, on every worker
        return _audit(spec, url, run_id, plan, t0)


def _audit(spec: AuditSpec, url: str, run_id: str, plan: AuditPlan, t0: float) -> dict[str, Any]:
    allocation_release = not plan.geometric
    # a published release is audited against its declared allocation's exact accounting
    accounted = allocation_release or plan.release == "observed"
    sigma2 = plan.sigma2_matrix()
    done = store.resume_point(url, run_id)  # blocks finished by an interrupted run of this spec
    if done is None:
        _create_template(url, spec, plan, run_id, accounted)
        done = set()
    a = spec.audit
    deltas = list(spec.accounting.deltas)
    grid = eps_grid_for(spec) if accounted else np.zeros(0)
    # exact accounting of the allocation's discrete Gaussian noise (seed 001's geometric releases
    # are pure ε-DP by construction: their nominal ε is in the store's attributes)
    # submitted first, the composed level (the longest single task) first: they need no simulation,
    # so one worker can run them while the others simulate
    levels: list[str | None] = list(spec.accounted_geolevels) if accounted else []
    if spec.accounting.composed and accounted:
        levels.insert(0, None)
    if store.group_complete(url, S.ACCOUNTING) and (
        store.group_complete(url, S.ACCURACY) or not allocation_release
    ):
        levels = []
    accts = [
        tasks.account.with_options(task_run_name=f"account {g or 'composed'}").submit(
            a.allocation,
            a.neighbours,
            a.universe,
            a.region,
            _measured_as(plan, g),
            deltas,
            grid,
            ALPHA_GRID,
            calibration_delta_for(spec),
            label=g,
            use_cache=spec.accounting.cache,
        )
        for g in levels
    ]
    # maximum privacy loss of one released cell count per geolevel (opt-in: [mpl] enabled)
    mpl_levels = [g for g in plan.geolevels if g in spec.mpl_geolevels] if spec.mpl.enabled else []
    if store.group_complete(url, S.MPL):
        mpl_levels = []
    mpl_settings = mpl_task_settings(spec)
    mpls = [
        tasks.mpl_geolevel.with_options(task_run_name=f"mpl {g}").submit(
            g, plan.geolevels.index(g), mpl_settings
        )
        for g in mpl_levels
    ]
    futures: list[PrefectFuture[Any]] = []
    empty_todo = [e for e in plan.empty if tuple(e) not in done]
    if empty_todo:
        futures.append(
            tasks.write_empty_blocks.with_options(task_run_name="write empty regions").submit(
                url, plan, empty_todo
            )
        )
    todo = [b for b in plan.blocks if (b.state, b.geolevel) not in done]
    sims: dict[int, list[PrefectFuture[Any]]] = {b.geolevel: [] for b in plan.blocks}
    workers = planned_workers(spec.cluster)
    per_worker = spec.cluster.tasks_per_worker
    if plan.production is not None:  # sparse TopDown of a production schema
        if todo:
            sims.update(submit_production(url, plan, todo, workers, per_worker))
    elif plan.topdown is not None:
        if todo:  # a TopDown state spans its geolevels: an unfinished range re-runs them all
            sims.update(submit_topdown(url, plan, todo, workers, per_worker))
    else:
        for batch in batch_blocks(plan, todo, workers, per_worker):
            f = tasks.simulate_blocks.with_options(task_run_name=f"simulate {batch.label}").submit(
                url, plan, list(batch.blocks)
            )
            for g in sorted({b.geolevel for b in batch.blocks}):
                sims[g].append(f)  # level g's EPL waits for every batch holding one of its blocks
    epl_done = store.group_complete(url, S.EPL)
    # a published release: the EPL floor of its rows' queries at the declared noise
    pub_levels = published_levels(spec, plan) if plan.release == "observed" else []
    declared = {lv.table_level for lv in pub_levels if lv.declared_law is not None}
    epls = [
        tasks.epl_geolevel.with_options(task_run_name=f"epl {plan.geolevels[g]}").submit(
            url,
            plan,
            g,
            spec.epl.bandwidth_factor,
            spec.epl.percentiles,
            range_multiplier=spec.epl.range_multiplier,
            bias_aware=spec.epl.bias_aware_settings(),
            declared={lv.query: lv.declared_law for lv in pub_levels if lv.table_level == g}
            if g in declared
            else None,
            wait_for=sims[g],
            return_state=False,
        )
        for g in sorted(sims)
        if not epl_done
    ]
    composed = (
        [
            tasks.epl_composed.with_options(task_run_name="epl composed").submit(
                url,
                plan,
                spec.epl.percentiles,
                spec.epl.bias_aware_settings(),
                wait_for=epls,
                return_state=False,
            )
        ]
        if plan.geometric and plan.release in GEOMETRIC_RELEASES and not epl_done
        else []
    )
    # the declared claim: a published release's levels tested (each test at α/m); a simulated
    # release holds it by construction (no task)
    n_tests = tests_run(spec, plan, pub_levels)
    claims_todo = accounted and not store.group_complete(url, S.CLAIMS)
    threshold = spec.accounting.claim_alpha / max(n_tests, 1)
    delta = spec.accounting.headline_delta
    claims: list[Any]  # futures of a verdict (a dict), or of a list of them
    if post_processed(spec):  # one reference release, every level tested against it
        claims = [
            tasks.claim_post_processed.with_options(task_run_name="claim post-processed").submit(
                spec, plan, pub_levels, delta, threshold, return_state=False
            )
            for _ in ([1] if claims_todo and pub_levels else [])
        ]
    else:
        claims = [
            tasks.claim_level.with_options(task_run_name=f"claim {lv.geolevel}").submit(
                url,
                plan,
                lv,
                delta,
                threshold,
                wait_for=sims.get(lv.table_level, []),
                return_state=False,
            )
            for lv in (pub_levels if claims_todo else [])
        ]
    unique_sims = {id(f): f for fs in sims.values() for f in fs}  # a TopDown state spans levels
    futures = [*futures, *unique_sims.values(), *epls, *composed, *accts, *mpls, *claims]
    regions = {(b.state, b.geolevel) for b in todo}
    named = {"epl": epls + composed, "accounting": accts, "mpl": mpls, "claims": claims}
    stage_of = {id(f): n for n, fs in named.items() for f in fs}
    tracker = progress.BlockProgress(
        lambda: len(store.done_blocks(url) & regions),
        len(regions),
        len(unique_sims),
        len(futures) - len(unique_sims),
        Counter(stage_of.values()),
    )
    with tracker:
        for f in as_completed(futures):
            try:
                f.result()  # raises on failure
            except BaseException:
                # let the other tasks finish first: then the only unfinished task runs left in the
                # API are those whose worker died, and the failure hook can mark them
                wait(futures)
                raise
            tracker.task_done(id(f) in unique_sims, stage_of.get(id(f)))
    if epls:
        epl_ds = epl_dataset(plan, [f.result() for f in epls], spec)
        epl_ds = epl_ds.assign(composed_epl_vars(plan, epl_ds, [f.result() for f in composed]))
        store.write_group(url, S.EPL, epl_ds)
    if accts:
        acct_ds = accounting_dataset(plan, [f.result() for f in accts], deltas, grid, spec)
        store.write_group(url, S.ACCOUNTING, acct_ds)
        if allocation_release:  # the errors of the simulated queries (none are simulated else)
            store.write_group(url, S.ACCURACY, accuracy_dataset(plan, sigma2, acct_ds))
    if claims_todo:
        acc = acct_ds if accts else written_accounting(url)
        assert acc is not None  # written above, or by the run this one resumes
        results: list[Any] = [f.result() for f in claims]  # a verdict, or a list of them
        published = (
            {r["geolevel"]: r for x in results for r in (x if isinstance(x, list) else [x])}
            if plan.release == "observed"
            else None
        )
        store.write_group(url, S.CLAIMS, claims_dataset(spec, acc, published, n_tests))
    if plan.topdown is not None and plan.production is None:  # every block is written
        kept_histograms.drop(url, kept_histograms.TOPDOWN_STATE_HISTOGRAMS)
    if plan.production is not None:
        drop_state_histograms(url)  # every block is written: the states' kept histograms go
        if not store.group_complete(url, PRODUCTION_GROUP):
            store.write_group(url, PRODUCTION_GROUP, production_dataset(url, plan))
    if mpls:
        acc = acct_ds if accts else written_accounting(url)  # its certified curves
        store.write_group(url, S.MPL, mpl_dataset([f.result() for f in mpls], spec, acc))
    wall = time.perf_counter() - t0
    store.set_root_attrs(
        url,
        {
            "software": json.dumps(software_versions()),
            "source_commit": source_commit(),
            "wall_time_s": round(wall, 3),
        },
    )
    return {
        "run_id": run_id,
        "blocks": len(plan.blocks),
        "resumed_blocks": len(plan.blocks) - len(todo),
        "residuals": int(sum(b.n_items for b in plan.blocks) * plan.replicates)
        if plan.production is None
        else stored_residuals(url, plan),  # a production block's n_items is its capacity
        "wall_time_s": wall,
    }


def _measured_as(plan: AuditPlan, geolevel: str | None) -> str | None:
    """The allocation geolevel a plan's geolevel is accounted as (a table's level: the geolevel
    ``release.levels`` maps onto it; None: all levels composed)."""
    t = plan.table_hierarchy
    if t is None or geolevel is None:
        return geolevel
    return t.measured_as[plan.geolevels.index(geolevel)]


def _create_template(
    url: str,
    spec: AuditSpec,
    plan: AuditPlan,
    run_id: str,
    allocation_release: bool,
) -> None:
    alloc = load_allocation(spec.audit.allocation)
    label = allocation_label(spec.audit.allocation)  # an allocation file: name and digest, no path
    stored_spec = path_free(spec.model_dump(mode="json"))
    store.create_residual_template(
        url,
        **plan.template_layout(),
        # TopDown: a state's replicates in ranges of tasks, each range whole chunks of the store
        replicate_chunk=spec.cluster.replicates_per_task if plan.topdown is not None else None,
        attrs={
            "dpaudit_version": auditlib.__version__,
            "run_id": run_id,
            "spec_toml": dump_toml(stored_spec),
            "allocation_id": label if allocation_release else "",
            "allocation_source": _allocation_source(alloc, label)
            if allocation_release and spec.release.kind != "observed"
            else _release_source(spec),
            "neighbours": spec.audit.neighbours,
            "universe": spec.audit.universe,
            "region": spec.audit.region,
            "seed": spec.audit.seed,
            "release": spec.release.kind,
            "release_epsilon": None if allocation_release else spec.release.epsilon,
            **({"published_runs": plan.replicates} if spec.release.kind == "observed" else {}),
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )


def _allocation_source(alloc: Any, label: str) -> str:
    """Where the allocation comes from: a shipped one's source; an allocation file's path-free
    label (its name and content digest)."""
    return alloc.source if alloc.allocation_id == label else f"allocation file {label}"


def _release_source(spec: AuditSpec) -> str:
    """What produced the residuals of a release that is not the allocation's simulated noise."""
    r = spec.release
    if r.kind == "observed":
        return (
            f"published release ({len(r.published or r.published_files)} run(s)) beside the true "
            f"counts of {spec.population.path}; accounting: the declared allocation "
            + _allocation_source(
                load_allocation(spec.audit.allocation), allocation_label(spec.audit.allocation)
            )
        )
    seed = "003" if r.kind in ("sa3", "sa4") else "001"
    return f"seed {seed} {r.kind.upper()} release at epsilon = {r.epsilon}"


def submit_topdown(
    url: str, plan: AuditPlan, todo: list[Block], workers: int, tasks_per_worker: int
) -> dict[int, list[PrefectFuture[Any]]]:
    """Batches of (state, replicate range) units (each range of a state's geolevels from one run;
    the ranges are the store's replicate chunks, ``cluster.replicates_per_task`` when it was
    created), then the nation from the states. With a national level every range of every state
    has its task (the nation sums their histograms: a finished range's task returns those kept in
    the staging store, ``flows.kept_histograms``); without one, only ranges with an unfinished
    block."""
    top = plan.topdown_top
    nation = [b for b in plan.blocks if b.state_key == 0]
    unfinished = {b.state for b in todo}
    state_blocks = [b for b in plan.blocks_at(top) if nation or b.state in unfinished]
    ranges = replicate_ranges(plan.replicates, store.replicate_chunk(url))
    done = set() if nation else store.done_ranges(url)
    if nation:  # the states' histograms kept for the nation (a resumed run reads them)
        kept_histograms.create(url, kept_histograms.TOPDOWN_STATE_HISTOGRAMS)
    units = [
        (b, rr)
        for b in state_blocks
        for rr in ranges
        if nation
        or not all((o.state, o.geolevel, rr[0]) in done for o in plan.blocks if o.state == b.state)
    ]
    per_state: dict[int, float] = {}
    for b in plan.blocks:
        per_state[b.state] = per_state.get(b.state, 0.0) + float(b.n_items)
    costs = [per_state.get(b.state, 0.0) * (r1 - r0) for b, (r0, r1) in units]
    groups = pack(costs, n_batches(len(units), workers, tasks_per_worker)) if units else []
    batches = []
    for g in groups:
        blocks = [units[i][0] for i in g]
        rr = [units[i][1] for i in g]
        name = batch_label(blocks, "states") if len(ranges) == 1 else _ranges_label(blocks, rr)
        f = tasks.simulate_topdown_states.with_options(task_run_name=f"topdown {name}").submit(
            url, plan, blocks, bool(nation), rr
        )
        batches.append((blocks, f))
    batch_futures: list[Any] = [f for _, f in batches]  # resolved to their results by Prefect
    sims: dict[int, list[PrefectFuture[Any]]] = {}
    for b in plan.blocks:
        if b.state_key == 0:  # the nation: after every state
            f = tasks.simulate_topdown_nation.with_options(
                task_run_name=f"topdown {b.label}"
            ).submit(url, plan, b, batch_futures)
            sims.setdefault(b.geolevel, []).append(f)
        else:
            sims.setdefault(b.geolevel, []).extend(
                f for blocks, f in batches if any(s.state == b.state for s in blocks)
            )
    return sims


def _ranges_label(blocks: list[Block], ranges: list[tuple[int, int]]) -> str:
    """A task's name for the Prefect UI: its (state, replicate range) units, e.g.
    ``ST01 r0–9, ST02 r0–9``."""
    parts = [
        f"{b.label.split('/', 1)[0]} r{r0}–{r1 - 1}"
        for b, (r0, r1) in zip(blocks, ranges, strict=True)
    ]
    return ", ".join(parts[:3]) + (f", … ({len(parts)} ranges)" if len(parts) > 3 else "")
