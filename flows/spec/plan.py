"""What an audit will compute: states, geolevels, queries, block sizes — from the spec alone.

Over 400 lines on purpose: one short builder per population kind (synthetic, Flaxman 2019, table,
TopDown, spine, TopDown on a table), each returning the one :class:`AuditPlan` defined here."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from auditlib.allocations import load_allocation
from auditlib.geography import NATIONAL, PopulationParams, SyntheticHierarchy
from auditlib.geography.schema import AttributeSchema
from auditlib.seeds import seed_sequence
from auditlib.simulate import QueryPlan
from auditlib.simulate.noise import NoiseVariance
from flows.releases import (
    AllocationRelease,
    FlaxmanTreeRelease,
    ObservedRelease,
    Release,
    SparseTopDownRelease,
    SpineTopDownRelease,
    StratifiedRelease,
    TableTopDownRelease,
    TableTreeRelease,
    TopDownRelease,
)
from flows.releases.published import published_errors_plan
from flows.spec.model import AuditSpec, observed_args, observed_schema
from flows.spec.production import PRODUCTION_SCHEMAS, block_capacity
from flows.spec.sources import (
    SPINE_LEVEL_OF,
    load_observed,
    load_spine,
    spine_geolevels,
    spine_state_indices,
    spine_state_labels,
    table_hierarchy,
    table_tree,
    topdown_measured,
)


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
    """Flaxman's setting: N people over a regular J-level tree, a geometric release at ε."""

    people: int
    levels: int
    mean_per_location: float
    epsilon: float
    n_runs: int
    seed: int


@dataclass(frozen=True)
class TopDownParams:
    """A TopDown-style release: schema, measured (schema query, σ²) by level name, tolerance."""

    schema: str
    measured: dict[str, tuple[tuple[str, float], ...]]  # geolevel name -> its measurements
    tol: float


@dataclass(frozen=True)
class ProductionParams:
    """TopDown on a production schema's sparse histograms (``flows.audit.production``): a block's items
    are the query cells non-zero in the truth or a replicate's release
    (``auditlib.simulate.sparse_release``), so a block's ``n_items`` is its capacity, not its
    count; ``units[state][geolevel]``: the block's geounits (its query ``q`` has ``units × n_q``
    cells, those not stored zero in the truth and in every replicate)."""

    schema: str
    units: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class SpineParams:
    """The US spine a plan runs on: generated from ``seed`` for ``region``; a state's ``state_key``
    is its spine index + 1."""

    seed: int
    region: str
    #: the name it is published under on the run's Dask cluster (``flows.audit.spine_share``); "": none
    shared: str = ""


@dataclass(frozen=True)
class TableParams:
    """A table of real counts (``read_counts``): file, count columns, hierarchy columns, unit
    column; a Flaxman 2019 release (``AuditPlan.release``) of the rows' totals at ε."""

    path: str
    counts: tuple[str, ...]
    levels: tuple[str, ...]
    unit: str
    epsilon: float
    n_runs: int
    epsilon_strata: float | None = None  # sa3: ε₂ of the counts (None: epsilon)
    #: observed: ``flows.spec.sources.load_observed``'s arguments (published runs read, not drawn)
    observed: tuple[Any, ...] | None = None
    #: the schema the count columns are the cells of ("": one attribute, the columns its levels)
    attributes: str = ""


