"""The audit flow: simulate releases per (state, geolevel) on Dask, then EPL and exact accounting.

Fan-out: one simulation task per (state, geolevel) block (replicates looped inside: a Prefect task
costs ~0.2 CPU-s on Dask, so tasks are coarse), one EPL task per geolevel (after that level's blocks),
one accounting task per geolevel plus one for all levels composed. Simulation tasks write their own
Zarr regions; EPL and accounting return small summaries that the flow writes as whole groups.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
import xarray as xr
from prefect import flow
from prefect.futures import PrefectFuture, as_completed

import auditlib
from auditlib.allocations import load_allocation
from flows import progress, tasks
from flows.mpl import mpl_dataset, mpl_task_settings
from flows.plan import AuditPlan, make_plan
from flows.spec import AuditSpec
from storage import schema as S
from storage import store

#: significance levels α of the stored trade-off curves β(α)
ALPHA_GRID = np.concatenate([np.geomspace(1e-6, 1e-2, 30), np.linspace(0.0125, 1.0, 80)])


def run_id_for(spec: AuditSpec) -> str:
    """A stable id of the run: a hash of the validated spec."""
    return hashlib.sha256(spec.to_toml().encode()).hexdigest()[:16]


def software_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("dpaudit", "numpy", "scipy", "xarray", "zarr", "dask", "distributed", "prefect"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def eps_grid_for(spec: AuditSpec) -> np.ndarray:
    """A common ε grid wide enough for every level's (ε, δ) curve down to the smallest δ."""
    from auditlib.accounting import bureau_epsilon

    alloc = load_allocation(spec.audit.allocation)
    a = spec.audit
    rhos = [float(alloc.rho(a.universe, a.region, g)) for g in spec.geolevels]
    top = float(bureau_epsilon(max(rhos), min(spec.accounting.deltas)))
    return np.linspace(0.0, top * 1.05, spec.accounting.eps_grid_points)


