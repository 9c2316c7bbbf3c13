"""Error bars for published TopDown counts by the Approximate Monte Carlo (AMC) method.

* :mod:`auditlib.published.amc` — :func:`amc_replicates`: TopDown rerun ``R`` times with the
  published histograms as its truth, streamed into per-count moments (levels and areas).
* :mod:`auditlib.published.moments` — :class:`Moments` (bias, variance, MSE from running sums),
  :class:`MomentAccumulator`, :func:`area_map` (bottom-level units into areas).
* :mod:`auditlib.published.intervals` — :func:`amc_interval` (the Bureau's conditionally
  bias-corrected RMSE-based t interval, and the variants it was chosen over), and
  :func:`area_moments` for areas defined after the run.

What the method assumes and where it fails: ``docs/published_error_bars.md``.
"""

from auditlib.published.amc import AMCResult, amc_replicates, replicate_rngs
from auditlib.published.intervals import (
    AMCInterval,
    amc_interval,
    area_moments,
    bias_correction_applies,
    critical_value,
)
from auditlib.published.moments import AreaMap, MomentAccumulator, Moments, area_map

__all__ = [
    "AMCInterval",
    "AMCResult",
    "AreaMap",
    "MomentAccumulator",
    "Moments",
    "amc_interval",
    "amc_replicates",
    "area_map",
    "area_moments",
    "bias_correction_applies",
    "critical_value",
    "replicate_rngs",
]
