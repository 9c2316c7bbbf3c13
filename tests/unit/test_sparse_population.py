"""Sparse production-schema populations: block totals, the production GQ invariants, structural
zeros, sparsity, and the PL94 histogram as a recode of the DHC one (the same people)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.geography import census_levels as census
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import (
    SparseHistograms,
    invariant_violations,
    people_per_unit_type,
)
from auditlib.geography.sparse_population import (
    AGE_PROFILES,
    SparsePopulationModel,
    _age_of,
    _shuffle_order,
    sparse_block_population,
    spine_state_sparse_population,
)
from auditlib.geography.spine import generate_spine, tallies_2020


@pytest.fixture(scope="module")
def blocks() -> np.ndarray:
    rng = np.random.default_rng(5)
    pop = rng.poisson(rng.gamma(0.5, 80.0, size=4000))
    pop[rng.random(pop.size) < 0.3] = 0
    return pop


@pytest.fixture(scope="module")
def population(blocks: np.ndarray):  # type: ignore[no-untyped-def]
    return sparse_block_population(blocks, np.random.default_rng(11))


def test_block_totals_and_invariants_hold(blocks: np.ndarray, population) -> None:  # type: ignore[no-untyped-def]
    for name in ("pl94_production", "dhc_production"):
        h, inv = population.histograms(name), population.invariants(name)
        np.testing.assert_array_equal(h.totals(), blocks)
        assert inv.state_total == blocks.sum()
        people = people_per_unit_type(h)
        units = inv.units.astype(np.int64)
        # each GQ type present => at least one person per facility; absent => nobody
        assert ((people[:, 1:] >= units[:, 1:]) | (units[:, 1:] == 0)).all()
        assert (people[units == 0] == 0).all()
        assert (units[:, 1:][people[:, 1:] > 0] >= 1).all()
        assert all(v == 0 for v in invariant_violations(h, inv).values())


def test_group_quarters_are_rare_and_concentrated(blocks: np.ndarray, population) -> None:  # type: ignore[no-untyped-def]
    people = people_per_unit_type(population.pl94)
    share = people[:, 1:].sum() / people.sum()
    assert 0.005 < share < 0.06
    gq_blocks = (people[:, 1:].sum(axis=1) > 0).sum()
    assert 0 < gq_blocks < 0.02 * (blocks > 0).sum()
    pl94_units = population.pl94_invariants.units
    dhc_units = population.dhc_invariants.units
    assert pl94_units.shape == (blocks.size, 8) and dhc_units.shape == (blocks.size, 25)
    np.testing.assert_array_equal(pl94_units[:, 0], dhc_units[:, 0])
    assert pl94_units[:, 1:].sum() == dhc_units[:, 1:].sum()


def test_storage_is_sparse(blocks: np.ndarray, population) -> None:  # type: ignore[no-untyped-def]
    for h in (population.pl94, population.dhc):
        per_block = np.diff(h.indptr)
        assert (per_block <= blocks).all()  # never more cells than people
        assert h.nbytes < 16 * blocks.sum() + 8 * (blocks.size + 1)
    # a DHC block holds a few dozen of its 1.2 M cells
    assert np.diff(population.dhc.indptr).max() < 1e-3 * schema("dhc_production").n_cells


def test_the_pl94_histogram_is_a_recode_of_the_dhc_one(population) -> None:  # type: ignore[no-untyped-def]
    dhc, pl94 = schema("dhc_production"), schema("pl94_production")
    h = population.dhc
    relgq, _sex, age, hisp, race = np.unravel_index(h.cells.astype(np.int64), dhc.shape)
    major = np.array([0] * 18 + list(census.RELGQ_GQ_TO_HHGQ))
    cell = np.ravel_multi_index((major[relgq], (age >= 18).astype(int), hisp, race), pl94.shape)
    want = np.zeros((h.n_units, pl94.n_cells), dtype=np.int64)
    np.add.at(want, (h.unit_of_entry(), cell), h.counts)
    np.testing.assert_array_equal(population.pl94.dense(), want)


def test_structural_zeros(population) -> None:  # type: ignore[no-untyped-def]
    dhc = schema("dhc_production")
    h = population.dhc
    relgq, _sex, age, _h, _r = np.unravel_index(h.cells.astype(np.int64), dhc.shape)
    groups = dict((n, g) for n, g, _ in census.RELGQ_RECODES)["gq_constr_groups"]
    for g, lowest in zip(groups[1:5], (3, 15, 16, 17), strict=True):
        assert not (np.isin(relgq, g) & (age < lowest)).any()
    assert not ((relgq == 27) & (age < 20)).any()  # nursing facilities (relgq27_lt20)
    assert not ((relgq <= 5) & (age < 15)).any()  # householders, spouses and partners
    # every relgq x age structural zero of the DHC's Constraints_DHCP.py, as the DAS's age recodes
    for rule, r, lo, hi in census.DHCP_AGE_STRUCTURAL_ZEROS:
        assert not ((relgq == r) & ((age < lo) | (age > hi))).any(), rule
    assert ((relgq == 16) & (age == 20)).any() or not (relgq == 16).any()
    for name, inv in (("dhc_production", population.dhc_invariants),
                      ("pl94_production", population.pl94_invariants)):  # fmt: skip
        assert invariant_violations(population.histograms(name), inv)["structural_zeros"] == 0
    assert [r for _, r, _, _ in census.DHCP_AGE_STRUCTURAL_ZEROS] == [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 16, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 31,
        32, 33, 34, 35, 37, 38, 39, 40,
    ]  # fmt: skip
    assert census.RELGQ_AGE_RANGE[23] == (17, 65) and census.RELGQ_AGE_RANGE[32] == (3, 30)


def test_answers_and_aggregation_match_dense_sums(population) -> None:  # type: ignore[no-untyped-def]
    h = population.pl94
    dense = h.dense()
    sch = schema("pl94_production")
    for q in ("hhinstlevels", "votingage * hispanic * cenrace", "total"):
        np.testing.assert_array_equal(h.answers(q), sch.answer(dense, q))
    parent = np.arange(h.n_units) // 7
    up = h.aggregate(parent)
    want = np.zeros((up.n_units, sch.n_cells), dtype=np.int64)
    np.add.at(want, parent, dense)
    np.testing.assert_array_equal(up.dense(), want)


def test_violations_are_named(population) -> None:  # type: ignore[no-untyped-def]
    h, inv = population.pl94, population.pl94_invariants
    units = inv.units.copy()
    people = people_per_unit_type(h)
    empty_gq = np.argwhere(people[:, 1:] == 0)[0]
    units[empty_gq[0], empty_gq[1] + 1] = 1  # a facility nobody lives in
    occupied = int(np.argmax(people[:, 0] > 0))
    units[occupied, 0] = 0  # household people without a housing unit
    bad = replace(inv, units=units, state_total=inv.state_total + 1)
    got = invariant_violations(h, bad)
    assert got == {
        "state_total": 1, "gq_lower": 1, "gq_upper": 1, "structural_zeros": 0, "nursing_minors": 0
    }  # fmt: skip
    # a minor in a nursing facility: a structural zero of both schemas' production runs
    cell = np.ravel_multi_index((3, 0, 0, 0), schema("pl94_production").shape)
    minors = SparseHistograms("pl94_production", np.array([0, 1]), np.array([cell], np.int32),
                              np.array([2], np.int32))  # fmt: skip
    one = replace(inv, units=np.array([[0, 0, 0, 1, 0, 0, 0, 0]], np.int32), state_total=2)
    assert invariant_violations(minors, one)["structural_zeros"] == 1
    assert invariant_violations(minors, one)["nursing_minors"] == 1
    with pytest.raises(InvalidParameterError, match="matching"):
        invariant_violations(population.dhc, inv)
    with pytest.raises(InvalidParameterError, match="> 0 people"):
        SparseHistograms(
            "pl94_production", np.array([0, 1]), np.array([3], np.int32), np.array([0], np.int32)
        )


def test_spine_states_are_keyed_streams() -> None:
    spine = generate_spine(
        4, totals={"US": tallies_2020()["US"].scaled(0.002)}, population={"US": 400_000}
    )
    a = spine_state_sparse_population(spine, 2, seed=9)
    b = spine_state_sparse_population(spine, 2, seed=9)
    lo, hi = np.searchsorted(spine.state_of("Block"), [2, 3])
    np.testing.assert_array_equal(a.dhc.totals(), spine.block_population[lo:hi])
    np.testing.assert_array_equal(a.dhc.cells, b.dhc.cells)
    np.testing.assert_array_equal(a.dhc.counts, b.dhc.counts)
    c = spine_state_sparse_population(spine, 2, seed=10)
    assert not np.array_equal(a.dhc.cells, c.dhc.cells)
    with pytest.raises(InvalidParameterError, match="states 0"):
        spine_state_sparse_population(spine, 51, seed=9)
    with pytest.raises(InvalidParameterError, match="gq_share"):
        SparsePopulationModel(gq_share=1.5)


def test_chunking_does_not_change_totals(blocks: np.ndarray) -> None:
    small = SparsePopulationModel(chunk_people=500)
    p = sparse_block_population(blocks, np.random.default_rng(3), model=small)
    np.testing.assert_array_equal(p.dhc.totals(), blocks)
    assert all(v == 0 for v in invariant_violations(p.dhc, p.dhc_invariants).values())


def _same(a: SparseHistograms, b: SparseHistograms) -> None:
    assert a.schema_name == b.schema_name
    for field in ("indptr", "cells", "counts"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("chunk_people", [500, 1 << 21])
def test_one_schema_drawn_alone_is_the_same(blocks: np.ndarray, chunk_people: int) -> None:
    m = SparsePopulationModel(chunk_people=chunk_people)
    both = sparse_block_population(blocks, np.random.default_rng(11), model=m)
    for name, field in (("pl94_production", "pl94"), ("dhc_production", "dhc")):
        alone = sparse_block_population(blocks, np.random.default_rng(11), model=m, schemas=(name,))
        _same(alone.histograms(name), both.histograms(name))
        np.testing.assert_array_equal(alone.invariants(name).units, both.invariants(name).units)
        assert alone.invariants(name).state_total == both.invariants(name).state_total
        other = "dhc" if field == "pl94" else "pl94"
        assert getattr(alone, other) is None and getattr(alone, f"{other}_invariants") is None
    swapped = sparse_block_population(
        blocks, np.random.default_rng(11), model=m, schemas=("dhc_production", "pl94_production")
    )
    _same(swapped.pl94, both.pl94)  # type: ignore[arg-type]
    _same(swapped.dhc, both.dhc)  # type: ignore[arg-type]


def test_spine_state_draws_one_schema_alone() -> None:
    spine = generate_spine(
        4, totals={"US": tallies_2020()["US"].scaled(0.002)}, population={"US": 400_000}
    )
    both = spine_state_sparse_population(spine, 1, seed=9)
    pl94 = spine_state_sparse_population(spine, 1, seed=9, schemas=("pl94_production",))
    _same(pl94.histograms("pl94_production"), both.histograms("pl94_production"))
    assert pl94.dhc is None
    with pytest.raises(
        InvalidParameterError, match=r"'dhc_production'.*schemas=\('dhc_production',\)"
    ):
        pl94.histograms("dhc_production")


def test_a_schema_not_drawn_is_refused(blocks: np.ndarray) -> None:
    dhc = sparse_block_population(blocks, np.random.default_rng(1), schemas=("dhc_production",))
    assert dhc.pl94 is None and dhc.pl94_invariants is None
    for ask in (dhc.histograms, dhc.invariants):
        with pytest.raises(InvalidParameterError, match="'pl94_production' was not drawn"):
            ask("pl94_production")
    assert dhc.histograms("dhc_production").n_units == blocks.size
    with pytest.raises(InvalidParameterError, match="choose"):
        dhc.histograms("pl94")


@pytest.mark.parametrize(
    ("schemas", "match"),
    [
        ((), "at least one"),
        (("pl94",), "'pl94'"),
        (("pl94_production", "dhc"), "'dhc'"),
        ("pl94_production", "tuple of schema names"),
        (None, "None"),
        (("pl94_production", "pl94_production"), "twice"),
    ],
)
def test_bad_schemas_are_refused(blocks: np.ndarray, schemas: object, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        sparse_block_population(blocks[:10], np.random.default_rng(1), schemas=schemas)  # type: ignore[arg-type]


@pytest.mark.parametrize("per_block", [1, 3, 40])
def test_the_shuffle_order_is_lexsorts(per_block: int) -> None:
    rng = np.random.default_rng(per_block)
    block = np.sort(rng.integers(0, 5000, size=5000 * per_block))
    u = rng.random(block.size)
    np.testing.assert_array_equal(_shuffle_order(block, u), np.lexsort((u, block)))
    coarse = np.floor(u * 8) / 8  # ties within blocks: the order of lexsort's, by position
    np.testing.assert_array_equal(_shuffle_order(block, coarse), np.lexsort((coarse, block)))
    assert _shuffle_order(block[:0], u[:0]).size == 0


def test_the_age_table_is_searchsorteds() -> None:
    cdf = np.cumsum(AGE_PROFILES, axis=1)
    k = 1 << 12
    edges = np.arange(k + 2) / k
    for c in range(cdf.shape[0]):  # at, just below and just above every weight and bucket edge
        at = np.concatenate([cdf[c], edges, [0.0, 1.0, 1.5, 5e-324]])
        x = np.concatenate([at, np.nextafter(at, -1), np.nextafter(at, 2)])
        x = np.concatenate([x[x >= 0], np.random.default_rng(c).random(10_000)])
        got = _age_of(np.full(x.size, c, dtype=np.int64), x)
        np.testing.assert_array_equal(got, np.searchsorted(cdf[c], x, side="right"))
