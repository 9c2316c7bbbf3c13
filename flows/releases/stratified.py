"""Flaxman & Petti's stratified releases (SA3 / SA4) of a table's rows: each row's total, then its counts
(the strata), every replicate in one block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from auditlib.simulate import ResidualBlock
from flows.releases.base import Release
from flows.releases.geometric import table_leaf_maps

if TYPE_CHECKING:
    from flows.spec import AuditSpec
    from flows.spec.audit_plan import AuditPlan, Block, TableParams

#: stream of Flaxman & Petti's stratified releases of a table (``seeds.rng(noise_seed, STRATIFIED_NOISE, r)``)
STRATIFIED_NOISE = 17


@dataclass(frozen=True)
class StratifiedRelease(Release):
    """SA3 (ε of the totals, ε₂ of the strata) or SA4 (the parent's total invariant)."""

    variant: str = "sa3"  # "sa3" | "sa4"
    simulates_allocation: ClassVar[bool] = False
    accounted: ClassVar[bool] = False
    geometric: ClassVar[bool] = True

    @property
    def kind(self) -> str:
        return self.variant

    def source(self, spec: AuditSpec, alloc: Any, label: str) -> str:
        r = spec.release
        return f"Flaxman & Petti's stratified {r.kind.upper()} release at epsilon = {r.epsilon}"

    def simulate_block(self, plan: AuditPlan, block: Block) -> ResidualBlock:
        assert plan.table is not None
        return stratified_block(plan, plan.table)

    def leaf_maps(self, plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
        return table_leaf_maps(plan, levels)

    def direct_release(self, plan: AuditPlan) -> Any:
        from auditlib.simulate.direct import Stratified

        t = plan.table
        assert t is not None
        return Stratified(self.kind, t.epsilon, t.epsilon_strata)  # type: ignore[arg-type]


def stratified_block(plan: AuditPlan, t: TableParams) -> ResidualBlock:
    """Flaxman & Petti's SA3 / SA4 of a table's rows (strata = count columns), every replicate: items are
    each row's total (query 0), then each row's counts (query 1, cell = column)."""
    from auditlib import seeds
    from auditlib.simulate.stratified import invariant_release, stratified_release
    from flows.spec.sources import load_table

    variant = plan.strategy.kind

    tab = load_table(t.path, t.counts, t.levels, t.unit)
    x = np.asarray(tab.histograms, dtype=np.int64)  # (rows, strata)
    n, k = x.shape
    res = np.empty((plan.replicates, n * (1 + k)), dtype=np.float32)
    for r in range(plan.replicates):
        g = seeds.rng(plan.noise_seed, STRATIFIED_NOISE, r)
        if variant == "sa3":
            e2 = t.epsilon_strata if t.epsilon_strata is not None else t.epsilon
            rel = stratified_release(x, t.epsilon, e2, g)
        else:
            rel = invariant_release(x, tab.parents[tab.levels[-1]], t.epsilon, g)
        res[r, :n] = rel.total_residuals()
        res[r, n:] = rel.strata_residuals().ravel()
    if x.max(initial=0) > np.iinfo(np.int32).max:
        raise ValueError("a table count exceeds int32")
    return ResidualBlock(
        residual=res,
        truth=np.concatenate([x.sum(axis=1), x.ravel()]).astype(np.int32),
        query_index=np.repeat(np.array([0, 1], dtype=np.int16), [n, n * k]),
        unit_index=np.concatenate([np.arange(n), np.repeat(np.arange(n), k)]).astype(np.int32),
        cell_index=np.concatenate([np.zeros(n), np.tile(np.arange(k), n)]).astype(np.int32),
    )
