"""The shipped allocations: loader against the published numbers (../REFERENCE and summary.toml)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from auditlib.allocations import list_allocations, load_allocation
from auditlib.exceptions import InvalidParameterError, UnknownNameError

# Su, Su & Wang (Su, Su, Wang) Table 1 / Appendix A.6: rho = 3.65, level shares a_i, 10 queries per level
SHARES = {
    "US": 20,
    "State": 274,
    "County": 85,
    "Prim": 131,
    "Tract_Subset_Group": 131,
    "Tract_Subset": 238,
    "Block_Group": 118,
    "Block": 3,
}
PAPER_SIGMA2 = {  # printed sigma^2 of Su, Su & Wang Table 1, "Bureau's" row
    "US": 68.49,
    "State": 5.00,
    "County": 16.12,
    "Prim": 10.46,
    "Tract_Subset": 5.76,
    "Block_Group": 11.61,
    "Block": 456.62,
}


def test_every_allocation_loads() -> None:
    for a in list_allocations():
        alloc = load_allocation(a)
        assert alloc.queries
        assert all(q.rho > 0 for q in alloc.queries)


def test_paper_allocation_matches_su_su_wang() -> None:
    alloc = load_allocation("dhcp_20220825_paper")
    assert alloc.geolevels() == tuple(SHARES)
    assert alloc.rho() == Fraction(73, 20)
    for g, share in SHARES.items():
        qs = alloc.select(geolevel=g)
        assert len(qs) == 10
        # sigma_i^2 = n / (2 a_i rho) with n = 10 (Su, Su & Wang A.6), as exact rationals
        expected = Fraction(10) / (2 * Fraction(share, 1000) * Fraction(73, 20))
        assert {q.sigma2("add_remove") for q in qs} == {expected}
        assert {q.sigma2("bounded") for q in qs} == {2 * expected}
        if g in PAPER_SIGMA2:
            assert float(expected) == pytest.approx(PAPER_SIGMA2[g], abs=0.006)


def test_production_totals_match_summary() -> None:
    pl94 = load_allocation("pl94_2021_production")
    # PL94-171 2021 persons rho = 293764/114921 (the production certificate)
    assert pl94.rho("persons", "US") == Fraction(293764, 114921)
    assert float(pl94.rho("units", "US")) == pytest.approx(0.07494366462242391, rel=1e-12)
    dhc = load_allocation("dhc_2023_production")
    assert float(dhc.rho("persons", "US")) == pytest.approx(4.9622, abs=1e-9)
    assert float(dhc.rho("units", "US")) == pytest.approx(7.7005, abs=1e-9)
    exp = load_allocation("dhcp_20220825_exp21_1")
    assert exp.rho() == Fraction(235225, 64516)


def test_components_by_neighbour_relation() -> None:
    alloc = load_allocation("pl94_2021_production")
    ar = alloc.components("add_remove", "persons", "US", "State")
    bd = alloc.components("bounded", "persons", "US", "State")
    assert [c for _, c in ar] == [1] * len(ar) and [c for _, c in bd] == [2] * len(bd)
    # same rho either way: count / (2 sigma^2) sums to the level's rho
    for comps in (ar, bd):
        assert sum(Fraction(c) / (2 * s) for s, c in comps) == alloc.rho("persons", "US", "State")


def test_unknown_names_are_named() -> None:
    with pytest.raises(UnknownNameError, match=r"'nope'.*allowed: dhcp_20220825_paper"):
        load_allocation("nope")
    alloc = load_allocation("dhcp_20220825_paper")
    with pytest.raises(UnknownNameError, match="geolevel: 'Tract'"):
        alloc.select(geolevel="Tract")
    with pytest.raises(UnknownNameError, match="region: 'XX'"):
        alloc.geolevels("persons", "XX")
    with pytest.raises(InvalidParameterError, match="neighbours: 'replace'"):
        alloc.queries[0].sigma2("replace")
