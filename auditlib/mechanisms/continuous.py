"""Continuous noise: Laplace (ε-DP with scale 1/ε) and Gaussian, thin closed forms."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import log_ndtr, ndtr

from auditlib.mechanisms.base import Size, check_rng, positive_finite

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Laplace:
    """Laplace noise, density ``exp(−|x|/b)/(2b)`` with b = ``scale`` (ε = 1/b at sensitivity 1)."""

    scale: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", positive_finite("scale", self.scale))

    def logpdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """log density."""
        arr = np.asarray(x, dtype=np.float64)
        return np.asarray(-np.abs(arr) / self.scale - math.log(2.0 * self.scale))

    def pdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Density."""
        return np.exp(self.logpdf(x))

    def cdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X ≤ x) (left tail with full relative precision)."""
        arr = np.asarray(x, dtype=np.float64)
        half = 0.5 * np.exp(-np.abs(arr) / self.scale)
        return np.asarray(np.where(arr < 0, half, 1.0 - half))

    def sf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X > x) (right tail with full relative precision)."""
        return self.cdf(-np.asarray(x, dtype=np.float64))

    def mean(self) -> float:
        """0."""
        return 0.0

    def var(self) -> float:
        """2b²."""
        return 2.0 * self.scale**2

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        """Draw with ``rng.laplace``."""
        check_rng(rng)
        return np.asarray(rng.laplace(0.0, self.scale, size=size), dtype=np.float64)


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise N(0, σ²), σ = ``sigma`` (the standard deviation)."""

    sigma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", positive_finite("sigma", self.sigma))

    def logpdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """log density."""
        z = np.asarray(x, dtype=np.float64) / self.sigma
        return np.asarray(-0.5 * z * z - _LOG_SQRT_2PI - math.log(self.sigma))

    def pdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Density."""
        return np.exp(self.logpdf(x))

    def cdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X ≤ x)."""
        return np.asarray(ndtr(np.asarray(x, dtype=np.float64) / self.sigma))

    def sf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X > x)."""
        return np.asarray(ndtr(-np.asarray(x, dtype=np.float64) / self.sigma))

    def logsf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """log P(X > x), accurate far in the tail."""
        return np.asarray(log_ndtr(-np.asarray(x, dtype=np.float64) / self.sigma))

    def mean(self) -> float:
        """0."""
        return 0.0

    def var(self) -> float:
        """σ²."""
        return self.sigma**2

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        """Draw with ``rng.normal``."""
        check_rng(rng)
        return np.asarray(rng.normal(0.0, self.sigma, size=size), dtype=np.float64)
