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


@dataclass(frozen=True)
class SparseTopDownRelease(SpineTopDownRelease):
    """Sparse states submitted one by one; the ``production`` group written at the end."""

    submission: ClassVar[str] = SPARSE_STATES

    def missing_units(
        self, plan: AuditPlan, state: int, geolevel: int, unit_index: np.ndarray
    ) -> int:
        from flows.audit.production import missing_units

        return missing_units(plan, state, geolevel, unit_index)

    def finish(self, url: str, plan: AuditPlan) -> None:
        from flows.audit.production import (
            PRODUCTION_GROUP,
            drop_state_histograms,
            production_dataset,
        )
        from storage import store

        drop_state_histograms(url)  # every block is written: the states' kept histograms go
        if not store.group_complete(url, PRODUCTION_GROUP):
            store.write_group(url, PRODUCTION_GROUP, production_dataset(url, plan))

    def stored_residuals(self, url: str, plan: AuditPlan) -> int:
        from flows.audit.production import stored_residuals

        return stored_residuals(url, plan)  # a block's n_items is its capacity
