"""The production constraints hold in every sparse TopDown release, at every level, for both
production schemas: the state total, ``hhgq_total_ub`` (no units of a type, nobody in it),
``hhgq_total_lb`` (at least one person per group-quarters facility), PL94's ``nurse_nva_0`` and the
DHC's relgq × age structural zeros; children sum to parents; counts are non-negative integers. And
the parent's bound leaves its children a feasible problem: the repairs of the fit and of the rounding
move people only within a parent's cell, and infeasible invariants are refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError
from auditlib.geography import census_levels as census
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import (
    GQInvariants,
    SparseHistograms,
    invariant_violations,
    people_per_unit_type,
)
from auditlib.geography.sparse_population import (
    SparsePopulationModel,
    spine_state_sparse_population,
)
from auditlib.geography.spine import generate_spine, tallies_2020
from auditlib.simulate import sparse_parts
from auditlib.simulate import sparse_topdown as sparse_topdown_module
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.sparse_repair import repair_lower
from auditlib.simulate.sparse_rounding import fix_lower
from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
from auditlib.simulate.topdown import spine_state

DHC_LEVELS = ["State", "County", "Tract_Subset", "Block_Group", "Block"]


@pytest.fixture(scope="module")
def small_state():
    spine = generate_spine(
        4, totals={"US": tallies_2020()["US"].scaled(0.05)}, population={"US": 16_000_000}
    )
    st = int(np.argmin(spine.populations()["State"]))
    hierarchy, _ = spine_state(spine, st)
    # many small facilities (a person or two each): noise alone leaves many below the bound
    model = SparsePopulationModel(gq_share=0.3, gq_fraction=0.02)
    return st, hierarchy, spine_state_sparse_population(spine, st, 3, model=model)


def _measured(name: str, levels: list[str]) -> list[list[tuple[str, float]]]:
    alloc = "pl94_2021_production" if name == "pl94_production" else "dhc_2023_production"
    sch = schema(name)
    return allocation_measured(
        load_allocation(alloc), levels, sch.query_names, "bounded", schema=sch
    )


def _independent_zeros(hist: SparseHistograms) -> int:
    """People in structural-zero cells, decoded here from the DAS's rules (not the library's)."""
    sch = hist.schema
    idx = np.unravel_index(hist.cells.astype(np.int64), sch.shape)
    if hist.schema_name == "pl94_production":
        bad = (idx[0] == 3) & (idx[1] == 0)  # nurse_nva_0
    else:
        relgq, age = idx[0], idx[2]
        bad = np.zeros(hist.nnz, dtype=bool)
        for _, r, lo, hi in census.DHCP_AGE_STRUCTURAL_ZEROS:
            bad |= (relgq == r) & ((age < lo) | (age > hi))
    return int(hist.counts[bad].sum())


def _check_release(release, hierarchy, inv: GQInvariants) -> None:
    units = [inv.units.astype(np.int64)]
    for p in reversed(hierarchy.parents):  # the invariants of every level, summed here
        up = np.zeros((int(p.max()) + 1, units[0].shape[1]), dtype=np.int64)
        np.add.at(up, p, units[0])
        units.insert(0, up)
    for i in range(len(hierarchy.levels)):
        dp = release.dp[i]
        assert dp.counts.dtype.kind == "i" and dp.counts.min() > 0
        assert int(dp.counts.sum()) == inv.state_total
        level_inv = GQInvariants(inv.schema_name, units[i].astype(np.int32), inv.state_total)
        got = invariant_violations(dp, level_inv)
        assert set(got.values()) == {0}, (hierarchy.levels[i], got)
        people = people_per_unit_type(dp)
        facilities = units[i].copy()
        facilities[:, 0] = 0
        assert (people >= facilities).all()  # hhgq_total_lb, one person per facility
        assert (people[units[i] == 0] == 0).all()  # hhgq_total_ub
        assert _independent_zeros(dp) == 0
        if i:
            up = dp.aggregate(hierarchy.parents[i - 1], release.dp[i - 1].n_units)
            np.testing.assert_array_equal(up.cells, release.dp[i - 1].cells)
            np.testing.assert_array_equal(up.counts, release.dp[i - 1].counts)


#: seeds run with the fit in parts of whole parents of ~500 variables (the route of large states)
IN_PARTS = 500


def _large_state_routes(monkeypatch, part: int | None, chunk: int | None) -> None:  # type: ignore[no-untyped-def]
    """The fit in parts of ``part`` variables, the levels below the State in chunks of ``chunk``."""
    if part is not None:
        monkeypatch.setattr(sparse_parts, "PART_VARIABLES", part)
    if chunk is not None:
        monkeypatch.setattr(sparse_topdown_module, "CHUNK_VARIABLES", chunk)


@pytest.mark.parametrize(
    ("seed", "part", "chunk"),
    [(1, None, None), (2, None, None), (3, IN_PARTS, None), (4, IN_PARTS, 200), (5, None, 200)],
)
def test_pl94_releases_keep_every_invariant_at_every_level(
    small_state, seed: int, part: int | None, chunk: int | None, monkeypatch
) -> None:
    # chunks of 200 candidate variables: every level below the State in several chunks (the
    # Tract's 596 variables in 3, the Block's 8,886 in about 40)
    _large_state_routes(monkeypatch, part, chunk)
    st, hierarchy, pop = small_state
    measured = _measured("pl94_production", list(hierarchy.levels))
    release = sparse_topdown(
        hierarchy.parents, hierarchy.levels, pop.pl94, pop.pl94_invariants, measured,
        noise_rngs(seed, st, len(hierarchy.levels)),
    )  # fmt: skip
    _check_release(release, hierarchy, pop.pl94_invariants)
    # the bound binds: blocks with a facility hold people in it although noise alone would not
    facilities = pop.pl94_invariants.units[:, 1:] > 0
    assert (people_per_unit_type(release.dp[-1])[:, 1:][facilities] >= 1).all()


@pytest.mark.slow  # minutes: the slow tier (the PL94 seeds above, a second each, stay in the fast)
@pytest.mark.parametrize(("seed", "part", "chunk"), [(1, None, None), (2, IN_PARTS, 10_000)])
def test_dhc_releases_keep_every_invariant_at_every_level(
    small_state, seed: int, part: int | None, chunk: int | None, monkeypatch
) -> None:
    # A loose fit (tolerance, few augmented-Lagrangian rounds): the constraints hold whatever the
    # fit's accuracy (the fit's repair and the rounding impose them); a loose tolerance keeps the
    # DHC's levels of many units quick (benchmarks/README.md).
    _large_state_routes(monkeypatch, part, chunk)
    st, hierarchy, pop = small_state
    release = sparse_topdown(
        hierarchy.parents, hierarchy.levels, pop.dhc, pop.dhc_invariants,
        _measured("dhc_production", DHC_LEVELS), noise_rngs(seed, st, 5), tol=0.05, max_outer=3,
    )  # fmt: skip
    _check_release(release, hierarchy, pop.dhc_invariants)


def test_repair_moves_people_within_a_parent_cell_to_children_below_their_bound() -> None:
    # one parent cell of a facility type held by two children (segment 0), a second cell (1):
    # child A (group 0) must hold >= 2, child B (group 1) >= 0; the fit left A at 0.5
    x = np.array([0.5, 2.0, 0.0, 1.5])  # (A, cell 0), (B, cell 0), (A, cell 1), (B, cell 1)
    segment = np.array([0, 0, 1, 1])
    group = np.array([0, 1, 0, 1])
    lower = np.array([2.0, 0.0])
    pair = np.array([0, 0])
    out = repair_lower(x, segment, group, lower, pair, columns=True)
    np.testing.assert_allclose(np.bincount(segment, weights=out), [2.5, 1.5])  # parent kept
    assert np.bincount(group, weights=out)[0] == pytest.approx(2.0)
    assert (out >= 0).all()
    # integers: A holds 1 < 2; one person moves from B in a shared cell, the cell sums kept
    y = np.array([1, 2, 0, 1])
    fixed = fix_lower(y, x, segment, group, np.array([2, 0]), pair, columns=True)
    np.testing.assert_array_equal(np.bincount(segment, weights=fixed), [3, 1])
    assert np.bincount(group, weights=fixed)[0] >= 2 and (fixed >= 0).all()
    # a parent short of its children's bounds: refused, not silently broken
    with pytest.raises(InvalidParameterError, match="Infeasible"):
        repair_lower(x, segment, group, np.array([5.0, 0.0]), pair, columns=True)
    with pytest.raises(InvalidParameterError, match="Infeasible"):
        fix_lower(y, x, segment, group, np.array([5, 0]), pair, columns=True)


@pytest.mark.parametrize("columns", [True, False])
def test_repair_takes_a_parent_at_exactly_its_bounds_short_by_rounding(columns: bool) -> None:
    # a parent holding exactly its children's bounds (1 + 1 people) fitted to floating point: child
    # B is 1.6e-9 of a person short and no child has anything to give. That is rounding, not an
    # infeasible bound (the largest state of a full-US replicate met it); the integer repair after
    # rounding restores the bound
    short = 1.5670912e-9
    x = np.array([1.0, 1.0 - short])
    segment = np.array([0, 1]) if columns else np.array([0, 0])
    group = np.array([0, 1])
    lower = np.array([1.0, 1.0])
    pair = np.array([0, 0])
    out = repair_lower(x, segment, group, lower, pair, columns=columns)
    np.testing.assert_allclose(np.bincount(segment, weights=out), np.bincount(segment, weights=x))
    assert (out >= 0).all() and (lower - np.bincount(group, weights=out)).max() <= 2 * short
    fixed = fix_lower(
        np.array([1, 1]), out, segment, group, np.array([1, 1]), pair, columns=columns
    )
    np.testing.assert_array_equal(fixed, [1, 1])
    # a real shortfall (a whole person) is still refused
    with pytest.raises(InvalidParameterError, match="Infeasible"):
        repair_lower(np.array([1.0, 0.0]), segment, group, lower, pair, columns=columns)


def test_infeasible_invariants_are_refused(small_state) -> None:
    st, hierarchy, pop = small_state
    inv = pop.pl94_invariants
    units = inv.units.copy()
    units[:, 3] += 1  # a nursing facility in every block: more facilities than people
    bad = replace(inv, units=units, state_total=int(units[:, 1:].sum()) - 1)
    with pytest.raises(InvalidParameterError, match="Infeasible invariants"):
        sparse_topdown(
            hierarchy.parents, hierarchy.levels, pop.pl94, bad,
            _measured("pl94_production", list(hierarchy.levels)), noise_rngs(1, st, 5),
        )  # fmt: skip
