"""The bias-aware EPL estimate with a bootstrap interval, a matched-reference floor and a slope.

:func:`estimate_epl` computes ``EPL(x) = log p̂(x)/p̂(x+Δ)`` on the points x of the residuals'
lattice in the window ``[m·p_lo, m·p_hi]`` (x and x+Δ inside; p_lo, p_hi percentiles of the
residuals, m the multiplier, Δ the neighbour shift) and ``EPL = max |EPL(x)|``, like
``method="percentile_window"`` but with a wider kernel: h = :data:`BIAS_AWARE_FACTOR` × sd by
default instead of 0.1 × sd. The lattice is ℤ for integer residuals (and the integers are used for
residuals on no lattice), ℤ/P for ADPC's means of P runs (:mod:`auditlib.epl.curves`).

Why the wider kernel (``benchmarks/epl_bandwidth_study.py``, ``docs/epl.md``): the maximum over the
window of a noisy curve errs upward at small n; the narrow kernel of Flaxman & Petti leaves so much
noise in p̂ that at 2,663 residuals EPL is ≈1.9× the true loss. A wider kernel removes most of that
noise; its own bias (smoothing flattens the log-ratio) is small for geometric noise, whose log-ratio
stays ε away from 0 under smoothing, and is a factor ≈ 1/(1 + f²) for Gaussian noise.

Uncertainty, *conditional on the bandwidth* of the data (held fixed):

* **bootstrap** — B multinomial resamples of the residual histogram, the EPL of each on the data's
  window; the ``confidence`` interval is the basic (reflected) interval
  ``[2·EPL − q_hi, 2·EPL − q_lo]`` (default ``ci_kind="basic"``; q the bootstrap quantiles), which
  subtracts the bootstrap's estimate of the max's upward bias, or the plain percentile interval
  ``[q_lo, q_hi]`` (``"percentile"``), which inherits that bias and covers the true loss far less
  often than its nominal level. For geometric noise (GDPC) the basic interval covers ε in
  0.73–0.93 of data sets at 90 % (mean 0.84; ``benchmarks/FIDELITY.md``, per n there): the
  bootstrap corrects only part of the max's upward bias over a flat log-ratio. It covers the *smoothed* loss
  (``ci_target="smoothed"``, the default on ℤ); on a lattice finer than ℤ the default
  ``ci_target="exact"`` brackets the unsmoothed loss over the population's window instead
  (:mod:`auditlib.epl.extrapolate`): coverage 0.91–1.00 for ADPC, ε = 0.01–2, n = 2,663–185,220.
  ``epl_debiased = 2·EPL − mean(bootstrap EPLs)`` is the bias-corrected point estimate.
* **matched reference floor** — n draws from a discrete Gaussian with σ² = the residuals' sample
  variance (the smooth, known-loss stand-in of the data), EPL computed the same way, repeated
  ``n_null`` times. ``null_true`` is that reference's *exact* loss over the same window
  (max |Δ(2x+Δ)|/2σ²); ``null_mean`` and ``null_upper`` (the ``null_quantile``) are what the
  estimator returns on it. ``null_mean − null_true`` is how much a smooth noise of this size and
  spread adds by small-sample noise alone; an estimate within ``null_upper`` of data with the same
  spread is not distinguishable from that Gaussian reference.

The slope of EPL(x) (least squares over the window) estimates 1/σ² for Gaussian noise, see
:mod:`auditlib.epl.slope`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.epl.bandwidth import (
    BANDWIDTH_KINDS,
    check_percentiles,
    check_positive,
    resolve_bandwidth,
)
from auditlib.epl.bootstrap import max_abs
from auditlib.epl.curves import Curves
from auditlib.epl.extrapolate import (
    CI_TARGETS,
    MULTIPLIERS,
    bracket,
    extrapolate,
    outer_percentiles,
)
from auditlib.epl.floor import declared_floor
from auditlib.epl.kde import as_residuals, weighted_percentiles, weighted_std
from auditlib.epl.settings import (
    BIAS_AWARE_FACTOR,
    CI_KINDS,
    DEFAULTS,
    check_draws,
    check_fraction,
)
from auditlib.epl.slope import inverse_sigma2, least_squares_slope
from auditlib.epl.stream import LatticeHistogram
from auditlib.exceptions import InvalidParameterError, UnknownNameError

#: where EPL(x) is evaluated: the residuals' lattice (ℤ/P for means of P runs), or the integers
GRIDS = ("lattice", "integers")

_EMPTY: npt.NDArray[np.float64] = np.empty(0, dtype=np.float64)

Seed = int | np.random.SeedSequence | np.random.Generator | None


@dataclass(frozen=True)
class EPLEstimate:
    """EPL with its interval, its matched-reference floor and the slope of EPL(x).

    ``status``: ``"ok"``; ``"invariant"`` (all residuals equal: no noise, ``epl = inf``);
    ``"too_few"`` (n < min_residuals; ``epl`` NaN); ``"empty_window"`` (no x with x and x+Δ in the
    window; ``epl`` NaN). Everything but ``epl``/``status``/``n`` is NaN unless ``status == "ok"``
    (and the interval/floor are NaN when their draws were switched off with ``None``).

    ``slope`` is the least-squares slope of EPL(x); ``inv_sigma2_hat`` = 1/σ̂² (the kernel's
    variance removed), ``rho_hat`` = Δ²/(2σ̂²) and ``epl_gaussian`` = max over the window of
    |Δ(2(x−c)+Δ)|/(2σ̂²) (c the rounded mean: the loss a discrete Gaussian of that σ̂² has there) are
    **estimates that assume Gaussian noise** (see :mod:`auditlib.epl.slope`); for other noise they
    mean nothing.

    ``lattice`` is the spacing of the residuals' lattice (1 for integers, 1/P for ADPC; NaN on
    none), ``grid`` where x was taken (``"lattice"`` or ``"integers"``), ``ci_target`` what the
    interval covers (``"smoothed"`` or ``"exact"``, resolved from ``"auto"``); with ``"exact"``,
    ``epl_extrapolated`` is the maximum of the curve extrapolated to h → 0 over the window and
    ``outer_window`` the window of the interval's upper end (:mod:`auditlib.epl.extrapolate`).
    """

    epl: float
    status: str
    n: int
    bandwidth: float
    x: npt.NDArray[np.float64] = field(compare=False, repr=False)
    epl_x: npt.NDArray[np.float64] = field(compare=False, repr=False)
    window: tuple[float, float]
    method: str = "bias_aware"
    bandwidth_kind: str = "factor"
    bandwidth_value: float = BIAS_AWARE_FACTOR
    percentiles: tuple[float, float] = (5.0, 95.0)
    range_multiplier: float = 1.0
    shift: float = 1.0
    # bootstrap
    n_boot: int = 0
    confidence: float = math.nan
    ci_kind: str = "basic"
    ci_low: float = math.nan
    ci_high: float = math.nan
    boot_mean: float = math.nan
    boot_se: float = math.nan
    epl_debiased: float = math.nan
    # matched discrete-Gaussian reference
    n_null: int = 0
    null_sigma2: float = math.nan
    null_true: float = math.nan
    null_mean: float = math.nan
    null_upper: float = math.nan
    null_quantile: float = math.nan
    # slope of EPL(x) (estimates that assume Gaussian noise)
    slope: float = math.nan
    slope_se: float = math.nan
    inv_sigma2_hat: float = math.nan
    rho_hat: float = math.nan
    epl_gaussian: float = math.nan
    seed: int | None = None
    # the residuals' lattice and what the interval covers
    lattice: float = math.nan
    grid: str = "integers"
    ci_target: str = "smoothed"
    epl_extrapolated: float = math.nan
    outer_window: tuple[float, float] = (math.nan, math.nan)
    # pointwise bootstrap band of EPL(x) (same ``confidence`` and ``ci_kind``; empty without draws)
    band_low: npt.NDArray[np.float64] = field(
        default_factory=lambda: _EMPTY, compare=False, repr=False
    )
    band_high: npt.NDArray[np.float64] = field(
        default_factory=lambda: _EMPTY, compare=False, repr=False
    )

    @property
    def argmax(self) -> float:
        """The x where |EPL(x)| is largest (NaN if there is no grid)."""
        if self.epl_x.size == 0:
            return math.nan
        return float(self.x[int(np.argmax(np.abs(self.epl_x)))])

    @property
    def null_excess(self) -> float:
        """``null_mean − null_true``: what small-sample noise adds on the smooth reference."""
        return self.null_mean - self.null_true

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (no arrays)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name in ("x", "epl_x", "band_low", "band_high"):
                continue
            v = getattr(self, name)
            out[name] = list(v) if isinstance(v, tuple) else v
        out["argmax"] = self.argmax
        out["null_excess"] = self.null_excess
        out["grid_size"] = int(self.x.size)
        return out


def _rngs(seed: Seed) -> tuple[np.random.Generator, np.random.Generator]:
    if isinstance(seed, np.random.Generator):
        a, b = seed.spawn(2)
        return a, b
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    a_ss, b_ss = ss.spawn(2)
    return np.random.default_rng(a_ss), np.random.default_rng(b_ss)


#: Most memory the bootstrap's curves (``n_boot`` × query points × bandwidths, float64, about four
#: copies for the band, the slopes and their quantiles) may take: 4 GiB. A larger ``n_boot`` for
#: the window at hand is refused before any draw, naming the memory it would need and the largest
#: allowed.
MAX_BOOTSTRAP_BYTES = 4 * 2**30


def _check_boot_memory(draws: int, queries: int) -> None:
    """Refuse ``n_boot`` whose curves (draws × queries float64, about four copies) pass
    :data:`MAX_BOOTSTRAP_BYTES`, naming the memory it needs and the largest allowed."""
    per_draw = 4 * 8 * queries
    if draws * per_draw > MAX_BOOTSTRAP_BYTES:
        raise InvalidParameterError(
            f"Invalid n_boot: {draws}; its curves over {queries} query points would need about "
            f"{draws * per_draw / 2**30:.1f} GiB, more than the {MAX_BOOTSTRAP_BYTES / 2**30:g} GiB "
            f"allowed (MAX_BOOTSTRAP_BYTES); the largest allowed here is "
            f"{MAX_BOOTSTRAP_BYTES // per_draw}"
        )


def estimate_epl(
    residuals: npt.ArrayLike | LatticeHistogram,
    *,
    bandwidth: float | None = None,
    bandwidth_kind: str = DEFAULTS.bandwidth_kind,
    percentiles: tuple[float, float] = (5.0, 95.0),
    range_multiplier: float = DEFAULTS.range_multiplier,
    shift: float = DEFAULTS.shift,
    n_boot: int | None = DEFAULTS.n_boot,
    confidence: float = DEFAULTS.confidence,
    ci_kind: str = DEFAULTS.ci_kind,
    ci_target: str = "auto",
    grid: str = "lattice",
    n_null: int | None = DEFAULTS.n_null,
    null_quantile: float = DEFAULTS.null_quantile,
    seed: Seed = None,
    min_residuals: int = 30,
    null_reference: tuple[npt.ArrayLike, npt.ArrayLike] | float | None = None,
) -> EPLEstimate:
    """Bias-aware EPL of ``residuals`` (DP − true counts of exchangeable queries), or of their
    :class:`~auditlib.epl.stream.LatticeHistogram` (residuals streamed chunk by chunk).

    ``bandwidth`` is the value of the ``bandwidth_kind`` rule (a multiple of the sd for
    ``"factor"``, default :data:`BIAS_AWARE_FACTOR`; residual units for ``"absolute"``; ignored by
    ``"scott"``/``"silverman"``). The window is ``[m·p_lo, m·p_hi]`` with (p_lo, p_hi) the
    ``percentiles`` and m = ``range_multiplier``; EPL(x) = log p̂(x)/p̂(x+Δ), Δ = ``shift``, over
    the points x of the residuals' lattice (ℤ for integers, ℤ/P for means of P runs; integers for
    residuals on no lattice) with both x and x+Δ in the window. ``n_boot`` bootstrap resamples
    give the ``confidence`` interval, for the smoothed loss (``ci_target="smoothed"``) or bracketing
    the unsmoothed one (``"exact"``; ``"auto"``: exact on a lattice finer than ℤ, see
    :mod:`auditlib.epl.extrapolate`); ``n_null`` draws of the matched discrete Gaussian give the
    floor (``None`` skips either). ``seed`` makes the draws reproducible. ``null_reference`` puts
    the floor at a *declared* noise instead of the matched discrete Gaussian: its support on the
    integers and pmf ``(points, pmf)`` (integer residuals), or a variance σ² (the discrete Gaussian
    of that σ² replaces the residuals' own variance). See the module docstring.
    """
    hist: LatticeHistogram | None = None
    raw: npt.ArrayLike = ()
    if isinstance(residuals, LatticeHistogram):  # streamed integer residuals: the histogram only
        hist = residuals
        if hist.n == 0:
            raise InvalidParameterError("Invalid residuals: an empty histogram; add chunks first.")
        r = np.array([hist.low, hist.high])  # the raw range: min/max and the first value below
    else:
        raw = residuals
        r = as_residuals(raw)
    if bandwidth_kind not in BANDWIDTH_KINDS:
        raise UnknownNameError(
            f"Unknown bandwidth kind {bandwidth_kind!r}; choose one of {BANDWIDTH_KINDS}."
        )
    if ci_kind not in CI_KINDS:
        raise UnknownNameError(f"Unknown ci_kind {ci_kind!r}; choose one of {CI_KINDS}.")
    if ci_target not in CI_TARGETS:
        raise UnknownNameError(f"Unknown ci_target {ci_target!r}; choose one of {CI_TARGETS}.")
    if grid not in GRIDS:
        raise UnknownNameError(f"Unknown grid {grid!r}; choose one of {GRIDS}.")
    value = BIAS_AWARE_FACTOR if bandwidth is None and bandwidth_kind == "factor" else bandwidth
    if bandwidth_kind in ("factor", "absolute"):
        value = check_positive(
            "bandwidth", value, "pass a finite number > 0 for kind 'factor' or 'absolute'."
        )
    elif bandwidth is not None:
        raise InvalidParameterError(
            f"Invalid bandwidth: {bandwidth!r} with bandwidth_kind {bandwidth_kind!r}, a rule that "
            "sets h itself; pass bandwidth=None, or kind 'factor'/'absolute' to set it."
        )
    else:
        value = math.nan
    lo, hi = check_percentiles(percentiles)
    mult = check_positive(
        "range_multiplier", range_multiplier, "pass a finite number > 0 (1 = the percentiles)."
    )
    delta = check_positive("shift", shift, "pass the neighbour shift Δ > 0 (1 for counts).")
    b = check_draws("n_boot", n_boot)
    nn = check_draws("n_null", n_null)
    conf = check_fraction("confidence", confidence)
    nq = check_fraction("null_quantile", null_quantile)
    n = hist.n if hist is not None else int(r.size)
    meta: dict[str, Any] = {
        "bandwidth_kind": bandwidth_kind,
        "bandwidth_value": value,
        "percentiles": (lo, hi),
        "range_multiplier": mult,
        "shift": delta,
        "confidence": conf,
        "ci_kind": ci_kind,
        "null_quantile": nq,
        "seed": seed if isinstance(seed, int) else None,
    }
    empty = np.empty(0, dtype=np.float64)
    if n >= 2 and float(r.min()) == float(r.max()):
        v = float(r[0])
        return EPLEstimate(math.inf, "invariant", n, 0.0, empty, empty, (v, v), **meta)
    if n < max(int(min_residuals), 2):
        nan2 = (math.nan, math.nan)
        return EPLEstimate(math.nan, "too_few", n, math.nan, empty, empty, nan2, **meta)

    ev = Curves(hist, raw, r, delta, grid == "lattice")
    meta["lattice"] = ev.spacing
    meta["grid"] = "lattice" if ev.lattice is not None else "integers"
    target = ci_target
    if target == "auto":
        target = "exact" if ev.lattice is not None and ev.lattice.denominator > 1 else "smoothed"
    meta["ci_target"] = target
    points, counts = ev.points, ev.counts
    sd = weighted_std(points, counts)
    p_lo, p_hi = (float(v) for v in weighted_percentiles(points, counts, [lo, hi]))
    h = resolve_bandwidth(bandwidth_kind, value, sd, n)
    window = (mult * p_lo, mult * p_hi)
    x = ev.grid(window, delta)
    if x.size == 0:
        return EPLEstimate(math.nan, "empty_window", n, h, empty, empty, window, **meta)
    x_all, inner = x, slice(0, x.size)
    hs = [h]
    if target == "exact":  # the curves on the outer window, at the extrapolation's bandwidths
        out_p = outer_percentiles((lo, hi), n, conf)
        o_lo, o_hi = (float(v) for v in weighted_percentiles(points, counts, list(out_p)))
        x_all = ev.grid((min(mult * o_lo, window[0]), max(mult * o_hi, window[1])), delta)
        first = int(np.searchsorted(x_all, x[0]))
        inner = slice(first, first + x.size)
        hs = [h * m for m in MULTIPLIERS]
        meta["outer_window"] = (float(x_all[0]), float(x_all[-1]) + delta)
    xq = np.concatenate([x_all, x_all + delta])
    if b is not None:  # before any curve: refused without allocating
        _check_boot_memory(b, int(xq.size) * len(hs))
    q = x_all.size
    curves = [lf[:q] - lf[q:] for lf in ev.main(hs, xq)]
    epl_x = curves[0][inner]
    estimate = float(np.max(np.abs(epl_x)))
    slope = float(least_squares_slope(x, epl_x)) if x.size >= 2 else math.nan
    inv_s2 = inverse_sigma2(slope, h, delta)
    centre = ev.centre(float(np.dot(points, counts)) / float(counts.sum()))
    out: dict[str, Any] = {
        "slope": slope,
        "inv_sigma2_hat": inv_s2,
        "rho_hat": 0.5 * delta * delta * inv_s2,
        "epl_gaussian": float(np.max(np.abs(delta * (2.0 * (x - centre) + delta)))) * 0.5 * inv_s2,
    }
    ext = extrapolate(curves) if target == "exact" else _EMPTY
    if target == "exact":
        out["epl_extrapolated"] = float(np.max(np.abs(ext[inner])))
    rng_boot, rng_null = _rngs(seed)
    if b is not None:
        draws = ev.resample(n, b, h, rng_boot)
        e_all = [lf[:, :q] - lf[:, q:] for lf in ev.boot(draws, hs, xq)]
        e = e_all[0][:, inner]
        boot = max_abs(e)
        ok = boot[np.isfinite(boot)]
        a = 0.5 * (1.0 - conf)
        if ok.size:
            q_lo, q_hi = (float(v) for v in np.quantile(ok, [a, 1.0 - a]))
            if ci_kind == "basic":
                q_lo, q_hi = max(0.0, 2.0 * estimate - q_hi), 2.0 * estimate - q_lo
            out.update(
                ci_low=q_lo,
                ci_high=q_hi,
                boot_mean=float(ok.mean()),
                epl_debiased=max(0.0, 2.0 * estimate - float(ok.mean())),
                boot_se=float(ok.std(ddof=1)) if ok.size > 1 else math.nan,
            )
        if target == "exact":
            lo_hi = bracket(
                (out.get("ci_low", math.nan), out.get("ci_high", math.nan)),
                float(np.max(np.abs(ext))),
                max_abs(extrapolate(e_all)),
                a,
                ci_kind,
            )
            out.update(ci_low=lo_hi[0], ci_high=lo_hi[1])
        out.update(_pointwise_band(epl_x, e, a, ci_kind))
        if x.size >= 2:
            s = least_squares_slope(x, e)
            s = s[np.isfinite(s)]
            if s.size > 1:
                out["slope_se"] = float(s.std(ddof=1))
        out["n_boot"] = b
    if nn is not None:
        if isinstance(null_reference, tuple) and ev.lattice is None:
            pts, pmf = (np.asarray(v, dtype=np.float64) for v in null_reference)
            out.update(declared_floor(pts, pmf, n, h, x, delta, nn, nq, rng_null))
        else:
            sd_null = sd if not isinstance(null_reference, float | int) else null_reference**0.5
            out.update(ev.reference_floor(sd_null, centre, n, h, x, delta, nn, nq, rng_null))
    return EPLEstimate(estimate, "ok", n, h, x, epl_x, window, **meta, **out)


def _pointwise_band(
    epl_x: npt.NDArray[np.float64], e: npt.NDArray[np.float64], a: float, ci_kind: str
) -> dict[str, npt.NDArray[np.float64]]:
    """Pointwise interval of EPL(x) from the bootstrap curves ``e`` (B × Q), tail mass ``a`` each.

    Non-finite bootstrap values (a resample with an empty region) are left out per point; a point
    with fewer than two finite values gets NaN.
    """
    finite = np.isfinite(e)
    ok = finite.sum(axis=0) >= 2
    safe = np.where(finite, e, np.nan)
    with np.errstate(invalid="ignore"):
        q = np.full((2, e.shape[1]), np.nan)
        if finite.all() and e.shape[0] >= 2:  # the same numbers as below, one sort per column
            q = np.quantile(e, [a, 1.0 - a], axis=0)
        elif ok.any():
            q[:, ok] = np.nanquantile(safe[:, ok], [a, 1.0 - a], axis=0)
    lo, hi = q[0], q[1]
    if ci_kind == "basic":
        lo, hi = 2.0 * epl_x - hi, 2.0 * epl_x - lo
    return {"band_low": lo, "band_high": hi}
