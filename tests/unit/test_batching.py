"""Simulation batches: every block in exactly one batch, balanced cost, deterministic, readable
names; a batch task skips the blocks already marked done in the store."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flows.audit.batching import (
    Batch,
    batch_blocks,
    batch_label,
    batch_states,
    block_cost,
    level_groups,
    n_batches,
    pack,
)
from flows.spec import load_spec, parse_spec
from flows.spec.audit_plan import Block
from flows.spec.plan import make_plan
from storage.result_store import ResultStore


def plan_of(tiny: bool = False, **population: Any) -> Any:
    data = load_spec().model_dump(mode="json", by_alias=True)
    data["population"].update(population)
    if tiny:  # one unit per level, 2 replicates, queries of 2 cells
        data["population"]["fanout"] = {k: 1 for k in data["population"]["fanout"]}
        data["audit"]["replicates"] = 2
        data["simulation"]["max_cells_per_query"] = 2
    return make_plan(parse_spec(data))


def brute_force_makespan(costs: list[float], bins: int) -> float:
    """The smallest possible largest group total, over every assignment."""
    best = float("inf")
    for assign in itertools.product(range(bins), repeat=len(costs)):
        loads = [0.0] * bins
        for c, b in zip(costs, assign, strict=True):
            loads[b] += c
        best = min(best, max(loads))
    return best


def test_n_batches_caps_and_per_block_mode() -> None:
    assert n_batches(22, 2, 2) == 4
    assert n_batches(3, 2, 2) == 3  # never more tasks than blocks
    assert n_batches(22, 2, 0) == 22  # 0: one task per block
    assert n_batches(22, 0, 2) == 2  # no worker counted: still work for one
    assert n_batches(0, 2, 2) == 0


def test_pack_is_a_partition_within_lpt_bound_of_the_optimum() -> None:
    rng = np.random.default_rng(np.random.SeedSequence(20261122))
    for _ in range(40):
        n, bins = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        costs = [float(c) for c in rng.integers(1, 100, size=n)]
        groups = pack(costs, bins)
        assert sorted(i for g in groups for i in g) == list(range(n))  # each index exactly once
        assert len(groups) == min(n, bins)
        assert groups == pack(costs, bins)  # deterministic
        largest = max(sum(costs[i] for i in g) for g in groups)
        # Graham (1969): longest-first is within 4/3 - 1/(3m) of the optimal makespan
        assert largest <= (4 / 3 - 1 / (3 * bins)) * brute_force_makespan(costs, bins) + 1e-9


def test_pack_balances_where_plan_order_would_not() -> None:
    costs = [10.0, 9.0, 8.0, 1.0, 1.0, 1.0]  # contiguous halves: 27 vs 3
    groups = pack(costs, 2)
    # 10 -> A, 9 -> B, 8 -> B (9 < 10), then the 1s to A: {10, 1, 1, 1} = 13, {9, 8} = 17, optimal
    assert groups == [[0, 3, 4, 5], [1, 2]]
    assert brute_force_makespan(costs, 2) == 17.0


def test_batches_of_the_default_plan_cover_each_block_once() -> None:
    plan = plan_of(states=5)
    batches = batch_blocks(plan, list(plan.blocks), workers=2, tasks_per_worker=2)
    assert len(batches) == 4
    got = [b for batch in batches for b in batch.blocks]
    assert sorted(got, key=lambda b: (b.state, b.level)) == sorted(
        plan.blocks, key=lambda b: (b.state, b.level)
    )
    assert len(set(got)) == len(plan.blocks)
    costs = [batch.cost for batch in batches]
    assert sum(costs) == pytest.approx(sum(block_cost(plan, b) for b in plan.blocks))
    # no batch exceeds the mean by more than the largest single block (greedy list bound)
    biggest = max(block_cost(plan, b) for b in plan.blocks)
    assert max(costs) <= sum(costs) / len(costs) + biggest
    assert batches == batch_blocks(plan, list(plan.blocks), workers=2, tasks_per_worker=2)
    for batch in batches:  # plan order inside a batch
        assert list(batch.blocks) == sorted(batch.blocks, key=plan.blocks.index)


def test_per_block_mode_gives_one_block_per_batch_named_as_before() -> None:
    plan = plan_of(states=2)
    batches = batch_blocks(plan, list(plan.blocks), workers=2, tasks_per_worker=0)
    assert [b.blocks for b in batches] == [(b,) for b in plan.blocks]
    assert [b.label for b in batches] == [b.label for b in plan.blocks]


def test_state_batches_carry_whole_states() -> None:
    plan = plan_of(states=6)
    top = plan.geolevels.index("State")
    states = list(plan.blocks_at(top))
    batches = batch_states(plan, states, workers=2, tasks_per_worker=1)
    assert len(batches) == 2 and all(b.unit == "states" for b in batches)
    assert sorted(s.state for b in batches for s in b.blocks) == [s.state for s in states]
    # a state's cost is all of its geolevels, not its State block alone
    want = sum(block_cost(plan, b) for b in plan.blocks if b.state_key != 0)
    assert sum(b.cost for b in batches) == pytest.approx(want)


def test_labels_read_as_state_ranges() -> None:
    def blk(state: int, level: int, label: str) -> Block:
        return Block(state, level, state, label, 1)

    one = [blk(1, 2, "ST01/County")]
    assert batch_label(one) == "ST01/County"
    many = [blk(s, g, f"ST{s:02d}/L{g}") for s in (1, 2, 3, 7) for g in (1, 2)]
    assert batch_label(many) == "ST01–ST03, ST07 (8 blocks)"
    states = [blk(s, 1, f"ST{s:02d}/State") for s in (1, 3, 5, 7, 9)]
    assert batch_label(states, "states") == "ST01, ST03, ST05, … (5 states)"
    assert Batch(tuple(states[:2]), 2.0, "states").label == "ST01, ST03 (2 states)"


def test_batch_task_skips_blocks_marked_done(tmp_path: Path) -> None:
    from flows.audit import tasks
    from storage import store

    plan = plan_of(tiny=True, states=1)
    url = str(tmp_path / "s.zarr")
    store.create_residual_template(
        url,
        **plan.template_layout(),
        attrs={"run_id": "t"},
    )
    blocks = list(plan.blocks)
    first = tasks.simulate_blocks.fn(ResultStore.at(url), plan, blocks[:2])
    assert (first["blocks"], first["simulated"]) == (2, 2)
    before = {(b.state, b.level): store.read_residuals(url, b.state, b.level)[0].copy()
              for b in blocks[:2]}  # fmt: skip
    again = tasks.simulate_blocks.fn(ResultStore.at(url), plan, blocks[:3])
    assert (again["blocks"], again["simulated"]) == (3, 1)  # the two marked blocks skipped
    assert store.done_blocks(url) >= {(b.state, b.level) for b in blocks[:3]}
    for (s, g), r in before.items():
        np.testing.assert_array_equal(store.read_residuals(url, s, g)[0], r)


def test_block_progress_counts_blocks_from_the_store_and_other_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.runtime import progress

    seen: list[tuple[int, int, str]] = []
    finished = iter(
        [3, 5, 9, 9, 9]
    )  # blocks marked done, as successive reads of the store see them
    monkeypatch.setattr(progress, "POLL_S", 3600.0)  # no background read during the test
    progress.listen(lambda d, t, w: seen.append((d, t, w)))
    try:
        with progress.BlockProgress(lambda: next(finished), 9, 2, 3) as p:
            p.task_done(sim=True)  # first batch: 3 blocks marked
            p.task_done(sim=False)  # an EPL or accounting task
            p.task_done(sim=True)  # second batch: 5 blocks, a re-read
    finally:
        progress.listen(None)
    assert seen[0] == (3, 12, "blocks simulated 3/9, tasks 0/3")
    assert seen[-1] == (6, 12, "blocks simulated 5/9, tasks 1/3")
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)  # never goes back


@pytest.mark.parametrize("n_items", range(0, 10))
@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_level_groups_split_in_order_into_at_most_workers_even_groups(
    n_items: int, workers: int
) -> None:
    items = [f"L{i}" for i in range(n_items)]
    groups = level_groups(items, workers, tasks_per_worker=2)
    assert [x for g in groups for x in g] == items  # every level once, in order
    assert len(groups) == min(n_items, workers)
    if groups:
        sizes = [len(g) for g in groups]
        assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1, sizes


def test_level_groups_per_block_mode_is_one_task_per_level() -> None:
    assert level_groups(["US", "State", "County"], 2, tasks_per_worker=0) == [
        ["US"],
        ["State"],
        ["County"],
    ]
    assert level_groups(["US", "State", "County"], 2, tasks_per_worker=1) == [
        ["US", "State"],
        ["County"],
    ]
