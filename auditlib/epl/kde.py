"""Gaussian kernel density estimates of residuals, fast on integer (lattice) data.

``p̂(x) = (1/(n h)) Σ_i φ((x − r_i)/h)``, φ the standard normal density, h the absolute bandwidth:
the same estimate as ``scipy.stats.gaussian_kde(r, bw_method=h / sd(r, ddof=1))``.

Integer residuals (all TopDown and geometric-mechanism residuals) take at most a few thousand
distinct values even when there are 10⁷ of them, so the mixture is a *discrete convolution* of the
lattice histogram (``np.bincount``) with the sampled Gaussian kernel, evaluated only at the query
points. It is computed in log space (``logsumexp``) and is **exact** up to float rounding: for each
query point x only lattice points with ``|x − k| ≤ R(x) = √(d₀² + 2h²(ln n + 40))`` are summed (d₀:
distance to the nearest data point); everything beyond is < e⁻⁴⁰ ≈ 4e-18 of the kept sum, so the
truncation errs *low* by a relative amount < 4e-18. Tails far outside the data stay finite in log
space where scipy's density underflows to 0.

Non-integer residuals are evaluated the same way over their distinct values when that is cheap
(``n_distinct × n_query ≤ max_exact_work``). Otherwise they are *linearly binned* onto a lattice of
spacing ``Δ = h / binning_resolution``; each kernel term is then replaced by its linear
interpolation, and :func:`binning_error_bound` bounds the relative error (either sign) — about 4e-4
in the bulk of 10⁷ points at the default resolution 200.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from auditlib.epl.bandwidth import check_positive
from auditlib.exceptions import InvalidParameterError

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_NEGLIGIBLE = 40.0  # dropped kernel mass < e^-40 of the kept mass
_BLOCK_ELEMENTS = 2_000_000  # work array size per block (memory ~ 16 MB)


def as_residuals(residuals: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Validate residuals: a non-empty 1-D array of finite numbers (returned as float64)."""
    try:
        r = np.asarray(residuals, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            "Invalid residuals: not convertible to a numeric array; pass DP − true counts as a "
            "1-D array of numbers."
        ) from None
    if r.ndim != 1:
        raise InvalidParameterError(
            f"Invalid residuals: shape {r.shape}; pass a 1-D array (flatten or select one query)."
        )
    if r.size == 0:
        raise InvalidParameterError("Invalid residuals: the array is empty; pass at least one.")
    bad = ~np.isfinite(r)
    if np.any(bad):
        raise InvalidParameterError(
            f"Invalid residuals: {int(bad.sum())} non-finite value(s) (first at index "
            f"{int(np.argmax(bad))}: {r[bad][0]!r}); drop or impute them first."
        )
    return r


def _check_bandwidth(bandwidth: object) -> float:
    return check_positive("bandwidth", bandwidth, "pass a finite absolute bandwidth h > 0.")


def is_integer_valued(r: npt.NDArray[np.float64]) -> bool:
    """True if every residual is an integer (the lattice fast path applies)."""
    return bool(np.all(r == np.round(r)))


def integer_view(
    residuals: npt.ArrayLike, r: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64] | None:
    """``residuals`` as int64 if they are integers (no check needed for integer dtypes), else None."""
    raw = np.asarray(residuals)
    if np.issubdtype(raw.dtype, np.integer) or raw.dtype == np.bool_:
        return raw.astype(np.int64, copy=False).ravel()
    if is_integer_valued(r) and float(np.max(np.abs(r))) < 2.0**53:
        return r.astype(np.int64)
    return None


