"""Per-level summaries the audit stores: accounting of a set of noise components, EPL per query.

Small, pure functions over the accountants and estimators, returning plain dicts of numpy arrays that
travel cheaply between processes and land in the store unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from auditlib.accounting import (
    bureau_delta,
    bureau_epsilon,
    calibrate_factor,
    cks_epsilon,
)
from auditlib.accounting.discrete_gaussian_pld import composition
from auditlib.accounting.tradeoff import tradeoff, zcdp_tradeoff
from auditlib.accuracy import CountAccuracy, count_accuracy
from auditlib.epl import SURFACE_POINTS, epl_surface, estimate_epl
from auditlib.epl import epl as epl_estimate
from auditlib.epl.rows import bias_aware_row, epl_row
from auditlib.simulate.noise import law_variance

#: why the zCDP conversions of a composition with pure ε-DP (geometric, Laplace) noise are n/a
BUREAU_NA = (
    "n/a: geometric and Laplace queries are pure eps-DP, not accounted in zCDP as the Bureau's "
    "discrete Gaussian noise is; their exact accounting is in the eps_exact columns"
)


def zcdp_and_variance(comp: Any) -> tuple[Fraction, float]:
    """(zCDP ρ, noise variance) of one component: a discrete Gaussian (σ², count) pair or a loss
    component (:mod:`auditlib.accounting.losses`; pure ε₀-DP releases give ε₀²/2 each)."""
    from auditlib.accounting import DiscreteGaussianLoss, GaussianLoss, GeometricLoss

    if isinstance(comp, tuple):
        s2, count = comp
        return Fraction(count) / (2 * Fraction(s2)), float(s2)
    if isinstance(comp, DiscreteGaussianLoss):
        return Fraction(comp.count) / (2 * Fraction(comp.sigma2)), float(comp.sigma2)
    if isinstance(comp, GaussianLoss):
        s = Fraction(comp.sigma) ** 2
        return Fraction(comp.count) / (2 * s), float(s)
    if isinstance(comp, GeometricLoss):
        e0 = Fraction(comp.epsilon)
        return comp.count * e0 * e0 / 2, law_variance("geometric", 1.0 / float(e0))
    b = Fraction(comp.scale)  # Laplace
    return Fraction(comp.count) / (2 * b * b), law_variance("laplace", float(b))


def account_components(
    components: Sequence[Any],
    deltas: Sequence[float],
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None = None,
    calibration_delta: float | None = None,
) -> dict[str, Any]:
    """Exact (certified) ε(δ) of a DG composition next to the Bureau's and CKS's zCDP conversions.

    With ``alpha_grid`` also the f-DP trade-off curves: the exact one's certified lower end (a valid
    guarantee) and the one implied by the Bureau's zCDP accounting. With ``calibration_delta`` also
    Su, Su & Wang's reduced noise (Table 1): the certified common factor ``c`` of every σ² at which the
    exact ε(δ*) equals the Bureau's ε(δ*) of the unscaled composition, and the variance cut ``1 − c``.

    ``components`` may instead be loss components of mixed mechanisms (an allocation file with
    geometric, Laplace or Gaussian queries), composed by
    :class:`~auditlib.accounting.PrivacyLossComposition`: ρ is then the zCDP the queries give,
    ``sigma2`` their noise variances, no reduced noise is calibrated, and with a pure ε-DP
    (geometric, Laplace) component the zCDP conversions are NaN (``bureau_na`` says why).
    """
    from auditlib.accounting import (
        DiscreteGaussianLoss,
        GeometricLoss,
        LaplaceLoss,
        PrivacyLossComposition,
    )

    mixed = not all(isinstance(c, tuple) for c in components)
    if mixed:  # (σ², count) pairs among loss components (several universes): losses throughout
        losses = [DiscreteGaussianLoss(*c) if isinstance(c, tuple) else c for c in components]
    comp: Any = PrivacyLossComposition(losses) if mixed else composition(list(components))
    d = np.asarray(deltas, dtype=float)
    eps = comp.epsilon(d)
    # the report keeps only the upper end of the curve
    curve = (
        comp.delta_upper(eps_grid) if hasattr(comp, "delta_upper") else comp.delta(eps_grid).upper
    )
    zv = [zcdp_and_variance(c) for c in components]
    rho = float(sum((z for z, _ in zv), Fraction(0)))
    s2 = [v for _, v in zv]
    pure = any(isinstance(c, GeometricLoss | LaplaceLoss) for c in components)
    out = _account_dict(comp, components, rho, s2, d, eps, curve, eps_grid, alpha_grid)
    if pure:
        for key in ("eps_bureau", "eps_cks", "delta_bureau", "tradeoff_bureau"):
            if key in out:
                out[key] = np.full(np.shape(out[key]), np.nan)
        out["bureau_na"] = BUREAU_NA
    if calibration_delta is not None and not mixed:
        out.update(calibrate(components, calibration_delta))
    return out


def _account_dict(
    comp: Any,
    components: Sequence[Any],
    rho: float,
    s2: list[float],
    d: np.ndarray,
    eps: Any,
    curve: Any,
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None,
) -> dict[str, Any]:
    return {
        "rho": rho,
        "n_queries": len(components),
        "sigma2_min": min(s2),
        "sigma2_max": max(s2),
        "method": comp.method,
        "eps_exact_lower": np.asarray(eps.lower, dtype=float),
        "eps_exact_upper": np.asarray(eps.upper, dtype=float),
        "eps_bureau": np.asarray(bureau_epsilon(rho, d), dtype=float),
        "eps_cks": np.asarray(cks_epsilon(rho, d), dtype=float),
        "delta_exact_upper": np.asarray(curve, dtype=float),
        "delta_bureau": np.asarray(bureau_delta(rho, eps_grid), dtype=float),
        **(
            {}
            if alpha_grid is None
            else {
                "tradeoff_exact_lower": np.asarray(tradeoff(comp, alpha_grid).lower, dtype=float),
                "tradeoff_bureau": np.asarray(zcdp_tradeoff(rho, alpha_grid), dtype=float),
            }
        ),
    }


def calibrate(components: Sequence[tuple[Fraction, int]], delta: float) -> dict[str, Any]:
    """Su, Su & Wang's reduced noise of a composition at ``delta`` (keys ``calibration_*``).

    The true factor lies in ``[factor_lower, factor_upper]``; ``factor_upper`` is the conservative
    one (more noise, ε(δ*) certainly at most the Bureau's), so the reduced σ² range uses it.
    """
    cal = calibrate_factor(list(components), delta)
    s2 = [float(s) for s, _ in components]
    hi = float(cal.factor.upper)
    return {
        "calibration_target_eps": float(cal.target_epsilon),
        "calibration_factor_lower": float(cal.factor.lower),
        "calibration_factor_upper": hi,
        "variance_cut_lower": float(cal.variance_cut.lower),
        "variance_cut_upper": float(cal.variance_cut.upper),
        "reduced_sigma2_min": hi * min(s2),
        "reduced_sigma2_max": hi * max(s2),
    }


#: true counts at which the accuracy after clipping at 0 is reported (the large-count limit is the
#: accuracy without post-processing)
ACCURACY_COUNTS = np.arange(0, 11)


def accuracy_by_query(
    sigma2: np.ndarray, factor: np.ndarray, counts: np.ndarray = ACCURACY_COUNTS
) -> dict[str, np.ndarray]:
    """Exact MSE and MAE of each query's noisy count under the Bureau's σ² and the reduced ``c σ²``.

    ``sigma2`` is (geolevel, query), NaN where a query is not measured; ``factor`` (geolevel,) the
    variance factor of each level (NaN: no reduced noise). Returns arrays over (geolevel, query,
    noise) with noise = (bureau, reduced): ``sigma2``, ``mse``, ``mae`` (no post-processing), and
    over (geolevel, query, noise, count): ``mse_clipped``, ``mae_clipped`` (clipped at 0).
    """
    s2 = np.asarray(sigma2, dtype=float)
    c = np.asarray(factor, dtype=float)
    ng, nq = s2.shape
    noise_s2 = np.stack([s2, s2 * c[:, None]], axis=-1)
    out = {
        "sigma2": noise_s2,
        "mse": np.full(noise_s2.shape, np.nan),
        "mae": np.full(noise_s2.shape, np.nan),
        "mse_clipped": np.full((*noise_s2.shape, len(counts)), np.nan),
        "mae_clipped": np.full((*noise_s2.shape, len(counts)), np.nan),
    }
    cache: dict[float, CountAccuracy] = {}
    for idx in np.ndindex(ng, nq, 2):
        v = float(noise_s2[idx])
        if not (np.isfinite(v) and v > 0):
            continue
        if v not in cache:
            cache[v] = count_accuracy(v, counts)
        a = cache[v]
        out["mse"][idx], out["mae"][idx] = a.mse, a.mae
        out["mse_clipped"][idx] = a.mse_clipped
        out["mae_clipped"][idx] = a.mae_clipped
    return out


def epl_by_query(
    residual: np.ndarray,
    query_index: np.ndarray,
    n_queries: int,
    *,
    bandwidth_factor: float,
    percentiles: tuple[float, float],
    method: str = "flaxman_petti",
    uncertainty_seed: int | None = None,
    surface_seed: int | None = None,
    surface_points: int = SURFACE_POINTS,
) -> list[dict[str, Any] | None]:
    """EPL of each query's residuals (all replicates and cells pooled); ``None`` where unmeasured.

    ``residual`` is (replicates, items); ``query_index`` (items,) says which query each item measures.
    With ``uncertainty_seed`` also the bias-aware estimate with its bootstrap interval, the matched
    floor and the slope estimate of 1/σ² (:func:`auditlib.epl.estimate_epl`), seeded per query.
    With ``surface_seed`` also the bias-aware EPL(x) curve with its pointwise bootstrap band
    (:func:`auditlib.epl.epl_surface`, at most ``surface_points`` points) under ``"surface"``.
    """
    out: list[dict[str, Any] | None] = []
    for q in range(n_queries):
        sel = query_index == q
        if not sel.any():
            out.append(None)
            continue
        r = residual[:, sel].ravel()
        res = epl_estimate(
            r, method=method, bandwidth_factor=bandwidth_factor, percentiles=percentiles
        )
        row = epl_row(res)
        if uncertainty_seed is not None:
            seq = np.random.SeedSequence(uncertainty_seed, spawn_key=(q,))
            est = estimate_epl(r, percentiles=percentiles, seed=seq)
            row.update(bias_aware_row(est))
        if surface_seed is not None:
            seq = np.random.SeedSequence(surface_seed, spawn_key=(q,))
            surf = epl_surface(r, percentiles=percentiles, max_points=surface_points, seed=seq)
            row["surface"] = surf.to_arrays()
        out.append(row)
    return out
