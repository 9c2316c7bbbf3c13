"""The simulation tasks of an audit submitted as its release kind says
(``plan.strategy.submission``): batches of independent blocks, TopDown states in replicate ranges
then the nation, or sparse production states. Each submitter returns, per level (index in
``plan.geolevels``), the futures that level's EPL waits for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.futures import PrefectFuture

from flows.audit import kept_histograms, tasks
from flows.audit.batching import batch_blocks, batch_label, n_batches, pack
from flows.audit.production_tasks import submit_production
from flows.releases import BATCHED_BLOCKS, SPARSE_STATES, TOPDOWN_STATES
from flows.spec.audit_plan import AuditPlan, Block
from storage.residuals import replicate_ranges
from storage.result_store import ResultStore

Sims = dict[int, list[PrefectFuture[Any]]]


def submit_simulation(
    store: ResultStore, plan: AuditPlan, todo: list[Block], workers: int, tasks_per_worker: int
) -> Sims:
    """The simulation of the blocks still to do, submitted as the plan's release kind says; per
    geolevel of the plan (with or without blocks to do) the futures its EPL waits for."""
    sims: Sims = {b.level: [] for b in plan.blocks}
    if todo:
        sims.update(
            SUBMITTERS[plan.strategy.submission](store, plan, todo, workers, tasks_per_worker)
        )
    return sims


def submit_blocks(
    store: ResultStore, plan: AuditPlan, todo: list[Block], workers: int, tasks_per_worker: int
) -> Sims:
    """Batches of independent blocks; level g's EPL waits for every batch holding one of its
    blocks."""
    sims: Sims = {b.level: [] for b in plan.blocks}
    for batch in batch_blocks(plan, todo, workers, tasks_per_worker):
        f = tasks.simulate_blocks.with_options(task_run_name=f"simulate {batch.label}").submit(
            store, plan, list(batch.blocks)
        )
        for g in sorted({b.level for b in batch.blocks}):
            sims[g].append(f)
    return sims


def submit_topdown(
    store: ResultStore, plan: AuditPlan, todo: list[Block], workers: int, tasks_per_worker: int
) -> Sims:
    """Batches of (state, replicate range) units (each range of a state's geolevels from one run;
    the ranges are the store's replicate chunks, ``cluster.replicates_per_task`` when it was
    created), then the nation from the states. With a national level every range of every state
    has its task (the nation sums their histograms: a finished range's task returns those kept in
    the staging store, ``flows.audit.kept_histograms``); without one, only ranges with an unfinished
    block."""
    top = plan.topdown_top
    nation = [b for b in plan.blocks if b.state_key == 0]
    unfinished = {b.state for b in todo}
    state_blocks = [b for b in plan.blocks_at(top) if nation or b.state in unfinished]
    ranges = replicate_ranges(plan.replicates, store.replicate_chunk())
    done = set() if nation else store.done_ranges()
    if nation:  # the states' histograms kept for the nation (a resumed run reads them)
        kept_histograms.create(store, kept_histograms.TOPDOWN_STATE_HISTOGRAMS)
    units = [
        (b, rr)
        for b in state_blocks
        for rr in ranges
        if nation
        or not all((o.state, o.level, rr[0]) in done for o in plan.blocks if o.state == b.state)
    ]
    per_state: dict[int, float] = {}
    for b in plan.blocks:
        per_state[b.state] = per_state.get(b.state, 0.0) + float(b.n_items)
    costs = [per_state.get(b.state, 0.0) * (r1 - r0) for b, (r0, r1) in units]
    groups = pack(costs, n_batches(len(units), workers, tasks_per_worker)) if units else []
    batches = []
    for g in groups:
        blocks = [units[i][0] for i in g]
        rr = [units[i][1] for i in g]
        name = batch_label(blocks, "states") if len(ranges) == 1 else _ranges_label(blocks, rr)
        f = tasks.simulate_topdown_states.with_options(task_run_name=f"topdown {name}").submit(
            store, plan, blocks, bool(nation), rr
        )
        batches.append((blocks, f))
    batch_futures: list[Any] = [f for _, f in batches]  # resolved to their results by Prefect
    sims: Sims = {}
    for b in plan.blocks:
        if b.state_key == 0:  # the nation: after every state
            f = tasks.simulate_topdown_nation.with_options(
                task_run_name=f"topdown {b.label}"
            ).submit(store, plan, b, batch_futures)
            sims.setdefault(b.level, []).append(f)
        else:
            sims.setdefault(b.level, []).extend(
                f for blocks, f in batches if any(s.state == b.state for s in blocks)
            )
    return sims


def _ranges_label(blocks: list[Block], ranges: list[tuple[int, int]]) -> str:
    """A task's name for the Prefect UI: its (state, replicate range) units, e.g.
    ``ST01 r0–9, ST02 r0–9``."""
    parts = [
        f"{b.label.split('/', 1)[0]} r{r0}–{r1 - 1}"
        for b, (r0, r1) in zip(blocks, ranges, strict=True)
    ]
    return ", ".join(parts[:3]) + (f", … ({len(parts)} ranges)" if len(parts) > 3 else "")


#: the submitter of each way a release kind's simulation is submitted
SUBMITTERS: dict[str, Callable[[ResultStore, AuditPlan, list[Block], int, int], Sims]] = {
    BATCHED_BLOCKS: submit_blocks,
    TOPDOWN_STATES: submit_topdown,
    SPARSE_STATES: submit_production,
}
