"""The stages of an audit beside the simulation, each submitted or written as one step of
``flows.audit.flow._audit``: exact accounting, MPL, EPL (per level in pieces, and composed),
claims, the wait for every task with its progress, and the groups written from their results."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import numpy as np
import xarray as xr
from prefect.futures import PrefectFuture, wait

from flows.audit import tasks
from flows.audit.batching import epl_batches, level_groups
from flows.audit.claims import PublishedLevel, post_processed
from flows.audit.groups import (
    ALPHA_GRID,
    accounting_dataset,
    accuracy_dataset,
    calibration_delta_for,
    composed_epl_vars,
    epl_dataset,
)
from flows.experiments.mpl_coverage import mpl_task_settings
from flows.runtime import deadline, progress
from flows.spec import AuditSpec
from flows.spec.audit_plan import AuditPlan
from storage import schema as S
from storage.result_store import ResultStore

Futures = list[PrefectFuture[Any]]


def submit_accounting(
    spec: AuditSpec, store: ResultStore, plan: AuditPlan, grid: np.ndarray, workers: int
) -> Futures:
    """Exact accounting of the declared allocation's noise: the composed level (the longest single
    task) first, then the accounted geolevels in at most ``workers`` tasks (``level_groups``: a
    level's accounting takes milliseconds to seconds beside a task's orchestration); none for a
    release not accounted (Flaxman's geometric releases are pure ε-DP by construction: their
    nominal ε is in the store's attributes), or when the groups are written already. A future's
    result is one level's, or a list of them in level order (:func:`results_of`)."""
    release = plan.strategy
    if not release.accounted or (
        store.group_complete(S.ACCOUNTING)
        and (store.group_complete(S.ACCURACY) or not release.simulates_allocation)
    ):
        return []
    a = spec.audit
    common = (a.allocation, a.neighbours, a.universe, a.region)
    after = (list(spec.accounting.deltas), grid, ALPHA_GRID, calibration_delta_for(spec))
    use_cache = spec.accounting.cache
    futures: Futures = []
    if spec.accounting.composed:
        futures.append(
            tasks.account.with_options(task_run_name="account composed").submit(
                *common, None, *after, label=None, use_cache=use_cache
            )
        )
    levels = list(spec.accounted_geolevels)
    for group in level_groups(levels, workers, spec.cluster.tasks_per_worker):
        if len(group) == 1:
            (g,) = group
            futures.append(
                tasks.account.with_options(task_run_name=f"account {g}").submit(
                    *common, release.measured_as(plan, g), *after, label=g, use_cache=use_cache
                )
            )
            continue
        futures.append(
            tasks.account_levels.with_options(task_run_name=f"account {', '.join(group)}").submit(
                *common,
                [(release.measured_as(plan, g), g) for g in group],
                *after,
                use_cache=use_cache,
            )
        )
    return futures


def results_of(futures: Futures) -> list[Any]:
    """The per-level results of tasks that return one level's result or a list of them, in the
    futures' order."""
    out: list[Any] = []
    for f in futures:
        r = f.result()
        out.extend(r if isinstance(r, list) else [r])
    return out


def submit_mpl(spec: AuditSpec, store: ResultStore, plan: AuditPlan, workers: int) -> Futures:
    """Maximum privacy loss of one released cell count per geolevel (opt-in: [mpl] enabled), the
    levels in at most ``workers`` tasks (``level_groups``); results as :func:`results_of` reads
    them."""
    mpl_levels = [g for g in plan.geolevels if g in spec.mpl_geolevels] if spec.mpl.enabled else []
    if store.group_complete(S.MPL):
        mpl_levels = []
    settings = mpl_task_settings(spec)
    futures: Futures = []
    for group in level_groups(mpl_levels, workers, spec.cluster.tasks_per_worker):
        if len(group) == 1:
            (g,) = group
            futures.append(
                tasks.mpl_geolevel.with_options(task_run_name=f"mpl {g}").submit(
                    g, plan.geolevels.index(g), settings
                )
            )
            continue
        futures.append(
            tasks.mpl_geolevels.with_options(task_run_name=f"mpl {', '.join(group)}").submit(
                [(g, plan.geolevels.index(g)) for g in group], settings
            )
        )
    return futures


def submit_epl(
    spec: AuditSpec,
    store: ResultStore,
    plan: AuditPlan,
    sims: dict[int, Futures],
    pub_levels: list[PublishedLevel],
    workers: int,
) -> tuple[Futures, Futures, Futures]:
    """EPL per geolevel in pieces: batches of the level's state blocks (``epl_batches``, after the
    simulation tasks holding its blocks), each reduced to its states' rows and histograms, then
    one task per level combining them (a published release's levels with a declared law: the
    floor of their queries at the declared noise); the levels of one batch each, pieces and
    combine in one task, in at most ``workers`` tasks (``level_groups``); the composed EPL of a
    tree release after them.
    Returns the pieces' futures, the levels' (their results are the levels' EPL, one or a list:
    :func:`results_of`) and the composed EPL's."""
    if store.group_complete(S.EPL):
        return [], [], []
    declared = {lv.table_level for lv in pub_levels if lv.declared_law is not None}
    knobs = spec.epl.knobs()
    batches = epl_batches(plan, workers, spec.cluster.tasks_per_worker)
    pieces: dict[int, Futures] = {
        g: [
            tasks.epl_blocks.with_options(
                task_run_name=f"epl {plan.geolevels[g]} {batch.label}"
            ).submit(
                store, plan, g, list(batch.blocks), knobs, wait_for=sims[g], return_state=False
            )
            for batch in batches.get(g, [])
        ]
        for g in sorted(sims)
        if len(batches.get(g, [])) > 1  # a level of one batch: one task, its combine included
    }

    def declared_of(g: int) -> dict[int, Any] | None:
        if g not in declared:
            return None
        return {lv.query: lv.declared_law for lv in pub_levels if lv.table_level == g}

    epls: Futures = [
        tasks.epl_combine.with_options(task_run_name=f"epl {plan.geolevels[g]}").submit(
            plan, g, pieces[g], knobs, declared=declared_of(g), return_state=False
        )
        for g in sorted(pieces)
    ]
    whole = [g for g in sorted(sims) if g not in pieces]  # a level of one batch: its own combine
    for group in level_groups(whole, workers, spec.cluster.tasks_per_worker):
        after = list({id(f): f for g in group for f in sims[g]}.values())
        if len(group) == 1:
            (g,) = group
            epls.append(
                tasks.epl_level.with_options(task_run_name=f"epl {plan.geolevels[g]}").submit(
                    store,
                    plan,
                    g,
                    knobs,
                    declared=declared_of(g),
                    wait_for=after,
                    return_state=False,
                )
            )
            continue
        name = f"epl {', '.join(plan.geolevels[g] for g in group)}"
        epls.append(
            tasks.epl_levels.with_options(task_run_name=name).submit(
                store,
                plan,
                group,
                knobs,
                declared={g: declared_of(g) for g in group},
                wait_for=after,
                return_state=False,
            )
        )
    composed = [
        tasks.epl_composed.with_options(task_run_name="epl composed").submit(
            store,
            plan,
            knobs,
            wait_for=epls,
            return_state=False,
        )
        for _ in ([1] if plan.strategy.composed_epl else [])
    ]
    return [f for g in sorted(pieces) for f in pieces[g]], epls, composed


def submit_claims(
    spec: AuditSpec,
    store: ResultStore,
    plan: AuditPlan,
    sims: dict[int, Futures],
    pub_levels: list[PublishedLevel],
    n_tests: int,
) -> list[Any]:
    """The declared claim: a published release's levels tested (each test at α/m); a simulated
    release holds it by construction (no task). Futures of a verdict (a dict), or of a list."""
    threshold = spec.accounting.claim_alpha / max(n_tests, 1)
    delta = spec.accounting.headline_delta
    if post_processed(spec):  # one reference release, every level tested against it
        return [
            tasks.claim_post_processed.with_options(task_run_name="claim post-processed").submit(
                spec, plan, pub_levels, delta, threshold, return_state=False
            )
            for _ in ([1] if pub_levels else [])
        ]
    return [
        tasks.claim_level.with_options(task_run_name=f"claim {lv.geolevel}").submit(
            store,
            plan,
            lv,
            delta,
            threshold,
            wait_for=sims.get(lv.table_level, []),
            return_state=False,
        )
        for lv in pub_levels
    ]


def wait_all(
    store: ResultStore,
    futures: list[Any],
    sims: dict[int, Any],
    named: dict[str, list[Any]],
    regions: set[tuple[int, int]],
    planned_blocks: int | None = None,
) -> None:
    """Every task's result, in the order they finish, with the run's progress (blocks written of
    ``regions`` of the plan's ``planned_blocks``, simulation tasks of ``sims`` by id, the others by
    stage); on a failure the others
    finish first (then the only unfinished task runs left in the API are those whose worker died,
    and the failure hook can mark them), then it is raised."""
    stage_of = {id(f): n for n, fs in named.items() for f in fs}
    seen: set[tuple[int, int]] = set()  # a block done stays done: each poll reads the others
    lock = threading.Lock()  # the progress thread and a finished task both count

    def count() -> int:
        with lock:
            seen.update(store.done_blocks(among=regions - seen))
            return len(seen)

    tracker = progress.BlockProgress(
        count,
        len(regions),
        len(sims),
        len(futures) - len(sims),
        Counter(stage_of.values()),
        planned_blocks,
    )
    with tracker:
        for f in deadline.as_completed(futures):  # the flow's timeout kept by the clock too
            try:
                f.result()  # raises on failure
            except BaseException:
                wait(futures)
                raise
            tracker.task_done(id(f) in sims, stage_of.get(id(f)))


def write_groups(
    spec: AuditSpec,
    store: ResultStore,
    plan: AuditPlan,
    epls: Futures,
    composed: Futures,
    accts: Futures,
    grid: np.ndarray,
) -> xr.Dataset | None:
    """The EPL group (with the composed EPL), the accounting group and, for a release of the
    allocation's simulated noise, the accuracy of its queries; returns the accounting written."""
    if epls:
        epl_ds = epl_dataset(plan, results_of(epls), spec)
        epl_ds = epl_ds.assign(composed_epl_vars(plan, epl_ds, [f.result() for f in composed]))
        store.write_group(S.EPL, epl_ds)
    if not accts:
        return None
    deltas = list(spec.accounting.deltas)
    acct_ds = accounting_dataset(plan, results_of(accts), deltas, grid, spec)
    store.write_group(S.ACCOUNTING, acct_ds)
    if plan.strategy.simulates_allocation:  # the errors of the simulated queries
        store.write_group(S.ACCURACY, accuracy_dataset(plan, plan.sigma2_matrix(), acct_ds))
    return acct_ds
