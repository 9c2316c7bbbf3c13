"""TopDown of a production schema's sparse histograms on spine states (``flows.audit.production``): a
block's items are the query cells non-zero in the truth or a replicate, so a block's ``n_items``
is its capacity and the run counts what it stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from flows.releases.base import SPARSE_STATES
from flows.releases.topdown import SpineTopDownRelease

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan
    from storage.result_store import ResultStore


@dataclass(frozen=True)
class SparseTopDownRelease(SpineTopDownRelease):
    """Sparse states submitted one by one; the ``production`` group written at the end."""

    submission: ClassVar[str] = SPARSE_STATES
    #: a state's replicates run in ranges of ``cluster.replicates_per_task``; its blocks are
    #: written by one task from all of them (``flows.audit.production_ranges``)
    replicate_ranges: ClassVar[bool] = True

    def missing_units(self, plan: AuditPlan, state: int, level: int, unit_index: np.ndarray) -> int:
        from flows.audit.production import missing_units

        return missing_units(plan, state, level, unit_index)

    def finish(self, store: ResultStore, plan: AuditPlan) -> None:
        from flows.audit import production_progress, production_ranges
        from flows.audit.production import (
            PRODUCTION_GROUP,
            drop_state_histograms,
            production_dataset,
        )

        drop_state_histograms(store)  # every block is written: the states' kept histograms go
        production_ranges.drop(store)  # and the ranges' histograms
        production_progress.drop(store)  # and the states' chunks
        if not store.group_complete(PRODUCTION_GROUP):
            store.write_group(PRODUCTION_GROUP, production_dataset(store, plan))
        production_progress.drop_costs(store)  # the production group holds them

    def stored_residuals(self, store: ResultStore, plan: AuditPlan) -> int:
        from flows.audit.production import stored_residuals

        return stored_residuals(store, plan)  # a block's n_items is its capacity
