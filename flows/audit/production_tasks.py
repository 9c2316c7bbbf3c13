"""Thin Prefect tasks of a TopDown run on a production schema (``flows.audit.production``), and how the
audit flow submits them: batches of whole states, then the nation from their State-level
histograms. Each state's blocks are written with their checksums (the resume marker); a re-run
skips states whose every block is done (with a national level it reads their State-level
histograms, kept in the staging store before the blocks, instead of simulating them again); a
state's replicate keeps its chunks as it goes (``flows.audit.production_progress``), so a killed
run resumes an unfinished state after its last chunk kept.
When a state's replicates are more than ``cluster.replicates_per_task`` (the store's replicate
chunk), each range of them is a task of its own, keeping its histograms in the staging store
(``flows.audit.production_ranges``; a re-run reads a kept range back), and one task per state
writes its blocks from all of them: a 100-replicate state is no longer one task."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prefect import task
from prefect.futures import PrefectFuture

from auditlib.simulate.release import ResidualItems
from flows.audit import production_progress, production_ranges
from flows.audit.batching import batch_states
from flows.audit.production import (
    create_state_histograms,
    load_state_histograms,
    production_blocks,
    production_nation,
    production_runs,
    production_state,
    save_state_histograms,
)
from flows.audit.tasks import TASK_OPTS
from flows.spec.audit_plan import AuditPlan, Block
from storage.residuals import replicate_ranges
from storage.result_store import ResultStore


def _state_one(store: ResultStore, plan: AuditPlan, block: Block, keep: bool) -> dict[str, Any]:
    blocks, state_dp, state_truth = production_state(plan, block, store)  # its cost kept there
    return _write_state(store, block, keep, blocks, state_dp, state_truth)


def _write_state(
    store: ResultStore,
    block: Block,
    keep: bool,
    blocks: Iterable[tuple[int, ResidualItems]],
    state_dp: list[Any],
    state_truth: Any,
) -> dict[str, Any]:
    if keep:  # before the blocks: their markers say the state is finished
        save_state_histograms(store, block.state, state_dp, state_truth)
    n = sum(store.write_residual_block(block.state, gi, res) for gi, res in blocks)
    production_progress.drop_state(store, block.state)  # finished: its resume points go
    return {"state": block.state, "n_items": n, "state_dp": state_dp, "state_truth": state_truth}


def _done_state(
    store: ResultStore, plan: AuditPlan, state: int, nation: bool
) -> dict[str, Any] | None:
    """A finished state's entry for the nation (its kept State-level histograms; ``{}`` without a
    ``nation``), or None if it is to be simulated: not finished, or finished without them."""
    done = store.done_blocks()
    if not all((o.state, o.level) in done for o in plan.blocks if o.state == state):
        return None
    if not nation:
        return {}
    kept = load_state_histograms(store, plan, state)
    return None if kept is None else {"state": state, "state_dp": kept[0], "state_truth": kept[1]}


def _result(t0: float, done: list[dict[str, Any]]) -> dict[str, Any]:
    """A states task's result: what it simulated, its items, its time and, per state, the
    State-level histograms the nation sums."""
    new = [d for d in done if "n_items" in d]
    return {
        "simulated": len(new),
        "n_items": sum(d["n_items"] for d in new),
        "seconds": time.perf_counter() - t0,
        "states": [{k: d[k] for k in ("state", "state_dp", "state_truth")} for d in done if d],
    }


@task(name="simulate-production-range", **TASK_OPTS)
def simulate_production_range(
    store: ResultStore, plan: AuditPlan, block: Block, replicates: tuple[int, int], nation: bool
) -> dict[str, Any]:
    """One range of a spine state's replicates (``block``: its State-level block): their sparse
    TopDown, kept in the staging store (``flows.audit.production_ranges``) for the state's blocks.
    Nothing is simulated for a finished state or a range kept whole by an earlier run."""
    t0 = time.perf_counter()
    if (
        _done_state(store, plan, block.state, nation) is not None
        or production_ranges.load_range(store, plan, block.state, replicates) is not None
    ):
        return {"simulated": 0, "seconds": time.perf_counter() - t0}
    dps, truth = production_runs(plan, block, replicates, store)
    production_ranges.save_range(
        store, block.state, replicates[0], dps, truth if replicates[0] == 0 else None
    )
    return {"simulated": replicates[1] - replicates[0], "seconds": time.perf_counter() - t0}


@task(name="production-state-blocks", **TASK_OPTS)
def production_state_blocks(
    store: ResultStore,
    plan: AuditPlan,
    block: Block,
    ranges: list[tuple[int, int]],
    nation: bool,
    done_ranges: list[dict[str, Any]],
) -> dict[str, Any]:
    """A state's residual blocks from its ranges' kept histograms (``done_ranges``: the range
    tasks' results, which this task waits for), as one task running every replicate writes them;
    a finished state's are not written again (with a ``nation`` its kept State-level histograms
    are read back)."""
    t0 = time.perf_counter()
    done = _done_state(store, plan, block.state, nation)
    if done is None:
        dps: list[Any] = []
        truth: list[Any] | None = None
        for rr in ranges:
            got = production_ranges.load_range(store, plan, block.state, rr)
            if got is None:
                raise RuntimeError(
                    f"replicates {rr[0]}–{rr[1] - 1} of {block.label} were not kept; re-run "
                    "the audit to simulate them"
                )
            dps += got[0]
            truth = got[1] if got[1] is not None else truth
        assert truth is not None  # the first range keeps the truth
        blocks = production_blocks(plan, dps, truth, streamed=True)  # many replicates
        done = _write_state(store, block, nation, blocks, [run[0] for run in dps], truth[0])
    return _result(t0, [done])


@task(name="simulate-production-states", **TASK_OPTS)
def simulate_production_states(
    store: ResultStore, plan: AuditPlan, blocks: list[Block], nation: bool
) -> dict[str, Any]:
    """A batch of spine states (each given by its State-level block) under the sparse TopDown,
    one after the other. A state whose every block is done is not simulated again: with a
    ``nation`` its State-level histograms are read back from the staging store (kept there before
    its blocks were written; a state finished without them runs again)."""
    t0 = time.perf_counter()
    done = []
    for b in blocks:
        one = _done_state(store, plan, b.state, nation)
        done.append(_state_one(store, plan, b, nation) if one is None else one)
    return _result(t0, done)


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
    production_progress.create(store)  # the states' chunks as they finish (resume points)
    ranges = replicate_ranges(plan.replicates, store.replicate_chunk())
    if len(ranges) > 1:
        return _submit_ranges(store, plan, state_blocks, ranges, bool(nation))
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


def _submit_ranges(
    store: ResultStore,
    plan: AuditPlan,
    state_blocks: list[Block],
    ranges: list[tuple[int, int]],
    nation: bool,
) -> dict[int, list[PrefectFuture[Any]]]:
    """A state's replicates in ranges (one task each), then one task per state writing its
    blocks from them, then the nation from the states' State-level histograms."""
    production_ranges.create(store)
    per_state: list[tuple[int, Any]] = []
    for b in state_blocks:
        label = b.label.split("/", 1)[0]
        futures: list[Any] = [  # the blocks' task waits for them
            simulate_production_range.with_options(
                task_run_name=f"production topdown {label} r{r0}–{r1 - 1}"
            ).submit(store, plan, b, (r0, r1), nation)
            for r0, r1 in ranges
        ]
        blocks_f = production_state_blocks.with_options(
            task_run_name=f"production blocks {label}"
        ).submit(store, plan, b, ranges, nation, futures)
        per_state.append((b.state, blocks_f))
    sims: dict[int, list[PrefectFuture[Any]]] = {}
    for b in plan.blocks:
        if b.state_key == 0:
            f = simulate_production_nation.with_options(
                task_run_name=f"production topdown {b.label}"
            ).submit(store, plan, b, [f for _, f in per_state])
            sims.setdefault(b.level, []).append(f)
        else:
            sims.setdefault(b.level, []).extend(f for s, f in per_state if s == b.state)
    return sims
