"""Tests of a declared noise law on residuals (published − true counts): the scale test and the
fit test, with what a level's residuals are reduced to between them.

Both assume what a declaration of additive noise says: each query's residuals are i.i.d. draws of
its declared :class:`~auditlib.claims.laws.NoiseLaw`, independent of the true counts. Residuals of
queries with different declared noise are kept apart (:class:`LawMoments`, one per law) and
combined in the statistics.

* **Scale test** (:func:`scale_test`). Along the path ``law.scaled(k)`` (the variance parameter
  times k; k = 1 is the declaration) the sum of squared residuals S has mean Σ nⱼ m₂ⱼ(k) and
  variance Σ nⱼ (m₄ⱼ(k) − m₂ⱼ(k)²), with the laws' exact moments. Z(k) = (S − mean)/sd is
  decreasing in k. The one-sided p-value of "the noise is at least as large as declared" is
  Φ(Z(1)); the one-sided confidence bounds k_low, k_high at level ``level`` solve Z(k) = ±z.
  The normal approximation errs on the safe side for refuting: S is skewed to the right, so its
  lower tail is lighter than the normal's and Φ(Z(1)) overstates the p-value
  (``tests/unit/test_claims.py`` measures the rates).
* **Fit test** (:func:`fit_test`). The randomized probability integral transform of each residual
  under its law at that law's own estimated scale (:func:`fitted_factor`; for a lattice law, u = F(r − 1) + V·P(r) with V
  uniform, so u is exactly uniform under the law), counted in :data:`FIT_BINS` equal bins, and
  Pearson's χ² with ``FIT_BINS − 2`` degrees of freedom (one for the total, one for the scale;
  with several laws each fitted its own scale, which makes the test conservative). It asks
  whether the declared *family* describes the residuals at all: its rejection says the scale
  test's premise fails, not that the noise is too small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import optimize

from auditlib.claims.laws import NoiseLaw
from auditlib.exceptions import InvalidParameterError

#: equal-probability bins of the fit test's transformed residuals
FIT_BINS = 20
#: the variance factors the scale test's confidence bounds are sought between
K_RANGE = (1e-3, 1e3)


@dataclass
class LawMoments:
    """The residuals of the queries declared with one ``law``: their number, sum, sum of squares
    and how many are not whole numbers (under a lattice law). Merge with ``+=``."""

    law: NoiseLaw
    n: int = 0
    sum1: float = 0.0
    sum2: float = 0.0
    off_lattice: int = 0

    def add(self, residuals: npt.ArrayLike) -> LawMoments:
        r = _finite(residuals)
        self.n += int(r.size)
        self.sum1 += float(r.sum())
        self.sum2 += float(np.dot(r, r))
        if self.law.discrete:
            self.off_lattice += int(np.count_nonzero(r != np.round(r)))
        return self

    def __iadd__(self, other: LawMoments) -> LawMoments:
        if other.law != self.law:
            raise InvalidParameterError(f"cannot merge residuals of {other.law} into {self.law}")
        self.n += other.n
        self.sum1 += other.sum1
        self.sum2 += other.sum2
        self.off_lattice += other.off_lattice
        return self


@dataclass
class FitCounts:
    """Counts of the transformed residuals in :data:`FIT_BINS` equal bins; merge with ``+=``."""

    counts: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(FIT_BINS, np.int64))

    def add(self, residuals: npt.ArrayLike, law: NoiseLaw, rng: np.random.Generator) -> FitCounts:
        u = transform(_finite(residuals), law, rng)
        b = np.minimum((u * FIT_BINS).astype(np.int64), FIT_BINS - 1)
        self.counts += np.bincount(b, minlength=FIT_BINS)
        return self

    def __iadd__(self, other: FitCounts) -> FitCounts:
        self.counts += other.counts
        return self


def _finite(residuals: npt.ArrayLike) -> npt.NDArray[np.float64]:
    r = np.asarray(residuals, dtype=np.float64).ravel()
    if not np.isfinite(r).all():
        raise InvalidParameterError(
            "Invalid residuals: NaN or infinite values; drop the padding (or the unpublished "
            "cells) before testing the declared noise"
        )
    return r


def transform(
    residuals: npt.NDArray[np.float64], law: NoiseLaw, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """The randomized probability integral transform of ``residuals`` under ``law``: uniform on
    (0, 1) when they are draws of it. Off a lattice law's integers a residual is rounded first (the
    fit test then sees the law it was rounded to; :class:`LawMoments` counts them)."""
    if not law.discrete:
        return np.clip(law.cdf(residuals), 0.0, 1.0)
    r = np.round(residuals)
    vals, inv = np.unique(r, return_inverse=True)
    hi = law.cdf(vals)
    lo = law.cdf(vals - 1.0)
    v = rng.random(r.size)
    return np.clip(lo[inv] + v * (hi[inv] - lo[inv]), 0.0, 1.0)


@dataclass(frozen=True)
class ScaleTest:
    """The scale test's result: ``n`` residuals, ``variance_ratio`` = S / Σ nⱼ m₂ⱼ(1) (the
    residuals' mean square over the declared noise's), ``k_hat`` the factor of the path with
    Z(k) = 0 (the laws ``law.scaled(k_hat)`` fit the mean square), ``z`` = Z(1), ``p_value`` =
    Φ(Z(1)) (small: the noise is smaller than declared), and the one-sided confidence bounds
    ``k_low`` ≤ k ≤ ``k_high`` on the path's factor, each at ``level``."""

    n: int
    variance_ratio: float
    k_hat: float
    z: float
    p_value: float
    k_low: float
    k_high: float
    level: float


