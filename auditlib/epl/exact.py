"""Exact windowed losses of lattice noise laws: what EPL estimates, computed from the pmf.

For residuals with pmf P on a lattice, the loss over the window is
``max |log P(x)/P(x+Δ)|`` over the lattice points x with x and x+Δ in ``[m·q_lo, m·q_hi]``, where
q_lo, q_hi are the *population* percentiles (the smallest value whose cdf reaches lo/100, hi/100:
the limit of the sample percentiles). :func:`windowed_loss` computes it; :func:`adpc_pmf` is the
pmf of Flaxman's ADPC residual, the mean of P two-sided geometrics G(ε/P), on ℤ/P (convolved by
FFT: its rounding, ≈ 1e-16 of the peak, is far below the pmf inside any 1–99 % window).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from auditlib.epl.bandwidth import check_percentiles, check_positive
from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import TwoSidedGeometric


def adpc_pmf(epsilon: float, runs: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Values k/P and pmf of the mean of P i.i.d. G(ε/P) (P = ``runs``; P = 1 is GDPC's G(ε)),
    on |k| ≤ 40·P²/ε (the mass beyond is < e⁻⁴⁰)."""
    eps = check_positive("epsilon", epsilon, "pass the release's ε > 0.")
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1:
        raise InvalidParameterError(f"Invalid runs: {runs!r}; pass the number P ≥ 1 of runs.")
    p = int(runs)
    radius = math.ceil(40.0 * p / eps)
    one = TwoSidedGeometric(eps / p).pmf(np.arange(-radius, radius + 1))
    s = one
    if p > 1:
        from scipy.signal import fftconvolve  # lazy: ≈ 0.9 s to import

        for _ in range(p - 1):
            s = fftconvolve(s, one)
    s = np.clip(s, 0.0, None)
    s /= s.sum()
    k = np.arange(s.size) - (s.size - 1) // 2
    return k / p, s


def windowed_loss(
    values: npt.ArrayLike,
    pmf: npt.ArrayLike,
    *,
    percentiles: tuple[float, float] = (5.0, 95.0),
    shift: float = 1.0,
    multiplier: float = 1.0,
) -> float:
    """``max |log P(x)/P(x+Δ)|`` over the lattice points x of ``values`` (sorted, evenly spaced)
    with x and x+Δ in ``[m·q_lo, m·q_hi]``, q the population percentiles of ``pmf``."""
    v = np.asarray(values, dtype=np.float64)
    p = np.asarray(pmf, dtype=np.float64)
    if v.ndim != 1 or v.shape != p.shape or v.size < 2:
        raise InvalidParameterError(
            f"Invalid values/pmf: shapes {v.shape} and {p.shape}; pass two equal 1-D arrays."
        )
    lo, hi = check_percentiles(percentiles)
    g = float(v[1] - v[0])
    steps = round(float(shift) / g)
    if steps < 1 or abs(steps * g - float(shift)) > 1e-9 * max(1.0, float(shift)):
        raise InvalidParameterError(
            f"Invalid shift: {shift!r}; pass a whole number of lattice steps ({g})."
        )
    cdf = np.cumsum(p) / p.sum()
    q_lo = v[min(int(np.searchsorted(cdf, lo / 100.0)), v.size - 1)]
    q_hi = v[min(int(np.searchsorted(cdf, hi / 100.0)), v.size - 1)]
    w_lo, w_hi = multiplier * q_lo, multiplier * q_hi
    i = np.flatnonzero((v >= w_lo - 1e-9 * g) & (v + shift <= w_hi + 1e-9 * g))
    i = i[i + steps < v.size]
    if i.size == 0:
        return math.nan
    with np.errstate(divide="ignore"):
        return float(np.max(np.abs(np.log(p[i]) - np.log(p[i + steps]))))
