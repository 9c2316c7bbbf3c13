"""Residual laws of Flaxman's ADPC against its exact pmf (Flaxman 2019 §2.2): the average of P GDPC runs
at ε/P, so ``P · residual`` is the sum of P independent two-sided geometrics G(ε/P), whose pmf is the
P-fold convolution of G's (computed here from the closed form ``P(k) = (1 − α)/(1 + α) α^|k|``,
``α = e^{−ε/P}``, on a window whose dropped tail mass is below 1e-12)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlib.geography.flaxman import generate_population
from auditlib.simulate.hierarchical import simulate_residuals

POP = generate_population(200_000, 3, 50, seed=7)  # 3,375 leaves


def _sum_of_geometrics_pmf(eps: float, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of the sum of ``p`` independent G(eps) (closed form, then convolution)."""
    a = np.exp(-eps)
    half = int(np.ceil(np.log(1e-15) / np.log(a)))  # one G's dropped tail: 2 α^half/(1+α) < 1e-15
    k = np.arange(-half, half + 1)
    g = (1 - a) / (1 + a) * a ** np.abs(k)
    pmf = g
    for _ in range(p - 1):
        pmf = np.convolve(pmf, g)
    support = np.arange(-(pmf.size // 2), pmf.size // 2 + 1)
    assert abs(pmf.sum() - 1) < 1e-12
    return support, pmf


def _chi2_pvalue(r_times_p: np.ndarray, eps: float, p: int, k_max: int) -> float:
    """Chi-square of P·residual against the sum of P G(ε/P) on -k_max..k_max plus the two tails."""
    support, pmf = _sum_of_geometrics_pmf(eps / p, p)
    inside = np.abs(support) <= k_max
    exp = (
        np.concatenate([[pmf[support < -k_max].sum()], pmf[inside], [pmf[support > k_max].sum()]])
        * r_times_p.size
    )
    r = np.clip(r_times_p, -k_max - 1, k_max + 1).astype(np.int64)
    obs = np.bincount(r + k_max + 1, minlength=2 * k_max + 3)
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize(("eps", "p"), [(0.5, 4), (1.0, 2)])
def test_adpc_residuals_follow_the_exact_pmf_and_a_30pc_wrong_epsilon_fails(eps, p):
    res = simulate_residuals(POP, "adpc", eps, seed=21, replicates=20, n_runs=p, dtype=np.float64)
    r = np.round(res["L3"].ravel() * p)
    np.testing.assert_allclose(res["L3"].ravel() * p, r, atol=1e-9)  # on the lattice Z/P
    k_max = int(3 * np.sqrt(2 * p) * p / eps)  # about 3 standard deviations of P·residual
    assert _chi2_pvalue(r, eps, p, k_max) > 1e-3
    assert _chi2_pvalue(r, 1.3 * eps, p, k_max) < 1e-8
    assert _chi2_pvalue(r, 0.7 * eps, p, k_max) < 1e-8


def test_the_pmf_of_one_geometric_is_the_closed_form():
    support, pmf = _sum_of_geometrics_pmf(0.7, 1)
    a = np.exp(-0.7)
    np.testing.assert_allclose(pmf[support == 0], (1 - a) / (1 + a))
    np.testing.assert_allclose(np.sum(support**2 * pmf), 2 * a / (1 - a) ** 2, rtol=1e-10)
