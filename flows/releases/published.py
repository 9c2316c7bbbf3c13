"""Error bars for published TopDown counts (``release.kind = "published"``): the table holds the
published counts, and ``audit.replicates`` further TopDown runs of the declared allocation start
from them (the approximate Monte Carlo of ``auditlib.published``).

Nothing is simulated from a truth, so there are no residuals: the plan has no blocks (every region
of the residual store is empty), no EPL, no accounting and no claims. The kind's own stage runs at
the end (:meth:`PublishedErrorsRelease.finish`): the replicates in ranges on Dask, merged exactly,
then the ``published_errors`` group (``flows.audit.published_errors``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from flows.releases.topdown import TableTopDownRelease

if TYPE_CHECKING:
    from flows.spec import AuditSpec
    from flows.spec.audit_plan import AuditPlan
    from storage.result_store import ResultStore


@dataclass(frozen=True)
class PublishedErrorsRelease(TableTopDownRelease):
    """TopDown runs of a table's hierarchy from its published counts: ``alpha`` the intervals'
    level, ``areas`` the areas file ("" none), ``replicates_per_task`` the most replicates of a
    Dask task's range (0: no limit) and ``tasks`` the ranges wanted (workers × tasks per worker,
    so that every worker runs some), ``queries`` the schema's queries with error bars (() all);
    the replicates' seed is the plan's ``noise_seed``."""

    alpha: float = 0.1
    areas: str = ""
    replicates_per_task: int = 25
    tasks: int = 1
    queries: tuple[str, ...] = ()

    simulates_allocation: ClassVar[bool] = False
    accounted: ClassVar[bool] = False
    topdown_bias: ClassVar[bool] = False
    replicate_ranges: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        return "published"

    def source(self, spec: AuditSpec, alloc: Any, label: str) -> str:
        return (
            f"published counts of {spec.population.path}; error bars from "
            f"{spec.audit.replicates} TopDown runs of allocation {label} started from them"
        )

    def finish(self, store: ResultStore, plan: AuditPlan) -> None:
        from flows.audit.published_errors_stage import run_error_bars

        run_error_bars(store, plan, self)

    def stored_residuals(self, store: ResultStore, plan: AuditPlan) -> int:
        return 0


def published_errors_plan(spec: AuditSpec, plan: AuditPlan) -> AuditPlan:
    """A table's TopDown plan made the plan of its published counts' error bars: no blocks (every
    region of the residual store empty), the strategy holding the spec's settings."""
    r, c = spec.release, spec.cluster
    workers = c.adapt.maximum if c.adapt is not None else c.n_workers  # a scheduler's: n_workers
    tasks = max(1, workers * max(1, c.tasks_per_worker))
    strategy = PublishedErrorsRelease(
        r.alpha, r.areas, c.replicates_per_task, tasks, tuple(r.queries)
    )
    empty = tuple((0, gi) for gi in range(len(plan.geolevels)))
    return replace(plan, blocks=(), empty=empty, release="published", strategy=strategy)
