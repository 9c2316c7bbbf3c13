"""Trade-off geometry: the privacy parameters a point above the curve implies, and the hull.

A point (α, β) on or above T(P, Q) rules out every f-DP guarantee whose curve passes above it:
:func:`implied_mu` (μ-GDP) and :func:`implied_epsilon` ((ε, δ)-DP) give the least parameter still
consistent with it; :func:`hull_curve` joins points into a curve that stays on or above a convex T.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from auditlib.exceptions import InvalidParameterError

FloatArray = npt.NDArray[np.float64]


def implied_mu(alpha: npt.ArrayLike, beta: npt.ArrayLike) -> FloatArray:
    """μ with G_μ(α) = β, G_μ(α) = Φ(Φ⁻¹(1 − α) − μ): Φ⁻¹(1 − α) − Φ⁻¹(β) (±∞ at the edges).
    A point (α, β) on or above T(P, Q) rules out μ-GDP for every smaller μ."""
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = ndtri(1.0 - a) - ndtri(b)
    return np.asarray(np.where(np.isnan(out), -np.inf, out), dtype=np.float64)


def implied_epsilon(alpha: npt.ArrayLike, beta: npt.ArrayLike, delta: float = 0.0) -> FloatArray:
    """The smallest ε ≥ 0 with f_{ε,δ}(α) ≤ β, f_{ε,δ}(α) = max(0, 1 − δ − e^ε α,
    e^{−ε}(1 − δ − α)): max(ln((1 − δ − β)/α), ln((1 − δ − α)/β), 0) (∞ when α or β is 0 and
    the matching numerator is positive)."""
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.where(1.0 - delta - b > 0.0, np.log(1.0 - delta - b) - np.log(a), -np.inf)
        two = np.where(1.0 - delta - a > 0.0, np.log(1.0 - delta - a) - np.log(b), -np.inf)
    out = np.maximum(np.maximum(one, two), 0.0)
    return np.asarray(np.where(np.isnan(out), 0.0, out), dtype=np.float64)


def check_delta(delta: object) -> float:
    """Return δ as a float in [0, 1), or raise naming it."""
    try:
        d = float(delta)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid delta: {delta!r} is not a number.") from None
    if not 0.0 <= d < 1.0:
        raise InvalidParameterError(f"Invalid delta: {delta!r}; δ lies in [0, 1).")
    return d


def hull_curve(alpha_pts: FloatArray, beta_pts: FloatArray, alpha: npt.ArrayLike) -> FloatArray:
    """The lower convex hull of the points and (0, 1), (1, 0), evaluated at ``alpha``: where every
    point is on or above a convex non-increasing T, so is the hull."""
    a = np.concatenate([[0.0, 1.0], alpha_pts])
    b = np.concatenate([[1.0, 0.0], beta_pts])
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    hull: list[tuple[float, float]] = []
    for p in zip(a.tolist(), b.tolist(), strict=True):
        if hull and hull[-1][0] == p[0]:
            continue  # same α, larger β (sorted): not on the lower hull
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) <= 0.0:
                hull.pop()  # the middle point lies on or above the chord
            else:
                break
        hull.append(p)
    hx, hy = np.array(hull).T
    q = np.asarray(alpha, dtype=np.float64)
    return np.asarray(np.minimum(np.interp(q, hx, hy), 1.0 - q))
