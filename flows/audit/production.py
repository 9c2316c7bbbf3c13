"""TopDown on a production schema (``population.attributes = "pl94_production" |
"dhc_production"``) of spine states, computed: a state's sparse releases cut into residual blocks
(``auditlib.simulate.sparse_release``), the nation's sum, and the cells each block left out.
Prefect tasks (``flows.audit.production_tasks``) call these."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from auditlib.geography.sparse_histograms import SparseHistograms
from auditlib.simulate import ResidualBlock
from auditlib.simulate.release import ResidualItems
from flows.audit import kept_histograms
from storage.result_store import ResultStore

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan, Block, ProductionParams

#: the small group that says which query cells a production run stored (``production_dataset``)
PRODUCTION_GROUP = "production"

#: the group of a staging store that keeps, per state, its State-level histograms (each
#: replicate's release and the truth) until the nation sums them: a resumed run reads a finished
#: state's from here instead of simulating it again; dropped before the store is published
STATE_HISTOGRAMS = "production_state_histograms"

#: a state task holding this many replicates or more writes each level's block part by part as
#: it is computed (``StreamedParts``), not held whole: a held block is its items × (4 bytes a
#: replicate + ~60 of keys and indices), and its items grow with the replicates too (the cells
#: non-zero in any of them); streamed, the writer holds a few parts for about twice the blocks'
#: build (a small share of a state's TopDown). One replicate's blocks are held, as measured at
#: every state of the full-US runs (``benchmarks/README.md``)
STREAM_FROM_REPLICATES = 2


def _params(plan: AuditPlan) -> tuple[ProductionParams, Any]:
    prod, td = plan.production, plan.topdown
    if prod is None or td is None:
        raise ValueError("needs a TopDown plan of a production schema on the spine")
    return prod, td


def _query_ids(plan: AuditPlan) -> dict[str, int]:
    return {q: i for i, q in enumerate(plan.queries)}


def production_runs(
    plan: AuditPlan,
    block: Block,
    replicates: tuple[int, int] | None = None,
    store: ResultStore | None = None,
) -> tuple[list[list[SparseHistograms]], list[SparseHistograms]]:
    """The replicates ``[r0, r1)`` (default: all) of one spine state's sparse TopDown
    (``block``: its State-level block): per replicate its released histograms at every run level,
    and the true ones. With a (staging) ``store``, each replicate keeps its chunks there as it
    goes and resumes after those an earlier run kept (``flows.audit.production_progress``), each
    save recording what the replicates have cost so far, and the finished replicates' cost is
    kept there (before the caller writes anything that says they are done). The fits' parts are
    solved in ``fit_processes`` processes beside this one when more than one
    (``flows.runtime.part_pool``: the same release)."""
    from auditlib.geography.sparse_population import spine_state_sparse_population
    from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
    from auditlib.simulate.topdown import spine_state
    from flows.audit.blocks import run_levels
    from flows.audit.production_progress import Cost, StoreProgress, save_cost
    from flows.audit.spine_share import spine_of
    from flows.runtime.part_pool import PartPool
    from flows.spec.sources import spine_levels

    r0, r1 = (0, plan.replicates) if replicates is None else replicates
    cost = None if store is None else Cost().resume(store, block.state, range(r0, r1))
    prod, td = _params(plan)
    params = plan.spine
    if params is None:
        raise ValueError("needs a TopDown plan of a production schema on the spine")
    spine = spine_of(params)
    st = block.state_key - 1
    gis = run_levels(plan)
    # the hierarchy over the run's levels (the DHC's: Prim and Tract_Subset_Group included), one
    # spine level per measured level, in the same order
    # (down to the blocks, whose people it is made of, when release.lowest_level stops it higher)
    chain = spine_levels(tuple(plan.geolevels[gi] for gi in gis))
    hierarchy, _ = spine_state(spine, st, chain if chain[-1] == "Block" else (*chain, "Block"))
    pop = spine_state_sparse_population(spine, st, plan.population.seed, schemas=(prod.schema,))
    measured = [td.measured[plan.geolevels[gi]] for gi in gis]
    dps, truth = [], []
    with ExitStack() as stack:
        pool = None
        if prod.fit_processes > 1:  # the fits' parts in processes beside this one
            pool = stack.enter_context(PartPool(prod.fit_processes))
            if cost is not None:
                cost.pool = pool
        for r in range(r0, r1):
            run = sparse_topdown(
                hierarchy.parents,
                hierarchy.levels,
                pop.histograms(prod.schema),
                pop.invariants(prod.schema),
                measured,
                noise_rngs(plan.noise_seed, block.state_key, len(gis), r),
                tol=td.tol,
                progress=None if store is None else StoreProgress(store, block.state, r, cost=cost),
                pool=pool,
                released=len(gis),
            )
            dps.append(list(run.dp))
            truth = list(run.truth)
        if store is not None and cost is not None:  # the population's draw included
            save_cost(store, block.state, r0, cost)
    return dps, truth


def production_blocks(
    plan: AuditPlan,
    dps: list[list[SparseHistograms]],
    truth: list[SparseHistograms],
    streamed: bool = False,
) -> Iterator[tuple[int, ResidualItems]]:
    """Residual blocks per run level of a state from every replicate's released histograms
    (``dps[replicate][level]``) and the true ones, each built when it is asked for (a writer
    holds one level's block at a time); ``streamed``: each block computed part by part as it is
    written (``StreamedParts``: about twice the work, a few parts held; for many replicates)."""
    from auditlib.simulate.sparse_release import StreamedParts, sparse_level_parts
    from flows.audit.blocks import run_levels

    ids = _query_ids(plan)
    build = StreamedParts if streamed else sparse_level_parts
    for i, gi in enumerate(run_levels(plan)):
        queries = [q.name for _, q in plan.level_queries[gi]]
        yield gi, build(truth[i], [run[i] for run in dps], queries, ids)


def production_state(
    plan: AuditPlan, block: Block, store: ResultStore | None = None
) -> tuple[Iterator[tuple[int, ResidualItems]], list[SparseHistograms], SparseHistograms]:
    """Every replicate of one spine state's sparse TopDown (``block``: its State-level block):
    residual blocks per level (:func:`production_blocks`), the State level's released histograms
    (one per replicate) and its true histogram, for the nation's sum (``store``: as
    :func:`production_runs`)."""
    dps, truth = production_runs(plan, block, store=store)
    streamed = len(dps) >= STREAM_FROM_REPLICATES
    return production_blocks(plan, dps, truth, streamed), [run[0] for run in dps], truth[0]


def production_nation(
    plan: AuditPlan,
    level: int,
    state_dp: list[list[SparseHistograms]],
    state_truth: list[SparseHistograms],
) -> ResidualBlock:
    """The national level: per replicate the sum of the states' released State histograms
    (``state_dp[state][replicate]``), beside the sum of their true ones."""
    from auditlib.simulate.sparse_release import sparse_level_residuals, sum_units

    _params(plan)
    dps = [sum_units([s[r] for s in state_dp]) for r in range(plan.replicates)]
    return sparse_level_residuals(
        sum_units(state_truth),
        dps,
        [q.name for _, q in plan.level_queries[level]],
        _query_ids(plan),
    )


def create_state_histograms(store: ResultStore) -> None:
    """The (empty) :data:`STATE_HISTOGRAMS` group, made once by the flow before its tasks write
    their states into it."""
    kept_histograms.create(store, STATE_HISTOGRAMS)


def save_state_histograms(
    store: ResultStore, state: int, state_dp: list[SparseHistograms], state_truth: SparseHistograms
) -> None:
    """Keep a state's one-unit State-level histograms (``production_state``) in the staging
    store, its completion attribute last; written before the state's blocks, whose markers say the
    state is finished."""
    hists = [*state_dp, state_truth]
    if any(h.n_units != 1 for h in hists):
        raise ValueError("a state's State-level histograms have one unit each")
    arrays = {"nnz": np.array([h.nnz for h in hists], np.int64)}
    for name in ("cells", "counts"):
        arrays[name] = np.concatenate([np.asarray(getattr(h, name), np.int64) for h in hists])
    kept_histograms.save(store, STATE_HISTOGRAMS, str(state), arrays)


def load_state_histograms(
    store: ResultStore, plan: AuditPlan, state: int
) -> tuple[list[SparseHistograms], SparseHistograms] | None:
    """A state's State-level histograms kept by :func:`save_state_histograms` (each replicate's
    release, the truth), or None if none were kept whole."""
    prod, _ = _params(plan)
    got = kept_histograms.load(store, STATE_HISTOGRAMS, str(state), ("nnz", "cells", "counts"))
    if got is None or got["nnz"].size != plan.replicates + 1:
        return None
    nnz, cells, counts = got["nnz"], got["cells"], got["counts"]
    ends = np.cumsum(nnz)
    hists = [
        SparseHistograms(
            prod.schema,
            np.array([0, n], np.int64),
            cells[e - n : e].astype(np.int32),
            counts[e - n : e].astype(np.int32),
        )
        for n, e in zip(nnz.tolist(), ends.tolist(), strict=True)
    ]
    return hists[:-1], hists[-1]


def drop_state_histograms(store: ResultStore) -> None:
    """Drop :data:`STATE_HISTOGRAMS` (the nation is written: no run needs them again)."""
    kept_histograms.drop(store, STATE_HISTOGRAMS)


def query_cells(plan: AuditPlan, state: int, level: int) -> dict[int, int]:
    """Per query index measured at a block: its cells over the block's units (stored or not)."""
    prod, _ = _params(plan)
    n = prod.units[state][level]
    return {qid: n * q.n_sim for qid, q in plan.level_queries[level]}


