"""The discrete Gaussian N_Z(0, σ²): P(k) ∝ exp(−k²/(2σ²)) on the integers (Canonne–Kamath–Steinke).

This is the noise the 2020 Census TopDown algorithm adds to each query. Numerics, and which way each
approximation errs:

* **Normalizing constant.** ``Z = Σ_k exp(−k²/(2σ²))`` by direct summation in log space over
  ``|k| ≤ K_ext``, a radius beyond :attr:`DiscreteGaussian.support_radius`. The terms dropped
  beyond ``K_ext`` are < 1e-20 of the smallest tail kept, so ``Z`` is exact to float rounding
  (it errs low by a relative amount < 1e-30).
* **Support radius.** ``K`` is the smallest radius at which a rigorous bound certifies
  ``P(|X| > K) < 1e-30``. The bound uses ``k² ≥ (K+1)² + 2(K+1)(k−K−1)`` for ``k > K``, i.e. a
  geometric series: ``P(|X| > K) ≤ 2·exp(−(K+1)²/(2σ²)) / (1 − exp(−(K+1)/σ²)) / Z``, with
  ``Z ≥ max(1, σ√(2π) − 1)`` when choosing K. It is an *upper* bound, exposed as
  :attr:`DiscreteGaussian.truncated_mass`; the exact tail is smaller (by up to ~σ/12).
* **pmf/logpmf/cdf/sf** are the exact law (not truncated): tails are computed in log space, so
  ``sf`` keeps full relative precision far beyond 1e-16.
* **Sampler.** Inverse CDF of ``|X|`` on integer thresholds ``round(P(|X| ≥ a)·2⁵³)`` compared with
  53 random bits, and an independent random sign from a 54th bit: one 64-bit draw per sample. Its
  total-variation distance from the exact law is at most :attr:`DiscreteGaussian.sampler_tv_bound`
  (threshold rounding ``2⁻⁵⁴`` per level, float rounding of the tail table, and the unreachable
  tail below ``2⁻⁵⁴``), about 1e-12 for σ² ≤ 500.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import (
    Size,
    as_integer_points,
    check_rng,
    positive_finite,
    quantiles,
)

#: Mass allowed outside the support radius (two-sided, upper bound).
TRUNCATION_MASS = 1e-30
#: Largest σ² accepted: the tables have about 16·σ entries (≈ 1.6e7 floats at the cap).
MAX_SIGMA2 = 1e12
_LOG_TAIL_REL = math.log(1e-20)  # tail terms beyond this fraction of the last kept term are dropped
_TWO53 = float(2**53)
_EPS = float(np.finfo(np.float64).eps)


def _log_tail_bound(start: npt.ArrayLike, sigma2: float) -> npt.NDArray[np.float64]:
    """log of an upper bound on ``Σ_{k ≥ start} exp(−k²/(2σ²))`` for integers ``start ≥ 1``."""
    s = np.asarray(start, dtype=np.float64)
    return np.asarray(-(s * s) / (2.0 * sigma2) - np.log(-np.expm1(-s / sigma2)))


def _smallest_radius(log_target: float, sigma2: float) -> int:
    """Smallest ``R ≥ 0`` with ``log(2) + _log_tail_bound(R + 1) < log_target`` (bisection)."""

    def ok(r: int) -> bool:
        return bool(math.log(2.0) + float(_log_tail_bound(r + 1, sigma2)) < log_target)

    lo, hi = 0, max(1, int(math.sqrt(sigma2)))
    if ok(lo):
        return 0
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class DiscreteGaussian:
    """Discrete Gaussian noise N_Z(0, σ²) on the integers, σ² = ``sigma2`` (not the variance).

    Its variance is slightly *below* σ² (the difference vanishes fast as σ² grows). For sensitivity
    1 it satisfies ρ-zCDP with ρ = 1/(2σ²). Parameters: ``sigma2`` finite, 0 < σ² ≤ 1e12.

    >>> dg = DiscreteGaussian(5.0)
    >>> round(float(dg.pmf(0)), 6), dg.support_radius
    (0.178412, 26)
    """

    sigma2: float
    _log_w: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _log_upper: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _log_z: float = field(init=False, repr=False, compare=False)
    _radius: int = field(init=False, repr=False, compare=False)
    _trunc: float = field(init=False, repr=False, compare=False)
    _thresholds: npt.NDArray[np.uint64] = field(init=False, repr=False, compare=False)
    _tv: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s2 = positive_finite("sigma2", self.sigma2)
        if s2 > MAX_SIGMA2:
            raise InvalidParameterError(
                f"Invalid sigma2: {self.sigma2!r}; at most {MAX_SIGMA2:g} is supported "
                "(the tables grow like σ); use a continuous Gaussian beyond that."
            )
        object.__setattr__(self, "sigma2", s2)
        # Z ≥ σ√(2π) − 1 (a sum of a unimodal function ≥ its integral − its maximum) and Z ≥ 1
        log_z_low = math.log(max(1.0, math.sqrt(2.0 * math.pi * s2) - 1.0))
        radius = _smallest_radius(math.log(TRUNCATION_MASS) + log_z_low, s2)
        # extend the table until what lies beyond is < 1e-20 of the term at the radius
        ext = max(radius + 1, _smallest_radius(-(radius**2) / (2.0 * s2) + _LOG_TAIL_REL, s2))
        j = np.arange(ext + 1, dtype=np.float64)
        log_w = -(j * j) / (2.0 * s2)
        # log Σ_{i ≥ j} w_i for j = 0..ext (beyond ext: < 1e-20 relative for j ≤ radius)
        log_upper = np.logaddexp.accumulate(log_w[::-1])[::-1]
        log_z = float(np.logaddexp(log_w[0], math.log(2.0) + log_upper[1]))
        trunc = math.exp(math.log(2.0) + float(_log_tail_bound(radius + 1, s2)) - log_z)
        object.__setattr__(self, "_log_w", log_w)
        object.__setattr__(self, "_log_upper", log_upper)
        object.__setattr__(self, "_log_z", log_z)
        object.__setattr__(self, "_radius", radius)
        object.__setattr__(self, "_trunc", trunc)
        self._build_sampler()

    # -- tables ------------------------------------------------------------------------------
    def _build_sampler(self) -> None:
        """Integer thresholds ``round(P(|X| ≥ a)·2⁵³)`` for a = 1..A (A: last one ≥ 1)."""
        r = self._radius
        s_abs = np.exp(math.log(2.0) + self._log_upper[1 : r + 1] - self._log_z)  # P(|X| ≥ a)
        t = np.rint(s_abs * _TWO53)
        last = int(np.count_nonzero(t >= 1.0))  # t is non-increasing
        thresholds = t[:last].astype(np.uint64)
        # TV bound: per-level rounding (2^-54), float error of the table (relative (ext+4)·eps on
        # each P(|X| ≥ a), summed: ≤ (ext+4)·eps·E|X|), and the tail the sampler never reaches.
        e_abs = float(np.sum(s_abs))
        unreachable = float(np.sum(s_abs[last:])) + self._trunc
        tv = last * 2.0**-54 + (len(self._log_w) + 4) * _EPS * e_abs + unreachable
        object.__setattr__(self, "_thresholds", thresholds[::-1].copy())  # ascending
        object.__setattr__(self, "_tv", tv)

    @property
    def sigma(self) -> float:
        """√σ² (the scale parameter, not the standard deviation)."""
        return math.sqrt(self.sigma2)

    @property
    def support_radius(self) -> int:
        """Smallest K at which a bound certifies P(|X| > K) < 1e-30 (:attr:`truncated_mass`)."""
        return self._radius

    @property
    def truncated_mass(self) -> float:
        """Rigorous upper bound on P(|X| > support_radius) (geometric-series bound), < 1e-30."""
        return self._trunc

    @property
    def sampler_tv_bound(self) -> float:
        """Upper bound on the total-variation distance between :meth:`rvs` and the exact law."""
        return self._tv

    @property
    def log_normalizer(self) -> float:
        """log Z, Z = Σ_k exp(−k²/(2σ²)) (errs low by a relative amount < 1e-30)."""
        return self._log_z

    def _log_upper_tail(self, m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """log Σ_{j ≥ m} exp(−j²/(2σ²)) for integer-valued float ``m ≥ 0`` (−inf at +inf)."""
        out = np.empty(m.shape, dtype=np.float64)
        inside = m <= self._radius
        out[inside] = self._log_upper[m[inside].astype(np.int64)]
        rest = ~inside
        if np.any(rest):
            for value in np.unique(m[rest]):
                out[rest & (m == value)] = self._far_log_tail(float(value))
        return out

    def _far_log_tail(self, start: float) -> float:
        """log Σ_{j ≥ start} w_j for start beyond the table, to relative 1e-20."""
        if math.isinf(start):
            return -math.inf
        s2 = self.sigma2
        # terms beyond start+M are < 1e-20·w_start (in total) once the geometric bound says so
        span = math.sqrt(start * start - 2.0 * s2 * (_LOG_TAIL_REL - math.log1p(s2))) - start
        j = start + np.arange(math.ceil(span) + 2, dtype=np.float64)
        return float(logsumexp(-(j * j) / (2.0 * s2)))

    # -- scipy-like API ----------------------------------------------------------------------
    def logpmf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """log P(X = k): exact law; −inf off the integers."""
        arr, on = as_integer_points(k)
        with np.errstate(invalid="ignore"):
            out = np.where(on, -(arr * arr) / (2.0 * self.sigma2) - self._log_z, -np.inf)
        return np.asarray(np.where(np.isnan(arr), np.nan, out))

    def pmf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X = k): exact law (not truncated); 0 off the integers."""
        return np.exp(self.logpmf(k))

    def _tail_prob(self, m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """P(X ≥ m) for integer-valued float m ≥ 1 (one-sided upper tail)."""
        return np.asarray(np.exp(self._log_upper_tail(m) - self._log_z))

    def cdf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X ≤ k); left tail with full relative precision (P(X ≤ −m) = P(X ≥ m))."""
        arr = np.floor(np.asarray(k, dtype=np.float64))
        out = np.full(arr.shape, np.nan)
        ok = ~np.isnan(arr)
        neg = ok & (arr < 0)
        pos = ok & (arr >= 0)
        out[neg] = self._tail_prob(-arr[neg])
        out[pos] = -np.expm1(self._log_upper_tail(arr[pos] + 1.0) - self._log_z)
        return out

    def sf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X > k); right tail with full relative precision."""
        arr = np.floor(np.asarray(k, dtype=np.float64))
        return np.asarray(self.cdf(-arr - 1.0))

    def ppf(self, q: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Smallest integer k with cdf(k) ≥ q (float; ±inf at q = 0, 1 as in scipy).

        Searches the support ``[−K, K]``: levels with ``q ≤ P(X ≤ −K)`` (< 1e-30) return −K and
        levels above ``cdf(K)`` return K + 1.
        """
        return quantiles(q, self._search)

    def _search(self, qq: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        r = self._radius
        ks = np.arange(-r, r + 1, dtype=np.float64)
        idx = np.searchsorted(self.cdf(ks), qq, side="left")
        return np.asarray(ks[0] + idx, dtype=np.float64)

    def mean(self) -> float:
        """0 (symmetric)."""
        return 0.0

    def var(self) -> float:
        """Variance Σ k² P(k) (slightly below σ²), by summation over the table."""
        j = np.arange(1, len(self._log_w), dtype=np.float64)
        log_second = math.log(2.0) + float(logsumexp(2.0 * np.log(j) + self._log_w[1:]))
        return math.exp(log_second - self._log_z)

    def std(self) -> float:
        """Standard deviation."""
        return math.sqrt(self.var())

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Draw ``size`` samples (int64) with ``rng``; see :attr:`sampler_tv_bound`."""
        check_rng(rng)
        raw = rng.bit_generator.random_raw(size=size)
        raw = np.asarray(raw, dtype=np.uint64)
        v = raw >> np.uint64(11)  # 53 uniform bits
        t = self._thresholds
        mag = (len(t) - np.searchsorted(t, v, side="right")).astype(np.int64)
        neg = (raw & np.uint64(1)).astype(bool)
        return np.where(neg, -mag, mag)


def sample_discrete_gaussian(
    sigma2: float, size: Size, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Draw ``size`` samples of N_Z(0, σ²) with ``rng`` (builds the tables each call)."""
    return DiscreteGaussian(sigma2).rvs(size, rng)
