"""The audit's small result groups, built from its tasks' summaries: ``epl`` (pooled and per-state
estimates, curves, surfaces with bands, the composed EPL), ``accounting`` (exact and Bureau ε(δ),
δ(ε), trade-off curves, Su, Su & Wang's reduced noise) and ``accuracy`` (MSE/MAE under both noises).
Names and dimensions: ``storage/schema.py``."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from auditlib.allocations import allocation_label
from auditlib.simulate.noise import NoiseVariance
from auditlib.simulate.topdown_residuals import TRUTH_CLASSES
from auditlib.summaries import ACCURACY_COUNTS, accuracy_by_query
from flows.spec import AuditSpec
from flows.spec.audit_plan import AuditPlan
from storage import schema as S

#: the estimator the `epl` group's per-level estimates come from (its ``method`` attribute)
EPL_METHOD = "flaxman_petti"

#: per-level (and composed) keys of Su, Su & Wang's reduced noise in the accounting group
CALIBRATION_KEYS = (
    "calibration_target_eps",
    "calibration_factor_lower",
    "calibration_factor_upper",
    "variance_cut_lower",
    "variance_cut_upper",
    "reduced_sigma2_min",
    "reduced_sigma2_max",
)


#: significance levels α of the stored trade-off curves β(α)
ALPHA_GRID = np.concatenate([np.geomspace(1e-6, 1e-2, 30), np.linspace(0.0125, 1.0, 80)])


def calibration_delta_for(spec: AuditSpec) -> float:
    """δ* of the reduced noise: the spec's smallest δ (Su, Su & Wang's Table 1 uses 1e-11)."""
    return float(min(spec.accounting.deltas))


def epl_dataset(plan: AuditPlan, results: list[dict[str, Any]], spec: AuditSpec) -> xr.Dataset:
    ns, ng, nq = len(plan.states), len(plan.geolevels), len(plan.queries)
    per_state = np.full((ns, ng, nq), np.nan)
    pooled = np.full((ng, nq), np.nan)
    status = np.full((ng, nq), "", dtype=object)
    n_res = np.zeros((ng, nq), dtype=np.int64)
    bw = np.full((ng, nq), np.nan)
    sigma2 = plan.sigma2_matrix()
    extra_keys = ("bias_aware", "ci_low", "ci_high", "null_upper", "inv_sigma2_hat")
    extra = {k: np.full((ng, nq), np.nan) for k in extra_keys}
    kde_error = np.full((ng, nq), np.nan)  # the largest over the pooled and per-state rows
    floor_ref = np.full((ng, nq), "matched", dtype=object)
    curves: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for res in results:
        g = res["geolevel"]
        for s, per_q in res["per_state"].items():
            for q, r in enumerate(per_q):
                if r is not None:
                    per_state[s, g, q] = r["epl"]
                    kde_error[g, q] = np.fmax(kde_error[g, q], r.get("kde_error", np.nan))
        for q, ref in res.get("floor_reference", {}).items():
            floor_ref[g, q] = ref
        for q, r in enumerate(res["pooled"]):
            if r is None:
                continue
            pooled[g, q] = r["epl"]
            status[g, q] = r["status"]
            n_res[g, q] = r["n"]
            bw[g, q] = r["bandwidth"]
            curves[g, q] = (r["x"], r["epl_x"])
            for k in extra_keys:
                extra[k][g, q] = r.get(k, np.nan)
            kde_error[g, q] = np.fmax(kde_error[g, q], r.get("kde_error", np.nan))
    surf = _surfaces(ns, ng, nq, results)
    bias = _total_bias(ng, results)
    npts = max((len(x) for x, _ in curves.values()), default=1)
    cx = np.full((ng, nq, npts), np.nan)
    cy = np.full((ng, nq, npts), np.nan)
    for (g, q), (x, y) in curves.items():
        cx[g, q, : len(x)] = x
        cy[g, q, : len(y)] = y
    st, gl, qu, pt = S.STATE, S.GEOLEVEL, S.QUERY, S.POINT
    return xr.Dataset(
        {
            "epl": ((st, gl, qu), per_state),
            "epl_pooled": ((gl, qu), pooled),
            "epl_status": ((gl, qu), status),
            "n_residuals": ((gl, qu), n_res),
            "sigma2": ((gl, qu), sigma2),
            "bandwidth": ((gl, qu), bw),
            "epl_curve_x": ((gl, qu, pt), cx),
            "epl_curve": ((gl, qu, pt), cy),
            "epl_bias_aware": ((gl, qu), extra["bias_aware"]),
            "epl_ci_low": ((gl, qu), extra["ci_low"]),
            "epl_ci_high": ((gl, qu), extra["ci_high"]),
            "epl_null_upper": ((gl, qu), extra["null_upper"]),
            "floor_reference": ((gl, qu), floor_ref),
            "inv_sigma2_hat": ((gl, qu), extra["inv_sigma2_hat"]),
            "kde_error": ((gl, qu), kde_error),
            **surf,
            **bias,
        },
        coords={
            st: np.array(plan.states, dtype=object),
            gl: np.array(plan.geolevels, dtype=object),
            qu: np.array(plan.queries, dtype=object),
            pt: np.arange(npts),
            S.SURFACE_POINT: np.arange(next(iter(surf.values()))[1].shape[-1]),
            **({S.TRUTH_CLASS: np.array(TRUTH_CLASSES, dtype=object)} if bias else {}),
        },
        attrs={
            "method": EPL_METHOD,
            "bandwidth_factor": spec.epl.bandwidth_factor,
            "percentiles": ",".join(f"{p:g}" for p in spec.epl.percentiles),
            "pooling": "all replicates and cells of a query at a geolevel; per state and all states",
            **spec.epl.store_attrs(),
        },
    )


def _total_bias(ng: int, results: list[dict[str, Any]]) -> dict[str, Any]:
    """TopDown: the mean released − true unit total per (geolevel, truth class) and its count."""
    if not any("total_bias" in r for r in results):
        return {}
    sums = np.zeros((ng, len(TRUTH_CLASSES)))
    counts = np.zeros((ng, len(TRUTH_CLASSES)), dtype=np.int64)
    for res in results:
        if "total_bias" in res:
            sums[res["geolevel"]] += res["total_bias"]["sums"]
            counts[res["geolevel"]] += res["total_bias"]["counts"]
    mean = np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)
    dims = (S.GEOLEVEL, S.TRUTH_CLASS)
    what = {
        "description": "mean of released minus true total over the level's units whose true total "
        "is 0 (empty) or > 0 (populated), and of the populated ones by true total (1–9, "
        "10–99, 100–999, ≥ 1000), every unit, state and replicate (TopDown: non-negativity "
        "lifts empty units, the invariant totals take it back from the others)"
    }
    return {"total_bias": (dims, mean, what), "total_bias_units": (dims, counts)}


def composed_epl_vars(
    plan: AuditPlan, epl_ds: xr.Dataset, composed: list[dict[str, Any]]
) -> dict[str, Any]:
    """The composed EPL of the counts containing one person (``auditlib.epl.composed``).

    Flaxman 2019 trees: estimated from the residual paths leaf → root, with the cross-level residual
    correlations. Allocation releases: the sum of the pooled bias-aware EPLs over every measured
    (geolevel, query) — one cell of each contains a person and the noise is independent by
    construction (no correlation is estimated: NaN).
    """
    gl, gb = S.GEOLEVEL, S.GEOLEVEL_B
    ng = len(plan.geolevels)
    corr = np.full((ng, ng), np.nan)
    if composed:
        c = composed[0]
        idx = np.asarray(c["geolevels"])
        corr[np.ix_(idx, idx)] = c["correlation"]
        vals = {
            k: float(c[k])
            for k in ("epl_sum", "ci_low", "ci_high", "epl_projection", "dependence_factor")
        }
        how = "paths leaf -> root of the released levels"
    else:
        ok = epl_ds.epl_status.values == "ok"
        ba, lo, hi = (epl_ds[k].values for k in ("epl_bias_aware", "epl_ci_low", "epl_ci_high"))
        have = ok & np.isfinite(ba)
        vals = {
            "epl_sum": float(ba[have].sum()) if have.any() else np.nan,
            "ci_low": float(lo[have].sum()) if have.any() else np.nan,
            "ci_high": float(hi[have].sum()) if have.any() else np.nan,
            "epl_projection": np.nan,
            "dependence_factor": np.nan,
        }
        how = plan.strategy.composed_over(
            "sum over measured (geolevel, query); independent noise by construction"
        )
    return {
        "epl_composed": ((), vals["epl_sum"], {"composed_over": how}),
        "epl_composed_ci_low": ((), vals["ci_low"]),
        "epl_composed_ci_high": ((), vals["ci_high"]),
        "epl_composed_projection": ((), vals["epl_projection"]),
        "composed_dependence_factor": ((), vals["dependence_factor"]),
        "level_correlation": ((gl, gb), corr),
        gb: ((gb,), np.array(plan.geolevels, dtype=object)),
    }


def _surfaces(ns: int, ng: int, nq: int, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-state and pooled EPL(x) surfaces as padded float32 arrays (NaN where unmeasured)."""
    keys = ("x", "epl_x", "low", "high")
    names = ("x", "", "low", "high")
    rows: dict[tuple[int | None, int, int], dict[str, np.ndarray]] = {}
    for res in results:
        g = res["geolevel"]
        for s, per_q in res["per_state"].items():
            for q, r in enumerate(per_q):
                if r is not None and "surface" in r:
                    rows[s, g, q] = r["surface"]
        for q, r in enumerate(res["pooled"]):
            if r is not None and "surface" in r:
                rows[None, g, q] = r["surface"]
    npts = max((len(v["x"]) for v in rows.values()), default=1) or 1
    per_state = {k: np.full((ns, ng, nq, npts), np.nan, dtype=np.float32) for k in keys}
    pooled = {k: np.full((ng, nq, npts), np.nan, dtype=np.float32) for k in keys}
    for (s, g, q), v in rows.items():
        for k in keys:
            target = pooled[k][g, q] if s is None else per_state[k][s, g, q]
            target[: len(v[k])] = v[k]
    out: dict[str, Any] = {}
    dims = (S.STATE, S.GEOLEVEL, S.QUERY, S.SURFACE_POINT)
    for k, name in zip(keys, names, strict=True):
        suffix = f"_{name}" if name else ""
        out[f"surface{suffix}"] = (dims, per_state[k])
        out[f"surface_pooled{suffix}"] = (dims[1:], pooled[k])
    return out


