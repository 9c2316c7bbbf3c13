"""Sparse TopDown over the DHC's seven spine levels (State, County, Prim, Tract_Subset_Group,
Tract_Subset, Block_Group, Block; the Prims drawn by ``auditlib/geography/spine_prims.py``): the
constraints hold at every level, the Prim and Tract_Subset_Group included (children sum to parents in
every cell, the state total exact, the group-quarters bounds aggregated through the new parents);
a level released in chunks of whole parents has the error of one released at once; and the levels
split a county of thousands of tracts into problems one worker holds, as the DAS's spine does
(``das_decennial/programs/geographic_spines/optimize_spine.py`` ``call_optimize_prim_spine``
L712–809: at most ``int(√n + 13)`` tract subsets under one Tract_Subset_Group)."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import SparseHistograms
from auditlib.geography.sparse_population import (
    SparsePopulationModel,
    sparse_block_population,
    spine_state_sparse_population,
)
from auditlib.geography.spine import PRIM_LEVELS, SpineTotals, generate_spine
from auditlib.simulate import sparse_topdown as sparse_topdown_module
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.sparse_progress import MemoryProgress
from auditlib.simulate.sparse_topdown import CHUNK_VARIABLES, noise_rngs, sparse_topdown
from auditlib.simulate.topdown import spine_state
from tests.unit.test_sparse_topdown_invariants import _check_release

DHC_LEVELS = [
    "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group", "Block",
]  # fmt: skip


@pytest.fixture(scope="module")
def prim_state():  # type: ignore[no-untyped-def]
    """A small state whose Prim levels are not trivial: of a spine of one county per state and 2,000
    tracts (so a county has tens of tracts in several Prims), among the states with a county of
    several Prims and a Prim of several groups the one of fewest Prims (the County → Prim fit's
    dual rows grow with them), then of fewest people; its people with many small facilities (noise
    alone leaves many below their bound)."""
    spine = generate_spine(
        4, totals={"US": SpineTotals(51, 51, 2000, 5000, 100_000)}, population={"US": 1_000_000}
    )
    people = spine.populations()["State"]
    found = []
    for st in range(spine.n_states):
        h, _ = spine_state(spine, st, PRIM_LEVELS)
        if np.bincount(h.parents[1]).max() > 1 and np.bincount(h.parents[2]).max() > 1:
            found.append(st)
    st = min(found, key=lambda s: (int(spine.units_per_state("Prim")[s]), int(people[s])))
    hierarchy, _ = spine_state(spine, st, PRIM_LEVELS)
    model = SparsePopulationModel(gq_share=0.3, gq_fraction=0.02)
    return st, hierarchy, spine_state_sparse_population(spine, st, 3, model=model)


def _pl94_measured() -> list[list[tuple[str, float]]]:
    """The PL94 allocation's queries at its five levels; at Prim and Tract_Subset_Group (which it
    has not) the County's, to run the PL94 schema over the seven levels."""
    sch = schema("pl94_production")
    five = allocation_measured(
        load_allocation("pl94_2021_production"),
        ["State", "County", "Tract", "Block_Group", "Block"],
        sch.query_names,
        "bounded",
        schema=sch,
    )
    return [five[0], five[1], five[1], five[1], *five[2:]]


def _dhc_measured() -> list[list[tuple[str, float]]]:
    sch = schema("dhc_production")
    alloc = load_allocation("dhc_2023_production")
    return allocation_measured(alloc, DHC_LEVELS, sch.query_names, "bounded", schema=sch)


def _l1(dp: SparseHistograms, truth: SparseHistograms) -> float:
    """Σ |released − true| over every (unit, cell), from the sparse entries (a DHC level's dense
    histograms would not fit in memory)."""
    n = dp.schema.n_cells

    def keys(h: SparseHistograms) -> np.ndarray:
        unit = np.repeat(np.arange(h.n_units, dtype=np.int64), np.diff(h.indptr))
        return unit * n + h.cells.astype(np.int64)

    both = np.concatenate([keys(dp), keys(truth)])
    diff = np.concatenate([dp.counts.astype(np.int64), -truth.counts.astype(np.int64)])
    _, at = np.unique(both, return_inverse=True)
    return float(np.abs(np.bincount(at, weights=diff)).sum())


def _release(prim_state, measured, schema_name: str, **kw):  # type: ignore[no-untyped-def]
    st, hierarchy, pop = prim_state
    return sparse_topdown(
        hierarchy.parents, hierarchy.levels, pop.histograms(schema_name),
        pop.invariants(schema_name), measured, noise_rngs(1, st, len(hierarchy.levels)), **kw,
    )  # fmt: skip


