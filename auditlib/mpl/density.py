"""Truncated density estimators of Askin, Kutta & Dette: TDDE (Algorithm 2) and TKDE (Algorithm 1).

* :func:`tdde` — relative frequency ``|{i : X_i = t}| / n ∨ τ`` at integer points t.
* :func:`tkde` — Gaussian kernel density ``(1/(n h^d)) Σ_i K((t − X_i)/h) ∨ τ`` in ℝ^d (scalar
  bandwidth, spherical kernel as in (K1)), evaluated exactly (chunked), or for d = 1 on a fine
  lattice (:func:`tkde_binned`) at a relative cost of ≲ 2e-4 (see there).

Bandwidths (Askin, Kutta & Dette §IV):

* :func:`silverman_bandwidth` — the estimation step (DPL). For d = 1 it is R's ``bw.nrd0``,
  ``0.9 · min(sd, IQR/1.34) · n^{−1/5}`` (the default of the ``kdensity`` package the authors
  used); for d > 1 the geometric mean of Silverman's per-coordinate rule
  ``sd_j · (4/((d+2) n))^{1/(d+4)}``.
* :func:`undersmoothed_bandwidth` — the confidence step (condition (C4)):
  ``h = scale · N^{−1/(2β+d) − γ}`` with the same scale constant, smaller than the estimation
  bandwidth, so that the bias of the density estimate is negligible against its standard deviation.
  β is the smoothness the rule assumes: β ≤ 1 a β-Hölder density (the paper's (C1)), β ∈ (1, 2] a
  differentiable one whose derivative is (β − 1)-Hölder, where the Gaussian kernel's bias is
  O(h^β). Defaults :data:`CONFIDENCE_BETA`, :data:`CONFIDENCE_GAMMA`: β = 2, γ = 0.05, i.e. R's
  ``bw.nrd0`` of the N draws times N^{−γ} — the widest h the rule family allows at γ = 0.05,
  chosen as the tightest LB that keeps coverage ≥ 0.94 on the catalogue's continuous mechanisms
  (``benchmarks/mpl_bandwidth_study.py``, ``benchmarks/FIDELITY.md``). β = 1 (the previous
  default) undersmooths far more: h 4× smaller at N = 5·10⁴, mean LB 6–29 % lower, coverage no
  higher (pooled 0.956 against 0.959).

The floor τ keeps ``ln f̂`` finite; a value equal to τ means "no evidence here" (see the
``floor_driven`` flag of :class:`auditlib.mpl.MPLResult`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_CUTOFF = 8.0  # kernel support kept in the binned estimate: |u| ≤ 8 (φ(8)/φ(0) ≈ 1.3e-14)
_BLOCK = 2_000_000  # kernel evaluations per block in the exact estimate
_MAX_LATTICE = 1 << 23  # the binned estimate's largest lattice (64 MiB); beyond it: exact sums
#: smoothness β and undersmoothing γ of the confidence step's default bandwidth (see module doc)
CONFIDENCE_BETA = 2.0
CONFIDENCE_GAMMA = 0.05


def check_tau(tau: object) -> float:
    """Return the floor τ as a float in [0, 1), or raise naming it."""
    try:
        t = float(tau)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid tau: {tau!r} is not a number.") from None
    if not (0.0 <= t < 1.0):
        raise InvalidParameterError(f"Invalid tau: {tau!r}; the floor must lie in [0, 1).")
    return t


def check_bandwidth(h: object, name: str = "bandwidth") -> float:
    """Return ``h`` as a finite float > 0, or raise naming it."""
    try:
        x = float(h)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid {name}: {h!r} is not a number.") from None
    if not math.isfinite(x) or x <= 0.0:
        raise InvalidParameterError(f"Invalid {name}: {h!r}; it must be finite and > 0.")
    return x


def _as_2d(samples: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(samples, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise InvalidParameterError(
            f"Invalid {name}: shape {np.shape(samples)}; need a non-empty (n,) or (n, d) array."
        )
    return arr


# -- TDDE --------------------------------------------------------------------------------------


def tdde(
    samples: npt.ArrayLike, points: npt.ArrayLike, tau: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Truncated discrete density estimate at integer ``points`` (Algorithm 2, vectorized).

    Returns ``(f̂, counts)``: ``f̂(t) = max(count(t)/n, τ)`` and the raw counts ``|{i: X_i = t}|``.

    >>> f, c = tdde([0, 0, 1, 3], [0, 1, 2], tau=0.1)
    >>> f.tolist(), c.tolist()
    ([0.5, 0.25, 0.1], [2, 1, 0])
    """
    tau = check_tau(tau)
    x = np.asarray(samples)
    if x.ndim != 1 or x.size == 0:
        raise InvalidParameterError(
            f"Invalid samples: shape {x.shape}; TDDE needs a non-empty 1-D integer array."
        )
    t = np.asarray(points)
    if t.ndim != 1 or t.size == 0:
        raise InvalidParameterError(f"Invalid points: shape {t.shape}; need a non-empty 1-D array.")
    values, counts = np.unique(x, return_counts=True)
    idx = np.clip(np.searchsorted(values, t), 0, values.size - 1)
    hit = values[idx] == t
    c = np.where(hit, counts[idx], 0).astype(np.int64)
    return np.maximum(c / x.size, tau), c


