"""EPL(x) surfaces: the pointwise bootstrap band against the exact smoothed log-ratio, thinning."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlib.epl import epl_surface, estimate_epl
from auditlib.epl.surface import thin_indices
from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import TwoSidedGeometric


def smoothed_log_ratio(eps: float, h: float, x: np.ndarray) -> np.ndarray:
    """log p_h(x)/p_h(x+1) with p_h the exact G(ε) pmf convolved with N(0, h²), by brute force."""
    k = np.arange(-4000, 4001)
    pmf = TwoSidedGeometric(eps).pmf(k)

    def dens(v: np.ndarray) -> np.ndarray:
        return (pmf[None, :] * stats.norm.pdf(v[:, None] - k[None, :], scale=h)).sum(axis=1)

    return np.log(dens(x)) - np.log(dens(x + 1.0))


def test_pointwise_band_covers_the_smoothed_loss_and_not_a_wrong_one() -> None:
    eps = 0.25
    covered, wrong = [], []
    for i in range(40):
        r = TwoSidedGeometric(eps).rvs(20_000, np.random.default_rng(100 + i))
        s = epl_surface(r, n_boot=200, confidence=0.9, seed=i)
        assert s.status == "ok" and s.x.size == s.grid_size  # narrow window: nothing thinned
        truth = smoothed_log_ratio(eps, s.bandwidth, s.x)
        covered.append((s.low <= truth) & (truth <= s.high))
        off = smoothed_log_ratio(1.3 * eps, s.bandwidth, s.x)  # a 30 % larger loss
        wrong.append((s.low <= off) & (off <= s.high))
    rate = np.concatenate(covered).mean()
    assert 0.8 <= rate <= 0.97  # nominal 90 % pointwise
    assert np.concatenate(wrong).mean() < 0.1  # power: the wrong ε is rejected almost everywhere


def test_surface_is_the_estimate_curve_and_keeps_its_max_when_thinned() -> None:
    r = TwoSidedGeometric(0.02).rvs(200_000, np.random.default_rng(3))  # ~ 300 grid points
    full = estimate_epl(r, n_boot=50, n_null=None, seed=5)
    s = epl_surface(r, max_points=41, n_boot=50, seed=5)
    assert full.x.size > 41 and s.grid_size == full.x.size
    assert s.x.size <= 42  # the argmax may add one point
    assert s.x[0] == full.x[0] and s.x[-1] == full.x[-1]
    np.testing.assert_array_equal(s.epl_x, full.epl_x[np.searchsorted(full.x, s.x)])
    assert np.max(np.abs(s.epl_x)) == s.epl == full.epl
    assert (s.low <= s.high).all()


def test_thin_indices() -> None:
    v = np.sin(np.linspace(0, 3, 1000))
    v[537] = 5.0
    idx = thin_indices(v, 10)
    assert idx[0] == 0 and idx[-1] == 999 and 537 in idx and idx.size <= 10
    assert (np.diff(idx) > 0).all()
    np.testing.assert_array_equal(thin_indices(v[:7], 10), np.arange(7))
    with pytest.raises(InvalidParameterError, match="max_points"):
        thin_indices(v, 2)


def test_surface_of_invariant_and_too_few_residuals_is_empty() -> None:
    s = epl_surface(np.zeros(100))
    assert s.status == "invariant" and s.epl == np.inf and s.x.size == 0
    t = epl_surface(np.arange(5.0))
    assert t.status == "too_few" and t.x.size == s.low.size == 0
