"""Flaxman & Petti's SA3 / SA4 releases: exact L1 post-processing checked by brute force and by HiGHS,
residual laws against closed forms, and the appendix's EPL statements."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from scipy import optimize, stats

from auditlib.epl import epl
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.populations import HistogramModel, block_histograms
from auditlib.geography.schema import schema
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.simulate.stratified import (
    adjust_to_totals,
    invariant_release,
    l1_consistent,
    stratified_release,
)

GRID = np.array(list(product(range(21), repeat=3)))  # every y in {0..20}^3


def _sa3_objective(y: np.ndarray, t: int, x: np.ndarray, wt: float, ws: float) -> np.ndarray:
    return wt * np.abs(y.sum(axis=-1) - t) + ws * np.abs(y - x).sum(axis=-1)


@pytest.mark.parametrize("weights", [(0.25, 0.75), (0.75, 0.25), (1.0, 1.0)])
def test_l1_consistent_is_optimal_by_enumeration(weights: tuple[float, float]) -> None:
    """Every candidate in {0..20}^3 (which holds all optima here: |x̃|, |T̃| ≤ 8) is no better."""
    rng = np.random.default_rng(1)
    wt, ws = weights
    x = rng.integers(-4, 9, size=(150, 3))
    t = rng.integers(-4, 15, size=150)
    y = l1_consistent(t, x, np.random.default_rng(2), total_weight=wt, strata_weight=ws)
    assert y.dtype == np.int64 and y.min() >= 0
    for i in range(150):
        best = _sa3_objective(GRID, t[i], x[i], wt, ws).min()
        assert _sa3_objective(y[i], t[i], x[i], wt, ws) == pytest.approx(best, abs=1e-12)


def test_adjust_to_totals_is_lexicographically_optimal_by_enumeration() -> None:
    """With a fixed sum: minimal L1 distance, and among L1 optima minimal squared distance."""
    rng = np.random.default_rng(3)
    n = 200
    x = rng.integers(-4, 9, size=(n, 3))
    target = rng.integers(0, 19, size=n)
    y = adjust_to_totals(x.ravel(), np.repeat(np.arange(n), 3), target, rng).reshape(n, 3)
    np.testing.assert_array_equal(y.sum(axis=1), target)
    assert y.min() >= 0
    for i in range(n):
        feasible = GRID[GRID.sum(axis=1) == target[i]]
        l1 = np.abs(feasible - x[i]).sum(axis=1)
        l2 = ((feasible - x[i]) ** 2).sum(axis=1)
        assert np.abs(y[i] - x[i]).sum() == l1.min()
        assert ((y[i] - x[i]) ** 2).sum() == l2[l1 == l1.min()].min()


def test_adjust_to_totals_matches_highs_on_larger_groups() -> None:
    """The L1 optimum over 8 groups of 40 cells equals HiGHS's LP optimum (the constraint matrix is
    an interval matrix, totally unimodular: the LP optimum is the integer optimum)."""
    rng = np.random.default_rng(4)
    g, m = 8, 40
    x = rng.integers(-6, 30, size=(g, m))
    target = rng.integers(0, 900, size=g)
    y = adjust_to_totals(x.ravel(), np.repeat(np.arange(g), m), target, rng).reshape(g, m)
    for i in range(g):
        # variables (y, u): minimize Σu, u ≥ y − x̃, u ≥ x̃ − y, Σy = T, y ≥ 0
        c = np.r_[np.zeros(m), np.ones(m)]
        eye = np.eye(m)
        a_ub = np.block([[eye, -eye], [-eye, -eye]])
        b_ub = np.r_[x[i], -x[i]]
        a_eq = np.r_[np.ones(m), np.zeros(m)][None, :]
        lp = optimize.linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[target[i]], method="highs")
        assert lp.status == 0
        assert np.abs(y[i] - x[i]).sum() == pytest.approx(lp.fun, abs=1e-7)


def test_sa3_release_is_consistent_and_reproducible() -> None:
    truth = np.random.default_rng(5).integers(0, 6, size=(500, 28))
    r = stratified_release(truth, 0.25, 0.75, np.random.default_rng(6))
    assert r.strata.min() >= 0 and r.strata.dtype == np.int64
    np.testing.assert_array_equal(r.total, r.strata.sum(axis=1))
    again = stratified_release(truth, 0.25, 0.75, np.random.default_rng(6))
    np.testing.assert_array_equal(r.strata, again.strata)
    # w_S > w_T: the strata are the clipped measurements and the noisy total is not used
    np.testing.assert_array_equal(r.strata, np.maximum(r.noisy_strata, 0))


def _clipped_law(g: TwoSidedGeometric, truth: int, support: np.ndarray) -> np.ndarray:
    """Law of max(truth + N, 0) − truth for N ~ g: the mass below −truth piles up at −truth."""
    p = g.pmf(support)
    p[support == -truth] = g.cdf(-truth)
    p[support < -truth] = 0.0
    return p


def _chi2_pvalue(sample: np.ndarray, probs: np.ndarray, support: np.ndarray) -> float:
    obs = np.array([(sample == k).sum() for k in support], dtype=float)
    exp = probs * sample.size
    keep = exp >= 5
    obs_k = np.append(obs[keep], sample.size - obs[keep].sum())
    exp_k = np.append(exp[keep], sample.size - exp[keep].sum())
    return float(stats.chisquare(obs_k, exp_k).pvalue)


@pytest.mark.parametrize("truth", [0, 3])
def test_sa3_strata_residual_law(truth: int) -> None:
    """Residuals of strata with true count ``truth``: max(x + G(ε₂), 0) − x exactly (w_S > w_T).
    The sample accepts ε₂ = 0.75 and rejects 0.75 × 1.3 and 0.75 / 1.3."""
    truths = np.full((4000, 5), truth)
    r = stratified_release(truths, 0.25, 0.75, np.random.default_rng(7))
    res = r.strata_residuals().ravel()
    support = np.arange(-truth, 40)
    assert _chi2_pvalue(res, _clipped_law(TwoSidedGeometric(0.75), truth, support), support) > 1e-3
    for wrong in (0.75 * 1.3, 0.75 / 1.3):
        probs = _clipped_law(TwoSidedGeometric(wrong), truth, support)
        assert _chi2_pvalue(res, probs, support) < 1e-8


def test_sa3_total_residual_law_when_the_total_weighs_more() -> None:
    """With w_T > w_S the released total is max(T̃, 0): its residual is G(ε₁) clipped at −T."""
    truths = np.full((20_000, 4), 1)  # T = 4
    r = stratified_release(truths, 0.75, 0.25, np.random.default_rng(8))
    res = r.total_residuals()
    support = np.arange(-4, 30)
    assert _chi2_pvalue(res, _clipped_law(TwoSidedGeometric(0.75), 4, support), support) > 1e-3
    assert _chi2_pvalue(res, _clipped_law(TwoSidedGeometric(0.6), 4, support), support) < 1e-8


def test_sa3_epl_below_the_composed_epsilon() -> None:
    """Flaxman & Petti's appendix (Fig. SA3): total at ε₁ = 0.25, strata at ε₂ = 0.75, L1 post-processing; the EPL is
    below ε₁ + ε₂ = 1 (the appendix reports 0.54). 2,663 units as in its Washington example; counts
    far from 0 so that non-negativity does not act (see docs/simulation.md for counts near 0)."""
    truths = np.full((2663, 4), 200)
    r = stratified_release(truths, 0.25, 0.75, np.random.default_rng(9))
    total = epl(r.total_residuals()).epl
    strata = epl(r.strata_residuals().ravel()).epl
    assert total < 1.0
    assert 0.6 < strata < 0.9  # the strata residuals are G(0.75) here


def test_sa4_invariant_exact_and_epl_above_epsilon() -> None:
    """Flaxman & Petti's appendix (Fig. SA4): strata at ε = 0.25, county totals held invariant; the released strata
    are non-negative integers with exact county totals, and the EPL exceeds ε (appendix: 2.3)."""
    rng = np.random.default_rng(10)
    n, k = 2663, 28
    pops = rng.negative_binomial(2, 2 / (2 + 650), size=n)
    county = np.sort(rng.integers(0, 39, size=n))
    model = HistogramModel(block_concentration=5.0)
    truth = block_histograms(pops, schema("pl94"), rng, groups=county, model=model)
    assert truth.shape == (n, k)
    r = invariant_release(truth, county, 0.25, rng)
    assert r.strata.min() >= 0
    np.testing.assert_array_equal(
        np.bincount(county, weights=r.strata.sum(axis=1)),
        np.bincount(county, weights=truth.sum(axis=1)),
    )
    assert r.noisy_total is None
    # 2.2 here; most of it comes from non-negativity at the many empty cells (docs/simulation.md)
    assert epl(r.strata_residuals().ravel()).epl > 4 * 0.25


def test_bad_inputs_name_the_value() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match=r"true_strata\[1, 0\] = -2.*>= 0"):
        stratified_release(np.array([[1, 2], [-2, 0]]), 0.25, 0.75, rng)
    with pytest.raises(InvalidParameterError, match="epsilon_total"):
        stratified_release(np.ones((2, 2), dtype=int), -1.0, 0.75, rng)
    with pytest.raises(InvalidParameterError, match=r"true_strata\[0, 1\] = 1.5.*whole numbers"):
        stratified_release(np.array([[1.0, 1.5]]), 0.25, 0.75, rng)
    with pytest.raises(InvalidParameterError, match=r"target\[1\] = -3"):
        adjust_to_totals(np.array([1, 2]), np.array([0, 1]), np.array([1, -3]), rng)
    with pytest.raises(InvalidParameterError, match="one county per unit"):
        invariant_release(np.ones((3, 2), dtype=int), np.array([0, 1]), 0.25, rng)
    with pytest.raises(InvalidParameterError, match="one row per unit"):
        l1_consistent(np.array([1, 2, 3]), np.ones((2, 2), dtype=int), rng)