def missing_units(plan: AuditPlan, state: int, level: int, unit_index: np.ndarray) -> int:
    """Units of a block with no item (true total 0 and released total 0 in every replicate: every
    query's cells of such a unit are left out), from the block's items' ``unit_index``."""
    prod, _ = _params(plan)
    return prod.units[state][level] - int(np.unique(unit_index).size)


def production_dataset(store: ResultStore, plan: AuditPlan) -> xr.Dataset:
    """The ``production`` group: per (state, geolevel, query) the query cells over the block's
    units (``query_cells``), the items stored (non-zero in the truth or a replicate's release) and
    the cells left out (zero in the truth and every replicate: residual 0, not stored); read from
    the store's blocks, so a resumed run counts the blocks an earlier run wrote."""
    from flows.audit.production_progress import state_costs

    prod, _ = _params(plan)
    shape = (len(plan.states), len(plan.geolevels), len(plan.queries))
    cells = np.zeros(shape, dtype=np.int64)
    stored = np.zeros(shape, dtype=np.int64)
    for b in plan.blocks:
        qi = store.read_query_index(b.state, b.level)  # not its residuals: the flow's process
        counts = np.bincount(qi[qi >= 0].astype(np.int64), minlength=len(plan.queries))
        for q, n in query_cells(plan, b.state, b.level).items():
            cells[b.state, b.level, q] = n
            stored[b.state, b.level, q] = counts[q]
    dims = ("state", "geolevel", "query")
    return xr.Dataset(
        {
            "query_cells": (
                dims,
                cells,
                {"description": "cells of the query over the block's units"},
            ),
            "stored_cells": (
                dims,
                stored,
                {"description": "items stored: non-zero in the truth or a replicate's release"},
            ),
            "zero_cells": (
                dims,
                cells - stored,
                {"description": "cells left out: zero in the truth and in every replicate"},
            ),
        },
        coords={
            "state": np.array(plan.states, dtype=object),
            "geolevel": np.array(plan.geolevels, dtype=object),
            "query": np.array(plan.queries, dtype=object),
        },
        attrs={
            "schema": prod.schema,
            "items": "query cells non-zero in the truth or in at least one replicate's release; "
            "the others (zero_cells) have residual 0 in every replicate and are not stored. The "
            "EPL and the residual figures condition on being stored (docs/simulation.md)",
            **_cost_attrs(plan, state_costs(store, len(plan.states))),
        },
    )


