"""TopDown-style releases, dense: one run per state measures every geolevel of the state (the
nation, if measured, is the sum of the states), on synthetic states, spine states or a table's
own levels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from auditlib.geography import NATIONAL
from flows.releases.base import TOPDOWN_STATES, Release

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan
    from storage.result_store import ResultStore


@dataclass(frozen=True)
class TopDownRelease(Release):
    """A TopDown run per synthetic state (``plan.topdown``, ``plan.hierarchy``); its blocks are
    written state by state, in ranges of replicates; the states' kept histograms are dropped at the
    end."""

    topdown_bias: ClassVar[bool] = True
    replicate_ranges: ClassVar[bool] = True
    submission: ClassVar[str] = TOPDOWN_STATES

    @property
    def kind(self) -> str:
        return "topdown"

    def state_population(self, plan: AuditPlan, key: int) -> tuple[Any, np.ndarray]:
        """The hierarchy (``StateHierarchy``) and block histograms of state ``key`` (1..n):
        the library's ``synthetic_state`` (stream ``SYNTHETIC_HISTOGRAMS``)."""
        from auditlib.geography.schema import schema
        from auditlib.simulate.topdown import synthetic_state

        assert plan.topdown is not None
        sch = schema(plan.topdown.schema)  # no query matrices: a large schema has none
        return synthetic_state(plan.hierarchy, plan.population, key, sch)

    def run_levels(self, plan: AuditPlan) -> list[int]:
        """The levels (indices in ``plan.geolevels``) of one run, top first (the nation is a sum)."""
        return [plan.geolevels.index(level) for level in plan.hierarchy.geolevels]

    def state_units(self, plan: AuditPlan, key: int) -> int:
        """Units of every level (blocks included) of state ``key``."""
        h = plan.hierarchy
        return 1 + sum(h.units_per_state(g) for g in h.below_state)

    def finish(self, store: ResultStore, plan: AuditPlan) -> None:
        from flows.audit import kept_histograms

        kept_histograms.drop(store, kept_histograms.TOPDOWN_STATE_HISTOGRAMS)


@dataclass(frozen=True)
class SpineTopDownRelease(TopDownRelease):
    """A TopDown run per US spine state (``plan.spine``; ``key`` = spine index + 1)."""

    runs_on_spine: ClassVar[bool] = True

    def state_population(self, plan: AuditPlan, key: int) -> tuple[Any, np.ndarray]:
        """The spine state's hierarchy and histograms (``spine_state_histograms``; the ``total``
        schema takes the block populations)."""
        from auditlib.geography.populations import spine_state_histograms
        from auditlib.geography.schema import schema
        from auditlib.simulate.topdown import StateHierarchy, spine_state
        from flows.audit.spine_share import spine_of
        from flows.spec.sources import spine_levels

        assert plan.topdown is not None and plan.spine is not None
        sch = schema(plan.topdown.schema)
        spine = spine_of(plan.spine)  # the run's shared copy on a Dask worker
        hist: np.ndarray
        # over the plan's levels: the spine's five (PL94), with the DHC's Prim and
        # Tract_Subset_Group where the allocation has them; down to the blocks, whose people
        # the histograms are, when release.lowest_level stops the release higher
        chain = spine_levels(plan.geolevels)
        whole = chain if chain[-1] == "Block" else (*chain, "Block")
        hierarchy, hist = spine_state(spine, key - 1, whole)
        if sch.n_cells != 1:
            hist = spine_state_histograms(spine, key - 1, sch, plan.population.seed)
        if whole != chain:  # the lowest level released: its histograms are its blocks' sums
            hist = hierarchy.aggregate(hist)[len(chain) - 1]
            hierarchy = StateHierarchy(chain, hierarchy.parents[: len(chain) - 1])
        return hierarchy, hist

    def run_levels(self, plan: AuditPlan) -> list[int]:
        return [gi for gi, g in enumerate(plan.geolevels) if g != NATIONAL]

    def state_units(self, plan: AuditPlan, key: int) -> int:
        from flows.audit.spine_share import spine_of
        from flows.spec.sources import spine_levels

        assert plan.spine is not None
        spine = spine_of(plan.spine)
        return sum(int(spine.units_per_state(g)[key - 1]) for g in spine_levels(plan.geolevels))


@dataclass(frozen=True)
class TableTopDownRelease(TopDownRelease):
    """One TopDown run (``key`` 1) of a table's hierarchy (``plan.table_hierarchy``): its root over
    the hierarchy columns over its rows, each level accounted as an allocation geolevel."""

    def state_population(self, plan: AuditPlan, key: int) -> tuple[Any, np.ndarray]:
        from auditlib.simulate.topdown import StateHierarchy
        from flows.spec.sources import table_hierarchy

        assert plan.table_hierarchy is not None
        tab = table_hierarchy(plan.table_hierarchy)
        below = tab.levels  # the hierarchy columns, then the rows
        parents = [np.zeros(tab.n_units(below[0]), dtype=np.int64)]
        parents += [np.asarray(tab.parents[lv], dtype=np.int64) for lv in below[1:]]
        levels = (plan.geolevels[0], *below)
        return StateHierarchy(levels, tuple(parents)), np.asarray(tab.histograms, np.int64)

    def run_levels(self, plan: AuditPlan) -> list[int]:
        return list(range(len(plan.geolevels)))

    def top_geolevel(self, plan: AuditPlan) -> int:
        return 0  # the table's root

    def measured_as(self, plan: AuditPlan, geolevel: str | None) -> str | None:
        t = plan.table_hierarchy
        if t is None or geolevel is None:
            return geolevel
        return t.measured_as[plan.geolevels.index(geolevel)]
