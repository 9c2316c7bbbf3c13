"""The allocation's discrete Gaussian noise simulated on the synthetic hierarchy, block by block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flows.releases.base import Release

if TYPE_CHECKING:
    from auditlib.simulate import ResidualBlock
    from flows.spec.audit_plan import AuditPlan, Block


@dataclass(frozen=True)
class AllocationRelease(Release):
    """Each (state, geolevel) block simulated on its own from the allocation's noise."""

    def simulate_block(self, plan: AuditPlan, block: Block) -> ResidualBlock:
        from auditlib.simulate.synthetic import simulate_synthetic_block

        return simulate_synthetic_block(
            hierarchy=plan.hierarchy,
            params=plan.population,
            state=block.state_key,
            geolevel=plan.geolevels[block.level],
            geolevel_index=block.level,
            queries=plan.level_queries[block.level],
            replicates=plan.replicates,
            noise_seed=plan.noise_seed,
            postprocess=plan.postprocess,  # type: ignore[arg-type]
        )