def _cost_attrs(plan: AuditPlan, costs: dict[str, np.ndarray]) -> dict[str, Any]:
    """The states' recorded costs as the group's attributes (run measurements, not results:
    attributes, so that two runs of one spec still hold the same arrays)."""
    per_state = {
        st: {
            "cpu_s": round(float(costs["cpu_s"][i]), 3),
            "wall_s": round(float(costs["wall_s"][i]), 3),
            "worker_peak_rss_bytes": int(costs["peak_rss"][i]),
        }
        for i, st in enumerate(plan.states)
        if np.isfinite(costs["cpu_s"][i])
    }
    return {
        "state_costs": per_state,
        "state_costs_meaning": "per state: CPU and wall seconds of its TopDown tasks (their "
        "worker processes, over every run that worked on them, less the work a kill lost after "
        "its last resume point), and the peak resident memory of the worker process that "
        "finished it, over that process's life up to then (an upper bound on the task's own); "
        "states finished by an older run are not listed",
    }


def stored_residuals(store: ResultStore, plan: AuditPlan) -> int:
    """Residuals the run stored: every block's items (not its capacity) times the replicates."""
    n = store.zarr_group("residuals")["n_items"]
    return plan.replicates * int(np.asarray(n[...]).sum())  # type: ignore[index]
