"""The discrete Gaussian N_Z(0, sigma^2) as a truncated, certified lattice measure.

``p(k) = w_k / Z`` with ``w_k = exp(-k^2 / (2 sigma^2))`` and ``Z = sum_k w_k`` over all integers.
Only ``|k| <= K`` is kept, with ``K`` the smallest integer whose two-sided dropped mass is below the
requested ``tail_mass``. The dropped weight is bounded by a geometric series: for ``k = K + 1 + j``,
``k^2 >= (K+1)^2 + 2 (K+1) j``, hence

    sum_{k > K} w_k <= exp(-(K+1)^2 / (2 sigma^2)) / (1 - exp(-(K+1) / sigma^2)).

The kept values are the *true* probabilities ``w_k / Z`` (the truncated measure is not
renormalised): with ``Z_K`` the kept weight, ``Z`` lies in ``[Z_K, Z_K + 2 tail]`` and that relative
uncertainty (``<= 2 tail``, as ``Z_K >= w_0 = 1``) goes into the log-radius with the rounding of
``w_k`` and ``Z_K``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from auditlib.accounting._floats import LIBM_LOG, U_LOG, U, summation_radius
from auditlib.accounting._lattice import LatticeMeasure
from auditlib.accounting._validation import MAX_LATTICE, MAX_WORK
from auditlib.exceptions import AccountingError

_HALF_WIDTH_SD = 12.5
"""Half-width, in standard deviations, of a sum of discrete Gaussians trimmed to two-sided mass
``1e-30`` (``sqrt(2 ln(2 / 1e-30)) = 11.8``, rounded up): for size estimates only."""


def check_sum_cost(sigma2: Fraction, count: int) -> None:
    """Refuse, before any lattice is built, the sum of ``count`` i.i.d. ``N_Z(0, sigma2)`` whose
    lattice would exceed :data:`MAX_LATTICE` points or whose binary powering (direct convolutions)
    would exceed :data:`MAX_WORK` multiply-adds: its width grows like ``sqrt(count sigma2)``, its
    work like ``count sigma2``. ``count`` is a query's sensitivity (the cells one change moves), or
    the terms of every query sharing ``sigma2``."""
    s2 = float(sigma2)

    def size(k: int) -> float:
        return min(
            k * 2 * _HALF_WIDTH_SD * math.sqrt(s2) + 1, 2 * _HALF_WIDTH_SD * math.sqrt(k * s2) + 1
        )

    work, done, base, k = 0.0, 0, 1, count
    while k:  # the sizes of the measures ``power`` convolves (see _lattice.power)
        if k & 1:
            work += size(done) * size(base) if done else 0.0
            done += base
        k >>= 1
        if k:
            work += size(base) ** 2
            base *= 2
    width = size(count)
    if width > MAX_LATTICE or work > MAX_WORK:
        raise AccountingError(
            f"Invalid composition: {count:,} discrete Gaussian terms of sigma2 = {s2:g} (a "
            "query's sensitivity, or the queries sharing that sigma2) sum to a lattice of about "
            f"{width:.3g} points built with about {work:.3g} multiply-adds; the largest allowed "
            f"are MAX_LATTICE = {MAX_LATTICE:.3g} points and MAX_WORK = {MAX_WORK:.3g} "
            "multiply-adds (about half an hour); lower the sensitivity or the noise (sigma2) of "
            "those queries"
        )


def tail_weight_bound(sigma2: Fraction, k_max: int) -> float:
    """Upper bound on ``sum_{k > k_max} exp(-k^2 / (2 sigma^2))`` (geometric series; padded by
    ``1e-9`` relative to cover its own rounding, so it errs high)."""
    k1 = k_max + 1
    log_head = -float(Fraction(k1 * k1) / (2 * sigma2))
    ratio = -math.expm1(-float(Fraction(k1) / sigma2))
    return math.exp(log_head) / ratio * (1.0 + 1e-9)


def _weights(sigma2: Fraction, k_max: int) -> tuple[np.ndarray, float]:
    """Computed ``w_k`` for ``|k| <= k_max`` and their log-radius.

    The exponent ``x = k^2 / (2 sigma^2)`` is formed as ``k^2 * fl(1 / (2 sigma^2))`` (``k^2`` is
    exact, ``Fraction -> float`` is correctly rounded, the product adds one rounding), so the computed
    exponent is ``x (1 + t)`` with ``|t| <= 2U + U^2``: ``exp`` turns that into a log-radius
    ``x_max (2U + U^2)``, plus ``exp``'s own error.
    """
    if k_max >= 2**26:
        raise OverflowError(f"discrete Gaussian support {k_max} too wide for exact k^2 in float64")
    inv = float(Fraction(1, 2) / sigma2)
    k = np.arange(-k_max, k_max + 1, dtype=np.float64)
    x = (k * k) * inv
    w = np.exp(-x)
    x_max = float(x.max())
    radius = x_max * (2.0 * U + U * U) * (1.0 + 1e-9) + LIBM_LOG
    return w, radius


def discrete_gaussian_measure(sigma2: Fraction, tail_mass: float) -> LatticeMeasure:
    """Certified sub-probability measure of ``N_Z(0, sigma2)`` truncated to two-sided mass
    ``< tail_mass``; ``dropped`` is that mass's upper bound."""
    k_max = max(1, math.ceil(math.sqrt(2.0 * float(sigma2) * math.log(2.0 / tail_mass))))
    while True:
        w, r_w = _weights(sigma2, k_max)
        z_hat = float(w.sum())
        r_z = r_w + summation_radius(w.size)
        z_lower = max(1.0, z_hat * math.exp(-r_z) * (1.0 - 4.0 * U))
        dropped = 2.0 * tail_weight_bound(sigma2, k_max) / z_lower
        if dropped < tail_mass:
            break
        k_max += max(1, k_max // 64)
    # shrink while the smaller support still meets the budget (Z_lower only decreases slightly)
    while k_max > 1:
        smaller = 2.0 * tail_weight_bound(sigma2, k_max - 1) / z_lower
        if smaller >= tail_mass:
            break
        k_max -= 1
        dropped = smaller
    w = w[w.size // 2 - k_max : w.size // 2 + k_max + 1]
    z_hat = float(w.sum())
    r_z = r_w + summation_radius(w.size)
    z_lower = max(1.0, z_hat * math.exp(-r_z) * (1.0 - 4.0 * U))
    dropped = 2.0 * tail_weight_bound(sigma2, k_max) / z_lower
    values = w / z_hat
    radius = r_w + r_z + U_LOG + math.log1p(dropped) * (1.0 + 1e-9)
    return LatticeMeasure(offset=-k_max, values=values, radius=radius, dropped=dropped)