def support(
    r: npt.NDArray[np.float64], ints: npt.NDArray[np.int64] | None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Distinct values (sorted) and their counts; bincount on integer data, sort otherwise."""
    if ints is not None:
        lo = int(ints.min())
        if int(ints.max()) - lo < 50_000_000:
            counts = np.bincount(ints - lo)
            nz = np.flatnonzero(counts)
            return nz.astype(np.float64) + lo, counts[nz].astype(np.float64)
    values, counts = np.unique(r, return_counts=True)
    return values, counts.astype(np.float64)


def _mixture_logpdf(
    points: npt.NDArray[np.float64],
    log_w: npt.NDArray[np.float64],
    n: float,
    h: float,
    x: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """log of (1/(n h)) Σ_j w_j φ((x − points_j)/h), windowed per query (see module docstring)."""
    out = np.empty(x.shape, dtype=np.float64)
    if x.size == 0:
        return out
    order = np.argsort(x, kind="stable")
    xs = x[order]
    # distance to the nearest support point, then the radius that keeps all non-negligible terms
    pos = np.searchsorted(points, xs)
    left = points[np.clip(pos - 1, 0, points.size - 1)]
    right = points[np.clip(pos, 0, points.size - 1)]
    d0 = np.minimum(np.abs(xs - left), np.abs(xs - right))
    radius = np.sqrt(d0 * d0 + 2.0 * h * h * (math.log(n) + _NEGLIGIBLE))
    lo_idx = np.searchsorted(points, xs - radius, side="left")
    hi_idx = np.searchsorted(points, xs + radius, side="right")
    res = np.empty(xs.shape, dtype=np.float64)
    inv_2h2 = 1.0 / (2.0 * h * h)
    i = 0
    m = xs.size
    while i < m:
        # grow the block while the (queries × window) work array stays small
        j = i + 1
        while j < m and (j + 1 - i) * (hi_idx[j] - lo_idx[i]) <= _BLOCK_ELEMENTS:
            j += 1
        a, b = int(lo_idx[i]), int(hi_idx[j - 1])
        diff = xs[i:j, None] - points[None, a:b]
        res[i:j] = logsumexp(log_w[None, a:b] - diff * diff * inv_2h2, axis=1)
        i = j
    out[order] = res - math.log(n * h) - _LOG_SQRT_2PI
    return out


def mixture_logpdf(
    points: npt.NDArray[np.float64],
    counts: npt.NDArray[np.float64],
    bandwidth: float,
    x: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """log p̂(x) from distinct sorted ``points`` with ``counts`` (as returned by :func:`support`)."""
    h = _check_bandwidth(bandwidth)
    xq = np.asarray(x, dtype=np.float64)
    res = _mixture_logpdf(points, np.log(counts), float(np.sum(counts)), h, xq.ravel())
    return res.reshape(xq.shape)


def weighted_std(points: npt.NDArray[np.float64], counts: npt.NDArray[np.float64]) -> float:
    """Sample standard deviation (ddof=1) of data given as distinct values and counts."""
    n = float(np.sum(counts))
    mean = float(np.dot(counts, points)) / n
    d = points - mean
    return math.sqrt(float(np.dot(counts, d * d)) / (n - 1.0))


def weighted_percentiles(
    points: npt.NDArray[np.float64], counts: npt.NDArray[np.float64], q: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """``np.percentile(data, q)`` (method "linear") from distinct sorted values and counts.

    Reproduces numpy's float operations (virtual index (n−1)·q/100, then its two-sided lerp), so
    the result is bit-identical to numpy on the expanded data; the tests check this. Fractional
    counts (a linearly binned histogram) are read the same way on their cumulative sums.
    """
    cum = np.cumsum(np.asarray(counts, dtype=np.float64))  # exact for integer counts < 2⁵³
    n = round(float(cum[-1]))
    qq = np.true_divide(np.asarray(q, dtype=np.float64), 100)
    vi = (n - 1) * qq
    prev = np.floor(vi)
    nxt = prev + 1.0
    above = vi >= n - 1
    prev[above] = n - 1
    nxt[above] = n - 1
    below = vi < 0
    prev[below] = 0
    nxt[below] = 0
    gamma = vi - np.floor(vi)
    last = points.size - 1  # fractional (binned) counts may round past the last cumulative sum
    a = points[np.minimum(np.searchsorted(cum, prev, side="right"), last)]
    b = points[np.minimum(np.searchsorted(cum, nxt, side="right"), last)]
    diff = b - a
    out = a + diff * gamma
    hi = gamma >= 0.5
    out[hi] = (b - diff * (1 - gamma))[hi]
    return np.asarray(out, dtype=np.float64)


def binning_error_bound(n: int, binning_resolution: float, nearest_distance: float = 0.0) -> float:
    """Bound on the relative error of the linearly binned estimate at one query point.

    With δ = 1/``binning_resolution`` (the lattice spacing in bandwidths), each kernel term is
    replaced by its linear interpolation between lattice points; for a term at standardized
    distance u the relative error is ≤ (δ²/8)((u + δ)² + 1)·e^{δ(u + δ)}. Only terms with
    u ≤ u_max = √(u₀² + 2(ln n + 40)) matter (u₀ = ``nearest_distance``/h); the rest is < e^{-40}.
    The bound holds for either sign of the error.
    """
    d = 1.0 / float(binning_resolution)
    u = math.sqrt(nearest_distance**2 + 2.0 * (math.log(max(n, 1)) + _NEGLIGIBLE))
    return (d * d / 8.0) * ((u + d) ** 2 + 1.0) * math.exp(d * (u + d)) + math.exp(-_NEGLIGIBLE)


def _linear_binning(
    r: npt.NDArray[np.float64], spacing: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Split each point's unit mass between its two neighbouring lattice points."""
    origin = float(r.min())
    t = (r - origin) / spacing
    k = np.floor(t).astype(np.int64)
    frac = t - k
    size = int(k.max()) + 2
    w = np.bincount(k, weights=1.0 - frac, minlength=size) + np.bincount(
        k + 1, weights=frac, minlength=size
    )
    nz = np.flatnonzero(w > 0)
    return (origin + nz * spacing).astype(np.float64), w[nz].astype(np.float64)


def lattice_kde_logpdf(
    residuals: npt.ArrayLike,
    bandwidth: float,
    x: npt.ArrayLike,
    *,
    max_exact_work: float = 5e7,
    binning_resolution: float = 200.0,
) -> npt.NDArray[np.float64]:
    """log p̂(x) for the Gaussian KDE of ``residuals`` with absolute bandwidth ``bandwidth``.

    Exact (to float rounding; the window truncation errs low by < 4e-18 relative) for integer
    residuals and for non-integer ones with ``n_distinct × len(x) ≤ max_exact_work``; otherwise
    linearly binned with the error bound of :func:`binning_error_bound`.
    """
    r = as_residuals(residuals)
    h = _check_bandwidth(bandwidth)
    xq = np.asarray(x, dtype=np.float64)
    if np.any(np.isnan(xq)):
        raise InvalidParameterError("Invalid x: contains NaN; pass finite query points.")
    flat = xq.ravel()
    ints = integer_view(residuals, r)
    points, weights = support(r, ints)
    if ints is None and points.size * max(flat.size, 1) > max_exact_work:
        if not math.isfinite(binning_resolution) or binning_resolution <= 0:
            raise InvalidParameterError(
                f"Invalid binning_resolution: {binning_resolution!r}; pass a number > 0 "
                "(lattice points per bandwidth)."
            )
        points, weights = _linear_binning(r, h / binning_resolution)
    res = _mixture_logpdf(points, np.log(weights), float(r.size), h, flat)
    return res.reshape(xq.shape)


def lattice_kde(
    residuals: npt.ArrayLike,
    bandwidth: float,
    x: npt.ArrayLike,
    *,
    max_exact_work: float = 5e7,
    binning_resolution: float = 200.0,
) -> npt.NDArray[np.float64]:
    """p̂(x), the Gaussian KDE density (``exp`` of :func:`lattice_kde_logpdf`; may underflow)."""
    return np.exp(
        lattice_kde_logpdf(
            residuals,
            bandwidth,
            x,
            max_exact_work=max_exact_work,
            binning_resolution=binning_resolution,
        )
    )


def scipy_bandwidth(residuals: npt.ArrayLike, factor: float) -> float:
    """Absolute h of ``scipy.stats.gaussian_kde(r, bw_method=factor)``: factor × sd(r, ddof=1)."""
    r = as_residuals(residuals)
    if r.size < 2:
        raise InvalidParameterError(
            f"Invalid residuals: {r.size} value; a bandwidth from the spread needs at least 2."
        )
    return float(factor) * float(np.std(r, ddof=1))
