"""The audit flow: simulate releases per (state, geolevel) on Dask, then EPL and exact accounting.

Fan-out: the blocks still to do packed into ``workers × cluster.tasks_per_worker`` simulation tasks
(``flows/batching.py``: a Prefect task costs ~0.25 CPU-s on Dask, so tasks are coarse; TopDown:
batches of whole states, then the nation), one EPL task per geolevel (after the batches holding
that level's blocks), one accounting task per geolevel plus one for all levels composed (submitted
first). Simulation tasks write their own Zarr regions, block by block; EPL and accounting return
small summaries that the flow writes as whole groups."""

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
from prefect.futures import PrefectFuture, as_completed, wait

import auditlib
from auditlib.allocations import load_allocation
from auditlib.summaries import ACCURACY_COUNTS, accuracy_by_query
from flows import progress, tasks
from flows.batching import batch_blocks, batch_states
from flows.mpl import mpl_dataset, mpl_task_settings
from flows.runtime import fail_orphaned_task_runs, planned_workers
from flows.spec import AuditSpec
from flows.spec.plan import AuditPlan, Block, make_plan
from flows.spec.sections import GEOMETRIC_RELEASES
from storage import schema as S
from storage import store

#: per-level (and composed) keys of seed 004's reduced noise in the accounting group
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


