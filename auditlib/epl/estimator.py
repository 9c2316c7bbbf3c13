"""Empirical privacy loss (EPL) of residuals, after Flaxman & Petti (2020) and its appendix.

``EPL(x) = log p̂(x)/p̂(x+1)`` with p̂ a Gaussian KDE of the residuals (DP − true counts), and
``EPL = max |EPL(x)|`` over a window of x set by percentiles of the residuals.

Methods (``method=``):

``"flaxman_petti"`` — the authors' code (``aflaxman/dp_2020_census``, ``model.py`` and the appendix
  notebook behind Table SA1): scipy ``gaussian_kde(bw_method=f)``, i.e. h = f × sd(residuals,
  ddof=1); ``b = m × max(|p_lo|, |p_hi|)`` (m = ``range_multiplier``, 1 in Table SA1); unit bins
  ``np.arange(−b, b, 1)``; p̂ evaluated at the bin centres c; EPL(c) = log p̂(c)/p̂(c+1) for every
  centre but the last; EPL = the largest |EPL(c)|.
``"percentile_window"`` — the text's definition on the lattice: integer x with
  ``p_lo ≤ x`` and ``x + 1 ≤ p_hi``.
``"bias_aware"`` — the percentile window with a wider kernel, h = 0.3 × sd
  (:data:`auditlib.epl.settings.BIAS_AWARE_FACTOR`), chosen by ``benchmarks/epl_bandwidth_study.py``
  to cut the small-sample upward bias; :func:`auditlib.epl.bias_aware.estimate_epl` adds the
  bootstrap interval, the matched-reference floor, the slope and the remaining knobs.

``bandwidth_factor=None`` means the method's default (0.1 for the first two, 0.3 for bias_aware).

Which way it errs: the max over a window of a noisy curve is biased **upward** at small n (≈1.9×
the true loss at 2,663 residuals with factor 0.1, ≈1.0 from 10⁶), and EPL depends strongly on the
bandwidth and window; see ``docs/epl.md``. The KDE itself is exact (:mod:`auditlib.epl.kde`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.epl.bandwidth import check_percentiles, check_positive
from auditlib.epl.bias_aware import estimate_epl
from auditlib.epl.kde import (
    as_residuals,
    integer_view,
    lattice_kde_logpdf,
    mixture_logpdf,
    support,
    weighted_percentiles,
    weighted_std,
)
from auditlib.epl.settings import BIAS_AWARE_FACTOR
from auditlib.epl.stream import LatticeHistogram
from auditlib.exceptions import InvalidParameterError, UnknownNameError

METHODS = ("flaxman_petti", "percentile_window", "bias_aware")
#: Statuses: "ok"; "too_few" (n < min_residuals: EPL NaN); "invariant" (all residuals equal:
#: no noise at all, EPL = inf); "empty_window" (the window holds no x with x+1 inside: EPL NaN).
STATUSES = ("ok", "too_few", "invariant", "empty_window")
MIN_RESIDUALS = 30


@dataclass(frozen=True)
class EPLResult:
    """One EPL estimate. ``x``/``epl_x`` are the grid and the signed log-ratio log p̂(x)/p̂(x+1)."""

    epl: float
    x: npt.NDArray[np.float64] = field(compare=False, repr=False)
    epl_x: npt.NDArray[np.float64] = field(compare=False, repr=False)
    window: tuple[float, float]
    bandwidth: float
    n: int
    method: str
    status: str
    bandwidth_factor: float = math.nan
    percentiles: tuple[float, float] = (math.nan, math.nan)

    @property
    def argmax(self) -> float:
        """The x where |EPL(x)| is largest (NaN if there is no grid)."""
        if self.epl_x.size == 0:
            return math.nan
        return float(self.x[int(np.argmax(np.abs(self.epl_x)))])

    def to_dict(self) -> dict[str, Any]:
        """Small JSON-friendly summary (no arrays)."""
        return {
            "epl": self.epl,
            "argmax": self.argmax,
            "window": [self.window[0], self.window[1]],
            "bandwidth": self.bandwidth,
            "bandwidth_factor": self.bandwidth_factor,
            "percentiles": [self.percentiles[0], self.percentiles[1]],
            "n": self.n,
            "grid_size": int(self.x.size),
            "method": self.method,
            "status": self.status,
        }


def _check_factor(bandwidth_factor: object) -> float:
    return check_positive(
        "bandwidth_factor",
        bandwidth_factor,
        "pass a finite number > 0 (0.1 reproduces Flaxman & Petti).",
    )


def _empty(
    status: str, epl_value: float, window: tuple[float, float], h: float, n: int, **kw: Any
) -> EPLResult:
    e = np.empty(0, dtype=np.float64)
    return EPLResult(epl_value, e, e, window, h, n, status=status, **kw)


def epl(
    residuals: npt.ArrayLike | LatticeHistogram,
    *,
    method: str = "flaxman_petti",
    bandwidth_factor: float | None = None,
    percentiles: tuple[float, float] = (5.0, 95.0),
    range_multiplier: float = 1.0,
    bandwidth: float | None = None,
    min_residuals: int = MIN_RESIDUALS,
) -> EPLResult:
    """Empirical privacy loss of ``residuals`` (DP − true counts of exchangeable queries).

    ``bandwidth`` (absolute h) overrides ``bandwidth_factor`` (h = factor × sd, ddof=1; None: the
    method's default, 0.1 for flaxman_petti and percentile_window, 0.3 for bias_aware).
    ``range_multiplier`` scales the flaxman_petti window half-width b (bias_aware: both ends of
    the percentile window). ``residuals`` may be their
    :class:`~auditlib.epl.stream.LatticeHistogram` (streamed chunk by chunk): the same numbers. See
    the module docstring for the methods, and :class:`EPLResult` for the statuses. Errs upward at
    small n.
    """
    hist: LatticeHistogram | None = None
    if isinstance(residuals, LatticeHistogram):
        hist = residuals
        if hist.n == 0:
            raise InvalidParameterError("Invalid residuals: an empty histogram; add chunks first.")
        r = np.array([hist.low, hist.high])  # the raw range: min/max and the first value below
    else:
        r = as_residuals(residuals)
    if method not in METHODS:
        raise UnknownNameError(f"Unknown EPL method {method!r}; choose one of {METHODS}.")
    if bandwidth_factor is None:
        bandwidth_factor = BIAS_AWARE_FACTOR if method == "bias_aware" else 0.1
    factor = _check_factor(bandwidth_factor)
    lo, hi = check_percentiles(percentiles)
    mult = float(range_multiplier)
    if not math.isfinite(mult) or mult <= 0.0:
        raise InvalidParameterError(
            f"Invalid range_multiplier: {range_multiplier!r}; pass a finite number > 0 (1 = "
            "the percentile window itself)."
        )
    if bandwidth is not None and (not math.isfinite(float(bandwidth)) or float(bandwidth) <= 0):
        raise InvalidParameterError(
            f"Invalid bandwidth: {bandwidth!r}; pass a finite absolute h > 0, or None to use "
            "bandwidth_factor."
        )
    if method == "bias_aware":
        est = estimate_epl(
            residuals,
            bandwidth=float(bandwidth) if bandwidth is not None else factor,
            bandwidth_kind="absolute" if bandwidth is not None else "factor",
            percentiles=(lo, hi),
            range_multiplier=mult,
            n_boot=None,
            n_null=None,
            min_residuals=min_residuals,
        )
        return EPLResult(
            est.epl,
            est.x,
            est.epl_x,
            est.window,
            est.bandwidth,
            est.n,
            method=method,
            status=est.status,
            bandwidth_factor=factor,
            percentiles=(lo, hi),
        )
    n = hist.n if hist is not None else int(r.size)
    meta: dict[str, Any] = {
        "method": method,
        "bandwidth_factor": factor,
        "percentiles": (lo, hi),
    }
    if n >= 2 and float(r.min()) == float(r.max()):
        v = float(r[0])
        return _empty("invariant", math.inf, (v, v), 0.0, n, **meta)
    if n < max(int(min_residuals), 2):
        return _empty("too_few", math.nan, (math.nan, math.nan), math.nan, n, **meta)

    # integer residuals: one bincount gives the spread, the percentiles and the KDE
    lattice: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None
    if isinstance(residuals, LatticeHistogram):
        lattice = (residuals.points, residuals.counts)
    else:
        ints = integer_view(residuals, r)
        lattice = support(r, ints) if ints is not None else None
    if lattice is not None:
        sd = weighted_std(*lattice)
        p_lo, p_hi = (float(v) for v in weighted_percentiles(*lattice, [lo, hi]))
    else:
        sd = float(np.std(r, ddof=1))
        p_lo, p_hi = (float(v) for v in np.percentile(r, [lo, hi]))
    h = float(bandwidth) if bandwidth is not None else factor * sd
    if method == "flaxman_petti":
        b = mult * max(abs(p_lo), abs(p_hi))
        edges = np.arange(-b, b, 1.0)
        centres = 0.5 * (edges[:-1] + edges[1:])
        window = (-b, b)
        query = centres
    else:
        window = (p_lo, p_hi)
        query = np.arange(math.ceil(p_lo), math.floor(p_hi) + 1, dtype=np.float64)
    if query.size < 2:
        return _empty("empty_window", math.nan, window, h, n, **meta)
    if lattice is not None:
        logf = mixture_logpdf(*lattice, h, query)
    else:
        logf = lattice_kde_logpdf(r, h, query)
    epl_x = logf[:-1] - logf[1:]
    return EPLResult(
        float(np.max(np.abs(epl_x))),
        query[:-1].copy(),
        epl_x,
        window,
        h,
        n,
        status="ok",
        **meta,
    )
