"""Census releases under test: a released count of D vs D′ (add / remove / move one person).

References, independent of the code under test: the discrete Gaussian's pmf normalized by direct
summation (∝ exp(−k²/(2σ²)), |k| ≤ 400), whose log-ratio for a shift by one is the affine
|(2u − 1)/(2σ²)| (so ε*_C = (2r + 1)/(2σ²) on C = {c − r..c + r}); the two-sided geometric's
|ln| ratio is ε at every integer (Flaxman 2019 §2.2); σ² of the allocation read back from its CSV.
Coverage at fixed seeds at n = 5·10³, N = 1.25·10⁴ (as in test_mpl_estimator.py), with power: the
bounds exceed the ε*_C of a claim with twice the variance in most runs.
"""

from __future__ import annotations

import csv
import io
import math
from fractions import Fraction
from importlib.resources import files

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl.catalogue import KnownMechanism
from auditlib.mpl.census import (
    allocation_count,
    allocation_query_count,
    census_database,
    gdpc_count,
    neighbour_pairs,
    unit_count,
)
from tests.unit._mpl import lower_bounds

N_SMALL, N_CONF_SMALL = 5_000, 12_500


def _dg_pmf(sigma2: float, k: np.ndarray) -> np.ndarray:
    j = np.arange(-400, 401, dtype=np.float64)
    z = np.exp(-(j * j) / (2 * sigma2)).sum()
    return np.exp(-(k.astype(np.float64) ** 2) / (2 * sigma2)) / z


def _lbs(e: KnownMechanism, reps: int, seed: int) -> np.ndarray:
    return lower_bounds(e, reps, seed, N_SMALL, N_CONF_SMALL)


def test_neighbour_databases_move_the_count_by_one() -> None:
    d = census_database(4)
    assert unit_count(d, 2, 0) == 4 and unit_count(d, 1, 0) == 4 + 3  # block 0 and its tract
    add, remove, move = neighbour_pairs(d, 2, 0)
    assert [unit_count(p[1], 2, 0) for p in (add, remove, move)] == [5, 3, 5]
    assert add[1].n_people == d.n_people + 1 and remove[1].n_people == d.n_people - 1
    assert move[1].n_people == d.n_people
    # at the tract level a move inside the tract does not change its count: pick one from outside
    t_move = neighbour_pairs(d, 1, 0, ["move"])[0]
    assert unit_count(t_move[1], 1, 0) == unit_count(d, 1, 0) + 1


@pytest.mark.parametrize("sigma2", [2.0, 5.0, 20.0])
def test_allocation_count_exact_epsilon_c(sigma2: float) -> None:
    e = allocation_count(sigma2)
    r = math.ceil(2.0 * math.sqrt(sigma2))
    assert e.region.points.tolist() == list(range(3 - r, 3 + r + 1))
    np.testing.assert_allclose(e.epsilon_c_pairs, (2 * r + 1) / (2 * sigma2), rtol=1e-12)
    assert math.isinf(e.epsilon)
    # the whole loss curve against the direct pmf: add (3 vs 4), remove (3 vs 2)
    t = e.region.points
    u = t - 3
    for (a, b), shift in zip(e.pairs[:2], (1, -1), strict=True):
        ref = np.abs(np.log(_dg_pmf(sigma2, u)) - np.log(_dg_pmf(sigma2, u - shift)))
        np.testing.assert_allclose(e.loss(a, b, t), ref, rtol=1e-10)
        np.testing.assert_allclose(ref, np.abs(shift * (2 * u - shift)) / (2 * sigma2), rtol=1e-9)


def test_clipped_count_exact_and_smaller() -> None:
    s2 = 3.0
    e = allocation_count(s2, count=0, pairs=("add",), radius=4, postprocess="nonnegative")
    t = e.region.points
    assert t.tolist() == [0, 1, 2, 3, 4]  # C ∩ support
    k = np.arange(-400, 1)
    p0_d, p0_dp = _dg_pmf(s2, k).sum(), _dg_pmf(s2, k - 1).sum()  # P(Z <= 0), P(Z <= -1)
    ref = np.abs(np.log(_dg_pmf(s2, t)) - np.log(_dg_pmf(s2, t - 1)))
    ref[0] = abs(math.log(p0_d / p0_dp))
    a, b = e.pairs[0]
    np.testing.assert_allclose(e.loss(a, b, t), ref, rtol=1e-10)
    unclipped = allocation_count(s2, count=0, pairs=("add",), radius=4)
    assert e.epsilon_c <= unclipped.epsilon_c  # post-processing cannot increase the loss
    # the clipped sampler never releases a negative count, and its atom at 0 has the right mass
    x = e.mechanism.sample(a, 200_000, np.random.default_rng(3))
    assert x.min() == 0 and np.mean(x == 0) == pytest.approx(p0_d, abs=4 * math.sqrt(0.25 / 2e5))


