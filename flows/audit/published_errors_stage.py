"""The stage of a published table's error bars (``release.kind = "published"``): its AMC
replicates in ranges, one Prefect task each on the run's Dask cluster, merged exactly in range
order, then the ``published_errors`` (and ``published_area_errors``) groups written part after
part (at most ``PART_ROWS`` rows each), so the long tables are never held whole.

A range's task returns the range's moments (running sums per level, unit and query cell): the
sums of integer deviations are exact, so the merged moments are those of one run whatever the
ranges and the workers."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from auditlib.published import AMCResult
from flows.audit.published_errors import (
    AREAS_GROUP,
    UNITS_GROUP,
    amc_range,
    errors_groups,
    replicate_ranges,
)
from flows.runtime import progress
from storage.result_store import ResultStore

if TYPE_CHECKING:
    from flows.releases.published import PublishedErrorsRelease
    from flows.spec.audit_plan import AuditPlan


#: as the audit's tasks (``flows.audit.tasks.TASK_OPTS``: inputs not hashed, results not persisted)
#: but without retries: this module is reached from the release strategy, which may not import
#: the tasks (they import the plan); a range whose worker dies is re-run by Dask
TASK_OPTS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="amc-replicates", **TASK_OPTS)
def amc_replicates_task(plan: AuditPlan, first: int, n: int) -> AMCResult:
    """AMC replicates ``first .. first + n - 1`` of the plan's published table."""
    return amc_range(plan, first, n)


def run_error_bars(
    store: ResultStore, plan: AuditPlan, release: PublishedErrorsRelease
) -> dict[str, Any]:
    """Submit the ranges, merge their moments, write the groups (skipped when a finished run's
    groups are there already); returns the number of replicates and ranges."""
    groups = [UNITS_GROUP, *([AREAS_GROUP] if release.areas else [])]
    ranges = replicate_ranges(plan.replicates, release.replicates_per_task, release.tasks)
    if all(store.group_complete(g) for g in groups):
        return {"replicates": plan.replicates, "ranges": 0}
    t0 = time.perf_counter()
    futures = [
        amc_replicates_task.with_options(task_run_name=f"amc r{a}–{a + n - 1}").submit(plan, a, n)
        for a, n in ranges
    ]
    merged: AMCResult | None = None
    while futures:  # in range order, each range's moments dropped once merged
        result: AMCResult = futures.pop(0).result()
        merged = result if merged is None else merged.merge(result)
        del result
    assert merged is not None
    for group in errors_groups(plan, merged, release.alpha, release.areas):
        store.write_group_parts(group.name, group.parts(), group.rows)  # one part held at a time
    progress.stage(
        f"error bars: {merged.n_replicates} TopDown runs from the published counts in "
        f"{len(ranges)} range{'s' if len(ranges) != 1 else ''} ({time.perf_counter() - t0:.0f} s)"
    )
    return {"replicates": merged.n_replicates, "ranges": len(ranges)}
