"""Trade-off curves: brute-force Neyman-Pearson, the Gaussian limit, f-DP properties, Su, Su & Wang."""

from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting import (
    DiscreteGaussianComposition,
    gaussian_tradeoff,
    gdp_mu_estimate,
    tradeoff,
    tradeoff_knots,
    zcdp_tradeoff,
)
from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError

ALPHA = np.linspace(0.0, 1.0, 201)
ALLOC_US = load_allocation("dhcp_20220825_paper").components("add_remove", geolevel="US")


def dg_pmf(sigma2: float, support: np.ndarray, mean: int) -> np.ndarray:
    k = np.arange(-80, 81)
    z = np.exp(-(k**2) / (2 * sigma2)).sum()
    return np.exp(-((support - mean) ** 2) / (2 * sigma2)) / z


def brute_force_tradeoff(sigma2s: list[float], alpha: np.ndarray) -> np.ndarray:
    """T(P, Q)(alpha) by enumerating every output of the product mechanism: the optimal test
    rejects P where Q/P is largest, randomizing on the boundary (linear interpolation)."""
    x = np.arange(-30, 31)
    p_list = [dg_pmf(s, x, 0) for s in sigma2s]
    q_list = [dg_pmf(s, x, 1) for s in sigma2s]
    p = np.ones(1)
    q = np.ones(1)
    for pi, qi in zip(p_list, q_list, strict=True):
        p = np.outer(p, pi).ravel()
        q = np.outer(q, qi).ravel()
    order = np.argsort(np.log(p) - np.log(q), kind="stable")
    a = np.concatenate([[0.0], np.cumsum(p[order])])
    b = np.concatenate([[1.0], 1.0 - np.cumsum(q[order])])
    return np.interp(alpha, a, b)


def test_matches_brute_force_neyman_pearson() -> None:
    sigma2s = [2.0, 3.0, 3.0]
    comp = DiscreteGaussianComposition([(Fraction(2), 1), (Fraction(3), 2)])
    assert comp.method == "exact-lattice"
    got = tradeoff(comp, ALPHA)
    want = brute_force_tradeoff(sigma2s, ALPHA)
    assert np.all(got.lower <= want + 1e-12) and np.all(want <= got.upper + 1e-12)
    assert np.max(got.width) < 1e-11


def test_bracket_mode_contains_the_exact_curve() -> None:
    comps = [(Fraction(2), 1), (Fraction(3), 2)]
    exact = tradeoff(DiscreteGaussianComposition(comps), ALPHA)
    grid = DiscreteGaussianComposition(comps, mode="bracket-grid", grid=1e-3)
    br = tradeoff(grid, ALPHA)
    assert br.method == "bracket-grid"
    assert np.all(br.lower <= exact.lower) and np.all(exact.upper <= br.upper)
    assert np.max(br.width) < 5e-3


def test_large_sigma_approaches_gaussian_dp() -> None:
    sigma2 = 400.0
    got = tradeoff(DiscreteGaussianComposition([(Fraction(400), 1)]), ALPHA)
    want = gaussian_tradeoff(1 / np.sqrt(sigma2), ALPHA)
    assert np.max(np.abs(np.asarray(got.midpoint) - want)) < 1e-5


def test_trade_off_function_properties_and_symmetry() -> None:
    comp = DiscreteGaussianComposition([(Fraction(3, 2), 2), (Fraction(5), 1)])
    beta = tradeoff(comp, ALPHA)
    lo, hi = np.asarray(beta.lower), np.asarray(beta.upper)
    assert np.all(np.diff(hi) <= 1e-12)  # non-increasing
    assert np.all(np.diff(lo, 2) >= -1e-12)  # convex (even grid)
    assert np.all(hi <= 1.0 - ALPHA + 1e-15) and hi[0] <= 1.0
    # symmetric mechanism: the curve is its own inverse, f(f(alpha)) = alpha
    inner = np.linspace(0.02, 0.98, 49)
    f = np.asarray(tradeoff(comp, inner).midpoint)
    ff = np.asarray(tradeoff(comp, f).midpoint)
    assert np.max(np.abs(ff - inner)) < 1e-9
    a_k, b_k = tradeoff_knots(comp)
    assert np.all(np.diff(a_k) >= 0) and np.all(np.diff(b_k) <= 0)
    assert np.interp(0.3, b_k[::-1], a_k[::-1]) == pytest.approx(
        float(tradeoff(comp, 0.3).midpoint), abs=1e-9
    )


