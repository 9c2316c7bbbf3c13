"""The matched reference floor of the bias-aware estimate (see :mod:`auditlib.epl.bias_aware`).

n draws from a discrete Gaussian with σ² = the residuals' sample variance, centred on their mean
rounded to the grid, run through the same estimator ``draws`` times: on the integers
(:func:`reference_floor`, N_Z(c, σ²)) or on the residuals' lattice c + ℤ/q
(:func:`lattice_reference_floor`, P(c + k/q) ∝ exp(−(k/q)²/2σ²)). Both have the exact log-ratio
Δ(2(x − c) + Δ)/2σ² over a shift Δ, so ``null_true`` is known exactly. A published release's
floor is taken at its *declared* noise instead (:func:`declared_floor`): the matched floor follows
the residuals' own spread, so it cannot tell noise smaller than declared from the declared noise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.epl.bootstrap import KernelMatrix, max_abs, multinomial_counts
from auditlib.epl.lattice import Lattice, lattice_log_densities
from auditlib.mechanisms import DiscreteGaussian


def reference_floor(
    sd: float,
    mean: float,
    n: int,
    h: float,
    x: npt.NDArray[np.float64],
    delta: float,
    draws: int,
    quantile: float,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """EPL of ``draws`` samples of n from N_Z(c, sd²) (c = ``mean``, an integer) on the same x, h, Δ."""
    s2 = max(sd * sd, 1e-6)
    dg = DiscreteGaussian(s2)
    c = float(mean)
    k = np.arange(-dg.support_radius, dg.support_radius + 1, dtype=np.float64)
    pmf = dg.pmf(k)
    rows = _reference_rows(k + c, pmf, n, h, x, delta, draws, rng)
    return _floor_summary(rows, x, c, delta, s2, draws, quantile)


def _reference_rows(
    pts: npt.NDArray[np.float64],
    pmf: npt.NDArray[np.float64],
    n: int,
    h: float,
    x: npt.NDArray[np.float64],
    delta: float,
    draws: int,
    rng: np.random.Generator,
) -> npt.NDArray[np.float64]:
    """log p̂ at x and x + Δ of ``draws`` multinomial samples of n from the law (pts, pmf)."""
    xq = np.concatenate([x, x + delta])
    km = KernelMatrix(pts, h, xq, float(n))
    return km.log_density(multinomial_counts(pmf, n, draws, rng))


def declared_floor(
    points: npt.NDArray[np.float64],
    pmf: npt.NDArray[np.float64],
    n: int,
    h: float,
    x: npt.NDArray[np.float64],
    delta: float,
    draws: int,
    quantile: float,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """The floor of a *declared* noise law on the integers (``points``, ``pmf``: e.g. a published
    release's declared geometric or discrete Gaussian noise): n draws of it through the same
    estimator on the same x, h, Δ, ``draws`` times. ``null_true`` is that law's exact loss
    max |log p(x)/p(x + Δ)| over the window; ``null_sigma2`` its variance."""
    pts = np.asarray(points, dtype=np.float64)
    p = np.asarray(pmf, dtype=np.float64)
    rows = _reference_rows(pts, p, n, h, x, delta, draws, rng)
    with np.errstate(divide="ignore"):
        logp = np.log(np.interp(np.concatenate([x, x + delta]), pts, p, left=0.0, right=0.0))
    loss = np.abs(logp[: x.size] - logp[x.size :])
    true = float(np.max(loss[np.isfinite(loss)])) if np.isfinite(loss).any() else math.nan
    s2 = float(np.sum(p * pts * pts) - np.sum(p * pts) ** 2)
    return _summary(rows, x, s2, true, draws, quantile)


def lattice_reference_floor(
    lat: Lattice,
    sd: float,
    centre: float,
    n: int,
    h: float,
    x: npt.NDArray[np.float64],
    delta: float,
    draws: int,
    quantile: float,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """The floor on the lattice c + ℤ/q: P(c + k/q) ∝ exp(−(k/q)²/2σ²), whose exact log-ratio
    over a shift Δ is Δ(2(x − c) + Δ)/2σ², as for N_Z; the estimator run on ``draws`` samples of n."""
    s2 = max(sd * sd, 1e-6)
    g = lat.spacing
    k = np.arange(-math.ceil(12.0 * math.sqrt(s2) / g), math.ceil(12.0 * math.sqrt(s2) / g) + 1)
    pmf = np.exp(-0.5 * (k * g) ** 2 / s2)
    pmf /= pmf.sum()
    c_idx = int(lat.index(centre))
    xq = np.concatenate([x, x + delta])
    rows = lattice_log_densities(
        k + c_idx, multinomial_counts(pmf, n, draws, rng), g, [h], lat.index(xq)
    )[0]
    return _floor_summary(rows, x, centre, delta, s2, draws, quantile)


def _floor_summary(
    rows: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
    centre: float,
    delta: float,
    s2: float,
    draws: int,
    quantile: float,
) -> dict[str, Any]:
    """The floor's numbers from the reference draws' log densities at x and x + Δ (``rows``): their
    EPLs' mean and quantile, and the reference's exact loss Δ(2(x − c) + Δ)/2σ² over the window."""
    true = float(np.max(np.abs(delta * (2.0 * (x - centre) + delta)) / (2.0 * s2)))
    return _summary(rows, x, s2, true, draws, quantile)


def _summary(
    rows: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
    s2: float,
    true: float,
    draws: int,
    quantile: float,
) -> dict[str, Any]:
    """The reference draws' EPLs (from log p̂ at x and x + Δ) as the floor's numbers."""
    null = max_abs(rows[:, : x.size] - rows[:, x.size :])
    ok = null[np.isfinite(null)]
    return {
        "n_null": draws,
        "null_sigma2": s2,
        "null_true": true,
        "null_mean": float(ok.mean()) if ok.size else math.nan,
        "null_upper": float(np.quantile(ok, quantile)) if ok.size else math.nan,
    }
