"""Thin Prefect tasks: each calls one pure ``auditlib`` / ``storage`` function.

Large arrays never travel through Prefect: simulation tasks write their own chunk-aligned region of
the store and return a few numbers. Inputs are not hashed (``NO_CACHE``) and results not persisted.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from auditlib import seeds
from auditlib.allocations import load_allocation
from auditlib.mpl.audit import mpl_geolevel as _mpl_geolevel
from auditlib.simulate.synthetic import simulate_synthetic_block
from auditlib.summaries import account_components, epl_by_query
from flows.plan import AuditPlan, Block, release_block
from storage import store

TASK_OPTS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False, "retries": 2}


@task(name="simulate-block", **TASK_OPTS)
def simulate_block(url: str, plan: AuditPlan, block: Block) -> dict[str, Any]:
    """Simulate every replicate of one (state, geolevel) block and write its region."""
    t0 = time.perf_counter()
    if plan.flaxman is not None:
        res = release_block(plan, block)
        n = store.write_residual_block(url, block.state, block.geolevel, res, plan.n_items_max)
        return {"label": block.label, "n_items": n, "seconds": time.perf_counter() - t0}
    gname = plan.geolevels[block.geolevel]
    res = simulate_synthetic_block(
        hierarchy=plan.hierarchy,
        params=plan.population,
        state=block.state_key,
        geolevel=gname,
        geolevel_index=block.geolevel,
        queries=plan.level_queries[block.geolevel],
        replicates=plan.replicates,
        noise_seed=plan.noise_seed,
        postprocess=plan.postprocess,  # type: ignore[arg-type]
    )
    n = store.write_residual_block(url, block.state, block.geolevel, res, plan.n_items_max)
    return {"label": block.label, "n_items": n, "seconds": time.perf_counter() - t0}


@task(name="write-empty-blocks", **TASK_OPTS)
def write_empty_blocks(url: str, plan: AuditPlan) -> int:
    for s, g in plan.empty:
        store.write_residual_block(url, s, g, None, plan.n_items_max)
    return len(plan.empty)


@task(name="epl-geolevel", **TASK_OPTS)
def epl_geolevel(
    url: str,
    plan: AuditPlan,
    geolevel: int,
    bandwidth_factor: float,
    percentiles: tuple[float, float],
) -> dict[str, Any]:
    """EPL of every query at one geolevel: per state, and pooled over states."""
    per_state: dict[int, list[dict[str, Any] | None]] = {}
    pooled_res, pooled_q = [], []
    for b in plan.blocks_at(geolevel):
        r, q = store.read_residuals(url, b.state, b.geolevel)
        per_state[b.state] = epl_by_query(
            r, q, len(plan.queries), bandwidth_factor=bandwidth_factor, percentiles=percentiles
        )
        pooled_res.append(r)
        pooled_q.append(q)
    pooled = epl_by_query(
        np.concatenate(pooled_res, axis=1),
        np.concatenate(pooled_q),
        len(plan.queries),
        bandwidth_factor=bandwidth_factor,
        percentiles=percentiles,
        uncertainty_seed=int(
            seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, geolevel).generate_state(1)[0]
        ),
    )
    return {"geolevel": geolevel, "per_state": per_state, "pooled": pooled}


@task(name="account", **TASK_OPTS)
def account(
    allocation: str,
    neighbours: str,
    universe: str,
    region: str,
    geolevel: str | None,
    deltas: list[float],
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None = None,
) -> dict[str, Any]:
    """Exact accounting of one geolevel (or, with ``geolevel=None``, all levels composed)."""
    comps = load_allocation(allocation).components(neighbours, universe, region, geolevel)
    out = account_components(comps, deltas, eps_grid, alpha_grid)
    out["geolevel"] = geolevel
    return out


@task(name="mpl-geolevel", **TASK_OPTS)
def mpl_geolevel(geolevel: str, geolevel_index: int, settings: dict[str, Any]) -> dict[str, Any]:
    """MPL of one geolevel's released cell count (D vs D′): LB, curves, flags, δ(ε)."""
    return _mpl_geolevel(geolevel, geolevel_index, **settings)
