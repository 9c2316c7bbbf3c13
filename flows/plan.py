"""What an audit will compute: states, geolevels, queries, block sizes — from the spec alone."""

from __future__ import annotations

from dataclasses import dataclass

from auditlib.allocations import load_allocation
from auditlib.geography import NATIONAL, PopulationParams, SyntheticHierarchy
from auditlib.seeds import seed_sequence
from auditlib.simulate import QueryPlan, ResidualBlock
from flows.spec import AuditSpec


@dataclass(frozen=True)
class Block:
    """One unit of simulation work: a (state, geolevel) region of the residual store."""

    state: int  # index in AuditPlan.states (0 = the nation when there is a US level)
    geolevel: int  # index in AuditPlan.geolevels
    state_key: int  # 0 = nation, 1..n = states
    label: str  # e.g. "ST02/County"
    n_items: int


@dataclass(frozen=True)
class FlaxmanParams:
    """Seed 001's setting: N people over a regular J-level tree, a geometric release at ε."""

    people: int
    levels: int
    mean_per_location: float
    epsilon: float
    n_runs: int
    seed: int


@dataclass(frozen=True)
class AuditPlan:
    states: tuple[str, ...]
    geolevels: tuple[str, ...]
    queries: tuple[str, ...]
    level_queries: tuple[tuple[tuple[int, QueryPlan], ...], ...]  # per geolevel
    hierarchy: SyntheticHierarchy
    population: PopulationParams
    blocks: tuple[Block, ...]  # the blocks with data
    empty: tuple[tuple[int, int], ...]  # (state, geolevel) regions without data
    n_items_max: int
    replicates: int
    noise_seed: int
    postprocess: str
    release: str = "allocation"  # or "gdpc" | "rdpc" | "adpc" (seed 001, needs ``flaxman``)
    flaxman: FlaxmanParams | None = None

    def blocks_at(self, geolevel: int) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.geolevel == geolevel)


def make_plan(spec: AuditSpec) -> AuditPlan:
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
            plan = QueryPlan(q.query, q.n_cells, n_sim, float(q.sigma2(a.neighbours)))
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
    for si, label in enumerate(states):
        nation = has_nation and si == 0
        for gi, g in enumerate(levels):
            if nation != (g == NATIONAL):
                empty.append((si, gi))
                continue
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
        n_items_max=max((b.n_items for b in blocks), default=1),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess=spec.simulation.postprocess,
    )


def _flaxman_plan(spec: AuditSpec) -> AuditPlan:
    """Seed 001's releases: one tree ("all"), levels L0..LJ, one query (the total count)."""
    from auditlib.geography.flaxman import children_per_unit

    a, p, r = spec.audit, spec.population, spec.release
    c = children_per_unit(p.people, p.levels, p.mean_per_location)
    levels = spec.geolevels
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    params = FlaxmanParams(
        people=p.people,
        levels=p.levels,
        mean_per_location=p.mean_per_location,
        epsilon=r.epsilon,
        n_runs=r.n_runs,
        seed=p.seed if p.seed is not None else int(base_seed[0]),
    )
    released = set(released_levels_of(r.kind, p.levels))
    blocks = tuple(
        Block(0, j, 0, f"all/{levels[j]}", c**j) for j in range(p.levels + 1) if j in released
    )
    empty = tuple((0, j) for j in range(p.levels + 1) if j not in released)
    return AuditPlan(
        states=("all",),
        geolevels=levels,
        queries=("total",),
        level_queries=tuple(() for _ in levels),
        hierarchy=SyntheticHierarchy(("State",), (), 1),
        population=PopulationParams(seed=params.seed),
        blocks=blocks,
        empty=empty,
        n_items_max=max(b.n_items for b in blocks),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="none",
        release=r.kind,
        flaxman=params,
    )


def released_levels_of(kind: str, levels: int) -> tuple[int, ...]:
    """Levels a seed 001 release publishes: all of 0..J for RDPC, the leaves otherwise."""
    return tuple(range(levels + 1)) if kind == "rdpc" else (levels,)


def release_block(plan: AuditPlan, block: Block) -> ResidualBlock:
    """Residuals of one level of a seed 001 release (the population is rebuilt from its seed)."""
    from auditlib.geography.flaxman import generate_population
    from auditlib.simulate.hierarchical import residual_block

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
