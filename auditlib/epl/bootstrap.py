"""Vectorized EPL curves for many count vectors on one lattice (bootstrap and reference draws).

A Gaussian KDE of data with distinct values ``points`` and counts ``c`` is, at query x,
``p̂(x) = (1/(n h √2π)) Σ_j c_j exp(−(x − points_j)²/2h²)``: linear in the counts. So B resampled
count vectors (rows of a B × P matrix) give B densities at Q query points with one matrix product
against the Q × P kernel matrix. Each kernel row is scaled by exp(d₀²/2h²) (d₀: distance from x to
the nearest point) so it cannot underflow, and points farther than ``√(d₀² + 2h²(ln n + 40))`` from
every query are dropped (their weight is < e⁻⁴⁰ of the nearest term), as in :mod:`auditlib.epl.kde`.

Resampling is multinomial on the counts: ``Multinomial(n, c/n)`` is exactly the law of the
histogram of n draws with replacement from the residuals, without materializing them.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

_NEGLIGIBLE = 40.0


class KernelMatrix:
    """Scaled Gaussian kernel between query points and (the relevant) lattice points."""

    def __init__(
        self,
        points: npt.NDArray[np.float64],
        h: float,
        x: npt.NDArray[np.float64],
        n: float,
    ) -> None:
        xs = np.asarray(x, dtype=np.float64)
        pos = np.searchsorted(points, xs)
        left = points[np.clip(pos - 1, 0, points.size - 1)]
        right = points[np.clip(pos, 0, points.size - 1)]
        d0 = np.minimum(np.abs(xs - left), np.abs(xs - right))
        reach = math.sqrt(
            float(np.max(d0)) ** 2 + 2.0 * h * h * (math.log(max(n, 2.0)) + _NEGLIGIBLE)
        )
        lo = int(np.searchsorted(points, float(xs.min()) - reach, side="left"))
        hi = int(np.searchsorted(points, float(xs.max()) + reach, side="right"))
        #: slice of the lattice points that matter for these queries
        self.columns = slice(lo, hi)
        diff = xs[:, None] - points[None, lo:hi]
        inv = 1.0 / (2.0 * h * h)
        self.matrix = np.exp(-(diff * diff - (d0 * d0)[:, None]) * inv)  # (Q, P'), max entry 1
        # log p̂ = log(c @ K.T) + offset
        self.offset = -(d0 * d0) * inv - math.log(h) - 0.5 * math.log(2.0 * math.pi)

    def log_density(self, counts: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """log p̂ at the queries for each row of ``counts`` (B × P, full lattice) → (B × Q)."""
        c = np.atleast_2d(counts)
        total = c.sum(axis=1, keepdims=True)
        dens = c[:, self.columns] @ self.matrix.T
        with np.errstate(divide="ignore"):
            return np.log(dens) - np.log(total) + self.offset[None, :]


def multinomial_counts(
    counts: npt.NDArray[np.float64], n: int, size: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """``size`` histograms of ``n`` draws from the distribution ∝ ``counts`` (size × P)."""
    if int(size) <= 0:
        raise InvalidParameterError(f"Invalid resample size: {size!r}; pass an integer ≥ 1.")
    p = np.asarray(counts, dtype=np.float64)
    p = p / p.sum()
    return rng.multinomial(int(n), p, size=int(size)).astype(np.float64)


def max_abs(e: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Row-wise max |e|; NaN for rows with a non-finite entry (a log of an empty region)."""
    m = np.max(np.abs(e), axis=-1)
    return np.where(np.all(np.isfinite(e), axis=-1), m, math.nan)
