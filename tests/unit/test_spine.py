"""The synthetic US spine: exact 2020 totals, every parent has a child, reproducible, plausible skew."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.spine import (
    LEVELS,
    POPULATION_2020,
    Spine,
    SpineModel,
    SpineTotals,
    generate_spine,
    tallies_2020,
    with_population,
)
from auditlib.simulate.hierarchical import CountTree, rdpc

US_2020 = (51, 3143, 84414, 239780, 8132968)
PR_2020 = (1, 78, 981, 2555, 41987)


@pytest.fixture(scope="module")
def full() -> Spine:
    """The whole spine with Puerto Rico (about 2 s, 70 MB of arrays)."""
    return generate_spine(2020, puerto_rico=True)


def small(seed: int = 1, puerto_rico: bool = True, **model: float) -> Spine:
    t = tallies_2020()
    return generate_spine(
        seed,
        puerto_rico=puerto_rico,
        totals={"US": t["US"].scaled(0.01), "PR": t["PR"].scaled(0.05)},
        model=SpineModel(**model),
    )


def test_tallies_are_read_from_the_shipped_csv() -> None:
    t = tallies_2020()
    assert t["US"].as_tuple() == US_2020
    assert t["PR"].as_tuple() == PR_2020


def _check_structure(s: Spine, us: tuple[int, ...], pr: tuple[int, ...]) -> None:
    n_us = us[0]
    assert s.n_states == n_us + pr[0]
    for i, level in enumerate(LEVELS):
        per_state = s.units_per_state(level)
        assert int(per_state[:n_us].sum()) == us[i], level
        assert int(per_state[n_us:].sum()) == pr[i], level
        assert s.n_units(level) == us[i] + pr[i]
        if level != "State":
            par = s.parents[level]
            assert par.dtype == np.int32
            assert (np.diff(par) >= 0).all()  # children contiguous, in parent order
        if level != "Block":
            assert s.children_per_unit(level).min() >= 1, level
    # Puerto Rico's units never hang under a US state and vice versa
    assert (s.state_of("Block")[-pr[4] :] == n_us).all()
    assert (s.state_of("Block")[: us[4]] < n_us).all()


def test_full_spine_totals_are_the_2020_tallies_and_every_parent_has_a_child(full: Spine) -> None:
    _check_structure(full, US_2020, PR_2020)
    assert full.state_names[0] == "S01" and full.state_names[-1] == "PR"
    assert full.nbytes < 80e6


def test_full_spine_populations_are_consistent_and_skewed(full: Spine) -> None:
    pops = full.populations()
    for level in LEVELS:
        assert int(pops[level].sum()) == int(full.block_population.sum())
    us, pr = pops["State"][:51], pops["State"][51]
    for got, want in ((int(us.sum()), POPULATION_2020["US"]), (int(pr), POPULATION_2020["PR"])):
        assert abs(got - want) < 6 * np.sqrt(want)  # Poisson total around the 2020 count
    assert 20 < us.max() / us.min() < 1000  # California / Wyoming ≈ 68
    b = full.block_population
    assert 0.3 < np.mean(b == 0) < 0.5  # structural plus sampling zeros
    assert np.percentile(b, 99) > 10 * np.median(b[b > 0])  # heavy right tail
    tracts = pops["Tract"]
    assert 2500 < np.median(tracts) < 5500  # tracts are drawn near 4,000 people
    counties = full.units_per_state("County")[:51]
    assert counties.max() > 5 * np.median(counties) / 2


def test_scaled_spine_totals_and_structure() -> None:
    t = tallies_2020()
    us, pr = t["US"].scaled(0.01), t["PR"].scaled(0.05)
    assert us.as_tuple() == (51, 51, 844, 2398, 81330)
    _check_structure(small(), us.as_tuple(), pr.as_tuple())


def test_spine_is_deterministic_and_regions_are_independent() -> None:
    a, b, c = small(3), small(3), small(4)
    for level in LEVELS[1:]:
        np.testing.assert_array_equal(a.parents[level], b.parents[level])
    np.testing.assert_array_equal(a.block_population, b.block_population)
    assert not np.array_equal(a.parents["Block"], c.parents["Block"])
    us_only = small(3, puerto_rico=False)
    n = us_only.n_units("Block")
    np.testing.assert_array_equal(us_only.parents["Block"], a.parents["Block"][:n])
    np.testing.assert_array_equal(us_only.block_population, a.block_population[:n])
    pr_only = generate_spine(3, regions=("PR",), totals={"PR": tallies_2020()["PR"].scaled(0.05)})
    assert pr_only.state_names == ("PR",)
    np.testing.assert_array_equal(pr_only.block_population, a.block_population[n:])
    np.testing.assert_array_equal(
        pr_only.parents["Block"],
        a.parents["Block"][n:] - a.n_units("Block_Group") + pr_only.n_units("Block_Group"),
    )


def test_empty_block_share_controls_the_zeros() -> None:
    none = small(5, empty_block_share=0.0)
    many = small(5, empty_block_share=0.8)
    assert np.mean(many.block_population == 0) > 0.8 > np.mean(none.block_population == 0)


def test_rdpc_on_the_spine_is_consistent() -> None:
    s = small(6)
    tree = CountTree.from_spine(s)
    assert tree.levels == 5 and int(tree.counts[0][0]) == int(s.block_population.sum())
    rel = rdpc(tree, 1.0, np.random.default_rng(0))
    for j in range(1, 6):
        sums = np.bincount(tree.parents[j - 1], weights=rel.dp[j])
        np.testing.assert_allclose(sums, rel.dp[j - 1], rtol=1e-10, atol=1e-6)


def test_with_population_and_bad_inputs() -> None:
    s = small(7, puerto_rico=False)
    moved = s.block_population.copy()
    moved[0] += 1
    assert int(with_population(s, moved).populations()["State"].sum()) == int(moved.sum())
    with pytest.raises(InvalidParameterError, match="block_population"):
        with_population(s, moved[:-1])
    with pytest.raises(InvalidParameterError, match="Block = 5 < Block_Group = 9"):
        SpineTotals(1, 2, 3, 9, 5)
    with pytest.raises(InvalidParameterError, match=r"empty_block_share: 1\.0"):
        SpineModel(empty_block_share=1.0)
    with pytest.raises(InvalidParameterError, match="tract_size_shape: -1"):
        SpineModel(tract_size_shape=-1)
    with pytest.raises(InvalidParameterError, match="factor: 2"):
        tallies_2020()["US"].scaled(2)
    with pytest.raises(UnknownNameError, match="'Place'"):
        s.units_per_state("Place")
    with pytest.raises(UnknownNameError, match="'VI'"):
        generate_spine(1, regions=("VI",))
    with pytest.raises(UnknownNameError, match="'PR'"):
        generate_spine(1, puerto_rico=True, totals={"US": tallies_2020()["US"].scaled(0.01)})