def accounting_dataset(
    plan: AuditPlan,
    results: list[dict[str, Any]],
    deltas: list[float],
    grid: np.ndarray,
    spec: AuditSpec,
) -> xr.Dataset:
    by_level = {r["geolevel"]: r for r in results}
    levels = [g for g in plan.geolevels if g in by_level]
    if any(g is not None and g not in plan.geolevels for g in by_level):
        # an observed release: every level of its declared allocation, in the allocation's order
        levels = [g for g in by_level if g is not None]
    gl, dl, eg = S.GEOLEVEL, S.DELTA, S.EPS_GRID

    def stack(key: str) -> np.ndarray:
        return np.array([by_level[g][key] for g in levels])

    data: dict[str, Any] = {
        "rho": ((gl,), stack("rho")),
        "sigma2_min": ((gl,), stack("sigma2_min")),
        "sigma2_max": ((gl,), stack("sigma2_max")),
        "n_queries": ((gl,), stack("n_queries").astype(np.int64)),
        "eps_exact_lower": ((gl, dl), stack("eps_exact_lower")),
        "eps_exact_upper": ((gl, dl), stack("eps_exact_upper")),
        "eps_bureau": ((gl, dl), stack("eps_bureau")),
        "eps_cks": ((gl, dl), stack("eps_cks")),
        "delta_exact_upper": ((gl, eg), stack("delta_exact_upper")),
        "delta_bureau": ((gl, eg), stack("delta_bureau")),
        "tradeoff_exact_lower": ((gl, S.ALPHA), stack("tradeoff_exact_lower")),
        "tradeoff_bureau": ((gl, S.ALPHA), stack("tradeoff_bureau")),
    }
    calibrated = all("calibration_factor_upper" in by_level[g] for g in levels)
    if calibrated:
        for key in CALIBRATION_KEYS:
            data[key] = ((gl,), stack(key))
    methods = sorted({by_level[g]["method"] for g in levels})
    if None in by_level:
        c = by_level[None]
        data.update(
            {
                "composed_eps_exact_lower": ((dl,), c["eps_exact_lower"]),
                "composed_eps_exact_upper": ((dl,), c["eps_exact_upper"]),
                "composed_eps_bureau": ((dl,), c["eps_bureau"]),
                "composed_eps_cks": ((dl,), c["eps_cks"]),
                "composed_delta_exact_upper": ((eg,), c["delta_exact_upper"]),
                "composed_delta_bureau": ((eg,), c["delta_bureau"]),
                "composed_rho": ((), c["rho"]),
                "composed_tradeoff_exact_lower": ((S.ALPHA,), c["tradeoff_exact_lower"]),
                "composed_tradeoff_bureau": ((S.ALPHA,), c["tradeoff_bureau"]),
            }
        )
        if calibrated and "calibration_factor_upper" in c:
            for key in CALIBRATION_KEYS:
                data[f"composed_{key}"] = ((), c[key])
        methods = sorted({*methods, c["method"]})
    return xr.Dataset(
        data,
        coords={
            gl: np.array(levels, dtype=object),
            dl: np.array(deltas),
            eg: grid,
            S.ALPHA: ALPHA_GRID,
        },
        attrs={
            "method": ",".join(methods),
            "headline_delta": spec.accounting.headline_delta,
            "neighbours": spec.audit.neighbours,
            "allocation": allocation_label(spec.audit.allocation),
            "bureau_conversion": "eps = rho + 2 sqrt(rho ln(1/delta))",
            "cks_conversion": "Canonne-Kamath-Steinke (2020) Prop. 12",
            "tradeoff": "tradeoff_exact_lower: certified lower end of the exact f-DP curve beta(alpha) "
            "(a valid guarantee); tradeoff_bureau: the curve implied by the Bureau's zCDP accounting",
            **({"bureau_na": na[0]} if (na := _bureau_na(results)) else {}),
            **(
                {
                    "calibration_delta": calibration_delta_for(spec),
                    "calibration": "Su, Su & Wang Table 1: every sigma2 of a level (composed: of all "
                    "levels) times a common factor c so that the exact eps(calibration_delta) equals "
                    "the Bureau's eps at that delta; the true c lies in [calibration_factor_lower, "
                    "calibration_factor_upper]; variance_cut = 1 - c; reduced_sigma2_min/max use "
                    "the conservative calibration_factor_upper",
                }
                if calibrated
                else {}
            ),
        },
    )