@dataclass(frozen=True)
class TableHierarchyParams:
    """A table's hierarchy under a TopDown release (one run, the root's total invariant): file,
    count columns (the schema's cells), hierarchy columns, unit column, and the allocation
    geolevel measured at each of the plan's geolevels (the table's levels)."""

    path: str
    counts: tuple[str, ...]
    levels: tuple[str, ...]
    unit: str
    attributes: str
    measured_as: tuple[str, ...]


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
    replicates: int
    noise_seed: int
    postprocess: str
    release: str = "allocation"  # or "gdpc" | "rdpc" | "adpc" (Flaxman 2019, needs ``flaxman``)
    flaxman: FlaxmanParams | None = None
    topdown: TopDownParams | None = None  # release "topdown"
    spine: SpineParams | None = None  # population "spine"
    table: TableParams | None = None  # population "table", Flaxman 2019 / 003 releases
    table_hierarchy: TableHierarchyParams | None = None  # population "table", release "topdown"
    production: ProductionParams | None = None  # spine TopDown on a production schema (sparse)
    #: the release kind, chosen once by :func:`make_plan`: what is computed and how
    strategy: Release = field(default_factory=AllocationRelease)
    #: the spec's allocation where the plan loaded it (None: not loaded); not sent to the tasks
    allocation: Any = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """The plan as pickled for a task: without its loaded allocation (read where it is made)."""
        return {k: v for k, v in self.__dict__.items() if k != "allocation"}

    @property
    def topdown_top(self) -> int:
        """The geolevel index of the top of each TopDown run: the table's root, else State."""
        return self.strategy.top_geolevel(self)

    @property
    def geometric(self) -> bool:
        """A release of a tree of total counts (Flaxman's GDPC/RDPC/ADPC, Flaxman & Petti's, a published
        table's): its residuals are not the allocation's simulated noise."""
        return self.strategy.geometric

    def blocks_at(self, geolevel: int) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.geolevel == geolevel)

    def sigma2_matrix(self) -> np.ndarray:
        """σ² of every (geolevel, query) the plan measures; NaN where a level has no such query."""
        sigma2 = np.full((len(self.geolevels), len(self.queries)), np.nan)
        for gi, lq in enumerate(self.level_queries):
            for qid, q in lq:
                sigma2[gi, qid] = q.sigma2
        return sigma2

    def block_items(self) -> np.ndarray:
        """(state, geolevel) items of every block with data (0: a region without data)."""
        n = np.zeros((len(self.states), len(self.geolevels)), dtype=np.int64)
        for b in self.blocks:
            n[b.state, b.geolevel] = b.n_items
        return n

    def template_layout(self) -> dict[str, Any]:
        """The residual store's layout for this plan: the keywords of
        ``storage.store.create_residual_template`` other than ``url`` and ``attrs``."""
        return {
            "states": self.states,
            "geolevels": self.geolevels,
            "replicates": self.replicates,
            "n_items": self.block_items(),
            "queries": self.queries,
            "sigma2": self.sigma2_matrix(),
        }


def _state_levels(
    states: list[str], levels: tuple[str, ...], has_nation: bool, empty: list[tuple[int, int]]
) -> Iterator[tuple[int, int, str, str, bool]]:
    """(state index, geolevel index, state label, geolevel, is the nation) of every region that can
    hold data: the nation (first, if present) only at the national level, states at every other
    level; the other regions are appended to ``empty``."""
    for si, label in enumerate(states):
        nation = has_nation and si == 0
        for gi, g in enumerate(levels):
            if nation != (g == NATIONAL):
                empty.append((si, gi))
                continue
            yield si, gi, label, g, nation


def make_plan(spec: AuditSpec) -> AuditPlan:
    if spec.population.kind == "spine":
        return _spine_plan(spec)
    if spec.population.kind == "table" and spec.release.kind in ("topdown", "published"):
        return _table_topdown_plan(spec)
    if spec.population.kind == "table":
        return _table_plan(spec)
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
    for si, gi, label, g, nation in _state_levels(states, levels, has_nation, empty):
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


def measured_queries(spec: AuditSpec) -> list[list[tuple[str, float]]]:
    """Per simulated geolevel of a TopDown spec, the queries it measures with their σ²."""
    a = spec.audit
    return topdown_measured(
        a.allocation,
        spec.geolevels,
        spec.population.attributes,
        a.neighbours,
        a.universe,
        a.region,
        on_spine=spec.population.kind == "spine",
    )


def _table_topdown_plan(spec: AuditSpec) -> AuditPlan:
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
    queries, level_queries = _measured_query_plans(measured, sch)
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


def _table_plan(spec: AuditSpec) -> AuditPlan:
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


def by_level(
    geolevels: tuple[str, ...], measured: list[list[tuple[str, float]]]
) -> dict[str, tuple[tuple[str, float], ...]]:
    """Measurements per level (in ``geolevels`` order) keyed by the level's name."""
    return {g: tuple(level) for g, level in zip(geolevels, measured, strict=True)}