def test_su_su_wang_state_level_exact_versus_bureau() -> None:
    # REFERENCE.md: State level at sigma2 = 5, 10 queries, add/remove: beta(0.05) = 0.591 exact,
    # 0.031 implied by the Bureau's zCDP conversion
    alloc = load_allocation("dhcp_20220825_paper")
    comp = DiscreteGaussianComposition(alloc.components("add_remove", geolevel="State"))
    b = tradeoff(comp, 0.05)
    assert float(b.lower) == pytest.approx(0.591, abs=5e-4)
    assert float(b.width) < 1e-10
    five = tradeoff(DiscreteGaussianComposition([(Fraction(5), 10)]), 0.05)
    assert float(five.lower) == pytest.approx(0.591, abs=5e-4)
    implied = zcdp_tradeoff(comp.rho, 0.05)
    assert implied == pytest.approx(0.031, abs=5e-4)
    # the Bureau's accounting is a valid but loose guarantee: below the exact curve everywhere
    z = np.asarray(zcdp_tradeoff(comp.rho, ALPHA))
    assert np.all(z <= np.asarray(tradeoff(comp, ALPHA).lower) + 1e-9)
    assert gdp_mu_estimate(comp) == pytest.approx(np.sqrt(2 * comp.rho), rel=2e-3)


def test_zcdp_tradeoff_endpoints_and_vectorization() -> None:
    out = zcdp_tradeoff(1.0, np.array([0.0, 1.0]))
    assert isinstance(out, np.ndarray) and out[0] == pytest.approx(1.0) and out[1] == 0.0
    assert isinstance(zcdp_tradeoff(1.0, 0.5), float)


def test_tiny_variances_do_not_overflow() -> None:
    # losses beyond e^700: those lines are left out, the bounds stay valid
    for s2 in (Fraction(1, 100), Fraction(1, 1000)):
        b = tradeoff(DiscreteGaussianComposition([(s2, 2)]), [0.0, 1e-5, 0.5, 1.0])
        assert np.all(b.lower <= b.upper) and b.upper[0] == 1.0 and b.upper[2] <= 1e-12
    z = zcdp_tradeoff(800.0, [0.0, 0.5])
    assert z[0] == 1.0 and z[1] == 0.0


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_alpha_is_named(bad: float) -> None:
    comp = DiscreteGaussianComposition([(Fraction(5), 1)])
    with pytest.raises(InvalidParameterError, match="alpha"):
        tradeoff(comp, [0.1, bad])


def test_brute_force_helper_is_itself_sane() -> None:
    for s in (1.0, 4.0):
        b = brute_force_tradeoff([s], np.array([0.0, 1.0]))
        assert b[0] == pytest.approx(1.0) and b[1] == pytest.approx(0.0, abs=1e-15)


def test_block_pruned_maximum_equals_the_dense_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # the package exports the function ``tradeoff``, which hides the module of the same name
    module = importlib.import_module("auditlib.accounting.tradeoff")
    comp = DiscreteGaussianComposition(ALLOC_US)
    dense = tradeoff(comp, ALPHA)
    monkeypatch.setattr(module, "_CHUNK", 1000)
    monkeypatch.setattr(module, "_BLOCK", 16)
    pruned = tradeoff(comp, ALPHA)
    assert np.array_equal(pruned.lower, dense.lower)
    assert np.array_equal(pruned.upper, dense.upper)
