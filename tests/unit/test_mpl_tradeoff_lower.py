"""Empirical f-DP points: exact curves, the implied ε/μ, the hull, coverage and power.

References are independent of the code under test: closed forms (G_μ, f_{ε,0}, the Laplace curve
through scipy's Laplace law), the certified curve of ``auditlib.accounting.tradeoff`` for the
discrete Gaussian, and brute-force Neyman–Pearson sums over a pmf table.

Coverage is checked with few repetitions (R = 40 per mechanism): the points are simultaneous
Clopper–Pearson/DKW bounds, so coverage is held to ≥ 0.9 (the stored study,
``benchmarks/results/fdp_coverage.csv``, has the 0.94 check at nominal 0.95). The same draws'
plug-in points must fail often (the check has power), and broken mechanisms whose true curve is
lower than claimed must be detected.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtr, ndtri

from auditlib.accounting import DiscreteGaussianComposition, tradeoff
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mechanisms import DiscreteGaussian
from auditlib.mpl.tradeoff_catalogue import (
    discrete_tradeoff,
    gaussian_shift,
    laplace_shift,
    randomized_response_pair,
)
from auditlib.mpl.tradeoff_coverage import known_tradeoff, refutes, tradeoff_coverage
from auditlib.mpl.tradeoff_geometry import hull_curve, implied_epsilon, implied_mu
from auditlib.mpl.tradeoff_lower import (
    certify,
    select_tests,
    tradeoff_from_samples,
    tradeoff_lower,
)

ALPHA = np.linspace(0.001, 0.999, 499)


def test_binary_rr_curve_is_pure_dp_curve() -> None:
    eps = 0.9
    want = np.maximum.reduce(
        [np.zeros_like(ALPHA), 1 - math.exp(eps) * ALPHA, math.exp(-eps) * (1 - ALPHA)]
    )
    got = randomized_response_pair(eps).curve(ALPHA)
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_laplace_curve_passes_through_threshold_tests() -> None:
    # {t > c} tests of Lap(0, b) vs Lap(1, b), errors from scipy's law
    b = 1 / 0.8
    c = np.linspace(-4.0, 5.0, 301)
    a = stats.laplace.sf(c, scale=b)
    beta = stats.laplace.cdf(c, loc=1.0, scale=b)
    np.testing.assert_allclose(laplace_shift(0.8).curve(a), beta, atol=1e-12)


def test_gaussian_curve_is_g_mu() -> None:
    g = gaussian_shift(1.3)
    np.testing.assert_allclose(g.curve(ALPHA), ndtr(ndtri(1 - ALPHA) - 1.3), atol=1e-14)
    assert g.mu == pytest.approx(1.3)


def test_dg_truth_agrees_with_brute_force_neyman_pearson() -> None:
    s2 = 2.0
    dg = DiscreteGaussian(s2)
    t = np.arange(-60, 62)
    p = np.exp(dg.logpmf(t))  # output law at 0
    q = np.exp(dg.logpmf(t - 1))  # at 1
    brute = discrete_tradeoff(p, q)(ALPHA)
    br = tradeoff(DiscreteGaussianComposition([(s2, 1)]), ALPHA)
    assert np.all(br.lower <= brute + 1e-9) and np.all(brute <= br.upper + 1e-9)
    assert known_tradeoff("dg_count", 1 / math.sqrt(s2)).curve(ALPHA) == pytest.approx(br.upper)


def test_implied_parameters_invert_the_curves() -> None:
    a = np.array([0.01, 0.1, 0.3])
    np.testing.assert_allclose(implied_mu(a, ndtr(ndtri(1 - a) - 0.7)), 0.7, atol=1e-9)
    eps, delta = 1.1, 0.01
    np.testing.assert_allclose(
        implied_epsilon(a[:2], 1 - delta - math.exp(eps) * a[:2], delta), eps
    )
    b = np.array([0.02, 0.2])
    np.testing.assert_allclose(implied_epsilon(1 - delta - math.exp(eps) * b, b, delta), eps)
    assert implied_epsilon(0.5, 0.6)[()] == 0.0  # above the diagonal: nothing ruled out


def test_hull_lies_above_a_convex_curve_through_points_above_it() -> None:
    f = gaussian_shift(1.0).curve
    a = np.array([0.02, 0.1, 0.25, 0.5])
    b = f(a) + np.array([0.01, 0.0, 0.0, 0.002])
    chord = 0.625 * b[1] + 0.375 * b[3]  # the chord of the 2nd and 4th points at α = 0.25
    b[2] = chord + 0.01  # above the chord (and above f): not a hull vertex
    h = hull_curve(a, b, ALPHA)
    assert np.all(h >= f(ALPHA) - 1e-12)
    np.testing.assert_allclose(hull_curve(a, b, a[[0, 1, 3]]), b[[0, 1, 3]], atol=1e-12)
    assert hull_curve(a, b, 0.25) == pytest.approx(chord, abs=1e-12)


@pytest.mark.parametrize(
    ("name", "parameter"),
    [("gaussian", 1.0), ("laplace", 1.0), ("randomized_response", 1.0), ("dg_count", 1.0)],
)
def test_coverage_and_plugin_failure(name: str, parameter: float) -> None:
    known = known_tradeoff(name, parameter)
    res = tradeoff_coverage(known, 0, 40, n_select=5_000, n=20_000, seed=7)
    for band in ("clopper-pearson", "dkw"):
        assert res[band]["covered"].mean() >= 0.9, (name, band)
    # the same draws' plug-in points (no confidence) fall below the curve in most repetitions
    # (randomized response has two tests only: still below half)
    assert res["clopper-pearson"]["plugin_covered"].mean() <= 0.5, name
    cp = res["clopper-pearson"]
    truth = known.mu if math.isfinite(known.claimed_mu) else known.epsilon
    got = cp["mu_lower"] if math.isfinite(known.claimed_mu) else cp["epsilon_lower"]
    assert np.median(got) > 0.75 * truth and np.mean(got <= truth + 1e-12) >= 0.9


@pytest.mark.parametrize(
    "name", ["gaussian_broken", "laplace_broken", "randomized_response_broken", "dg_count_broken"]
)
def test_broken_mechanisms_are_detected(name: str) -> None:
    known = known_tradeoff(name, 1.0)
    res = tradeoff_coverage(known, 0, 20, n_select=5_000, n=20_000, seed=8, bands=("dkw",))
    hits = [
        refutes(known, m, e)
        for m, e in zip(res["dkw"]["mu_lower"], res["dkw"]["epsilon_lower"], strict=True)
    ]
    assert np.mean(hits) >= 0.9, name
    assert res["dkw"]["covered"].mean() >= 0.9  # still above the broken mechanism's own curve


def test_points_err_high_and_counts_are_consistent() -> None:
    rng = np.random.default_rng(0)
    g = gaussian_shift(1.0)
    pts = tradeoff_lower(g.mechanism, g.x, g.x_prime, n_select=4_000, n=10_000, rng=rng)
    assert np.all(pts.alpha_upper >= pts.alpha_hat) and np.all(pts.beta_upper >= pts.beta_hat)
    assert np.all(np.diff(pts.thresholds) > 0) and pts.tests <= 32
    # higher threshold: fewer type I errors, more type II errors
    assert np.all(np.diff(pts.k_alpha) <= 0) and np.all(np.diff(pts.k_beta) >= 0)
    assert pts.to_dict()["mu_lower"] == pts.mu_lower()
    assert np.all(pts.curve(ALPHA) >= g.curve(ALPHA))


def test_discrete_scores_and_reuse_of_fixed_tests() -> None:
    rng = np.random.default_rng(2)
    rr = randomized_response_pair(1.0, k=4)
    m = rr.mechanism
    score, cuts = select_tests(m.sample(0, 2000, rng), m.sample(1, 2000, rng), kind="discrete")
    assert score(np.array([99]))[0] == 0.0  # unseen value: a tie
    a = certify(score, cuts, m.sample(0, 5000, rng), m.sample(1, 5000, rng), kind="discrete")
    assert a.covers(rr.curve)


def test_bad_input_is_refused() -> None:
    g = gaussian_shift(1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="conf"):
        tradeoff_lower(g.mechanism, 0.0, 1.0, n_select=100, n=100, rng=rng, conf=1.5)
    with pytest.raises(InvalidParameterError, match="band"):
        tradeoff_lower(g.mechanism, 0.0, 1.0, n_select=100, n=100, rng=rng, band="wald")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="tests"):
        tradeoff_lower(g.mechanism, 0.0, 1.0, n_select=100, n=100, rng=rng, tests=0)
    with pytest.raises(InvalidParameterError, match="fresh_y"):
        tradeoff_from_samples(
            np.zeros(10), np.ones(10), np.zeros(10), np.ones(9), kind="continuous"
        )
    with pytest.raises(InvalidParameterError, match="shape"):
        tradeoff_from_samples(
            np.zeros((10, 2)), np.ones(10), np.zeros(10), np.ones(10), kind="continuous"
        )
    with pytest.raises(UnknownNameError, match="allowed"):
        known_tradeoff("nope", 1.0)
    with pytest.raises(InvalidParameterError, match="delta"):
        tradeoff_lower(g.mechanism, 0.0, 1.0, n_select=100, n=100, rng=rng).epsilon_lower(1.0)
