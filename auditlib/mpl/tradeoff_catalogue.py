"""Mechanisms with exactly known trade-off curves T(A(x), A(x′)): the test bed of empirical f-DP.

Each factory returns a :class:`KnownTradeoff`: the black-box mechanism, the inputs x and x′, the
true curve (vectorized in α) and the privacy parameters the curve has exactly (``mu`` of μ-GDP,
``epsilon`` of pure ε-DP; ∞ when it has none), beside those the mechanism *claims*
(``claimed_mu``/``claimed_epsilon``). A ``scale``/``keep`` other than the default gives a broken
mechanism: it still claims the nominal parameter while its true curve lies lower.

* :func:`gaussian_shift` — x + N(0, σ²), x = 0 vs x′ = 1: T = G_μ, μ = 1/σ (Dong, Roth & Su).
* :func:`laplace_shift` — x + Lap(b), 0 vs 1: T(α) = F(F⁻¹(1 − α) − 1) with F the Lap(b) cdf (the
  likelihood ratio is non-decreasing in t, so the tests {t > c} are Neyman–Pearson tests).
* :func:`randomized_response_pair` — k-ary randomized response, x = 0 vs x′ = 1: the exact
  piecewise-linear curve of two pmfs (:func:`discrete_tradeoff`); binary RR gives f_{ε,0}.
* :func:`dg_count` — x + N_Z(0, σ²), 0 vs 1: the truth is the *upper* end of the certified bracket of
  :func:`auditlib.accounting.tradeoff` (which errs high, so coverage judged against it errs low:
  a point is counted valid only if it is above the upper end).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

from auditlib.accounting import DiscreteGaussianComposition, tradeoff
from auditlib.mechanisms import DiscreteGaussian, Laplace
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.catalogue import CountSampler, LaplaceSampler
from auditlib.mpl.protocol import MechanismUnderTest
from auditlib.mpl.randomized_response import (
    RandomizedResponseSampler,
    randomized_response_pmf,
    rr_epsilon,
    rr_keep_probability,
)
from auditlib.mpl.tradeoff_geometry import implied_mu

FloatArray = npt.NDArray[np.float64]
Curve = Callable[[npt.ArrayLike], FloatArray]


@dataclass(frozen=True, eq=False)
class KnownTradeoff:
    """A mechanism with its inputs x, x′ and exact trade-off curve T(A(x), A(x′)).

    ``mu``: the least μ with T ≥ G_μ — exact for the Gaussian; for the others the maximum of
    Φ⁻¹(1 − α) − Φ⁻¹(T(α)) over a grid of α (errs low by the grid's resolution; DG: from the lower
    end of the certified curve). ``epsilon``: the pure-DP ε (∞ if none)."""

    mechanism: MechanismUnderTest
    x: Any
    x_prime: Any
    curve: Curve
    mu: float
    epsilon: float
    claimed_mu: float
    claimed_epsilon: float


@dataclass(frozen=True)
class GaussianSampler:
    """x + N(0, σ²)."""

    sigma: float

    def __call__(self, x: Any, n: int, rng: np.random.Generator) -> FloatArray:
        return float(x) + self.sigma * rng.standard_normal(n)


def gdp_curve(mu: float) -> Curve:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)."""

    def curve(alpha: npt.ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        return np.asarray(ndtr(ndtri(1.0 - a) - mu), dtype=np.float64)

    return curve


def pure_dp_curve(epsilon: float, delta: float = 0.0) -> Curve:
    """f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α))."""

    def curve(alpha: npt.ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        e = math.exp(epsilon)
        return np.asarray(
            np.maximum.reduce([np.zeros_like(a), 1 - delta - e * a, (1 - delta - a) / e])
        )

    return curve


def discrete_tradeoff(p: npt.ArrayLike, q: npt.ArrayLike) -> Curve:
    """The exact trade-off curve T(P, Q) of two pmfs on a common finite support.

    Neyman–Pearson: reject P on outcomes in decreasing order of q/p (ties merged, p = 0 first);
    the knots are (Σ p, 1 − Σ q) over the rejected outcomes, and T is linear between them
    (randomizing on the boundary outcome)."""
    pp = np.asarray(p, dtype=np.float64)
    qq = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore"):
        ratio = np.where(pp > 0, qq / np.where(pp > 0, pp, 1.0), np.inf)
    ratio = np.where((pp == 0) & (qq == 0), -np.inf, ratio)
    order = np.argsort(-ratio, kind="stable")
    ka = np.concatenate([[0.0], np.cumsum(pp[order])])
    kb = np.concatenate([[1.0], 1.0 - np.cumsum(qq[order])])
    ka, kb = np.clip(ka, 0.0, 1.0), np.clip(kb, 0.0, 1.0)

    def curve(alpha: npt.ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        # interp needs increasing knots: ties in α keep the smallest β (the lower envelope)
        ua, idx = np.unique(ka[::-1], return_index=True)
        ub = kb[::-1][idx]
        return np.asarray(np.interp(a, ua, ub), dtype=np.float64)

    return curve


def gaussian_shift(mu: float, *, sigma: float | None = None) -> KnownTradeoff:
    """x + N(0, σ²), 0 vs 1, claiming μ-GDP; σ defaults to 1/μ (exact). Another σ gives a
    mechanism that is (1/σ)-GDP while it claims μ."""
    mu0 = positive_finite("mu", mu)
    s = 1.0 / mu0 if sigma is None else positive_finite("sigma", sigma)
    return KnownTradeoff(
        mechanism=MechanismUnderTest("gaussian", GaussianSampler(s), "continuous"),
        x=0.0,
        x_prime=1.0,
        curve=gdp_curve(1.0 / s),
        mu=1.0 / s,
        epsilon=math.inf,
        claimed_mu=mu0,
        claimed_epsilon=math.inf,
    )


def laplace_shift(epsilon: float, *, scale: float | None = None) -> KnownTradeoff:
    """x + Lap(b), 0 vs 1, claiming ε-DP; b defaults to 1/ε. Another b: (1/b)-DP, claims ε."""
    eps0 = positive_finite("epsilon", epsilon)
    b = 1.0 / eps0 if scale is None else positive_finite("scale", scale)
    lap = Laplace(b)

    def curve(alpha: npt.ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        # F⁻¹(1 − α) of Lap(b), then F(c − 1)
        with np.errstate(divide="ignore"):
            c = np.where(a < 0.5, -b * np.log(2.0 * a), b * np.log(2.0 * (1.0 - a)))
        return np.asarray(np.where(a <= 0.0, 1.0, np.where(a >= 1.0, 0.0, lap.cdf(c - 1.0))))

    mu = float(
        np.max(
            implied_mu(
                np.linspace(1e-6, 1 - 1e-6, 20001), curve(np.linspace(1e-6, 1 - 1e-6, 20001))
            )
        )
    )
    return KnownTradeoff(
        mechanism=MechanismUnderTest("laplace", LaplaceSampler(b), "continuous"),
        x=0.0,
        x_prime=1.0,
        curve=curve,
        mu=mu,
        epsilon=1.0 / b,
        claimed_mu=math.inf,
        claimed_epsilon=eps0,
    )


def randomized_response_pair(
    epsilon: float, *, k: int = 2, keep: float | None = None
) -> KnownTradeoff:
    """k-ary randomized response claiming ε, x = 0 vs x′ = 1; ``keep`` defaults to the exact
    γ(ε, k); another γ gives an rr_epsilon(γ, k)-DP mechanism that claims ε."""
    eps0 = positive_finite("epsilon", epsilon)
    g = rr_keep_probability(eps0, k) if keep is None else float(keep)
    true_eps = rr_epsilon(g, k)
    curve = discrete_tradeoff(randomized_response_pmf(0, k, g), randomized_response_pmf(1, k, g))
    grid = np.linspace(1e-6, 1 - 1e-6, 20001)
    return KnownTradeoff(
        mechanism=MechanismUnderTest(
            "randomized_response" if k == 2 else f"randomized_response_k{k}",
            RandomizedResponseSampler(k, g),
            "discrete",
        ),
        x=0,
        x_prime=1,
        curve=curve,
        mu=float(np.max(implied_mu(grid, curve(grid)))),
        epsilon=true_eps,
        claimed_mu=math.inf,
        claimed_epsilon=eps0,
    )


def dg_count(sigma2: float, *, claimed_sigma2: float | None = None) -> KnownTradeoff:
    """A count + N_Z(0, σ²), 0 vs 1. Truth: the upper end of the certified curve of
    :func:`auditlib.accounting.tradeoff` (errs high). ``mu`` is the GDP parameter that curve
    implies (max over a grid of Φ⁻¹(1 − α) − Φ⁻¹(T(α)), from the lower end: errs high);
    ``claimed_mu`` is that of ``claimed_sigma2`` (default σ²)."""
    s2 = positive_finite("sigma2", sigma2)
    comp = DiscreteGaussianComposition([(s2, 1)])

    def curve(alpha: npt.ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        return np.asarray(tradeoff(comp, a.ravel()).upper, dtype=np.float64).reshape(a.shape)

    def implied(c: DiscreteGaussianComposition) -> float:
        grid = np.linspace(1e-6, 1 - 1e-6, 801)
        return float(np.max(implied_mu(grid, np.asarray(tradeoff(c, grid).lower))))

    mu = implied(comp)
    cs2 = s2 if claimed_sigma2 is None else positive_finite("claimed_sigma2", claimed_sigma2)
    claimed = mu if cs2 == s2 else implied(DiscreteGaussianComposition([(cs2, 1)]))
    return KnownTradeoff(
        mechanism=MechanismUnderTest("dg_count", CountSampler(DiscreteGaussian(s2)), "discrete"),
        x=0,
        x_prime=1,
        curve=curve,
        mu=mu,
        epsilon=math.inf,
        claimed_mu=claimed,
        claimed_epsilon=math.inf,
    )
