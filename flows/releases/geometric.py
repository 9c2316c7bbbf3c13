"""Flaxman's geometric releases (GDPC / RDPC / ADPC) of a tree of total counts: the regular tree
of a Flaxman population, or a table's tree (root, its level columns, its rows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from flows.releases.base import Release

if TYPE_CHECKING:
    from auditlib.geography.flaxman import FlaxmanPopulation
    from auditlib.simulate import ResidualBlock
    from auditlib.simulate.hierarchical import CountTree
    from flows.spec import AuditSpec
    from flows.spec.audit_plan import AuditPlan, Block


@dataclass(frozen=True)
class GeometricRelease(Release):
    """A pure ε-DP release of every level of a tree: not accounted, its composed EPL estimated."""

    variant: str = "gdpc"  # "gdpc" | "rdpc" | "adpc"
    simulates_allocation: ClassVar[bool] = False
    accounted: ClassVar[bool] = False
    geometric: ClassVar[bool] = True
    composed_epl: ClassVar[bool] = True

    @property
    def kind(self) -> str:
        return self.variant

    def source(self, spec: AuditSpec, alloc: Any, label: str) -> str:
        r = spec.release
        return f"Flaxman 2019 {r.kind.upper()} release at epsilon = {r.epsilon}"

    def tree_block(
        self,
        plan: AuditPlan,
        block: Block,
        tree: CountTree | FlaxmanPopulation,
        epsilon: float,
        n_runs: int,
    ) -> ResidualBlock:
        """Every replicate of this release of ``tree`` at ``block``'s level (the plan's noise
        seed and replicates)."""
        from auditlib.simulate.hierarchical import residual_block

        return residual_block(
            tree,
            self.variant,  # type: ignore[arg-type]
            epsilon,
            level=block.level,
            seed=plan.noise_seed,
            replicates=plan.replicates,
            n_runs=n_runs,
        )


@dataclass(frozen=True)
class FlaxmanTreeRelease(GeometricRelease):
    """On the regular J-level tree of a Flaxman population (``plan.flaxman``), rebuilt from its
    seed in each task."""

    def simulate_block(self, plan: AuditPlan, block: Block) -> ResidualBlock:
        from auditlib.geography.flaxman import generate_population

        f = plan.flaxman
        assert f is not None
        pop = generate_population(f.people, f.levels, f.mean_per_location, seed=f.seed)
        return self.tree_block(plan, block, pop, f.epsilon, f.n_runs)

    def leaf_maps(self, plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
        from auditlib.geography.flaxman import FlaxmanHierarchy, children_per_unit

        f = plan.flaxman
        assert f is not None
        h = FlaxmanHierarchy(f.levels, children_per_unit(f.people, f.levels, f.mean_per_location))
        leaves = np.arange(h.n_leaves)
        return h.n_leaves, [h.unit_of_leaf(leaves, g) for g in levels]


@dataclass(frozen=True)
class TableTreeRelease(GeometricRelease):
    """On a table's tree of total counts (``plan.table``), read again in each task."""

    def simulate_block(self, plan: AuditPlan, block: Block) -> ResidualBlock:
        from flows.spec.sources import table_tree

        t = plan.table
        assert t is not None
        return self.tree_block(plan, block, table_tree(t), t.epsilon, t.n_runs)

    def leaf_maps(self, plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
        return table_leaf_maps(plan, levels)

    def direct_release(self, plan: AuditPlan) -> Any:
        from auditlib.simulate.direct import Hierarchical

        t = plan.table
        assert t is not None
        return Hierarchical(self.kind, t.epsilon, t.n_runs)  # type: ignore[arg-type]


def table_leaf_maps(plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
    """Leaves (rows) of a table plan's tree and, per level in ``levels``, each row's unit there."""
    from flows.spec.sources import table_tree

    assert plan.table is not None
    tree = table_tree(plan.table)
    n = int(tree.counts[-1].size)
    up = [np.arange(n)]  # up[k]: each leaf's unit k levels above the leaves
    for par in reversed(tree.parents):
        up.append(par[up[-1]])
    return n, [up[tree.levels - g] for g in levels]
