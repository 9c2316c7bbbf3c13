"""Plans of a table population: Flaxman's and the stratified releases of its totals, a published
release read from files (observed), and TopDown over its hierarchy (with the published counts'
error bars)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from auditlib.geography import PopulationParams, SyntheticHierarchy
from auditlib.seeds import seed_sequence
from flows.releases import ObservedRelease, StratifiedRelease, TableTopDownRelease, TableTreeRelease
from flows.releases.published import published_errors_plan
from flows.spec.audit_plan import (
    AuditPlan,
    Block,
    TableHierarchyParams,
    TableParams,
    TopDownParams,
)
from flows.spec.model import AuditSpec
from flows.spec.plan_levels import by_level, measured_query_plans
from flows.spec.sources import (
    load_observed,
    observed_args,
    observed_schema,
    table_hierarchy,
    table_tree,
    topdown_measured,
)


def table_topdown_plan(spec: AuditSpec) -> AuditPlan:
    """A TopDown-style release of a table's hierarchy: one run (state "all", key 1) from the root
    (the whole table, its total invariant) down the hierarchy columns to the rows; each level
    measured with the queries of the allocation geolevel ``release.levels`` maps onto it."""
    from auditlib.geography.schema import schema

    a, p = spec.audit, spec.population
    sch = schema(p.attributes)
    levels = spec.geolevels
    measured_as = spec.table_measured_geolevels
    measured = topdown_measured(
        a.allocation, measured_as, p.attributes, a.neighbours, a.universe, a.region
    )
    params = TableHierarchyParams(
        p.path, spec.table_counts, p.level_columns, p.unit, p.attributes, measured_as
    )
    tab = table_hierarchy(params)
    queries, level_queries = measured_query_plans(measured, sch)
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    blocks = tuple(
        Block(0, gi, 1, f"all/{g}", tab.n_units(g) * sum(q.n_sim for _, q in level_queries[gi]))
        for gi, g in enumerate(levels[1:], start=1)
    )
    root = Block(0, 0, 1, f"all/{levels[0]}", sum(q.n_sim for _, q in level_queries[0]))
    plan = AuditPlan(
        states=("all",),
        geolevels=levels,
        queries=queries,
        level_queries=tuple(level_queries),
        hierarchy=SyntheticHierarchy(("State",), (), 1),  # unused: the table is the hierarchy
        population=PopulationParams(seed=int(base_seed[0])),
        blocks=(root, *blocks),
        empty=(),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="topdown",
        release="topdown",
        topdown=TopDownParams(sch.name, by_level(levels, measured), spec.release.tolerance),
        table_hierarchy=params,
        strategy=TableTopDownRelease(),
    )  # published counts' error bars: the same runs, from the published counts
    return published_errors_plan(spec, plan) if spec.release.kind == "published" else plan


def table_plan(spec: AuditSpec) -> AuditPlan:
    """Flaxman's releases of a table's totals: one tree ("all"), levels root, columns, rows."""
    from auditlib.simulate.hierarchical import released_levels

    a, p, r = spec.audit, spec.population, spec.release
    params = TableParams(
        path=p.path,
        counts=tuple(p.counts),
        levels=p.level_columns,
        unit=p.unit,
        epsilon=r.epsilon,
        n_runs=r.n_runs,
        epsilon_strata=r.epsilon_strata,
        attributes=observed_schema(spec) if r.kind == "observed" else "",
    )
    tree = table_tree(params)
    levels = spec.geolevels
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    if r.kind == "observed":
        return _observed_plan(spec, replace(params, observed=observed_args(spec)), tree, base_seed)
    stratified = r.kind in ("sa3", "sa4")
    if stratified:  # the rows: each row's total, then its counts (the strata)
        released = {len(levels) - 1}
        per_unit = 1 + len(params.counts)
    else:
        released = set(released_levels(tree, r.kind))  # type: ignore[arg-type]
        per_unit = 1
    blocks = tuple(
        Block(0, j, 0, f"all/{levels[j]}", per_unit * int(tree.counts[j].size))
        for j in range(len(levels))
        if j in released
    )
    return AuditPlan(
        states=("all",),
        geolevels=levels,
        queries=("total", "strata") if stratified else ("total",),
        level_queries=tuple(() for _ in levels),
        hierarchy=SyntheticHierarchy(("State",), (), 1),  # unused: the table is the hierarchy
        population=PopulationParams(seed=int(base_seed[0])),
        blocks=blocks,
        empty=tuple((0, j) for j in range(len(levels)) if j not in released),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="none",
        release=r.kind,
        table=params,
        strategy=StratifiedRelease(r.kind) if stratified else TableTreeRelease(r.kind),
    )


def _observed_plan(spec: AuditSpec, params: TableParams, tree: Any, base_seed: Any) -> AuditPlan:
    """A published release of a table: every level (root, levels columns, rows) released, one
    replicate per published run, the residuals read instead of drawn."""
    obs = load_observed(*(params.observed or ()))
    levels = spec.geolevels
    per_unit = sum(1 if q == "total" else obs.population.schema.n_cells for q in obs.queries)
    blocks = tuple(
        Block(0, j, 0, f"all/{levels[j]}", per_unit * int(tree.counts[j].size))
        for j in range(len(levels))
    )
    return AuditPlan(
        states=("all",),
        geolevels=levels,
        queries=obs.queries,
        level_queries=tuple(() for _ in levels),
        hierarchy=SyntheticHierarchy(("State",), (), 1),  # unused: the table is the hierarchy
        population=PopulationParams(seed=int(base_seed[0])),
        blocks=blocks,
        empty=(),
        replicates=obs.n_runs,
        noise_seed=int(base_seed[1]),
        postprocess="none",
        release="observed",
        table=params,
        strategy=ObservedRelease(),
    )
