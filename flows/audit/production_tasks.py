"""Thin Prefect tasks of a TopDown run on a production schema (``flows.audit.production``), and how the
audit flow submits them: batches of whole spine states, then the nation from their State-level
histograms. Each state's blocks are written with their checksums (the resume marker); a re-run
skips states whose every block is done (with a national level it reads their State-level
histograms, kept in the staging store before the blocks, instead of simulating them again)."""

from __future__ import annotations

import time
from typing import Any

from prefect import task
from prefect.futures import PrefectFuture

from flows.audit.batching import batch_states
from flows.audit.production import (
    create_state_histograms,
    load_state_histograms,
    production_nation,
    production_state,
    save_state_histograms,
)
from flows.audit.tasks import TASK_OPTS
from flows.spec.audit_plan import AuditPlan, Block
from storage.result_store import ResultStore


def _state_one(store: ResultStore, plan: AuditPlan, block: Block, keep: bool) -> dict[str, Any]:
    blocks, state_dp, state_truth = production_state(plan, block)
    if keep:  # before the blocks: their markers say the state is finished
        save_state_histograms(store, block.state, state_dp, state_truth)
    n = sum(store.write_residual_block(block.state, gi, res) for gi, res in blocks.items())
    return {"state": block.state, "n_items": n, "state_dp": state_dp, "state_truth": state_truth}


@task(name="simulate-production-states", **TASK_OPTS)
def simulate_production_states(
    store: ResultStore, plan: AuditPlan, blocks: list[Block], nation: bool
) -> dict[str, Any]:
    """A batch of spine states (each given by its State-level block) under the sparse TopDown,
    one after the other. A state whose every block is done is not simulated again: with a
    ``nation`` its State-level histograms are read back from the staging store (kept there before
    its blocks were written; a state finished without them runs again)."""
    t0 = time.perf_counter()
    done = store.done_blocks()
    states, simulated, n_items = [], 0, 0
    for b in blocks:
        finished = all((o.state, o.level) in done for o in plan.blocks if o.state == b.state)
        kept = load_state_histograms(store, plan, b.state) if finished and nation else None
        if finished and not nation:
            continue
        if kept is not None:
            states.append({"state": b.state, "state_dp": kept[0], "state_truth": kept[1]})
            continue
        one = _state_one(store, plan, b, nation)
        simulated, n_items = simulated + 1, n_items + one["n_items"]
        states.append({k: one[k] for k in ("state", "state_dp", "state_truth")})
    return {
        "simulated": simulated,
        "n_items": n_items,
        "seconds": time.perf_counter() - t0,
        "states": states,
    }


@task(name="simulate-production-nation", **TASK_OPTS)
def simulate_production_nation(
    store: ResultStore, plan: AuditPlan, block: Block, batches: list[dict[str, Any]]
) -> dict[str, Any]:
    """The nation: the sum of the states' State-level histograms, in state order."""
    t0 = time.perf_counter()
    states = sorted((s for r in batches for s in r["states"]), key=lambda s: int(s["state"]))
    res = production_nation(
        plan, block.level, [s["state_dp"] for s in states], [s["state_truth"] for s in states]
    )
    n = store.write_residual_block(block.state, block.level, res)
    return {"label": block.label, "n_items": n, "seconds": time.perf_counter() - t0}


def submit_production(
    store: ResultStore, plan: AuditPlan, todo: list[Block], workers: int, tasks_per_worker: int
) -> dict[int, list[PrefectFuture[Any]]]:
    """The futures each geolevel's EPL waits for (as ``flows.audit.submit.submit_topdown``): batches of
    whole states, then the nation (with a national level every state's task runs: a finished
    state's returns its kept histograms, which the nation sums)."""
    top = plan.topdown_top
    nation = [b for b in plan.blocks if b.state_key == 0]
    unfinished = {b.state for b in todo}
    state_blocks = [b for b in plan.blocks_at(top) if nation or b.state in unfinished]
    if nation:  # the states' histograms kept for the nation (a resumed run reads them)
        create_state_histograms(store)
    batches = [
        (
            batch,
            simulate_production_states.with_options(
                task_run_name=f"production topdown {batch.label}"
            ).submit(store, plan, list(batch.blocks), bool(nation)),
        )
        for batch in batch_states(plan, state_blocks, workers, tasks_per_worker)
    ]
    batch_futures: list[Any] = [f for _, f in batches]
    sims: dict[int, list[PrefectFuture[Any]]] = {}
    for b in plan.blocks:
        if b.state_key == 0:
            f = simulate_production_nation.with_options(
                task_run_name=f"production topdown {b.label}"
            ).submit(store, plan, b, batch_futures)
            sims.setdefault(b.level, []).append(f)
        else:
            sims.setdefault(b.level, []).extend(
                f for batch, f in batches if any(s.state == b.state for s in batch.blocks)
            )
    return sims