def test_sampler_runs_the_release_on_each_database() -> None:
    e = allocation_count(5.0, count=3)
    g = np.random.default_rng(11)
    n = 200_000
    for (a, b), c_prime in zip(e.pairs, (4, 2, 4), strict=True):
        xa = e.mechanism.sample(a, n, g)
        xb = e.mechanism.sample(b, n, g)
        assert xa.dtype == np.int64 and xa.shape == (n,)
        assert np.mean(xa) == pytest.approx(3, abs=0.03) and np.mean(xb) == pytest.approx(
            c_prime, abs=0.03
        )
    # frequencies against the directly normalized pmf (5 sd of a binomial at n = 2·10⁵)
    k = np.arange(-6, 7)
    freq = np.array([np.mean(xa - 3 == j) for j in k])
    p = _dg_pmf(5.0, k)
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
    with pytest.raises(InvalidParameterError, match="a database"):
        e.mechanism.sample(3, 10, g)


def test_allocation_sigma2_from_the_shipped_file() -> None:
    text = (files("auditlib") / "data" / "allocations" / "dhcp_20220825_paper.csv").read_text()
    rows = [
        r
        for r in csv.DictReader(io.StringIO(text))
        if r["geolevel"] == "State" and r["universe"] == "persons" and r["region"] == "US"
    ]
    rho = max(Fraction(r["rho_query_exact"]) for r in rows)
    e = allocation_query_count("dhcp_20220825_paper", "State")
    s2 = float(1 / (2 * rho))  # add/remove: σ² = 1/(2ρ)
    assert e.mechanism.sampler.sigma2 == pytest.approx(s2, rel=1e-12)  # type: ignore[attr-defined]
    r = math.ceil(2 * math.sqrt(s2))
    assert e.epsilon_c == pytest.approx((2 * r + 1) / (2 * s2), rel=1e-12)
    eb = allocation_query_count("dhcp_20220825_paper", "State", neighbours="bounded")
    assert eb.mechanism.sampler.sigma2 == pytest.approx(2 * s2, rel=1e-12)  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match="query: 'nope'"):
        allocation_query_count("dhcp_20220825_paper", "State", "nope")


def test_gdpc_count_exact() -> None:
    e = gdpc_count(0.7)
    np.testing.assert_allclose(e.epsilon_c_pairs, 0.7, rtol=1e-12)
    assert e.epsilon == 0.7 and e.claimed_epsilon == 0.7
    a, b = e.pairs[0]
    t = e.region.points
    # |ln| ratio of (1−a)/(1+a)·a^{|k|}, a = e^{−ε}, shifted by one: ε everywhere
    ref = np.abs(np.abs(t - 4) - np.abs(t - 3)) * 0.7
    np.testing.assert_allclose(e.loss(a, b, t), ref, rtol=1e-12)


def test_mpl_coverage_and_power_allocation_count() -> None:
    e = allocation_count(5.0)  # ε*_C = 11/10 on C = {−2..8}
    lbs = _lbs(e, 100, seed=801)
    assert np.mean(lbs <= e.epsilon_c) >= 0.95 - 0.08
    # power: a release claiming twice the variance (ε*_C = 11/20 on the same C) is refuted in
    # most runs; measured 100 of 100
    claim = allocation_count(10.0, radius=5)
    assert claim.epsilon_c == pytest.approx(0.55)
    assert np.mean(lbs > claim.epsilon_c) >= 0.9


def test_mpl_coverage_clipped_and_gdpc() -> None:
    clipped = allocation_count(5.0, count=1, postprocess="nonnegative")
    lbs = _lbs(clipped, 60, seed=802)
    assert np.mean(lbs <= clipped.epsilon_c) >= 0.95 - 0.1
    assert np.median(lbs) > 0.5 * clipped.epsilon_c
    g = gdpc_count(0.7)
    lbs_g = _lbs(g, 60, seed=803)
    assert np.mean(lbs_g <= g.epsilon_c) >= 0.95 - 0.1
    # power: GDPC at ε = 1.4 claimed as 0.7 is refuted in most runs
    broken = gdpc_count(1.4)
    assert np.mean(_lbs(broken, 20, seed=804) > 0.7) >= 0.9


def test_bad_census_inputs() -> None:
    with pytest.raises(InvalidParameterError, match="count: -1"):
        census_database(-1)
    with pytest.raises(InvalidParameterError, match="pair 'remove'"):
        allocation_count(5.0, count=0)
    with pytest.raises(InvalidParameterError, match="pair kind: 'swap'"):
        allocation_count(5.0, pairs=("swap",))
    with pytest.raises(InvalidParameterError, match="unit: 99"):
        allocation_count(5.0, unit=99)
    with pytest.raises(InvalidParameterError, match="sigma2"):
        allocation_count(-1.0)
    with pytest.raises(InvalidParameterError, match="postprocess: 'round'"):
        allocation_count(5.0, postprocess="round")  # type: ignore[arg-type]


def test_tract_count_under_test() -> None:
    # the tract holding block 0: 3 people in block 0 + one in each of its 3 sibling blocks
    e = allocation_count(5.0, level=1)
    assert e.region.points.tolist() == list(range(6 - 5, 6 + 5 + 1))
    np.testing.assert_allclose(e.epsilon_c_pairs, 11 / 10, rtol=1e-12)
    g = np.random.default_rng(21)
    means = [float(np.mean(e.mechanism.sample(b, 100_000, g))) for _, b in e.pairs]
    np.testing.assert_allclose(means, [7, 5, 7], atol=0.04)
    lbs = _lbs(e, 20, seed=805)
    assert np.mean(lbs <= e.epsilon_c) >= 0.8 and np.median(lbs) > 0.6
