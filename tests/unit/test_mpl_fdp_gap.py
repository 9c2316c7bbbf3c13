"""The gap between empirical f-DP points and a certified curve on a grid (auditlib.mpl.fdp_gap)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl.fdp_gap import curve_below, fdp_gap
from auditlib.mpl.tradeoff_catalogue import gaussian_shift
from auditlib.mpl.tradeoff_lower import tradeoff_lower


def _g(mu: float, a: np.ndarray) -> np.ndarray:
    return np.asarray(norm.cdf(norm.ppf(1 - a) - mu))


def test_curve_below_is_a_lower_bound_between_grid_points() -> None:
    grid = np.linspace(0.0, 1.0, 11)
    alpha = np.linspace(0.0, 1.0, 1001)
    below = curve_below(grid, _g(1.0, grid), alpha)
    # a right step of a non-increasing curve never exceeds it; linear interpolation does
    assert np.all(below <= _g(1.0, alpha) + 1e-15)
    assert np.any(np.interp(alpha, grid, _g(1.0, grid)) > _g(1.0, alpha) + 1e-3)
    assert np.isnan(curve_below(np.array([0.1, 0.5]), np.array([0.7, 0.2]), np.array([0.6])))[0]


def test_gap_of_gaussian_points_against_their_own_and_a_lower_curve() -> None:
    g = gaussian_shift(1.0)
    pts = tradeoff_lower(
        g.mechanism, g.x, g.x_prime, n_select=5_000, n=20_000, rng=np.random.default_rng(5)
    )
    grid = np.concatenate([np.geomspace(1e-6, 1e-2, 30), np.linspace(0.0125, 1.0, 80)])
    own = fdp_gap(pts.alpha_upper, pts.beta_upper, grid, _g(1.0, grid))
    looser = fdp_gap(pts.alpha_upper, pts.beta_upper, grid, _g(2.0, grid))
    # the points lie above the true curve: a small non-negative gap; a lower (looser) certified
    # curve leaves a larger one
    assert 0.0 <= own < 0.08
    assert looser > own + 0.1
    with_nan = fdp_gap(
        np.append(pts.alpha_upper, np.nan), np.append(pts.beta_upper, 0.0), grid, _g(1.0, grid)
    )
    assert with_nan == own


def test_bad_grid_names_the_fix() -> None:
    with pytest.raises(InvalidParameterError, match="increasing"):
        curve_below([0.5, 0.1], [0.2, 0.7], [0.3])