# -- bandwidths ---------------------------------------------------------------------------------


def bandwidth_scale(samples: npt.ArrayLike) -> float:
    """The scale constant of the rules below: ``0.9·min(sd, IQR/1.34)`` (d = 1), else see module.

    Falls back to ``sd``, then to 1, when the robust spread is 0 (as ``bw.nrd0`` does).
    """
    x = _as_2d(samples, "samples")
    n, d = x.shape
    if n < 2:
        raise InvalidParameterError(f"Invalid samples: {n} draw; a bandwidth rule needs >= 2.")
    sd = np.std(x, axis=0, ddof=1)
    if d == 1:
        q75, q25 = np.percentile(x[:, 0], [75.0, 25.0])
        iqr = (q75 - q25) / 1.34
        lo = min(float(sd[0]), iqr)
        if lo <= 0.0:
            lo = float(sd[0]) or 1.0
        return 0.9 * lo
    sd = np.where(sd > 0.0, sd, 1.0)
    return float(np.exp(np.mean(np.log(sd)))) * (4.0 / (d + 2)) ** (1.0 / (d + 4))


def silverman_bandwidth(samples: npt.ArrayLike) -> float:
    """Rule-of-thumb bandwidth for estimation: ``scale · n^{−1/(d+4)}`` (d = 1: ``bw.nrd0``).

    >>> round(silverman_bandwidth(np.random.default_rng(0).normal(size=10_000)), 3)
    0.142
    """
    x = _as_2d(samples, "samples")
    n, d = x.shape
    return bandwidth_scale(x) * n ** (-1.0 / (d + 4))


def check_smoothing(beta: object, gamma: object) -> tuple[float, float]:
    """Return (β, γ) if β ∈ (0, 2] and γ ∈ (0, 1), else raise naming the bad one."""
    try:
        b, g = float(beta), float(gamma)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid beta/gamma: {beta!r}, {gamma!r}.") from None
    if not (0.0 < b <= 2.0):
        raise InvalidParameterError(
            f"Invalid beta: {beta!r}; a smoothness order in (0, 2] (1: Lipschitz; 2: the most a "
            "Gaussian kernel's bias can use)."
        )
    if not (0.0 < g < 1.0):
        raise InvalidParameterError(f"Invalid gamma: {gamma!r}; undersmoothing needs 0 < γ < 1.")
    return b, g


def undersmoothed_bandwidth(
    samples: npt.ArrayLike, *, beta: float = CONFIDENCE_BETA, gamma: float = CONFIDENCE_GAMMA
) -> float:
    """Bandwidth for the confidence step, condition (C4): ``scale · N^{−1/(2β+d) − γ}``.

    β ∈ (0, 2] is the smoothness the rule assumes (1: Lipschitz, e.g. Laplace, exponential
    mechanism at their kinks; 2: twice differentiable, as they are away from them), γ > 0 the
    amount of undersmoothing. β = 2 gives R's ``bw.nrd0`` · N^{−γ} (d = 1).
    """
    beta, gamma = check_smoothing(beta, gamma)
    x = _as_2d(samples, "samples")
    n, d = x.shape
    return bandwidth_scale(x) * n ** (-1.0 / (2.0 * beta + d) - gamma)


def kernel_square_integral(dim: int) -> float:
    """∫K² of the standard Gaussian kernel on ℝ^d: ``(4π)^{−d/2}`` (enters σ̂² of Askin, Kutta & Dette)."""
    return float((4.0 * math.pi) ** (-dim / 2.0))


# -- TKDE ---------------------------------------------------------------------------------------


