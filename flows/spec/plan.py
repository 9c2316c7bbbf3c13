"""What an audit will compute, from the spec alone: :func:`make_plan` picks the builder of the
spec's population and release kind and returns its :class:`~flows.spec.audit_plan.AuditPlan`.

The synthetic population's builders are here (the allocation's release, Flaxman 2019's, TopDown);
a table's are in ``plan_tables``, the US spine's in ``plan_spine``."""

from __future__ import annotations

from dataclasses import replace

from auditlib.allocations import load_allocation
from auditlib.geography import NATIONAL, PopulationParams, SyntheticHierarchy
from auditlib.seeds import seed_sequence
from auditlib.simulate import QueryPlan
from flows.releases import FlaxmanTreeRelease, TopDownRelease
from flows.spec.audit_plan import AuditPlan, Block, FlaxmanParams, TopDownParams
from flows.spec.model import AuditSpec
from flows.spec.plan_levels import by_level, measured_queries, measured_query_plans, state_levels
from flows.spec.plan_spine import spine_plan
from flows.spec.plan_tables import table_plan, table_topdown_plan


def make_plan(spec: AuditSpec) -> AuditPlan:
    """The plan of ``spec``: its regions, queries, blocks and release strategy."""
    if spec.population.kind == "spine":
        return spine_plan(spec)
    if spec.population.kind == "table" and spec.release.kind in ("topdown", "published"):
        return table_topdown_plan(spec)
    if spec.population.kind == "table":
        return table_plan(spec)
    if spec.release.kind == "topdown":
        return _topdown_plan(spec)
    if spec.release.kind != "allocation":
        return _flaxman_plan(spec)
    a = spec.audit
    alloc = load_allocation(a.allocation)
    levels = spec.geolevels
    wanted = spec.simulation.queries
    budgets = [
        q for q in alloc.select(a.universe, a.region) if wanted == "all" or q.query in wanted
    ]
    queries = tuple(dict.fromkeys(q.query for q in budgets))
    level_queries = []
    for g in levels:
        lq = []
        for q in budgets:
            if q.geolevel != g:
                continue
            n_sim = min(q.n_cells, spec.simulation.max_cells_per_query)
            plan = QueryPlan(q.query, q.n_cells, n_sim, q.noise_variance(a.neighbours))
            lq.append((queries.index(q.query), plan))
        level_queries.append(tuple(lq))
    below = [g for g in levels if g not in (NATIONAL, "State")]
    hierarchy = SyntheticHierarchy(
        geolevels=tuple(g for g in levels if g != NATIONAL),
        fanouts=tuple(spec.fanout(g) for g in below),
        n_states=spec.population.states,
    )
    n = spec.population.states
    state_labels = [a.region] if a.region != "US" else [f"ST{i:02d}" for i in range(1, n + 1)]
    has_nation = NATIONAL in levels
    states = ([NATIONAL] if has_nation else []) + state_labels
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    pop_seed = spec.population.seed if spec.population.seed is not None else int(base_seed[0])
    blocks: list[Block] = []
    empty: list[tuple[int, int]] = []
    for si, gi, label, g, nation in state_levels(states, levels, has_nation, empty):
        units = 1 if nation else hierarchy.units_per_state(g)
        items = units * sum(q.n_sim for _, q in level_queries[gi])
        if items == 0:
            empty.append((si, gi))
            continue
        key = 0 if nation else (si if has_nation else si + 1)
        blocks.append(Block(si, gi, key, f"{label}/{g}", items))
    return AuditPlan(
        states=tuple(states),
        geolevels=levels,
        queries=queries,
        level_queries=tuple(level_queries),
        hierarchy=hierarchy,
        population=PopulationParams(
            seed=pop_seed,
            mean_block_population=spec.population.mean_block_population,
            empty_block_share=spec.population.empty_block_share,
            cell_concentration=spec.population.cell_concentration,
        ),
        blocks=tuple(blocks),
        empty=tuple(empty),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess=spec.simulation.postprocess,
        allocation=alloc,
    )


def _flaxman_plan(spec: AuditSpec) -> AuditPlan:
    """Flaxman's releases: one tree ("all"), levels L0..LJ, one query (the total count)."""
    from auditlib.geography.flaxman import children_per_unit

    a, p, r = spec.audit, spec.population, spec.release
    c = children_per_unit(p.people, p.depth, p.mean_per_location)
    levels = spec.geolevels
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    params = FlaxmanParams(
        people=p.people,
        levels=p.depth,
        mean_per_location=p.mean_per_location,
        epsilon=r.epsilon,
        n_runs=r.n_runs,
        seed=p.seed if p.seed is not None else int(base_seed[0]),
    )
    released = set(released_levels_of(r.kind, p.depth))
    blocks = tuple(
        Block(0, j, 0, f"all/{levels[j]}", c**j) for j in range(p.depth + 1) if j in released
    )
    empty = tuple((0, j) for j in range(p.depth + 1) if j not in released)
    return AuditPlan(
        states=("all",),
        geolevels=levels,
        queries=("total",),
        level_queries=tuple(() for _ in levels),
        hierarchy=SyntheticHierarchy(("State",), (), 1),
        population=PopulationParams(seed=params.seed),
        blocks=blocks,
        empty=empty,
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="none",
        release=r.kind,
        flaxman=params,
        strategy=FlaxmanTreeRelease(r.kind),
    )


def released_levels_of(kind: str, levels: int) -> tuple[int, ...]:
    """Levels a Flaxman 2019 release publishes: all of 0..J for RDPC, the leaves otherwise."""
    return tuple(range(levels + 1)) if kind == "rdpc" else (levels,)


def _topdown_plan(spec: AuditSpec) -> AuditPlan:
    """A TopDown-style release on the synthetic hierarchy: one state's levels are one run; the
    national level (if the allocation has one) is the sum of the states."""
    from auditlib.geography.schema import schema

    sch = schema(spec.population.attributes)
    measured = measured_queries(spec)
    as_measurements = {
        "release": spec.release.model_copy(update={"kind": "allocation"}),
        "simulation": spec.simulation.model_copy(update={"queries": "all"}),
    }
    base = make_plan(spec.model_copy(update=as_measurements))
    queries, level_queries = measured_query_plans(measured, sch)
    blocks = []
    for b in base.blocks:
        units = 1 if b.state_key == 0 else base.hierarchy.units_per_state(base.geolevels[b.level])
        n = units * sum(q.n_sim for _, q in level_queries[b.level])
        blocks.append(Block(b.state, b.level, b.state_key, b.label, n))
    return replace(
        base,
        queries=queries,
        level_queries=tuple(level_queries),
        blocks=tuple(blocks),
        postprocess="topdown",
        release="topdown",
        topdown=TopDownParams(sch.name, by_level(base.geolevels, measured), spec.release.tolerance),
        strategy=TopDownRelease(),
    )
