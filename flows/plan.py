"""What an audit will compute: states, geolevels, queries, block sizes — from the spec alone."""

from __future__ import annotations

from dataclasses import dataclass

from auditlib.allocations import load_allocation
from auditlib.geography import NATIONAL, PopulationParams, SyntheticHierarchy
from auditlib.seeds import seed_sequence
from auditlib.simulate import QueryPlan
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

    def blocks_at(self, geolevel: int) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.geolevel == geolevel)


def make_plan(spec: AuditSpec) -> AuditPlan:
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
