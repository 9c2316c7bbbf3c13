"""What an audit will compute: states, geolevels, queries, block sizes — from the spec alone."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from auditlib.allocations import load_allocation
from auditlib.geography import NATIONAL, PopulationParams, SyntheticHierarchy
from auditlib.geography.schema import AttributeSchema
from auditlib.seeds import seed_sequence
from auditlib.simulate import QueryPlan, ResidualBlock
from flows.spec.model import AuditSpec


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
class TopDownParams:
    """A TopDown-style release: schema, per-geolevel measured (schema query, σ²), solver tolerance."""

    schema: str
    measured: tuple[tuple[tuple[str, float], ...], ...]  # per AuditPlan.geolevels
    tol: float


@dataclass(frozen=True)
class SpineParams:
    """The US spine a plan runs on: generated from ``seed`` for ``region``; a state's ``state_key``
    is its spine index + 1."""

    seed: int
    region: str


@dataclass(frozen=True)
class TableParams:
    """A table of real counts (``read_counts``): file, count columns, hierarchy columns, unit
    column; a seed 001 release (``AuditPlan.release``) of the rows' totals at ε."""

    path: str
    counts: tuple[str, ...]
    levels: tuple[str, ...]
    unit: str
    epsilon: float
    n_runs: int
    epsilon_strata: float | None = None  # sa3: ε₂ of the counts (None: epsilon)


#: stream of seed 003's stratified releases of a table (``seeds.rng(noise_seed, STRATIFIED_NOISE, r)``)
STRATIFIED_NOISE = 17


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
    topdown: TopDownParams | None = None  # release "topdown"
    spine: SpineParams | None = None  # population "spine"
    table: TableParams | None = None  # population "table"

    @property
    def geometric(self) -> bool:
        """A seed 001 geometric release (GDPC/RDPC/ADPC) of a tree of total counts."""
        return self.flaxman is not None or self.table is not None

    def blocks_at(self, geolevel: int) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.geolevel == geolevel)

    def sigma2_matrix(self) -> np.ndarray:
        """σ² of every (geolevel, query) the plan measures; NaN where a level has no such query."""
        sigma2 = np.full((len(self.geolevels), len(self.queries)), np.nan)
        for gi, lq in enumerate(self.level_queries):
            for qid, q in lq:
                sigma2[gi, qid] = q.sigma2
        return sigma2

    def template_layout(self) -> dict[str, Any]:
        """The residual store's layout for this plan: the keywords of
        ``storage.store.create_residual_template`` other than ``url`` and ``attrs``."""
        return {
            "states": self.states,
            "geolevels": self.geolevels,
            "replicates": self.replicates,
            "n_items": self.n_items_max,
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
        n_items_max=max((b.n_items for b in blocks), default=1),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess=spec.simulation.postprocess,
    )


def _flaxman_plan(spec: AuditSpec) -> AuditPlan:
    """Seed 001's releases: one tree ("all"), levels L0..LJ, one query (the total count)."""
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


def load_table(path: str, counts: tuple[str, ...], levels: tuple[str, ...], unit: str) -> Any:
    """A table of real counts (``read_counts``; cached per process and file version: a worker
    reads it once)."""
    import os

    try:
        st = os.stat(path)
        version = (st.st_mtime_ns, st.st_size)
    except OSError:
        version = (0, 0)  # read_counts names the missing file
    return _load_table(path, version, counts, levels, unit)


@functools.lru_cache(maxsize=4)
def _load_table(
    path: str, version: tuple[int, int], counts: tuple[str, ...], levels: tuple[str, ...], unit: str
) -> Any:
    from auditlib.geography.tabular import read_counts

    return read_counts(path, counts, levels=levels, unit=unit or None)


def table_tree(t: TableParams) -> Any:
    """The table's tree of total counts: a root over its top level, then every level."""
    return load_table(t.path, t.counts, t.levels, t.unit).count_tree()


def _table_plan(spec: AuditSpec) -> AuditPlan:
    """Seed 001's releases of a table's totals: one tree ("all"), levels root, columns, rows."""
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
    )
    tree = table_tree(params)
    levels = spec.geolevels
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
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
        n_items_max=max(b.n_items for b in blocks),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="none",
        release=r.kind,
        table=params,
    )


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


#: the ``pl94`` schema's reduced race stands for the allocations' CENRACE
SCHEMA_ALIASES: dict[str, dict[str, str]] = {"pl94": {"cenrace": "race"}}


