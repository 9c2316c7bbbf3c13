"""An interval for the *unsmoothed* loss of lattice residuals: the kernel's bias bracketed.

The KDE convolves the residuals' pmf with N(0, h²), which flattens a curved log-ratio: the
smoothed loss L(h) errs **low** (ADPC with P = 4: −5 to −7 % at h = 0.3 sd, for every ε). For a
pmf that is smooth at the scale h, L(h) = L(0) + a·h² + b·h⁴ + …, so the curves at h, √2·h and
√3·h extrapolate to h → 0 (Richardson, quadratic in h²):

    EPL₀(x) = 3·EPL_h(x) − 3·EPL_{√2h}(x) + EPL_{√3h}(x).

On the exact pmf of ADPC (P = 2, 3, 4, 8; ε = 0.01 … 2) its maximum is within −0.06 … +1.2 % of the
exact loss, against −3 … −8 % for L(h) (``benchmarks/epl_smoothing_bias.py``). At a kink of the pmf
(the two-sided geometric's mode) the expansion fails and the extrapolation errs **high** (+14 …
+27 % on a single geometric at ε ≤ 1): it is used as an *upper* end only.

:func:`bracket` makes the ``"exact"`` interval from bootstrap curves:

* lower end — the basic (or percentile) lower end of max |EPL_h| over the data's window: it errs
  low by the smoothing bias, so it stays below the exact loss (conservative);
* upper end — the larger of the smoothed interval's upper end and the basic upper end of
  max |EPL₀| over an **outer window** ``[P(lo − δ), P(hi + δ)]``, δ = z·√(p(1−p)/n) percentage
  points (z the interval's one-sided quantile): the data's percentiles move by O(1/√n), and on a
  lattice one more point in the window can raise the loss by a few percent (ADPC at ε = 1: +3 %),
  so the exact loss over the *population's* window is inside the outer window with high
  probability.

Which way it errs: both ends lean outward — coverage of the exact loss is at least the nominal
level wherever the extrapolation is accurate (measured in ``benchmarks/FIDELITY.md``).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

#: bandwidth multipliers and weights of the extrapolation to h → 0 (quadratic in h²)
MULTIPLIERS = (1.0, math.sqrt(2.0), math.sqrt(3.0))
WEIGHTS = (3.0, -3.0, 1.0)
#: what the interval covers
CI_TARGETS = ("auto", "smoothed", "exact")


def extrapolate(curves: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    """``Σ w_k · curves[k]`` for the curves at h·MULTIPLIERS (any matching shapes)."""
    return np.asarray(sum(w * c for w, c in zip(WEIGHTS, curves, strict=True)), dtype=np.float64)


def outer_percentiles(
    percentiles: tuple[float, float], n: int, confidence: float
) -> tuple[float, float]:
    """The percentiles of the outer window: each end moved out by z·√(p(1−p)/n) (in %), z the
    one-sided quantile of ``confidence``'s tail, clamped to [0, 100]."""
    z = float(ndtri(1.0 - 0.5 * (1.0 - confidence)))
    lo, hi = (p / 100.0 for p in percentiles)
    d_lo = z * math.sqrt(lo * (1.0 - lo) / n)
    d_hi = z * math.sqrt(hi * (1.0 - hi) / n)
    return max(0.0, 100.0 * (lo - d_lo)), min(100.0, 100.0 * (hi + d_hi))


def interval(
    estimate: float, boot: npt.NDArray[np.float64], a: float, ci_kind: str
) -> tuple[float, float]:
    """Basic ``[2E − q_hi, 2E − q_lo]`` (lower end ≥ 0) or percentile ``[q_lo, q_hi]`` interval of
    the finite bootstrap values ``boot``, tail mass ``a`` each; NaN without values."""
    ok = boot[np.isfinite(boot)]
    if not ok.size or not math.isfinite(estimate):
        return math.nan, math.nan
    q_lo, q_hi = (float(v) for v in np.quantile(ok, [a, 1.0 - a]))
    if ci_kind == "basic":
        return max(0.0, 2.0 * estimate - q_hi), 2.0 * estimate - q_lo
    return q_lo, q_hi


def bracket(
    smoothed: tuple[float, float],
    extrapolated_outer: float,
    boot_outer: npt.NDArray[np.float64],
    a: float,
    ci_kind: str,
) -> tuple[float, float]:
    """The ``"exact"`` interval: the smoothed interval's lower end, and the larger of its upper end
    and the extrapolated loss's upper end over the outer window (see the module docstring)."""
    _, hi_x = interval(extrapolated_outer, boot_outer, a, ci_kind)
    lo, hi = smoothed
    if math.isfinite(hi_x):
        hi = max(hi, hi_x) if math.isfinite(hi) else hi_x
    return lo, hi
