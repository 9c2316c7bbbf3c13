"""Plans of a TopDown release on the US spine, on the pl94 schema or (sparse, each block at its
capacity) a production schema."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from auditlib.geography import NATIONAL, PopulationParams, SyntheticHierarchy
from auditlib.seeds import seed_sequence
from auditlib.simulate import QueryPlan
from flows.releases import SparseTopDownRelease, SpineTopDownRelease
from flows.spec.audit_plan import AuditPlan, Block, ProductionParams, SpineParams, TopDownParams
from flows.spec.model import AuditSpec
from flows.spec.plan_levels import by_level, measured_queries, measured_query_plans, state_levels
from flows.spec.production import PRODUCTION_SCHEMAS
from flows.spec.sources import (
    SPINE_LEVEL_OF,
    load_spine,
    spine_geolevels,
    spine_levels,
    spine_state_indices,
    spine_state_labels,
)


def spine_plan(spec: AuditSpec) -> AuditPlan:
    """A TopDown-style release on the US spine: one spine state's levels are one run; the nation
    (if the allocation has it) is the sum of the chosen states."""
    from auditlib.geography.schema import schema

    a = spec.audit
    sch = schema(spec.population.attributes)
    levels = spine_geolevels(spec.geolevels, bool(spec.release.lowest_level))
    measured = measured_queries(spec)
    base_seed = seed_sequence(a.seed).generate_state(2, dtype="uint64")
    pop_seed = spec.population.seed if spec.population.seed is not None else int(base_seed[0])
    spine = load_spine(pop_seed, a.region)
    indices = spine_state_indices(a.region, spec.population.spine_states)
    labels = spine_state_labels(a.region)
    queries, level_queries = measured_query_plans(measured, sch)
    has_nation = NATIONAL in levels
    cells = [sum(q.n_sim for _, q in lq) for lq in level_queries]
    units = {g: spine.units_per_state(g) for g in spine_levels(levels)}
    states = ([NATIONAL] if has_nation else []) + [labels[i] for i in indices]
    blocks: list[Block] = []
    empty: list[tuple[int, int]] = []
    for si, gi, label, g, nation in state_levels(states, levels, has_nation, empty):
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
        production = replace(production, fit_processes=spec.cluster.fit_processes)
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
    fewer of its cells and the non-zero cells of the truth and the replicates), and their units.
    A capacity is an upper bound that reserves room on the store's item axis; a block is written
    as its own items (``storage/residuals.py``, layout 4), so no capacity is refused."""
    from auditlib.simulate.sparse_release import capacity

    people = spine.populations()["State"]
    per_state = {g: spine.units_per_state(g) for g in spine_levels(levels)}
    units = [[0] * len(levels) for _ in states]
    out = []
    for b in blocks:
        g = levels[b.level]
        if b.state_key == 0:
            n_units, p = 1, int(sum(int(people[i]) for i in indices))
        else:
            n_units = int(per_state[SPINE_LEVEL_OF[g]][b.state_key - 1])
            p = int(people[b.state_key - 1])
        units[b.state][b.level] = n_units
        cells = [q.n_sim for _, q in level_queries[b.level]]
        out.append(replace(b, n_items=capacity(n_units, cells, p, replicates)))
    return out, ProductionParams(schema_name, tuple(tuple(u) for u in units))
