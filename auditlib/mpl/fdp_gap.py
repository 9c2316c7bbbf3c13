"""How far empirical f-DP points lie above a certified trade-off curve given on an α grid.

The accounting certifies a curve ``lower`` on a grid ``α_1 < … < α_m`` with ``lower_j ≤ f(α_j)``
for the exact trade-off function ``f`` of a level's release; the empirical points
(:mod:`~auditlib.mpl.tradeoff_lower`) of one released count satisfy ``β_u ≥ T(α_u)`` (w.p. ≥
conf), and ``T ≥ f`` because the count is a post-processing of the release (a test on the count
is a test on the release). Between grid points the certified curve is read as a right step:
``L(α) = lower_j`` at the smallest ``α_j ≥ α`` — a valid lower bound on ``f(α)`` since ``f`` is
non-increasing (linear interpolation is not: a chord of a convex curve lies above it).

The gap is ``max_k (β_u,k − L(α_u,k))`` over the points. It errs high: with probability ≥ conf
``T(α_u,k) − f(α_u,k) ≤ gap`` at every tested α, so a gap near 0 says the certified curve is
attained by this one count there (the accounting is tight); a large gap says either slack in the
accounting or a weak test (too few draws, or a count that carries less than the level).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

FloatArray = npt.NDArray[np.float64]


def curve_below(grid: npt.ArrayLike, lower: npt.ArrayLike, alpha: npt.ArrayLike) -> FloatArray:
    """The certified curve at ``alpha`` as a right step (``lower`` at the next grid point ≥ α);
    NaN beyond the grid's last point."""
    g = np.asarray(grid, dtype=np.float64)
    lo = np.asarray(lower, dtype=np.float64)
    if g.ndim != 1 or g.shape != lo.shape or g.size == 0 or np.any(np.diff(g) <= 0):
        raise InvalidParameterError(
            f"Invalid grid: shape {g.shape} for a curve of shape {lo.shape}; pass an increasing "
            "α grid and the curve's values on it."
        )
    a = np.asarray(alpha, dtype=np.float64)
    i = np.searchsorted(g, a, side="left")
    inside = i < g.size
    return np.where(inside, lo[np.minimum(i, g.size - 1)], np.nan)


def fdp_gap(
    alpha_upper: npt.ArrayLike,
    beta_upper: npt.ArrayLike,
    grid: npt.ArrayLike,
    lower: npt.ArrayLike,
) -> float:
    """Largest vertical distance ``β_u − L(α_u)`` of the empirical points above the certified
    curve (NaN points skipped; NaN if none is left). Errs high (see the module docstring)."""
    a = np.asarray(alpha_upper, dtype=np.float64)
    b = np.asarray(beta_upper, dtype=np.float64)
    d = b - curve_below(grid, lower, a)
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else float("nan")