def topdown_measured(spec: AuditSpec) -> list[list[tuple[str, float]]]:
    """Per geolevel of the spec, the allocation's queries the schema expresses, with their σ²."""
    from auditlib.geography.schema import schema
    from auditlib.simulate.topdown import allocation_measured

    a = spec.audit
    sch = schema(spec.population.attributes)
    levels = spec.geolevels
    if spec.population.kind == "spine":
        levels = spine_geolevels(levels)
    return allocation_measured(
        load_allocation(a.allocation),
        levels,
        sch.query_names,
        a.neighbours,
        a.universe,
        a.region,
        attribute_aliases=SCHEMA_ALIASES.get(sch.name),
        detailed_as=" * ".join(sch.attribute_names),
    )


def _measured_query_plans(
    measured: list[list[tuple[str, float]]], sch: AttributeSchema
) -> tuple[tuple[str, ...], list[tuple[tuple[int, QueryPlan], ...]]]:
    """The queries a TopDown release measures, and per level (query index, plan) with σ² of the
    combined precision of a query measured more than once."""
    queries = tuple(dict.fromkeys(q for level in measured for q, _ in level))
    level_queries = []
    for level in measured:
        prec: dict[str, float] = {}
        for q, sigma2 in level:  # a query measured twice: its combined precision
            prec[q] = prec.get(q, 0.0) + 1.0 / sigma2
        level_queries.append(
            tuple(
                (queries.index(q), QueryPlan(q, sch.n_query_cells(q), sch.n_query_cells(q), 1 / w))
                for q, w in prec.items()
            )
        )
    return queries, level_queries


