"""Batches of simulation work: the plan's blocks packed into a few Prefect tasks of similar cost.

A Prefect task on Dask costs about 0.4 CPU-s of orchestration whatever it does, so a block of a
fraction of a second is too little work for one task. The audit flow packs the blocks still to do
into ``workers × cluster.tasks_per_worker`` batches (at most one per block), greedy longest-first
on an estimated cost (cells × replicates), so every worker gets work and the largest batch is
within 4/3 of the best possible one. Each block keeps its own keyed seeds, region write and
checksums: results do not depend on the batching, and a re-run skips finished blocks inside a batch.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from flows.spec.audit_plan import AuditPlan, Block

T = TypeVar("T")


@dataclass(frozen=True)
class Batch:
    """Blocks simulated by one task, in plan order, and their estimated cost."""

    blocks: tuple[Block, ...]
    cost: float
    unit: str = "blocks"  # what one of ``blocks`` stands for: "blocks", or "states" (TopDown)

    @property
    def label(self) -> str:
        return batch_label(self.blocks, self.unit)


def block_cost(plan: AuditPlan, block: Block) -> float:
    """Estimated work of one block: its simulated cells (every query) times the replicates."""
    return float(block.n_items) * plan.replicates


def n_batches(n_units: int, workers: int, tasks_per_worker: int) -> int:
    """How many tasks ``n_units`` blocks (or states) make: ``workers × tasks_per_worker``, at most
    one per unit; ``tasks_per_worker = 0`` is one task per unit."""
    if n_units <= 0:
        return 0
    if tasks_per_worker == 0:
        return n_units
    return max(1, min(n_units, max(1, workers) * tasks_per_worker))


def pack(costs: Sequence[float], bins: int) -> list[list[int]]:
    """Indices of ``costs`` packed into ``bins`` groups, greedy longest-first (LPT).

    Each item, largest first (ties: lower index first), goes to the group with the smallest total
    so far (ties: lower group). Deterministic; empty groups are dropped; each group is sorted and
    the groups are ordered by their first index.
    """
    if bins <= 0:
        raise ValueError(f"bins = {bins}: need at least one group")
    heap = [(0.0, b) for b in range(bins)]
    groups: list[list[int]] = [[] for _ in range(bins)]
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        load, b = heapq.heappop(heap)
        groups[b].append(i)
        heapq.heappush(heap, (load + costs[i], b))
    return sorted((sorted(g) for g in groups if g), key=lambda g: g[0])


def batch_blocks(
    plan: AuditPlan, blocks: Sequence[Block], workers: int, tasks_per_worker: int
) -> list[Batch]:
    """``blocks`` (independent (state, geolevel) blocks) in balanced batches."""
    costs = [block_cost(plan, b) for b in blocks]
    groups = pack(costs, n_batches(len(blocks), workers, tasks_per_worker)) if blocks else []
    return [Batch(tuple(blocks[i] for i in g), sum(costs[i] for i in g)) for g in groups]


def batch_states(
    plan: AuditPlan, state_blocks: Sequence[Block], workers: int, tasks_per_worker: int
) -> list[Batch]:
    """TopDown states (each given by its State-level block) in balanced batches; a state's cost is
    that of all its geolevels' blocks (one TopDown run writes them all)."""
    per_state: dict[int, float] = {}
    for b in plan.blocks:
        per_state[b.state] = per_state.get(b.state, 0.0) + block_cost(plan, b)
    costs = [per_state.get(b.state, 0.0) for b in state_blocks]
    n = n_batches(len(state_blocks), workers, tasks_per_worker)
    groups = pack(costs, n) if state_blocks else []
    return [
        Batch(tuple(state_blocks[i] for i in g), sum(costs[i] for i in g), "states") for g in groups
    ]


#: an EPL piece's work beside its residuals, in residuals: a state's rows (estimates, surface
#: and its band) took about 0.07 CPU-s a block at 1,000 replicates, what histogramming 2 M
#: residuals took (0.035 CPU-s a million; synthetic states, default queries)
EPL_BLOCK_RESIDUALS = 2e6


def epl_batches(plan: AuditPlan, workers: int, tasks_per_worker: int) -> dict[int, list[Batch]]:
    """Per geolevel, its blocks in balanced batches for the EPL pieces (``epl-blocks`` tasks).

    The levels' pieces run together (each after the simulation of its blocks), so they share one
    budget, ``workers × tasks_per_worker`` tasks as the simulation has; each level gets a share
    of it by its estimated work (residuals, plus :data:`EPL_BLOCK_RESIDUALS` a block), at least one
    task and at most one per block; ``tasks_per_worker = 0`` is one task per block. Within a level
    the blocks are packed longest-first (:func:`pack`), each batch in plan order."""
    levels: dict[int, list[Block]] = {}
    for b in plan.blocks:
        levels.setdefault(b.level, []).append(b)
    costs = {g: [block_cost(plan, b) + EPL_BLOCK_RESIDUALS for b in bs] for g, bs in levels.items()}
    total = sum(sum(c) for c in costs.values())
    budget = n_batches(len(plan.blocks), workers, tasks_per_worker)
    out: dict[int, list[Batch]] = {}
    for g, bs in sorted(levels.items()):
        share = budget * sum(costs[g]) / total
        n = len(bs) if tasks_per_worker == 0 else max(1, min(len(bs), round(share)))
        out[g] = [
            Batch(tuple(bs[i] for i in grp), sum(costs[g][i] for i in grp))
            for grp in pack(costs[g], n)
        ]
    return out


def level_groups(items: Sequence[T], workers: int, tasks_per_worker: int) -> list[list[T]]:
    """Per-level work that costs little beside a task's orchestration (a level's accounting, MPL
    or whole EPL) in at most ``workers`` tasks: ``items`` in order, split into that many
    contiguous groups whose sizes differ by at most one; ``tasks_per_worker = 0`` (one task per
    block) is one task per item, as before grouping."""
    if not items:
        return []
    if tasks_per_worker == 0:
        return [[x] for x in items]
    n = max(1, min(len(items), workers))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        stop = start + size + (1 if i < extra else 0)
        out.append(list(items[start:stop]))
        start = stop
    return out


def batch_label(blocks: Sequence[Block], unit: str = "blocks") -> str:
    """A name for the Prefect UI: one block's own label, else its states as ranges and the count,
    e.g. ``ST01–ST03, ST07 (12 blocks)``."""
    if len(blocks) == 1:
        return blocks[0].label
    names: dict[int, str] = {}
    for b in blocks:
        names.setdefault(b.state, b.label.split("/", 1)[0])
    idx = sorted(names)
    runs: list[tuple[int, int]] = []
    for i in idx:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    parts = [names[a] if a == b else f"{names[a]}–{names[b]}" for a, b in runs]
    shown = ", ".join(parts[:3]) + (", …" if len(parts) > 3 else "")
    return f"{shown} ({len(blocks)} {unit})"
