"""Conversions from rho-zCDP to (eps, delta)-DP.

* The Census Bureau's conversion (Bun & Steinke 2016, Prop. 1.3), used on the 2020 privacy-loss
  budget documents: ``eps = rho + 2 sqrt(rho ln(1/delta))``, inverted as
  ``delta = exp(-(eps - rho)^2 / (4 rho))`` for ``eps >= rho`` (else 1).
* Canonne, Kamath & Steinke (2020, "The Discrete Gaussian for Differential Privacy", Prop. 12 and
  Cor. 13), tighter at every delta: ``eps = inf_{a > 1} a rho + (ln(1/delta) + (a-1) ln(1 - 1/a)
  - ln a) / (a - 1)`` and ``delta = inf_{a > 1} exp((a-1)(a rho - eps)) / (a-1) (1 - 1/a)^a``.
  The PL94-171 persons certificate's eps(1e-10) = 17.14 is this bound at rho = 293764/114921.

Every order ``a > 1`` gives a valid bound, so a numerically minimised value errs *high* (safe): the
minimiser is parametrised by ``x = ln(a - 1)``, bracketed on a grid and polished by bounded Brent
search to ``1e-12`` in ``x``, which leaves the result within about ``1e-12`` of the infimum.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar

from auditlib.accounting._validation import check_delta, check_epsilon, check_rho

_X_GRID = np.linspace(-25.0, 25.0, 501)


def _scalar_or_array(values: np.ndarray) -> np.ndarray | float:
    return float(values) if values.ndim == 0 else values


def bureau_epsilon(rho: ArrayLike, delta: ArrayLike) -> np.ndarray | float:
    """``rho + 2 sqrt(rho ln(1/delta))``: the Bureau's eps for rho-zCDP (an upper bound on eps;
    errs high, typically by 4-5 % over the CKS bound). Broadcasts over ``rho`` and ``delta``."""
    r = check_rho(rho)
    d = check_delta(delta)
    return _scalar_or_array(r + 2.0 * np.sqrt(r * -np.log(d)))


def bureau_delta(rho: ArrayLike, epsilon: ArrayLike) -> np.ndarray | float:
    """Inverse of :func:`bureau_epsilon`: ``exp(-(eps - rho)^2 / (4 rho))`` for ``eps >= rho``,
    else 1 (an upper bound on delta; errs high)."""
    r = check_rho(rho)
    e = check_epsilon(epsilon)
    r, e = np.broadcast_arrays(r, e)
    out = np.ones(r.shape)
    ok = e >= r
    out[ok] = np.exp(-((e[ok] - r[ok]) ** 2) / (4.0 * r[ok]))
    return _scalar_or_array(out)


def _minimise(objective: Callable[[float], float]) -> float:
    """Minimum over ``x`` of a unimodal objective: grid bracket, then bounded Brent."""
    values = np.array([objective(float(x)) for x in _X_GRID])
    i = int(np.argmin(values))
    lo = _X_GRID[max(i - 1, 0)]
    hi = _X_GRID[min(i + 1, _X_GRID.size - 1)]
    res = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return float(min(values[i], res.fun))


def _cks_eps_objective(rho: float, log_inv_delta: float) -> Callable[[float], float]:
    def f(x: float) -> float:
        a = np.exp(x)  # a = alpha - 1
        log1p_a = np.log1p(a)  # ln(alpha); ln(1 - 1/alpha) = x - ln(alpha)
        return float((1.0 + a) * rho + (log_inv_delta + a * (x - log1p_a) - log1p_a) / a)

    return f


def _cks_log_delta_objective(rho: float, eps: float) -> Callable[[float], float]:
    def f(x: float) -> float:
        a = np.exp(x)
        log1p_a = np.log1p(a)
        return float(a * ((1.0 + a) * rho - eps) - x + (1.0 + a) * (x - log1p_a))

    return f


def cks_epsilon(rho: ArrayLike, delta: ArrayLike) -> np.ndarray | float:
    """Canonne-Kamath-Steinke eps for rho-zCDP at ``delta`` (an upper bound on eps; errs high).

    Broadcasts over ``rho`` and ``delta``.
    """
    r = check_rho(rho)
    d = check_delta(delta)
    r, d = np.broadcast_arrays(r, d)
    out = np.array(
        [
            _minimise(_cks_eps_objective(float(ri), float(-np.log(di))))
            for ri, di in zip(r.ravel(), d.ravel(), strict=True)
        ]
    ).reshape(r.shape)
    return _scalar_or_array(np.maximum(out, 0.0))


def cks_delta(rho: ArrayLike, epsilon: ArrayLike) -> np.ndarray | float:
    """Canonne-Kamath-Steinke delta for rho-zCDP at ``epsilon`` (an upper bound; errs high),
    minimised in log space and capped at 1. Broadcasts over ``rho`` and ``epsilon``."""
    r = check_rho(rho)
    e = check_epsilon(epsilon)
    r, e = np.broadcast_arrays(r, e)
    log_d = np.array(
        [
            _minimise(_cks_log_delta_objective(float(ri), float(ei)))
            if np.isfinite(ei)
            else -np.inf
            for ri, ei in zip(r.ravel(), e.ravel(), strict=True)
        ]
    ).reshape(r.shape)
    return _scalar_or_array(np.exp(np.minimum(log_d, 0.0)))