def _chunked_like_whole(prim_state, whole, measured, schema_name, chunk, monkeypatch, **kw) -> None:  # type: ignore[no-untyped-def]
    """Released in chunks of whole parents of ``chunk`` candidate variables: the same constraints
    and the error of the whole (as ``test_sparse_topdown.py``'s chunks of the five levels)."""
    _, hierarchy, pop = prim_state
    monkeypatch.setattr(sparse_topdown_module, "CHUNK_VARIABLES", chunk)
    chunked = _release(prim_state, measured, schema_name, **kw)
    _check_release(chunked, hierarchy, pop.invariants(schema_name))
    several = 0
    for i in range(1, len(hierarchy.levels)):
        chunks = sparse_topdown_module._chunks(whole.dp[i - 1], hierarchy.parents[i - 1], chunk)
        n_parents = np.unique(hierarchy.parents[i - 1]).size
        assert len(chunks) > 1 or n_parents == 1, hierarchy.levels[i]  # whole parents only
        several += len(chunks) > 1
        a = _l1(whole.dp[i], whole.truth[i])
        b = _l1(chunked.dp[i], chunked.truth[i])
        assert b < 1.3 * a + 2, (hierarchy.levels[i], b, a)
    assert several >= 4  # Tract_Subset_Group and below in several chunks


def test_pl94_schema_over_the_seven_levels_keeps_every_constraint(prim_state, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _, hierarchy, pop = prim_state
    assert hierarchy.levels == PRIM_LEVELS
    measured = _pl94_measured()
    whole = _release(prim_state, measured, "pl94_production")
    _check_release(whole, hierarchy, pop.pl94_invariants)
    assert [r.n_units for r in whole.dp] == [hierarchy.n_units(i) for i in range(7)]
    _chunked_like_whole(prim_state, whole, measured, "pl94_production", 200, monkeypatch)


@pytest.mark.slow  # a minute or two on a loaded 2-core machine
def test_dhc_over_the_seven_levels_keeps_every_constraint_chunked_or_not(
    prim_state, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # a loose fit (tolerance, few augmented-Lagrangian rounds), as test_sparse_topdown_invariants'
    # DHC test: the constraints hold whatever the fit's accuracy
    _, hierarchy, pop = prim_state
    measured = _dhc_measured()
    assert len(measured) == 7 and all(measured)  # every level of the allocation measured
    kept = MemoryProgress()  # every chunk of the whole run kept as it finishes
    whole = _release(prim_state, measured, "dhc_production", tol=0.05, max_outer=3, progress=kept)
    _check_release(whole, hierarchy, pop.dhc_invariants)
    # the State is one chunk either way (the same noise, the same release): the chunked run
    # resumes after the whole run's State instead of fitting its 10⁵ cells again
    state = MemoryProgress(kept={0: kept.load(0)})
    _chunked_like_whole(
        prim_state, whole, measured, "dhc_production", 2_000, monkeypatch, tol=0.05, max_outer=3,
        progress=state,
    )  # fmt: skip
    assert state.load(0) == kept.load(0) and state.load(1)  # the State resumed, the rest fitted


#: the largest problem one worker has solved: S28's largest Tract_Subset part, one county's 401
#: tracts, 10,737,408 variables in 5.69 GB (benchmarks/README.md, sparse TopDown of the DHC)
SOLVED_ON_ONE_WORKER = 10_737_408


def test_the_prim_levels_split_a_county_of_thousands_of_tracts() -> None:
    """Without Prim and Tract_Subset_Group a county's tracts are one problem at the Tract level:
    children × the county's non-zero cells candidate variables (``sparse_topdown._child_variables``,
    counted so by ``_chunks``; a chunk never splits a parent). With them the parent is a group of
    at most ``int(√n + 13)`` tracts. A parent's true histogram stands for its released one here
    (a fitted release is sparser than the truth: in a seven-level DHC run of a 13,000-person
    state, fewer non-zero cells at every level below the County)."""
    spine = generate_spine(20200325)  # the benchmarks' seed: S41 holds a county of 4,391 tracts
    county, prim, tsg, tract = spine.parents_over(PRIM_LEVELS)[:4]
    tracts = np.bincount(spine.parents["Tract"])
    big = int(np.argmax(tracts))
    assert tracts[big] == 4391 and spine.state_names[county[big]] == "S41"
    # every group of the US: at most int(√n + 13) tracts, and tracts × people (≥ tracts × non-zero
    # cells, whatever the people drawn: each non-zero cell holds a person) under the bound
    per_group = np.bincount(tract)
    people = np.bincount(tract, weights=spine.populations()["Tract"])
    assert per_group.max() <= int(np.sqrt(np.bincount(tsg[tract]).max()) + 13)
    assert (per_group * people).max() < SOLVED_ON_ONE_WORKER
    # the largest county's largest group by tracts × people, its people drawn: the Tract level's
    # largest problem there, with and without the Prim levels
    groups = np.flatnonzero(prim[tsg] == big)
    g = int(groups[np.argmax((per_group * people)[groups])])
    t0, t1 = np.searchsorted(tract, [g, g + 1])
    bg0, bg1 = np.searchsorted(spine.parents["Block_Group"], [t0, t1])
    b0, b1 = np.searchsorted(spine.parents["Block"], [bg0, bg1])
    pop = sparse_block_population(spine.block_population[b0:b1], np.random.default_rng(1))
    nnz = pop.dhc.aggregate(np.zeros(pop.dhc.n_units, np.int64), 1).nnz  # the group's cells
    with_levels = int(per_group[g]) * nnz
    # the county holds at least the group's non-zero cells, under each of its 4,391 tracts
    without = int(tracts[big]) * nnz
    assert with_levels <= CHUNK_VARIABLES < SOLVED_ON_ONE_WORKER < without / 5
