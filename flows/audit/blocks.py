"""One block of an audit plan, computed: the residuals of a geometric (Flaxman 2019) or stratified (Flaxman & Petti) release level, a
state's TopDown replicates and the nation's sum, and the population a TopDown state runs on.
Prefect tasks (``flows.audit.tasks``) and the direct estimate (``flows.experiments.direct_loss``) call these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from auditlib.simulate import ResidualBlock
from flows.releases.stratified import STRATIFIED_NOISE as STRATIFIED_NOISE
from flows.releases.stratified import stratified_block as stratified_block

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan, Block, TopDownParams


def leaf_maps(plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
    """Leaves of a tree release's tree and, per level in ``levels``, each leaf's unit there."""
    return plan.strategy.leaf_maps(plan, levels)


def release_block(plan: AuditPlan, block: Block) -> ResidualBlock:
    """Residuals of one block of a batched release (a level of a tree release: the population
    rebuilt from its seed, or the table read again)."""
    return plan.strategy.simulate_block(plan, block)


def _topdown_inputs(plan: AuditPlan) -> tuple[TopDownParams, Any, dict[str, Any], dict[str, int]]:
    from auditlib.geography.schema import schema

    td = plan.topdown
    if td is None:
        raise ValueError("needs a topdown plan")
    sch = schema(td.schema)
    matrices = {q: sch.query_matrix(q) for q in sch.query_names}
    return td, sch, matrices, {q: i for i, q in enumerate(plan.queries)}


def state_population(plan: AuditPlan, key: int) -> tuple[Any, np.ndarray]:
    """The hierarchy (``StateHierarchy``) and block histograms ``(n_blocks, n_cells)`` of one state
    (``key``: 1..n, a spine state's index + 1) of a TopDown plan: the population its TopDown runs
    on, and D of a direct estimate built from the same spec. Synthetic states are the library's
    ``synthetic_state`` (stream ``SYNTHETIC_HISTOGRAMS``), spine states draw their histograms with
    ``spine_state_histograms``; the ``total`` schema takes the block populations. A table is one
    run (``key`` 1): its root over the hierarchy columns over its rows, the rows' histograms."""
    return plan.strategy.state_population(plan, key)


def run_levels(plan: AuditPlan) -> list[int]:
    """The levels (indices in ``plan.geolevels``) of one TopDown run of a plan, top first (the nation is a sum)."""
    return plan.strategy.run_levels(plan)


def topdown_state(
    plan: AuditPlan, block: Block, replicate_range: tuple[int, int] | None = None
) -> tuple[dict[int, ResidualBlock], np.ndarray, np.ndarray]:
    """One state's TopDown replicates (``block``: the state's State-level block), all of them or
    those of ``replicate_range`` = [start, stop) (each replicate its own keyed streams, so a range
    is the same rows of the whole run): residual blocks per level, the State level's
    released histograms (replicates, n_cells) and its true histogram (n_cells,)."""
    from auditlib.simulate.topdown_residuals import level_residuals

    _, _, matrices, ids = _topdown_inputs(plan)
    gis, runs = _topdown_runs(plan, block, replicate_range)
    out = {
        gi: level_residuals(
            runs[0].truth[i],
            [run.dp[i] for run in runs],
            matrices,
            [q.name for _, q in plan.level_queries[gi]],
            ids,
        )
        for i, gi in enumerate(gis)
    }
    return out, np.stack([run.dp[0][0] for run in runs]), runs[0].truth[0][0]


def _topdown_runs(
    plan: AuditPlan, block: Block, replicate_range: tuple[int, int] | None
) -> tuple[list[int], list[Any]]:
    """The levels of one state's TopDown run (top first) and its replicates'
    releases (``auditlib.simulate.topdown.TopDownRelease``)."""
    from auditlib import seeds
    from auditlib.simulate.topdown import TOPDOWN_NOISE, replicates

    td, _, matrices, _ = _topdown_inputs(plan)
    key = block.state_key
    hierarchy, hist = state_population(plan, key)
    gis = run_levels(plan)
    r0, r1 = (0, plan.replicates) if replicate_range is None else replicate_range
    runs = replicates(
        hierarchy,
        hist,
        matrices,
        [td.measured[plan.geolevels[gi]] for gi in gis],
        lambda r: [seeds.rng(plan.noise_seed, TOPDOWN_NOISE, key, gi, r0 + r) for gi in gis],
        r1 - r0,
        tol=td.tol,
    )
    return gis, runs


def topdown_histograms(plan: AuditPlan, block: Block) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """One state's TopDown replicates as histograms: per level, the true (units,
    cells) and the released (replicates, units, cells) — every cell of every unit, whichever
    queries the level measures."""
    gis, runs = _topdown_runs(plan, block, None)
    return {
        gi: (np.asarray(runs[0].truth[i]), np.stack([np.asarray(run.dp[i]) for run in runs]))
        for i, gi in enumerate(gis)
    }


def topdown_nation(
    plan: AuditPlan, level: int, state_dp: list[np.ndarray], state_truth: list[np.ndarray]
) -> ResidualBlock:
    """The national level: the sum of the states' released (and true) histograms."""
    from auditlib.simulate.topdown_residuals import level_residuals

    _, _, matrices, ids = _topdown_inputs(plan)
    dp = np.sum(state_dp, axis=0)  # (replicates, n_cells)
    truth = np.sum(state_truth, axis=0)
    return level_residuals(
        truth[None, :],
        [row[None, :] for row in dp],
        matrices,
        [q.name for _, q in plan.level_queries[level]],
        ids,
    )