def _z_of(moments: Sequence[LawMoments]) -> tuple[float, Callable[[float], float]]:
    s = sum(m.sum2 for m in moments)

    def z(k: float) -> float:
        mean = var = 0.0
        for m in moments:
            m2, m4 = m.law.scaled(k).moments()
            mean += m.n * m2
            var += m.n * (m4 - m2 * m2)
        if not var > 0.0:  # a law too narrow to hold any spread: every residual is an outlier
            return math.inf if s > mean else 0.0
        return (s - mean) / math.sqrt(var)

    return s, z


def scale_test(moments: Sequence[LawMoments], level: float) -> ScaleTest:
    """The scale test of the declared laws on their residuals' moments (see the module
    docstring); ``level`` is the one-sided confidence of each bound (1 − the test's α)."""
    ms = [m for m in moments if m.n > 0]
    if not ms:
        raise InvalidParameterError("Invalid residuals: none to test; the level has no residuals")
    if not 0.5 < level < 1.0:
        raise InvalidParameterError(f"Invalid level: {level!r}; pass a confidence in (0.5, 1)")
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    s, z = _z_of(ms)
    n = sum(m.n for m in ms)
    z1 = z(1.0)
    q = float(stats.norm.ppf(level))
    return ScaleTest(
        n=n,
        variance_ratio=s / sum(m.n * m.law.moments()[0] for m in ms),
        k_hat=_solve(z, 0.0),
        z=z1,
        p_value=float(stats.norm.cdf(z1)),
        k_low=_solve(z, q),
        k_high=_solve(z, -q),
        level=level,
    )


def fitted_factor(moments: LawMoments) -> float:
    """The path factor k at which one law's second moment matches its residuals' mean square
    (Z(k) = 0 for that law alone): where the fit test looks at that law."""
    if moments.n == 0:
        return 1.0
    return _solve(_z_of([moments])[1], 0.0)


def _solve(z: Callable[[float], float], target: float) -> float:
    """The k with Z(k) = target (Z decreasing), on a log scale; the range's end if beyond it."""
    lo, hi = math.log(K_RANGE[0]), math.log(K_RANGE[1])

    def f(t: float) -> float:
        return float(z(math.exp(t))) - target

    if f(lo) <= 0.0:
        return K_RANGE[0]
    if f(hi) >= 0.0:
        return math.inf
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-10))


@dataclass(frozen=True)
class FitTest:
    """Pearson's χ² of the transformed residuals' bin counts: ``statistic``, ``dof``,
    ``p_value`` (small: the declared family does not describe the residuals)."""

    n: int
    statistic: float
    dof: int
    p_value: float


def fit_test(counts: FitCounts) -> FitTest:
    """Pearson's χ² of ``counts`` against equal bins, ``FIT_BINS − 2`` degrees of freedom."""
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    c = counts.counts.astype(np.float64)
    n = int(c.sum())
    if n == 0:
        raise InvalidParameterError("Invalid residuals: none to test; the level has no residuals")
    e = n / FIT_BINS
    chi2 = float(np.sum((c - e) ** 2) / e)
    dof = FIT_BINS - 2
    return FitTest(n=n, statistic=chi2, dof=dof, p_value=float(stats.chi2.sf(chi2, dof)))
