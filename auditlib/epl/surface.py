"""EPL(x) surfaces: the bias-aware log-ratio curve on its grid with a pointwise bootstrap band.

:func:`epl_surface` runs :func:`auditlib.epl.estimate_epl` (multinomial bootstrap on the lattice
counts, the window and h of the data held fixed) and keeps the curve ``EPL(x) = log p̂(x)/p̂(x+Δ)``
with, at every x, the ``confidence`` interval of the B bootstrap curves at that x (basic by default,
as the scalar interval). The band is *pointwise*: each x is covered with about that probability,
not the whole curve at once, and it is centred on the *smoothed* loss (the noise's log-ratio after
convolution with the kernel), not on the unsmoothed one (see ``docs/epl.md``).

Stores keep at most ``max_points`` grid points per curve: when the window holds more points x,
the curve is thinned to evenly spaced points that always include both ends and the argmax of
|EPL(x)| (so the stored curve attains the stored maximum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from auditlib.epl.bias_aware import Seed, estimate_epl
from auditlib.epl.settings import DEFAULTS
from auditlib.epl.stream import LatticeHistogram
from auditlib.exceptions import InvalidParameterError

#: the bands' bootstrap size by default: the estimate's (set, never None: a surface has bands)
DEFAULT_N_BOOT = cast(int, DEFAULTS.n_boot)

#: default cap on stored grid points per curve
SURFACE_POINTS = 101

_EMPTY: npt.NDArray[np.float64] = np.empty(0, dtype=np.float64)


@dataclass(frozen=True)
class EPLSurface:
    """EPL(x) at ``x`` with its pointwise band [``low``, ``high``]; ``epl`` = max |EPL(x)| on the
    full grid (before thinning), ``status`` as :class:`auditlib.epl.EPLEstimate`."""

    x: npt.NDArray[np.float64] = field(compare=False, repr=False)
    epl_x: npt.NDArray[np.float64] = field(compare=False, repr=False)
    low: npt.NDArray[np.float64] = field(compare=False, repr=False)
    high: npt.NDArray[np.float64] = field(compare=False, repr=False)
    epl: float
    status: str
    n: int
    bandwidth: float
    confidence: float
    grid_size: int  # points x in the window (on the residuals' lattice), before thinning

    def to_arrays(self) -> dict[str, Any]:
        return {"x": self.x, "epl_x": self.epl_x, "low": self.low, "high": self.high}


def thin_indices(values: npt.ArrayLike, max_points: int) -> npt.NDArray[np.int64]:
    """At most ``max_points`` sorted indices into ``values``: evenly spaced, both ends and the
    argmax of |values| included (all indices when there are few enough)."""
    v = np.asarray(values, dtype=np.float64)
    if isinstance(max_points, bool) or not isinstance(max_points, int | np.integer):
        raise InvalidParameterError(f"Invalid max_points: {max_points!r}; pass an integer ≥ 3.")
    if max_points < 3:
        raise InvalidParameterError(f"Invalid max_points: {max_points}; pass an integer ≥ 3.")
    n = v.size
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    finite = np.where(np.isfinite(v), np.abs(v), -np.inf)
    peak = int(np.argmax(finite))
    idx = np.unique(np.round(np.linspace(0, n - 1, int(max_points) - 1)).astype(np.int64))
    if peak not in idx:
        idx = np.sort(np.append(idx, peak))
    return idx


def epl_surface(
    residuals: npt.ArrayLike | LatticeHistogram,
    *,
    max_points: int = SURFACE_POINTS,
    n_boot: int = DEFAULT_N_BOOT,
    confidence: float = DEFAULTS.confidence,
    seed: Seed = None,
    **kwargs: Any,
) -> EPLSurface:
    """The bias-aware EPL(x) of ``residuals`` with its pointwise ``confidence`` band from
    ``n_boot`` multinomial resamples, thinned to ``max_points``. Other keywords (bandwidth and its
    kind, percentiles, range_multiplier, shift, ci_kind, grid, min_residuals) go to
    :func:`auditlib.epl.estimate_epl`; the matched floor is not drawn here, nor the bracket of the
    exact loss (the band is pointwise, for the smoothed curve)."""
    kwargs.setdefault("ci_target", "smoothed")  # the band is the smoothed curve's, pointwise
    est = estimate_epl(
        residuals, n_boot=n_boot, confidence=confidence, n_null=None, seed=seed, **kwargs
    )
    if est.status != "ok":
        return EPLSurface(
            _EMPTY, _EMPTY, _EMPTY, _EMPTY, est.epl, est.status, est.n, est.bandwidth, confidence, 0
        )
    keep = thin_indices(est.epl_x, max_points)
    low = est.band_low if est.band_low.size else np.full(est.x.size, math.nan)
    high = est.band_high if est.band_high.size else np.full(est.x.size, math.nan)
    return EPLSurface(
        est.x[keep],
        est.epl_x[keep],
        low[keep],
        high[keep],
        est.epl,
        est.status,
        est.n,
        est.bandwidth,
        est.confidence,
        int(est.x.size),
    )