def _measured_query_plans(
    measured: list[list[tuple[str, float]]], sch: AttributeSchema
) -> tuple[tuple[str, ...], list[tuple[tuple[int, QueryPlan], ...]]]:
    """The queries a TopDown release measures, and per level (query index, plan) with σ² of the
    combined precision of a query measured more than once."""
    queries = tuple(dict.fromkeys(q for level in measured for q, _ in level))
    level_queries = []
    for level in measured:
        prec: dict[str, float] = {}
        once: dict[str, float] = {}  # a query measured once with other noise: its NoiseVariance
        for q, sigma2 in level:  # a query measured twice: its combined precision
            prec[q] = prec.get(q, 0.0) + 1.0 / sigma2
            once[q] = sigma2 if q not in once else 1.0 / prec[q]
        level_queries.append(
            tuple(
                (
                    queries.index(q),
                    QueryPlan(
                        q,
                        sch.n_query_cells(q),
                        sch.n_query_cells(q),
                        once[q] if isinstance(once[q], NoiseVariance) else 1 / prec[q],
                    ),
                )
                for q in prec
            )
        )
    return queries, level_queries


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
    queries, level_queries = _measured_query_plans(measured, sch)
    blocks = []
    for b in base.blocks:
        units = (
            1 if b.state_key == 0 else base.hierarchy.units_per_state(base.geolevels[b.geolevel])
        )
        n = units * sum(q.n_sim for _, q in level_queries[b.geolevel])
        blocks.append(Block(b.state, b.geolevel, b.state_key, b.label, n))
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


def _spine_plan(spec: AuditSpec) -> AuditPlan:
    """A TopDown-style release on the US spine: one spine state's levels are one run; the nation
    (if the allocation has it) is the sum of the chosen states."""
    from auditlib.geography.schema import schema
    from auditlib.geography.spine import LEVELS

    a = spec.audit
    sch = schema(spec.population.attributes)
    levels = spine_geolevels(spec.geolevels)
    measured = measured_queries(spec)
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    pop_seed = spec.population.seed if spec.population.seed is not None else int(base_seed[0])
    spine = load_spine(pop_seed, a.region)
    indices = spine_state_indices(a.region, spec.population.spine_states)
    labels = spine_state_labels(a.region)
    queries, level_queries = _measured_query_plans(measured, sch)
    has_nation = NATIONAL in levels
    cells = [sum(q.n_sim for _, q in lq) for lq in level_queries]
    units = {g: spine.units_per_state(g) for g in LEVELS}
    states = ([NATIONAL] if has_nation else []) + [labels[i] for i in indices]
    blocks: list[Block] = []
    empty: list[tuple[int, int]] = []
    for si, gi, label, g, nation in _state_levels(states, levels, has_nation, empty):
        if nation:
            blocks.append(Block(si, gi, 0, f"{label}/{g}", cells[gi]))
            continue
        i = indices[si - has_nation]
        n = int(units[SPINE_LEVEL_OF[g]][i]) * cells[gi]
        blocks.append(Block(si, gi, i + 1, f"{label}/{g}", n))
    production = None
    if sch.name in PRODUCTION_SCHEMAS:
        blocks, production = _production_blocks(spine, indices, states, levels, level_queries,
                                                blocks, sch.name, a.replicates)  # fmt: skip
    return AuditPlan(
        states=tuple(states),
        geolevels=levels,
        queries=queries,
        level_queries=tuple(level_queries),
        hierarchy=SyntheticHierarchy(("State",), (), 1),  # unused: the spine is the hierarchy
        population=PopulationParams(seed=pop_seed),
        blocks=tuple(blocks),
        empty=tuple(empty),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="topdown",
        release="topdown",
        topdown=TopDownParams(sch.name, by_level(levels, measured), spec.release.tolerance),
        spine=SpineParams(pop_seed, a.region),
        production=production,
        strategy=SpineTopDownRelease() if production is None else SparseTopDownRelease(),
    )


def _production_blocks(
    spine: Any,
    indices: tuple[int, ...],
    states: list[str],
    levels: tuple[str, ...],
    level_queries: list[tuple[tuple[int, QueryPlan], ...]],
    blocks: list[Block],
    schema_name: str,
    replicates: int,
) -> tuple[list[Block], ProductionParams]:
    """A production schema's blocks at their capacity (``sparse_release.capacity``: per query the
    fewer of its cells and the non-zero cells of the truth and the replicates), and their units;
    ``ValueError`` naming a block too large to write (the spec's checks name it first)."""
    people = spine.populations()["State"]
    units = [[0] * len(levels) for _ in states]
    out = []
    for b in blocks:
        g = levels[b.geolevel]
        if b.state_key == 0:
            n_units, p = 1, int(sum(int(people[i]) for i in indices))
        else:
            n_units = int(spine.units_per_state(SPINE_LEVEL_OF[g])[b.state_key - 1])
            p = int(people[b.state_key - 1])
        units[b.state][b.geolevel] = n_units
        cap = block_capacity(
            b.label, schema_name, n_units, [q.n_sim for _, q in level_queries[b.geolevel]], p,
            replicates,
        )  # fmt: skip
        out.append(replace(b, n_items=cap))
    return out, ProductionParams(schema_name, tuple(tuple(u) for u in units))