def run_id_for(spec: AuditSpec) -> str:
    """A stable id of the run: a hash of the validated spec's sections that determine the results.

    Where the store goes (``output``) and on how many workers it runs (``cluster``) do not change a
    single stored value, so they do not change the id: a killed run resumes under another
    ``--overwrite`` or worker count, and a different computation never resumes into this one.
    """
    data = spec.model_dump(mode="json")
    data.pop("output", None)
    data.pop("cluster", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def software_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("dpaudit", "numpy", "scipy", "xarray", "zarr", "dask", "distributed", "prefect"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def source_commit() -> str:
    """The git commit of the dpaudit source the run used ("unknown" outside a git checkout)."""
    import subprocess
    from pathlib import Path

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def eps_grid_for(spec: AuditSpec) -> np.ndarray:
    """A common ε grid wide enough for every level's (ε, δ) curve down to the smallest δ."""
    from auditlib.accounting import bureau_epsilon

    alloc = load_allocation(spec.audit.allocation)
    a = spec.audit
    rhos = [float(alloc.rho(a.universe, a.region, g)) for g in spec.geolevels]
    top = float(bureau_epsilon(max(rhos), min(spec.accounting.deltas)))
    return np.linspace(0.0, top * 1.05, spec.accounting.eps_grid_points)


def calibration_delta_for(spec: AuditSpec) -> float:
    """δ* of the reduced noise: the spec's smallest δ (seed 004's Table 1 uses 1e-11)."""
    return float(min(spec.accounting.deltas))


@flow(
    name="dpaudit-audit",
    flow_run_name="audit {run_id}",
    validate_parameters=False,
    on_failure=[fail_orphaned_task_runs],
    on_crashed=[fail_orphaned_task_runs],
)
def audit_flow(spec: AuditSpec, url: str, run_id: str) -> dict[str, Any]:
    """Run one audit into the (new) store at ``url``; return a small summary."""
    t0 = time.perf_counter()
    plan = make_plan(spec)
    allocation_release = not plan.geometric
    sigma2 = plan.sigma2_matrix()
    done = store.resume_point(url, run_id)  # blocks finished by an interrupted run of this spec
    if done is None:
        _create_template(url, spec, plan, run_id, allocation_release)
        done = set()
    a = spec.audit
    deltas = list(spec.accounting.deltas)
    grid = eps_grid_for(spec) if allocation_release else np.zeros(0)
    # exact accounting of the allocation's discrete Gaussian noise (seed 001's geometric releases
    # are pure ε-DP by construction: their nominal ε is in the store's attributes)
    # submitted first, the composed level (the longest single task) first: they need no simulation,
    # so one worker can run them while the others simulate
    levels: list[str | None] = list(plan.geolevels) if allocation_release else []
    if spec.accounting.composed and allocation_release:
        levels.insert(0, None)
    if store.group_complete(url, S.ACCOUNTING) and store.group_complete(url, S.ACCURACY):
        levels = []
    accts = [
        tasks.account.with_options(task_run_name=f"account {g or 'composed'}").submit(
            a.allocation,
            a.neighbours,
            a.universe,
            a.region,
            g,
            deltas,
            grid,
            ALPHA_GRID,
            calibration_delta_for(spec),
        )
        for g in levels
    ]
    # maximum privacy loss of one released cell count per geolevel (opt-in: [mpl] enabled)
    mpl_levels = [g for g in plan.geolevels if g in spec.mpl_geolevels] if spec.mpl.enabled else []
    if store.group_complete(url, S.MPL):
        mpl_levels = []
    mpl_settings = mpl_task_settings(spec)
    mpls = [
        tasks.mpl_geolevel.with_options(task_run_name=f"mpl {g}").submit(
            g, plan.geolevels.index(g), mpl_settings
        )
        for g in mpl_levels
    ]
    futures: list[PrefectFuture[Any]] = []
    empty_todo = [e for e in plan.empty if tuple(e) not in done]
    if empty_todo:
        futures.append(
            tasks.write_empty_blocks.with_options(task_run_name="write empty regions").submit(
                url, plan, empty_todo
            )
        )
    todo = [b for b in plan.blocks if (b.state, b.geolevel) not in done]
    sims: dict[int, list[PrefectFuture[Any]]] = {b.geolevel: [] for b in plan.blocks}
    workers = planned_workers(spec.cluster)
    per_worker = spec.cluster.tasks_per_worker
    if plan.topdown is not None:
        if todo:  # a TopDown state spans its geolevels: an unfinished one re-runs them all
            sims.update(submit_topdown(url, plan, todo, workers, per_worker))
    else:
        for batch in batch_blocks(plan, todo, workers, per_worker):
            f = tasks.simulate_blocks.with_options(task_run_name=f"simulate {batch.label}").submit(
                url, plan, list(batch.blocks)
            )
            for g in sorted({b.geolevel for b in batch.blocks}):
                sims[g].append(f)  # level g's EPL waits for every batch holding one of its blocks
    epl_done = store.group_complete(url, S.EPL)
    epls = [
        tasks.epl_geolevel.with_options(task_run_name=f"epl {plan.geolevels[g]}").submit(
            url,
            plan,
            g,
            spec.epl.bandwidth_factor,
            spec.epl.percentiles,
            range_multiplier=spec.epl.range_multiplier,
            bias_aware=spec.epl.bias_aware_settings(),
            wait_for=sims[g],
            return_state=False,
        )
        for g in sorted(sims)
        if not epl_done
    ]
    composed = (
        [
            tasks.epl_composed.with_options(task_run_name="epl composed").submit(
                url,
                plan,
                spec.epl.percentiles,
                spec.epl.bias_aware_settings(),
                wait_for=epls,
                return_state=False,
            )
        ]
        if plan.geometric and plan.release in GEOMETRIC_RELEASES and not epl_done
        else []
    )
    unique_sims = {id(f): f for fs in sims.values() for f in fs}  # a TopDown state spans levels
    futures = [*futures, *unique_sims.values(), *epls, *composed, *accts, *mpls]
    regions = {(b.state, b.geolevel) for b in todo}
    tracker = progress.BlockProgress(
        lambda: len(store.done_blocks(url) & regions),
        len(regions),
        len(unique_sims),
        len(futures) - len(unique_sims),
    )
    with tracker:
        for f in as_completed(futures):
            try:
                f.result()  # raises on failure
            except BaseException:
                # let the other tasks finish first: then the only unfinished task runs left in the
                # API are those whose worker died, and the failure hook can mark them
                wait(futures)
                raise
            tracker.task_done(sim=id(f) in unique_sims)
    if epls:
        epl_ds = epl_dataset(plan, [f.result() for f in epls], spec)
        epl_ds = epl_ds.assign(composed_epl_vars(plan, epl_ds, [f.result() for f in composed]))
        store.write_group(url, S.EPL, epl_ds)
    if accts:
        acct_ds = accounting_dataset(plan, [f.result() for f in accts], deltas, grid, spec)
        store.write_group(url, S.ACCOUNTING, acct_ds)
        store.write_group(url, S.ACCURACY, accuracy_dataset(plan, sigma2, acct_ds))
    if mpls:
        store.write_group(url, S.MPL, mpl_dataset([f.result() for f in mpls], spec))
    wall = time.perf_counter() - t0
    store.set_root_attrs(
        url,
        {
            "software": json.dumps(software_versions()),
            "source_commit": source_commit(),
            "wall_time_s": round(wall, 3),
        },
    )
    return {
        "run_id": run_id,
        "blocks": len(plan.blocks),
        "resumed_blocks": len(plan.blocks) - len(todo),
        "residuals": int(sum(b.n_items for b in plan.blocks) * plan.replicates),
        "wall_time_s": wall,
    }


def _create_template(
    url: str,
    spec: AuditSpec,
    plan: AuditPlan,
    run_id: str,
    allocation_release: bool,
) -> None:
    alloc = load_allocation(spec.audit.allocation)
    store.create_residual_template(
        url,
        **plan.template_layout(),
        attrs={
            "dpaudit_version": auditlib.__version__,
            "run_id": run_id,
            "spec_toml": spec.to_toml(),
            "allocation_id": alloc.allocation_id if allocation_release else "",
            "allocation_source": alloc.source
            if allocation_release
            else f"seed {'003' if spec.release.kind in ('sa3', 'sa4') else '001'} {spec.release.kind.upper()} release at epsilon = {spec.release.epsilon}",
            "neighbours": spec.audit.neighbours,
            "universe": spec.audit.universe,
            "region": spec.audit.region,
            "seed": spec.audit.seed,
            "release": spec.release.kind,
            "release_epsilon": None if allocation_release else spec.release.epsilon,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )


def submit_topdown(
    url: str, plan: AuditPlan, todo: list[Block], workers: int, tasks_per_worker: int
) -> dict[int, list[PrefectFuture[Any]]]:
    """Batches of whole states (each state's geolevels from one run), then the nation from the
    states. With a national level every state runs (the nation sums their histograms); without
    one, only states with an unfinished block."""
    top = plan.geolevels.index("State")
    nation = [b for b in plan.blocks if b.state_key == 0]
    unfinished = {b.state for b in todo}
    state_blocks = [b for b in plan.blocks_at(top) if nation or b.state in unfinished]
    batches = [
        (
            batch,
            tasks.simulate_topdown_states.with_options(
                task_run_name=f"topdown {batch.label}"
            ).submit(url, plan, list(batch.blocks), not nation),
        )
        for batch in batch_states(plan, state_blocks, workers, tasks_per_worker)
    ]
    batch_futures: list[Any] = [f for _, f in batches]  # resolved to their results by Prefect
    sims: dict[int, list[PrefectFuture[Any]]] = {}
    for b in plan.blocks:
        if b.state_key == 0:  # the nation: after every state
            f = tasks.simulate_topdown_nation.with_options(
                task_run_name=f"topdown {b.label}"
            ).submit(url, plan, b, batch_futures)
            sims.setdefault(b.geolevel, []).append(f)
        else:
            sims.setdefault(b.geolevel, []).extend(
                f for batch, f in batches if any(s.state == b.state for s in batch.blocks)
            )
    return sims


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
    curves: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for res in results:
        g = res["geolevel"]
        for s, per_q in res["per_state"].items():
            for q, r in enumerate(per_q):
                if r is not None:
                    per_state[s, g, q] = r["epl"]
                    kde_error[g, q] = np.fmax(kde_error[g, q], r.get("kde_error", np.nan))
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
            "kde_error": ((gl, qu), kde_error),
            **surf,
        },
        coords={
            st: np.array(plan.states, dtype=object),
            gl: np.array(plan.geolevels, dtype=object),
            qu: np.array(plan.queries, dtype=object),
            pt: np.arange(npts),
            S.SURFACE_POINT: np.arange(next(iter(surf.values()))[1].shape[-1]),
        },
        attrs={
            "method": spec.epl.method,
            "bandwidth_factor": spec.epl.bandwidth_factor,
            "percentiles": ",".join(f"{p:g}" for p in spec.epl.percentiles),
            "pooling": "all replicates and cells of a query at a geolevel; per state and all states",
            **spec.epl.store_attrs(),
        },
    )


def composed_epl_vars(
    plan: AuditPlan, epl_ds: xr.Dataset, composed: list[dict[str, Any]]
) -> dict[str, Any]:
    """The composed EPL of the counts containing one person (``auditlib.epl.composed``).

    Seed 001 trees: estimated from the residual paths leaf → root, with the cross-level residual
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
        how = "sum over measured (geolevel, query); independent noise by construction"
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
            "neighbours": spec.audit.neighbours,
            "allocation": spec.audit.allocation,
            "bureau_conversion": "eps = rho + 2 sqrt(rho ln(1/delta))",
            "cks_conversion": "Canonne-Kamath-Steinke (2020) Prop. 12",
            "tradeoff": "tradeoff_exact_lower: certified lower end of the exact f-DP curve beta(alpha) "
            "(a valid guarantee); tradeoff_bureau: the curve implied by the Bureau's zCDP accounting",
            **(
                {
                    "calibration_delta": calibration_delta_for(spec),
                    "calibration": "seed 004 Table 1: every sigma2 of a level (composed: of all "
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


def accuracy_dataset(plan: AuditPlan, sigma2: np.ndarray, acct: xr.Dataset) -> xr.Dataset:
    """Exact MSE/MAE of each query's count under the Bureau's and the reduced noise (seed 004 §3.4).

    The reduced noise multiplies the Bureau's σ² by the level's conservative calibration factor.
    """
    levels = [str(g) for g in acct[S.GEOLEVEL].values]
    gi = [plan.geolevels.index(g) for g in levels]
    factor = (
        np.asarray(acct["calibration_factor_upper"].values, dtype=float)
        if "calibration_factor_upper" in acct
        else np.full(len(levels), np.nan)
    )
    acc = accuracy_by_query(sigma2[gi], factor, ACCURACY_COUNTS)
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
        },
    )
