"""The two-sided geometric ("discrete Laplace") noise G(ε) of the geometric mechanism.

Parameterization (Flaxman 2019, G(ε)): ``P(k) = (1 − α)/(1 + α) · α^|k|`` with ``α = e^{−ε}``, so that
``log P(k)/P(k+1) = ±ε``: adding it to a sensitivity-1 count is exactly ε-DP. Everything is in
closed form; nothing is truncated.

Flaxman & Petti's simulations draw ``geometric(p) − geometric(p)`` with numpy's success probability
``p``; that is this law with ``α = 1 − p``, i.e. ``ε = −log(1 − p)`` (see
:meth:`TwoSidedGeometric.from_success_probability`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import (
    Size,
    as_integer_points,
    check_rng,
    positive_finite,
    quantiles,
)


@dataclass(frozen=True)
class TwoSidedGeometric:
    """Two-sided geometric noise, ``P(k) = (1−α)/(1+α)·α^|k|``, ``α = exp(−epsilon)``.

    >>> g = TwoSidedGeometric(1.0)
    >>> round(float(g.pmf(0)), 6), round(g.var(), 6)
    (0.462117, 1.841347)
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", positive_finite("epsilon", self.epsilon))

    @classmethod
    def from_success_probability(cls, p: float) -> TwoSidedGeometric:
        """The law of ``rng.geometric(p) − rng.geometric(p)``: ε = −log(1 − p), 0 < p < 1."""
        pp = positive_finite("p", p)
        if pp >= 1.0:
            raise InvalidParameterError(f"Invalid p: {p!r}; a success probability must be < 1.")
        return cls(-math.log1p(-pp))

    @property
    def alpha(self) -> float:
        """α = e^{−ε}."""
        return math.exp(-self.epsilon)

    @property
    def success_probability(self) -> float:
        """1 − α, the numpy ``geometric`` parameter of each half (computed without cancellation)."""
        return -math.expm1(-self.epsilon)

    @property
    def _log_p0(self) -> float:
        # (1 − α)/(1 + α) = tanh(ε/2)
        return math.log(math.tanh(self.epsilon / 2.0))

    def logpmf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """log P(X = k) = log tanh(ε/2) − ε|k|; −inf off the integers."""
        arr, on = as_integer_points(k)
        with np.errstate(invalid="ignore"):
            out = np.where(on, self._log_p0 - self.epsilon * np.abs(arr), -np.inf)
        return np.asarray(np.where(np.isnan(arr), np.nan, out))

    def pmf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X = k)."""
        return np.exp(self.logpmf(k))

    def _upper(self, m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """P(X ≥ m) = α^m/(1+α) for m ≥ 1."""
        return np.asarray(np.exp(-self.epsilon * m) / (1.0 + self.alpha))

    def cdf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X ≤ k), closed form (left tail with full relative precision)."""
        arr = np.floor(np.asarray(k, dtype=np.float64))
        out = np.full(arr.shape, np.nan)
        neg = arr < 0
        pos = arr >= 0
        out[neg] = self._upper(-arr[neg])
        out[pos] = 1.0 - self._upper(arr[pos] + 1.0)
        return out

    def sf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X > k), closed form (right tail with full relative precision)."""
        arr = np.floor(np.asarray(k, dtype=np.float64))
        return np.asarray(self.cdf(-arr - 1.0))

    def ppf(self, q: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Smallest integer k with cdf(k) ≥ q (float; ±inf at q = 0, 1 as in scipy)."""
        return quantiles(q, self._search)

    def _search(self, qq: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        eps, a1 = self.epsilon, 1.0 + self.alpha
        out = np.empty(qq.shape, dtype=np.float64)
        with np.errstate(divide="ignore"):
            low = qq <= 0.5
            # left: cdf(−m) = α^m/(1+α) ≥ q  ⇔  m ≤ −log(q(1+α))/ε
            m = np.floor(-np.log(qq[low] * a1) / eps)
            out[low] = -m
            # right: cdf(k) ≥ q ⇔ α^{k+1}/(1+α) ≤ 1−q ⇔ k ≥ −log((1−q)(1+α))/ε − 1
            out[~low] = np.ceil(-np.log((1.0 - qq[~low]) * a1) / eps - 1.0)
        # one step of correction against rounding in the logs
        for _ in range(2):
            c = self.cdf(out)
            c_prev = self.cdf(out - 1.0)
            fin = np.isfinite(out)
            out = np.where(fin & (c < qq), out + 1.0, out)
            out = np.where(fin & (c_prev >= qq), out - 1.0, out)
        return np.array(out + 0.0, dtype=np.float64)  # no negative zeros

    def mean(self) -> float:
        """0 (symmetric)."""
        return 0.0

    def var(self) -> float:
        """2α/(1 − α)²."""
        a = self.alpha
        return 2.0 * a / math.expm1(-self.epsilon) ** 2

    def std(self) -> float:
        """Standard deviation."""
        return math.sqrt(self.var())

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """``rng.geometric(1−α) − rng.geometric(1−α)``: exact (int64)."""
        check_rng(rng)
        p = self.success_probability
        a = np.asarray(rng.geometric(p, size=size), dtype=np.int64)
        b = np.asarray(rng.geometric(p, size=size), dtype=np.int64)
        return a - b