def _bureau_na(results: list[dict[str, Any]]) -> list[str]:
    """Why the zCDP conversions are NaN at some level (an allocation file with pure ε-DP noise):
    the reason once, else []."""
    return list(dict.fromkeys(str(r["bureau_na"]) for r in results if r.get("bureau_na")))


def accuracy_dataset(plan: AuditPlan, sigma2: np.ndarray, acct: xr.Dataset) -> xr.Dataset:
    """Exact MSE/MAE of each query's count under the Bureau's and the reduced noise (Su, Su & Wang §3.4).

    The reduced noise multiplies the Bureau's σ² by the level's conservative calibration factor.
    """
    levels = [str(g) for g in acct[S.GEOLEVEL].values]
    # a level the plan does not simulate (the DHC's Prim on the spine): no query, NaN rows
    gi = [plan.geolevels.index(g) if g in plan.geolevels else -1 for g in levels]
    factor = (
        np.asarray(acct["calibration_factor_upper"].values, dtype=float)
        if "calibration_factor_upper" in acct
        else np.full(len(levels), np.nan)
    )
    dg = np.ones(sigma2.shape, dtype=bool)  # the queries whose noise is discrete Gaussian
    for g, lq in enumerate(plan.level_queries):
        for qid, q in lq:
            dg[g, qid] = not isinstance(q.sigma2, NoiseVariance)
    rows = np.vstack([np.where(dg, sigma2, np.nan), np.full((1, sigma2.shape[1]), np.nan)])
    acc = accuracy_by_query(rows[gi], factor, ACCURACY_COUNTS)
    gl, qu, no, co = S.GEOLEVEL, S.QUERY, S.NOISE, S.COUNT
    return xr.Dataset(
        {
            "sigma2": ((gl, qu, no), acc["sigma2"]),
            "mse": ((gl, qu, no), acc["mse"]),
            "mae": ((gl, qu, no), acc["mae"]),
            "mse_clipped": ((gl, qu, no, co), acc["mse_clipped"]),
            "mae_clipped": ((gl, qu, no, co), acc["mae_clipped"]),
        },
        coords={
            gl: np.array(levels, dtype=object),
            qu: np.array(plan.queries, dtype=object),
            no: np.array(["bureau", "reduced"], dtype=object),
            co: ACCURACY_COUNTS,
        },
        attrs={
            "method": "exact sums over the discrete Gaussian pmf (auditlib.accuracy)",
            "post_processing": "mse/mae: none (= the large-count limit); mse_clipped/mae_clipped: "
            "release max(0, count + noise) at true count `count`",
            "reduced": "sigma2 times the level's calibration_factor_upper (accounting group)",
            **(
                {}
                if dg.all()
                else {
                    "other_noise": "NaN: queries of an allocation file with geometric, Laplace or "
                    "Gaussian noise (this accuracy is of discrete Gaussian noise)"
                }
            ),
        },
    )
