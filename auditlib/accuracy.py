"""Accuracy of a noisy count: exact MSE and MAE of discrete-Gaussian noise, with and without
non-negativity (Su, Su & Wang, Section 3.4).

A count ``n`` is released as ``n + Z`` with ``Z ~ N_Z(0, σ²)``, the discrete Gaussian with pmf
proportional to ``exp(-k²/(2σ²))`` on the integers. Without post-processing the error is ``Z``:

* ``MSE = E[Z²] = Var(Z)``, slightly *below* σ² (Poisson summation:
  ``Var = σ² − 4π²σ⁴ Σ m² e^{−2π²σ²m²} / Σ e^{−2π²σ²m²}``), so ``MSE → σ²`` fast as σ² grows;
* ``MAE = E|Z| ≈ σ √(2/π) − 1/(6 √(2π) σ)`` for large σ² (Euler–Maclaurin).

The simplest post-processing that keeps counts non-negative clips at 0: the release is
``max(0, n + Z)`` and the error ``max(−n, Z)``. Clipping only moves the left tail towards the
truth, so it never increases the error: ``MSE_clip(n) ≤ MSE`` and ``MAE_clip(n) ≤ MAE``, with
equality in the large-count limit, and at ``n = 0`` exactly half of each (by symmetry).

Everything is computed *exactly* from the pmf (no sampling): a sum over the integers
``|k| ≤ K`` with ``K`` at least 40 σ, where the dropped mass is below ``e^{−800}`` and does not
move a double. The pmf is normalised in log space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

__all__ = ["CountAccuracy", "count_accuracy", "dg_error_moments", "dg_support"]

#: the support is cut at this many standard deviations (dropped mass < e^{-800})
_RADIUS_SD = 40.0
#: σ² accepted: the support then has at most ~2.6 million points
MAX_SIGMA2 = 1e9


def _check_sigma2(sigma2: float) -> float:
    try:
        s2 = float(sigma2)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"sigma2 must be a positive number, got {sigma2!r}") from None
    if not (math.isfinite(s2) and 0 < s2 <= MAX_SIGMA2):
        raise InvalidParameterError(
            f"sigma2 must lie in (0, {MAX_SIGMA2:g}], got {sigma2!r}; pass the discrete "
            "Gaussian's σ² (not σ)"
        )
    return s2


def dg_support(sigma2: float) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Integers ``k`` with ``|k| ≤ K`` and the discrete-Gaussian pmf on them (normalised)."""
    s2 = _check_sigma2(sigma2)
    radius = max(math.ceil(_RADIUS_SD * math.sqrt(s2)), 40)
    k = np.arange(-radius, radius + 1, dtype=np.int64)
    log_w = -(k.astype(np.float64) ** 2) / (2.0 * s2)
    log_z = float(np.logaddexp.reduce(log_w))
    return k, np.exp(log_w - log_z)


def dg_error_moments(sigma2: float) -> tuple[float, float]:
    """``(MSE, MAE)`` of discrete-Gaussian noise without post-processing: ``(E[Z²], E|Z|)``."""
    k, p = dg_support(sigma2)
    kf = k.astype(np.float64)
    # pair k and -k: sum over k >= 1 of 2 p(k) k^2, smallest terms first
    pos = slice(k.size // 2 + 1, None)
    mse = 2.0 * math.fsum((p[pos] * kf[pos] ** 2)[::-1])
    mae = 2.0 * math.fsum((p[pos] * kf[pos])[::-1])
    return mse, mae


@dataclass(frozen=True)
class CountAccuracy:
    """Exact errors of a count released with discrete-Gaussian noise of parameter ``sigma2``.

    ``mse``/``mae``: no post-processing (independent of the count); ``mse_clipped``/
    ``mae_clipped``: after clipping at 0, one value per true count in ``counts``.
    """

    sigma2: float
    counts: npt.NDArray[np.int64]
    mse: float
    mae: float
    mse_clipped: npt.NDArray[np.float64]
    mae_clipped: npt.NDArray[np.float64]


def count_accuracy(sigma2: float, counts: npt.ArrayLike) -> CountAccuracy:
    """MSE and MAE of ``n + Z`` and of ``max(0, n + Z)`` for each true count ``n`` in ``counts``.

    ``counts`` are non-negative integers. With ``F(−n) = P(Z ≤ −n)``:
    ``MSE_clip(n) = Σ_{k > −n} p(k) k² + F(−n) n²`` and ``MAE_clip(n) = Σ_{k > −n} p(k)|k| + F(−n) n``.
    """
    n = np.asarray(counts)
    if n.ndim != 1 or n.size == 0:
        raise InvalidParameterError(
            f"counts must be a non-empty 1-d sequence of integers, got shape {n.shape}"
        )
    if not np.issubdtype(n.dtype, np.integer):
        if not (
            np.issubdtype(n.dtype, np.floating) and np.all(np.isfinite(n) & (n == np.round(n)))
        ):
            raise InvalidParameterError(
                f"counts must be whole numbers, got {n[:5].tolist()!r}; round them first"
            )
    n = n.astype(np.int64)
    if np.any(n < 0):
        raise InvalidParameterError(
            f"counts must be non-negative, got {int(n.min())}; a true count is never negative"
        )
    k, p = dg_support(sigma2)
    kf = k.astype(np.float64)
    mse, mae = dg_error_moments(sigma2)
    radius = int(k[-1])
    # left-cumulative sums from the far tail (small terms first): index i covers k[0..i]
    cdf = np.cumsum(p)
    left_sq = np.cumsum(p * kf**2)
    left_abs = np.cumsum(p * np.abs(kf))
    # for count n the clipped part is k <= -n, i.e. indices 0 .. radius - n
    idx = radius - np.minimum(n, radius + 1)
    inside = idx >= 0
    i = np.where(inside, idx, 0)
    tail = np.where(inside, cdf[i], 0.0)
    sq_clipped = np.where(inside, left_sq[i], 0.0)
    abs_clipped = np.where(inside, left_abs[i], 0.0)
    nf = n.astype(np.float64)
    mse_c = np.clip(mse - sq_clipped + tail * nf**2, 0.0, mse)
    mae_c = np.clip(mae - abs_clipped + tail * nf, 0.0, mae)
    return CountAccuracy(
        sigma2=float(sigma2),
        counts=n,
        mse=mse,
        mae=mae,
        mse_clipped=mse_c,
        mae_clipped=mae_c,
    )