@flow(name="dpaudit-audit", flow_run_name="audit {run_id}", validate_parameters=False)
def audit_flow(spec: AuditSpec, url: str, run_id: str) -> dict[str, Any]:
    """Run one audit into the (new) store at ``url``; return a small summary."""
    t0 = time.perf_counter()
    plan = make_plan(spec)
    allocation_release = plan.flaxman is None
    alloc = load_allocation(spec.audit.allocation)
    sigma2 = np.full((len(plan.geolevels), len(plan.queries)), np.nan)
    for gi, lq in enumerate(plan.level_queries):
        for qid, q in lq:
            sigma2[gi, qid] = q.sigma2
    store.create_residual_template(
        url,
        states=plan.states,
        geolevels=plan.geolevels,
        replicates=plan.replicates,
        n_items=plan.n_items_max,
        queries=plan.queries,
        sigma2=sigma2,
        attrs={
            "dpaudit_version": auditlib.__version__,
            "run_id": run_id,
            "spec_toml": spec.to_toml(),
            "allocation_id": alloc.allocation_id if allocation_release else "",
            "allocation_source": alloc.source
            if allocation_release
            else f"seed 001 {spec.release.kind.upper()} release at epsilon = {spec.release.epsilon}",
            "neighbours": spec.audit.neighbours,
            "universe": spec.audit.universe,
            "region": spec.audit.region,
            "seed": spec.audit.seed,
            "release": spec.release.kind,
            "release_epsilon": None if allocation_release else spec.release.epsilon,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    a = spec.audit
    deltas = list(spec.accounting.deltas)
    grid = eps_grid_for(spec) if allocation_release else np.zeros(0)
    futures: list[PrefectFuture[Any]] = []
    empty = tasks.write_empty_blocks.with_options(task_run_name="write empty regions").submit(
        url, plan
    )
    sims: dict[int, list[PrefectFuture[Any]]] = {}
    for b in plan.blocks:
        f = tasks.simulate_block.with_options(task_run_name=f"simulate {b.label}").submit(
            url, plan, b
        )
        sims.setdefault(b.geolevel, []).append(f)
    epls = [
        tasks.epl_geolevel.with_options(task_run_name=f"epl {plan.geolevels[g]}").submit(
            url,
            plan,
            g,
            spec.epl.bandwidth_factor,
            spec.epl.percentiles,
            wait_for=sims[g],
            return_state=False,
        )
        for g in sorted(sims)
    ]
    # exact accounting of the allocation's discrete Gaussian noise (seed 001's geometric releases
    # are pure ε-DP by construction: their nominal ε is in the store's attributes)
    levels: list[str | None] = list(plan.geolevels) if allocation_release else []
    if spec.accounting.composed and allocation_release:
        levels.append(None)
    accts = [
        tasks.account.with_options(task_run_name=f"account {g or 'composed'}").submit(
            a.allocation, a.neighbours, a.universe, a.region, g, deltas, grid, ALPHA_GRID
        )
        for g in levels
    ]
    # maximum privacy loss of one released cell count per geolevel (opt-in: [mpl] enabled)
    mpl_levels = [g for g in plan.geolevels if g in spec.mpl_geolevels] if spec.mpl.enabled else []
    mpl_settings = mpl_task_settings(spec)
    mpls = [
        tasks.mpl_geolevel.with_options(task_run_name=f"mpl {g}").submit(
            g, plan.geolevels.index(g), mpl_settings
        )
        for g in mpl_levels
    ]
    futures = [empty, *[f for fs in sims.values() for f in fs], *epls, *accts, *mpls]
    done = 0
    for f in as_completed(futures):
        f.result()  # raises on failure
        done += 1
        progress.report(done, len(futures), "tasks")
    epl_ds = epl_dataset(plan, [f.result() for f in epls], spec)
    acct_ds = (
        accounting_dataset(plan, [f.result() for f in accts], deltas, grid, spec) if accts else None
    )
    store.write_group(url, S.EPL, epl_ds)
    if acct_ds is not None:
        store.write_group(url, S.ACCOUNTING, acct_ds)
    if mpls:
        store.write_group(url, S.MPL, mpl_dataset([f.result() for f in mpls], spec))
    wall = time.perf_counter() - t0
    store.set_root_attrs(
        url,
        {
            "software": json.dumps(software_versions()),
            "wall_time_s": round(wall, 3),
        },
    )
    return {
        "run_id": run_id,
        "blocks": len(plan.blocks),
        "residuals": int(sum(b.n_items for b in plan.blocks) * plan.replicates),
        "wall_time_s": wall,
    }


def epl_dataset(plan: AuditPlan, results: list[dict[str, Any]], spec: AuditSpec) -> xr.Dataset:
    ns, ng, nq = len(plan.states), len(plan.geolevels), len(plan.queries)
    per_state = np.full((ns, ng, nq), np.nan)
    pooled = np.full((ng, nq), np.nan)
    status = np.full((ng, nq), "", dtype=object)
    n_res = np.zeros((ng, nq), dtype=np.int64)
    bw = np.full((ng, nq), np.nan)
    sigma2 = np.full((ng, nq), np.nan)
    for gi, lq in enumerate(plan.level_queries):
        for qid, qp in lq:
            sigma2[gi, qid] = qp.sigma2
    extra_keys = ("bias_aware", "ci_low", "ci_high", "null_upper", "inv_sigma2_hat")
    extra = {k: np.full((ng, nq), np.nan) for k in extra_keys}
    curves: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for res in results:
        g = res["geolevel"]
        for s, per_q in res["per_state"].items():
            for q, r in enumerate(per_q):
                if r is not None:
                    per_state[s, g, q] = r["epl"]
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
            "inv_sigma2_hat": ((gl, qu), extra["inv_sigma2_hat"]),
        },
        coords={
            st: np.array(plan.states, dtype=object),
            gl: np.array(plan.geolevels, dtype=object),
            qu: np.array(plan.queries, dtype=object),
            pt: np.arange(npts),
        },
        attrs={
            "method": spec.epl.method,
            "bandwidth_factor": spec.epl.bandwidth_factor,
            "percentiles": ",".join(f"{p:g}" for p in spec.epl.percentiles),
            "pooling": "all replicates and cells of a query at a geolevel; per state and all states",
            "bias_aware": "epl_bias_aware: bandwidth 0.3 sd, integer window; epl_ci_low/high: 90 % "
            "basic bootstrap interval of it; epl_null_upper: 95 % quantile of the same estimator on "
            "matched discrete-Gaussian noise (a small-sample reference, not a no-loss null); "
            "inv_sigma2_hat: slope of EPL(x), an estimate of 1/sigma^2 assuming Gaussian noise",
        },
    )


def accounting_dataset(
    plan: AuditPlan,
    results: list[dict[str, Any]],
    deltas: list[float],
    grid: np.ndarray,
    spec: AuditSpec,
) -> xr.Dataset:
    by_level = {r["geolevel"]: r for r in results}
    levels = [g for g in plan.geolevels if g in by_level]
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
            "neighbours": spec.audit.neighbours,
            "allocation": spec.audit.allocation,
            "bureau_conversion": "eps = rho + 2 sqrt(rho ln(1/delta))",
            "cks_conversion": "Canonne-Kamath-Steinke (2020) Prop. 12",
            "tradeoff": "tradeoff_exact_lower: certified lower end of the exact f-DP curve beta(alpha) "
            "(a valid guarantee); tradeoff_bureau: the curve implied by the Bureau's zCDP accounting",
        },
    )
