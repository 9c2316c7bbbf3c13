"""One block of an audit plan, computed: the residuals of a seed 001 / seed 003 release level, a
state's TopDown replicates and the nation's sum, and the population a TopDown state runs on.
Prefect tasks (``flows.tasks``) and the direct estimate (``flows.direct``) call these."""

from __future__ import annotations

from typing import Any

import numpy as np

from auditlib.geography import NATIONAL
from auditlib.simulate import ResidualBlock
from flows.spec.plan import (
    AuditPlan,
    Block,
    TableParams,
    TopDownParams,
    table_hierarchy,
    table_tree,
)
from flows.spec.sources import load_observed, load_table
from flows.spine_share import spine_of

#: stream of seed 003's stratified releases of a table (``seeds.rng(noise_seed, STRATIFIED_NOISE, r)``)
STRATIFIED_NOISE = 17


def leaf_maps(plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
    """Leaves of a seed 001 plan's tree and, per level in ``levels``, each leaf's unit there."""
    if plan.table is not None:
        tree = table_tree(plan.table)
        n = int(tree.counts[-1].size)
        up = [np.arange(n)]  # up[k]: each leaf's unit k levels above the leaves
        for par in reversed(tree.parents):
            up.append(par[up[-1]])
        return n, [up[tree.levels - g] for g in levels]
    from auditlib.geography.flaxman import FlaxmanHierarchy, children_per_unit

    f = plan.flaxman
    if f is None:
        raise ValueError("leaf_maps needs a seed 001 plan")
    h = FlaxmanHierarchy(f.levels, children_per_unit(f.people, f.levels, f.mean_per_location))
    leaves = np.arange(h.n_leaves)
    return h.n_leaves, [h.unit_of_leaf(leaves, g) for g in levels]


def stratified_block(plan: AuditPlan, t: TableParams) -> ResidualBlock:
    """Seed 003's SA3 / SA4 of a table's rows (strata = count columns), every replicate: items are
    each row's total (query 0), then each row's counts (query 1, cell = column)."""
    from auditlib import seeds
    from auditlib.simulate.stratified import invariant_release, stratified_release

    tab = load_table(t.path, t.counts, t.levels, t.unit)
    x = np.asarray(tab.histograms, dtype=np.int64)  # (rows, strata)
    n, k = x.shape
    res = np.empty((plan.replicates, n * (1 + k)), dtype=np.float32)
    for r in range(plan.replicates):
        g = seeds.rng(plan.noise_seed, STRATIFIED_NOISE, r)
        if plan.release == "sa3":
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


def release_block(plan: AuditPlan, block: Block) -> ResidualBlock:
    """Residuals of one level of a seed 001 release (the population is rebuilt from its seed, or
    the table read again)."""
    from auditlib.geography.flaxman import generate_population
    from auditlib.simulate.hierarchical import residual_block

    if plan.table is not None and plan.release in ("sa3", "sa4"):
        return stratified_block(plan, plan.table)
    if plan.table is not None and plan.table.observed is not None:  # published: read, not drawn
        level = plan.geolevels[block.geolevel] if block.geolevel else None  # 0: the root
        return load_observed(*plan.table.observed).residual_block(level)
    if plan.table is not None:
        t = plan.table
        return residual_block(
            table_tree(t),
            plan.release,  # type: ignore[arg-type]
            t.epsilon,
            level=block.geolevel,
            seed=plan.noise_seed,
            replicates=plan.replicates,
            n_runs=t.n_runs,
        )
    f = plan.flaxman
    if f is None:
        raise ValueError("release_block needs a seed 001 plan")
    pop = generate_population(f.people, f.levels, f.mean_per_location, seed=f.seed)
    return residual_block(
        pop,
        plan.release,  # type: ignore[arg-type]
        f.epsilon,
        level=block.geolevel,
        seed=plan.noise_seed,
        replicates=plan.replicates,
        n_runs=f.n_runs,
    )


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
    from auditlib.geography.schema import schema
    from auditlib.simulate.topdown import StateHierarchy, synthetic_state

    if plan.topdown is None:
        raise ValueError("needs a topdown plan")
    sch = schema(plan.topdown.schema)  # no query matrices: a large schema has none
    hist: np.ndarray
    if plan.table_hierarchy is not None:
        tab = table_hierarchy(plan.table_hierarchy)
        below = tab.levels  # the hierarchy columns, then the rows
        parents = [np.zeros(tab.n_units(below[0]), dtype=np.int64)]
        parents += [np.asarray(tab.parents[lv], dtype=np.int64) for lv in below[1:]]
        levels = (plan.geolevels[0], *below)
        return StateHierarchy(levels, tuple(parents)), np.asarray(tab.histograms, np.int64)
    if plan.spine is not None:
        from auditlib.geography.populations import spine_state_histograms
        from auditlib.simulate.topdown import spine_state

        spine = spine_of(plan.spine)  # the run's shared copy on a Dask worker
        hierarchy, hist = spine_state(spine, key - 1)
        if sch.n_cells != 1:
            hist = spine_state_histograms(spine, key - 1, sch, plan.population.seed)
        return hierarchy, hist
    return synthetic_state(plan.hierarchy, plan.population, key, sch)


def run_levels(plan: AuditPlan) -> list[int]:
    """The geolevel indices of one TopDown run of a plan, top first (the nation is a sum)."""
    if plan.table_hierarchy is not None:
        return list(range(len(plan.geolevels)))
    if plan.spine is not None:
        return [gi for gi, g in enumerate(plan.geolevels) if g != NATIONAL]
    return [plan.geolevels.index(level) for level in plan.hierarchy.geolevels]


def topdown_state(
    plan: AuditPlan, block: Block, replicate_range: tuple[int, int] | None = None
) -> tuple[dict[int, ResidualBlock], np.ndarray, np.ndarray]:
    """One state's TopDown replicates (``block``: the state's State-level block), all of them or
    those of ``replicate_range`` = [start, stop) (each replicate its own keyed streams, so a range
    is the same rows of the whole run): residual blocks per geolevel index, the State level's
    released histograms (replicates, n_cells) and its true histogram (n_cells,)."""
    from auditlib.simulate.topdown import level_residuals

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
    """The geolevel indices of one state's TopDown run (top first) and its replicates'
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
    """One state's TopDown replicates as histograms: per geolevel index, the true (units,
    cells) and the released (replicates, units, cells) — every cell of every unit, whichever
    queries the level measures."""
    gis, runs = _topdown_runs(plan, block, None)
    return {
        gi: (np.asarray(runs[0].truth[i]), np.stack([np.asarray(run.dp[i]) for run in runs]))
        for i, gi in enumerate(gis)
    }


def topdown_nation(
    plan: AuditPlan, geolevel: int, state_dp: list[np.ndarray], state_truth: list[np.ndarray]
) -> ResidualBlock:
    """The national level: the sum of the states' released (and true) histograms."""
    from auditlib.simulate.topdown import level_residuals

    _, _, matrices, ids = _topdown_inputs(plan)
    dp = np.sum(state_dp, axis=0)  # (replicates, n_cells)
    truth = np.sum(state_truth, axis=0)
    return level_residuals(
        truth[None, :],
        [row[None, :] for row in dp],
        matrices,
        [q.name for _, q in plan.level_queries[geolevel]],
        ids,
    )
