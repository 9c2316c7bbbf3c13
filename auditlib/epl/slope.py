"""Slope of the EPL curve: an estimate of 1/σ² (and ρ) for Gaussian-noise releases.

For discrete-Gaussian noise N_Z(0, σ²) and neighbour shift Δ the exact log-ratio is linear in x,
``log P(x)/P(x+Δ) = Δ(2x + Δ)/(2σ²)``, with slope Δ/σ². The KDE p̂ is the residual histogram
convolved with N(0, h²); for Gaussian residuals of variance v its log-ratio has slope Δ/(v + h²).
So with ``s`` the least-squares slope of EPL(x) over the window,

``1/σ̂² = 1/(Δ/s − h²)``   (the kernel's variance removed; NaN if Δ/s ≤ h²),

and under add/remove neighbours with sensitivity Δ, ``ρ̂ = Δ²/(2σ̂²)`` (= slope/2 per query for
Δ = 1 and h → 0). These are *estimates* that assume Gaussian noise: for geometric (Laplace-like)
noise EPL(x) is a step, not a line, and the slope means nothing.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def least_squares_slope(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Slope of the least-squares line of each row of ``y`` (… × Q) on ``x`` (Q); NaN if Q < 2."""
    xx = np.asarray(x, dtype=np.float64)
    yy = np.asarray(y, dtype=np.float64)
    if xx.size < 2:
        return np.full(yy.shape[:-1], math.nan)
    xc = xx - xx.mean()
    sxx = float(np.dot(xc, xc))
    if sxx == 0.0:
        return np.full(yy.shape[:-1], math.nan)
    return np.asarray((yy - yy.mean(axis=-1, keepdims=True)) @ xc / sxx, dtype=np.float64)


def inverse_sigma2(slope: float, bandwidth: float, shift: float = 1.0) -> float:
    """1/σ̂² from the raw slope of EPL(x), the KDE's variance h² removed (see the module docstring)."""
    if not math.isfinite(slope) or slope <= 0.0:
        return math.nan
    v = shift / slope - bandwidth * bandwidth
    return 1.0 / v if v > 0.0 else math.nan
