"""Confidence intervals of true counts from AMC moments, and the moments of user-defined areas.

The interval is the one the Census Bureau publishes code for (Ashmead et al. 2024, "ct"; the
notebook of ``uscensusbureau/AMC_Confidence_Intervals``): a *conditionally bias-corrected,
RMSE-based Wald interval with Student's t (5 degrees of freedom)*::

    centre = P − b   if  P > 5  and  |b| >= 0.5 · s  and  (b < 0  or  P >= 25)
             P       otherwise
    [floor(max(0, centre − t₅(1 − α/2) · √MSE)),  ceil(centre + t₅(1 − α/2) · √MSE)]

with ``b`` the AMC bias, ``s`` the replicates' standard deviation and ``MSE`` the mean of
``(P_r − P)²`` (:class:`~auditlib.published.moments.Moments`). Why this one: of the eight
intervals the paper compares on 2010 data, the Wald intervals met 90 % coverage where the
quantile intervals did not (quantiles of 25 replicates are too noisy — so no order statistic is
kept here); √MSE rather than ``s`` widens the interval in proportion to the bias it cannot trust
to remove; t₅ rather than the normal quantile absorbs the heavier tails of the error and the
noise of ``s`` from 25 replicates; and the bias is subtracted only where the paper found the
estimate reliable (not for counts of 5 or less, and a positive bias — the non-negativity bias of
small counts — only from 25 up). The other variants (``bias_correction="always"|"never"``,
``spread="sd"`` for the variance-only interval of the paper's eq. (7), ``distribution="normal"``)
are there to be compared with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special

from auditlib.exceptions import InvalidParameterError
from auditlib.published.moments import (
    AreaMap,
    Areas,
    FloatArray,
    MomentAccumulator,
    Moments,
    area_map,
    check_counts,
)

BiasCorrection = Literal["conditional", "always", "never"]
Spread = Literal["rmse", "sd"]
Distribution = Literal["t", "normal"]

#: the Bureau's degrees of freedom of the t quantile (a 90 % interval: 2.015 against 1.645)
T_DF = 5.0
#: the conditional bias correction applies when P > MIN_PUBLISHED, |b| >= MIN_BIAS_SD · s and
#: (b < 0 or P >= MIN_PUBLISHED_POSITIVE_BIAS)
MIN_PUBLISHED = 5
MIN_BIAS_SD = 0.5
MIN_PUBLISHED_POSITIVE_BIAS = 25


@dataclass(frozen=True)
class AMCInterval:
    """Per count: the centre, the bounds of a level ``1 − alpha`` interval of the true count, and
    whether the centre is bias-corrected (``P − b``)."""

    centre: FloatArray
    lower: FloatArray
    upper: FloatArray
    bias_corrected: npt.NDArray[np.bool_]
    alpha: float

    def covers(self, truth: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether each interval contains the corresponding true count."""
        t = np.asarray(truth, dtype=np.float64)
        return (self.lower <= t) & (t <= self.upper)

    @property
    def width(self) -> FloatArray:
        return self.upper - self.lower


def check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise InvalidParameterError(
            f"Invalid alpha: {alpha}; need 0 < alpha < 1 (0.1 for a 90 % interval)"
        )
    return a


def critical_value(alpha: float, distribution: Distribution = "t", df: float = T_DF) -> float:
    """The two-sided quantile ``q(1 − α/2)`` of Student's t (``df``) or the standard normal."""
    a = check_alpha(alpha)
    if distribution == "normal":
        return float(special.ndtri(1.0 - a / 2.0))
    if distribution != "t":
        raise InvalidParameterError(f"Invalid distribution: {distribution!r}; allowed: t, normal")
    if not (np.isfinite(df) and df > 0):
        raise InvalidParameterError(f"Invalid df: {df}; need a number > 0 (the Bureau's: 5)")
    return float(special.stdtrit(df, 1.0 - a / 2.0))


def bias_correction_applies(m: Moments) -> npt.NDArray[np.bool_]:
    """The Bureau's rule for subtracting the estimated bias (see the module docstring); a bias of
    exactly zero is not counted as corrected."""
    p, b = m.published, m.bias
    return (
        (p > MIN_PUBLISHED)
        & (np.abs(b) >= MIN_BIAS_SD * m.sd)
        & ((b < 0) | (p >= MIN_PUBLISHED_POSITIVE_BIAS))
        & (b != 0)
    )


def amc_interval(
    m: Moments,
    alpha: float = 0.1,
    *,
    bias_correction: BiasCorrection = "conditional",
    spread: Spread = "rmse",
    distribution: Distribution = "t",
    df: float = T_DF,
    integer: bool = True,
) -> AMCInterval:
    """Level ``1 − alpha`` intervals of the true counts behind the published ``m.published``.

    The defaults are the Bureau's "ct" interval (module docstring). ``spread="sd"`` uses the
    replicates' standard deviation instead of √MSE (it ignores the bias: the paper's eq. (7));
    ``integer`` floors the lower and ceils the upper bound and truncates the lower at zero (counts
    are non-negative integers); without it the bounds are the real-valued Wald bounds."""
    q = critical_value(alpha, distribution, df)
    if bias_correction == "conditional":
        corrected = bias_correction_applies(m)
    elif bias_correction == "always":
        corrected = np.ones(m.published.shape, dtype=bool)
    elif bias_correction == "never":
        corrected = np.zeros(m.published.shape, dtype=bool)
    else:
        raise InvalidParameterError(
            f"Invalid bias_correction: {bias_correction!r}; allowed: conditional, always, never"
        )
    if spread == "rmse":
        half = q * m.rmse
    elif spread == "sd":
        half = q * m.sd
    else:
        raise InvalidParameterError(f"Invalid spread: {spread!r}; allowed: rmse, sd")
    centre = np.where(corrected, m.published - m.bias, m.published)
    lower, upper = centre - half, centre + half
    if integer:
        lower = np.floor(np.maximum(lower, 0.0))
        upper = np.ceil(upper)
    return AMCInterval(centre, lower, upper, corrected, float(alpha))


def area_moments(
    published_bottom: npt.ArrayLike, replicates_bottom: npt.ArrayLike, areas: Areas | AreaMap
) -> Moments:
    """Moments of areas' counts from stored bottom-level replicates: every replicate's area sums
    first, then their moments (the areas' variances include the units' covariances).

    ``published_bottom`` is ``(n_units, k)``, ``replicates_bottom`` ``(R, n_units, k)``, ``areas``
    as :func:`~auditlib.published.moments.area_map` takes it."""
    p = check_counts(published_bottom)
    if p.ndim != 2:
        raise InvalidParameterError(
            f"Invalid published counts of shape {p.shape}; need (n_units, k)"
        )
    reps = np.asarray(replicates_bottom)
    if reps.ndim != 3 or reps.shape[1:] != p.shape:
        raise InvalidParameterError(
            f"Invalid replicates of shape {reps.shape}; need (R, {p.shape[0]}, {p.shape[1]})"
        )
    amap = area_map(areas, p.shape[0])
    if reps.shape[0] < 2:
        raise InvalidParameterError(
            f"Invalid replicates: {reps.shape[0]}; a variance needs at least 2 (the Bureau runs 25)"
        )
    acc = MomentAccumulator(amap.sums(p))
    for r in reps:
        acc.add(amap.sums(r))
    return acc.moments()
