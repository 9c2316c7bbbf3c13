"""A published release of a table (``release.kind = "observed"``): its runs read, not drawn, and
audited against the declared allocation's exact accounting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from flows.releases.base import Release, allocation_source
from flows.releases.geometric import table_leaf_maps

if TYPE_CHECKING:
    from auditlib.simulate import ResidualBlock
    from flows.spec import AuditSpec
    from flows.spec.audit_plan import AuditPlan, Block

#: how the EPL sum composes a published release's levels
SUMS_OF_ROWS = (
    "sum over (geolevel, query) of a published release: its levels are sums of the "
    "same rows, not independent; an upper reading, no estimate of their joint loss"
)


@dataclass(frozen=True)
class ObservedRelease(Release):
    """Every level of the table released; one replicate per published run; claims tested."""

    simulates_allocation: ClassVar[bool] = False
    accounted: ClassVar[bool] = True
    geometric: ClassVar[bool] = True
    published: ClassVar[bool] = True

    @property
    def kind(self) -> str:
        return "observed"

    def simulate_block(self, plan: AuditPlan, block: Block) -> ResidualBlock:
        from flows.spec.sources import load_observed

        assert plan.table is not None and plan.table.observed is not None
        level = plan.geolevels[block.level] if block.level else None  # 0: the root
        return load_observed(*plan.table.observed).residual_block(level)

    def leaf_maps(self, plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
        return table_leaf_maps(plan, levels)

    def direct_release(self, plan: AuditPlan) -> Any:
        """None to draw: a published release is read from its files, and a direct experiment draws
        the release on D and on D′."""
        from auditlib.exceptions import InvalidParameterError

        raise InvalidParameterError(
            "Invalid --spec: release.kind = 'observed' is a published release read from its files, "
            "and direct draws the release on D and D′; set release.kind to the mechanism that "
            "drew it (gdpc, rdpc, adpc, sa3, sa4) to study that mechanism"
        )

    def source(self, spec: AuditSpec, alloc: Any, label: str) -> str:
        r = spec.release
        return (
            f"published release ({len(r.published or r.published_files)} run(s)) beside the true "
            f"counts of {spec.population.path}; accounting: the declared allocation "
            + allocation_source(alloc, label)
        )

    def composed_over(self, default: str) -> str:
        return SUMS_OF_ROWS

    def published_columns(self, plan: AuditPlan) -> tuple[str, ...]:
        return plan.table.counts if plan.table is not None else ()
