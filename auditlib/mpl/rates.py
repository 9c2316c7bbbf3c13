"""Bounds on error rates (binomial proportions), one-sided, for K counts of n draws at once.

``band``: ``"clopper-pearson"`` (exact per count, Bonferroni over the K), ``"dkw"`` (the one-sided
Dvoretzky–Kiefer–Wolfowitz–Massart band: one width for every threshold of an empirical distribution)
or ``"mixture"`` (Robbins' beta-binomial confidence sequence per count, Bonferroni over the K: valid
at every n at once, :mod:`~auditlib.mpl.confseq`). Upper bounds err high, lower bounds err low.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl.confseq import mixture_bound

FloatArray = npt.NDArray[np.float64]
Band = Literal["clopper-pearson", "dkw", "mixture"]
BANDS: tuple[Band, ...] = ("clopper-pearson", "dkw", "mixture")


def check_band(band: object) -> Band:
    """Return ``band`` if it is ``"clopper-pearson"``, ``"dkw"`` or ``"mixture"``, else raise."""
    if band not in BANDS:
        raise InvalidParameterError(f"Invalid band: {band!r}; allowed: {', '.join(BANDS)}.")
    return band


def cp_upper(k: npt.ArrayLike, n: int, level: float) -> FloatArray:
    """One-sided Clopper–Pearson upper bound on a binomial proportion (k successes of n):
    P(p ≤ bound) ≥ 1 − level. 1 where k = n."""
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    kk = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        b = stats.beta.ppf(1.0 - level, kk + 1.0, n - kk)
    return np.asarray(np.where(kk >= n, 1.0, b), dtype=np.float64)


def cp_lower(k: npt.ArrayLike, n: int, level: float) -> FloatArray:
    """One-sided Clopper–Pearson lower bound: P(p ≥ bound) ≥ 1 − level. 0 where k = 0."""
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    kk = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        b = stats.beta.ppf(level, kk, n - kk + 1.0)
    return np.asarray(np.where(kk <= 0, 0.0, b), dtype=np.float64)


def error_bounds(
    k: npt.NDArray[np.int64], n: int, risk: float, band: Band, *, upper: bool = True
) -> FloatArray:
    """Bounds on the K error rates k/n, all valid at once with probability ≥ 1 − ``risk``:
    upper bounds (``upper``) or lower ones. Clopper–Pearson at risk/K each, the one-sided DKW
    band ``± sqrt(ln(1/risk)/(2n))`` (Massart: needs risk ≤ ½), or the beta-binomial mixture
    confidence sequence at risk/K each (:mod:`~auditlib.mpl.confseq`: valid at every n at once)."""
    if band == "clopper-pearson":
        level = risk / max(1, k.size)
        return cp_upper(k, n, level) if upper else cp_lower(k, n, level)
    if band == "mixture":
        return mixture_bound(k, n, risk / max(1, k.size), upper=upper)
    lam = math.sqrt(math.log(1.0 / min(risk, 0.5)) / (2.0 * n))
    p = k / n
    return np.asarray(np.minimum(p + lam, 1.0) if upper else np.maximum(p - lam, 0.0))
