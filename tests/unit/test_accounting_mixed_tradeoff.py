"""f-DP trade-off curves and calibration of mixed compositions against closed forms.

Trade-off curves (Dong, Roth & Su 2022):

* Gaussian ``N(0, sigma^2)``, ``k`` releases: ``mu = sqrt(k) / sigma`` and
  ``G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)`` (DRS Def. 2.7, Cor. 3.3); heterogeneous Gaussians
  compose to ``mu = sqrt(sum mu_j^2)``;
* Laplace ``Lap(b)``, sensitivity 1, ``eps = 1/b`` (DRS Prop. A.6 / Example):
  ``1 - e^eps alpha`` for ``alpha < e^-eps / 2``, ``e^-eps / (4 alpha)`` up to ``1/2``,
  ``e^-eps (1 - alpha)`` beyond;
* two-sided geometric (the loss is ``+-eps0``, a randomized-response pair): the ``eps0``-DP curve
  ``max(0, 1 - e^eps0 alpha, e^-eps0 (1 - alpha))`` (DRS Prop. 2.5 with delta = 0).

Brackets are certified: ``lower`` errs low, ``upper`` high; each must contain the closed form, and
be narrow enough that the wrong mechanism (a 5 % larger mu or eps) falls outside.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom, norm

from auditlib.accounting import (
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    LaplaceLoss,
    PrivacyLossComposition,
    calibrate_mixed,
    calibrate_sigma2,
    tradeoff,
)
from auditlib.exceptions import InvalidParameterError

ALPHA = np.array([0.0, 1e-4, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.0])


def gaussian_curve(mu: float, alpha: np.ndarray) -> np.ndarray:
    return norm.cdf(norm.ppf(1.0 - alpha) - mu)


def laplace_curve(eps: float, alpha: np.ndarray) -> np.ndarray:
    e = np.exp(-eps)
    with np.errstate(divide="ignore"):
        mid = e / (4.0 * alpha)
    return np.where(alpha < e / 2, 1.0 - alpha / e, np.where(alpha <= 0.5, mid, e * (1.0 - alpha)))


def pure_dp_curve(eps: float, alpha: np.ndarray) -> np.ndarray:
    return np.maximum(np.maximum(0.0, 1.0 - np.exp(eps) * alpha), np.exp(-eps) * (1.0 - alpha))


def _contains(comp: PrivacyLossComposition, ref: np.ndarray, tol: float) -> None:
    b = tradeoff(comp, ALPHA)
    lo, hi = np.asarray(b.lower), np.asarray(b.upper)
    assert np.all(lo <= ref + 1e-12) and np.all(ref <= hi + 1e-12)
    assert np.all(hi - lo <= tol)


def test_gaussian_releases() -> None:
    comp = PrivacyLossComposition([GaussianLoss(1.0, 4)], grid=1e-4)
    ref = gaussian_curve(2.0, ALPHA)
    _contains(comp, ref, 5e-5)
    wrong = gaussian_curve(2.1, ALPHA)  # power: 5 % more mu is outside the bracket
    assert np.any(np.asarray(tradeoff(comp, ALPHA).lower) > wrong[:] + 1e-4)


def test_heterogeneous_gaussians_compose_to_root_sum_of_squares() -> None:
    comp = PrivacyLossComposition([GaussianLoss(1.0, 2), GaussianLoss(2.0, 1)], grid=2e-3)
    _contains(comp, gaussian_curve(1.5, ALPHA), 2e-3)


@pytest.mark.parametrize("b", [1.0, 2.0])
def test_laplace_release(b: float) -> None:
    comp = PrivacyLossComposition([LaplaceLoss(b)])
    _contains(comp, laplace_curve(1.0 / b, ALPHA), 1e-6)
    wrong = laplace_curve(1.05 / b, ALPHA)  # power: 5 % more eps lies below the bracket
    assert np.any(np.asarray(tradeoff(comp, ALPHA).lower) > wrong + 1e-4)


def test_geometric_release_is_pure_dp() -> None:
    comp = PrivacyLossComposition([GeometricLoss(0.5, 1)])
    assert comp.method == "exact-lattice"
    _contains(comp, pure_dp_curve(0.5, ALPHA), 1e-12)


def test_mixed_curve_properties() -> None:
    """DG + geometric + Laplace + Gaussian: convex, non-increasing, below 1 - alpha, and below
    each component's own curve (composition only makes tests easier)."""
    comps = [
        DiscreteGaussianLoss(5, 2),
        GeometricLoss(0.3, 2),
        LaplaceLoss(2.0, 1),
        GaussianLoss(3.0, 2),
    ]
    alpha = np.linspace(0.0, 1.0, 201)
    b = tradeoff(PrivacyLossComposition(comps), alpha)
    lo, hi = np.asarray(b.lower), np.asarray(b.upper)
    assert np.all(lo <= hi) and np.all(hi <= 1.0 - alpha + 1e-12)
    assert np.all(np.diff(hi) <= 1e-9)
    # convex up to the bracket width: midpoints lie below the chords
    mid = 0.5 * (lo + hi)
    width = float(np.max(hi - lo))
    assert np.all(mid[1:-1] <= 0.5 * (mid[:-2] + mid[2:]) + 2 * width + 1e-12)
    assert np.all(lo <= pure_dp_curve(0.6, alpha) + 1e-12)  # the geometric part alone: 2 x 0.3
    assert np.all(lo <= gaussian_curve(np.sqrt(2) / 3, alpha) + 1e-12)


def _geometric_delta(eps0: float, k: int, eps: float) -> float:
    """Closed form: ``L = -k eps0 + 2 eps0 J``, ``J ~ Binomial(k, 1/(1 + e^-eps0))``."""
    p = 1.0 / (1.0 + np.exp(-eps0))
    j = np.arange(k + 1)
    pmf = binom.pmf(j, k, p)
    loss = -k * eps0 + 2.0 * eps0 * j
    return float(np.sum(pmf * np.maximum(0.0, -np.expm1(eps - loss))))


def test_calibrate_mixed_geometric_closed_form() -> None:
    """Three geometric releases at eps0 = 1, target eps = 1.5 at delta = 1e-3: the certified
    variance factor contains c* = (1 / eps0*)^2 with eps0* solved from the binomial closed form
    (scale 1/eps0 times sqrt(c))."""
    target, delta = 1.5, 1e-3
    eps0_star = brentq(lambda e0: _geometric_delta(e0, 3, target) - delta, 0.3, 1.0, xtol=1e-14)
    c_star = (1.0 / eps0_star) ** 2
    res = calibrate_mixed([GeometricLoss(1.0, 3)], delta, target)
    assert res.accounting == "exact-lattice"
    assert float(res.factor.lower) <= c_star <= float(res.factor.upper)
    assert float(res.factor.width) <= 1e-6 * c_star


def test_calibrate_mixed_agrees_with_the_discrete_gaussian_path() -> None:
    """Discrete Gaussians only: the mixed path meets the (independently tested) DG path."""
    dg = calibrate_sigma2(5, 10, 1e-11)
    mixed = calibrate_mixed([DiscreteGaussianLoss(5, 10)], 1e-11, dg.target_epsilon)
    assert float(mixed.factor.lower) <= float(dg.factor.upper)
    assert float(dg.factor.lower) <= float(mixed.factor.upper)
    with pytest.raises(InvalidParameterError, match="target epsilon"):
        calibrate_mixed([GaussianLoss(1.0)], 1e-6, -1.0)
    with pytest.raises(InvalidParameterError, match="Invalid component"):
        calibrate_mixed([(5, 10)], 1e-6, 1.0)