def _topdown_plan(spec: AuditSpec) -> AuditPlan:
    """A TopDown-style release on the synthetic hierarchy: one state's levels are one run; the
    national level (if the allocation has one) is the sum of the states."""
    from auditlib.geography.schema import schema

    sch = schema(spec.population.attributes)
    measured = topdown_measured(spec)
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
        n_items_max=max((b.n_items for b in blocks), default=1),
        postprocess="topdown",
        release="topdown",
        topdown=TopDownParams(
            sch.name, tuple(tuple(level) for level in measured), spec.release.tolerance
        ),
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
    on, and D of a direct estimate built from the same spec. Synthetic states draw their
    histograms with ``synthetic_state_histograms`` (stream ``SYNTHETIC_HISTOGRAMS``), spine states
    with ``spine_state_histograms``; the ``total`` schema takes the block populations."""
    from auditlib.geography import state_level_populations
    from auditlib.geography.populations import synthetic_state_histograms
    from auditlib.simulate.topdown import StateHierarchy

    _, sch, _, _ = _topdown_inputs(plan)
    hist: np.ndarray
    if plan.spine is not None:
        from auditlib.geography.populations import spine_state_histograms
        from auditlib.simulate.topdown import spine_state

        spine = load_spine(plan.spine.seed, plan.spine.region)
        hierarchy, hist = spine_state(spine, key - 1)
        if sch.n_cells != 1:
            hist = spine_state_histograms(spine, key - 1, sch, plan.population.seed)
        return hierarchy, hist
    h = plan.hierarchy
    if sch.n_cells == 1:
        hist = state_level_populations(h, plan.population, key)[h.geolevels[-1]][:, None]
    else:
        hist = synthetic_state_histograms(h, plan.population, key, sch)
    return StateHierarchy.from_fanouts(h.geolevels, h.fanouts), hist


def topdown_state(
    plan: AuditPlan, block: Block
) -> tuple[dict[int, ResidualBlock], np.ndarray, np.ndarray]:
    """One state's TopDown replicates (``block``: the state's State-level block): residual blocks
    per geolevel index, the State level's released histograms (replicates, n_cells) and its true
    histogram (n_cells,)."""
    from auditlib import seeds
    from auditlib.simulate.topdown import TOPDOWN_NOISE, level_residuals, replicates

    td, _, matrices, ids = _topdown_inputs(plan)
    key = block.state_key
    hierarchy, hist = state_population(plan, key)
    if plan.spine is not None:
        gis = [gi for gi, g in enumerate(plan.geolevels) if g != NATIONAL]
    else:
        gis = [plan.geolevels.index(level) for level in plan.hierarchy.geolevels]
    runs = replicates(
        hierarchy,
        hist,
        matrices,
        [td.measured[gi] for gi in gis],
        lambda r: [seeds.rng(plan.noise_seed, TOPDOWN_NOISE, key, gi, r) for gi in gis],
        plan.replicates,
        tol=td.tol,
    )
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


#: the spine level each allocation geolevel stands on (the DHC's Tract_Subset: the spine's tracts);
#: Prim and Tract_Subset_Group have no spine level and are not simulated
SPINE_LEVEL_OF: dict[str, str] = {
    "State": "State",
    "County": "County",
    "Tract": "Tract",
    "Tract_Subset": "Tract",
    "Block_Group": "Block_Group",
    "Block": "Block",
}


def spine_geolevels(allocation_levels: tuple[str, ...]) -> tuple[str, ...]:
    """The allocation's geolevels simulated on the spine (US, if present, first; then one per spine
    level, in spine order), named as the allocation names them."""
    from auditlib.geography.spine import LEVELS

    kept = tuple(g for g in allocation_levels if g == NATIONAL or g in SPINE_LEVEL_OF)
    on_spine = tuple(SPINE_LEVEL_OF[g] for g in kept if g != NATIONAL)
    if on_spine != LEVELS:
        raise ValueError(
            f"the allocation's geolevels {', '.join(allocation_levels)} do not map one to one onto "
            f"the spine's {', '.join(LEVELS)}; use an allocation with those levels"
        )
    return kept


def spine_state_labels(region: str) -> tuple[str, ...]:
    """Labels of the spine's states of a region: ST01..ST51 (the spine's S01..S51) or PR."""
    from auditlib.geography.spine import tallies_2020

    if region == "PR":
        return ("PR",)
    return tuple(f"ST{i:02d}" for i in range(1, tallies_2020()[region].states + 1))


def spine_state_indices(region: str, wanted: str | int | list[str]) -> tuple[int, ...]:
    """Spine indices of ``population.spine_states``; ``ValueError`` naming a bad state and the fix."""
    labels = spine_state_labels(region)
    if wanted == "all":
        return tuple(range(len(labels)))
    if isinstance(wanted, int):
        if wanted > len(labels):
            raise ValueError(
                f"population.spine_states = {wanted}: region {region!r} has {len(labels)} "
                f'state(s); use 1..{len(labels)} or "all"'
            )
        return tuple(range(wanted))
    if not wanted:
        raise ValueError('population.spine_states = []: name at least one state, or use "all"')
    out = []
    for name in wanted:
        if name not in labels:
            raise ValueError(
                f"population.spine_states has unknown state {name!r} for region {region!r}; "
                f"allowed: {labels[0]}..{labels[-1]}"
                + (' (Puerto Rico: audit.region = "PR")' if name == "PR" else "")
            )
        if labels.index(name) in out:
            raise ValueError(f"population.spine_states repeats {name!r}; name each state once")
        out.append(labels.index(name))
    return tuple(sorted(out))


@functools.lru_cache(maxsize=2)
def load_spine(seed: int, region: str) -> Any:
    """The spine of one region (cached per process: a worker builds it once per run)."""
    from auditlib.geography.spine import generate_spine

    return generate_spine(seed, regions=(region,))


def _spine_plan(spec: AuditSpec) -> AuditPlan:
    """A TopDown-style release on the US spine: one spine state's levels are one run; the nation
    (if the allocation has it) is the sum of the chosen states."""
    from auditlib.geography.schema import schema
    from auditlib.geography.spine import LEVELS

    a = spec.audit
    sch = schema(spec.population.attributes)
    levels = spine_geolevels(spec.geolevels)
    measured = topdown_measured(spec)
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
    return AuditPlan(
        states=tuple(states),
        geolevels=levels,
        queries=queries,
        level_queries=tuple(level_queries),
        hierarchy=SyntheticHierarchy(("State",), (), 1),  # unused: the spine is the hierarchy
        population=PopulationParams(seed=pop_seed),
        blocks=tuple(blocks),
        empty=tuple(empty),
        n_items_max=max((b.n_items for b in blocks), default=1),
        replicates=a.replicates,
        noise_seed=int(base_seed[1]),
        postprocess="topdown",
        release="topdown",
        topdown=TopDownParams(
            sch.name, tuple(tuple(level) for level in measured), spec.release.tolerance
        ),
        spine=SpineParams(pop_seed, a.region),
    )