def gaussian_kde_exact(
    samples: npt.ArrayLike, points: npt.ArrayLike, h: float
) -> npt.NDArray[np.float64]:
    """``(1/(n h^d)) Σ_i φ_d((t − X_i)/h)`` at every point, summed exactly in blocks (no floor).

    ``samples``: (n,) or (n, d); ``points``: (m,) or (m, d). Equals
    ``scipy.stats.gaussian_kde(samples.T, bw_method=h / sd)`` for d = 1 (to rounding).
    """
    h = check_bandwidth(h)
    x = _as_2d(samples, "samples")
    t = _as_2d(points, "points")
    n, d = x.shape
    if t.shape[1] != d:
        raise InvalidParameterError(
            f"Invalid points: dimension {t.shape[1]} where the samples have dimension {d}."
        )
    out = np.empty(t.shape[0], dtype=np.float64)
    step = max(1, _BLOCK // max(1, n * d))
    log_norm = -d * (_LOG_SQRT_2PI + math.log(h))
    for a in range(0, t.shape[0], step):
        diff = (t[a : a + step, None, :] - x[None, :, :]) / h
        sq = np.einsum("mnd,mnd->mn", diff, diff)
        out[a : a + step] = np.exp(-0.5 * sq).sum(axis=1) / n
    return out * math.exp(log_norm)


def tkde_binned(
    samples: npt.ArrayLike,
    points: npt.ArrayLike,
    h: float,
    *,
    resolution: int = 32,
) -> npt.NDArray[np.float64]:
    """1-D Gaussian KDE at ``points`` through a lattice of spacing ``Δ = h/resolution`` (no floor).

    The samples are linearly binned onto the lattice spanning ``[min(points) − 8h, max(points) +
    8h]`` (draws beyond contribute < φ(8)/(n h) ≈ 5e-15/(n h) each and are dropped: errs *low* by
    at most that), the counts are convolved with the sampled kernel on ``|u| ≤ 8``, and the result
    is interpolated linearly at ``points``. Binning and interpolation each err by about
    ``Δ²/(8h²)`` relative to the kernel scale, ≈ 1.2e-4 at the default resolution (either sign).
    When the points span more than 2²³ lattice steps (a tiny ``h`` against a wide region) the
    lattice would not fit in memory: the exact sums are returned instead.
    """
    h = check_bandwidth(h)
    x = np.asarray(samples, dtype=np.float64)
    t = np.asarray(points, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or t.ndim != 1 or t.size == 0:
        raise InvalidParameterError(
            f"Invalid samples/points: shapes {x.shape}, {t.shape}; the binned KDE is 1-D, non-empty."
        )
    delta = h / resolution
    a = float(t.min()) - _CUTOFF * h
    span = (float(t.max()) + _CUTOFF * h - a) / delta
    if not span < _MAX_LATTICE:  # points spread over far more than h: the lattice would not fit
        return gaussian_kde_exact(x, t, h)
    m = math.ceil(span) + 2
    pos = (x - a) / delta
    keep = (pos >= 0.0) & (pos < m - 1)
    pos = pos[keep]
    i = np.floor(pos).astype(np.int64)
    w = pos - i
    counts = np.bincount(i, weights=1.0 - w, minlength=m) + np.bincount(
        i + 1, weights=w, minlength=m
    )
    j = np.arange(-_CUTOFF * resolution, _CUTOFF * resolution + 1)
    kern = np.exp(-0.5 * (j / resolution) ** 2 - _LOG_SQRT_2PI)
    dens = np.convolve(counts[:m], kern, mode="same") / (x.size * h)
    lattice = a + delta * np.arange(m)
    return np.asarray(np.interp(t, lattice, dens), dtype=np.float64)


def tkde(
    samples: npt.ArrayLike,
    points: npt.ArrayLike,
    h: float,
    tau: float,
    *,
    method: str = "exact",
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Truncated Gaussian KDE (Algorithm 1): returns ``(max(f̃, τ), f̃)`` at ``points``.

    ``method``: ``"exact"`` (any d) or ``"binned"`` (d = 1, :func:`tkde_binned`).
    """
    tau = check_tau(tau)
    if method == "exact":
        raw = gaussian_kde_exact(samples, points, h)
    elif method == "binned":
        raw = tkde_binned(samples, points, h)
    else:
        raise InvalidParameterError(f"Invalid method: {method!r}; 'exact' or 'binned'.")
    return np.maximum(raw, tau), raw
