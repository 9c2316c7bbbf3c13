"""The capacity model of a production-schema audit (``pl94_production``, sparse TopDown): measured
per-state costs in, the predicted wall time of ``states × replicates`` on ``N`` workers out.

A task is one state (or one state's share of the replicates, ``replicates_per_task``): it draws the
state's sparse population once (``setup_s``), runs each replicate's TopDown (``replicate_s``) and
writes each replicate's residuals (``bytes_per_replicate`` at ``write_mb_s`` per worker). Tasks go
to ``N`` identical one-core workers longest first (Dask with priorities = the largest state first:
a free worker takes the longest task left), each worker first builds the spine (``worker_s``) and
each task pays the orchestrator's ``task_s``. The largest state's task is then the floor of the wall
time whatever ``N``; the store's aggregate throughput (``store_mb_s``) bounds it from below too.
Pure: no Dask, no store; the measured figures come from ``benchmarks/bench_production.py``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ProductionState:
    """One state's measured (or fitted) costs: CPU-s of one worker (one core, one thread)."""

    label: str
    blocks: int
    people: int
    setup_s: float  # the sparse population (and hierarchy), once per task
    replicate_s: float  # one replicate's sparse TopDown and residuals
    bytes_per_replicate: float = 0.0  # residual bytes one replicate writes (as stored)
    peak_mb: float = 0.0  # peak RSS of the state's task (one replicate)
    peak_mb_per_replicate: float = 0.0  # and more per further replicate the task holds


@dataclass(frozen=True)
class LinearFit:
    """``y ≈ a + b · x`` (least squares with ``a ≥ 0``), with its worst relative error on the
    points it was fitted on."""

    a: float
    b: float
    max_rel_err: float

    def __call__(self, x: float) -> float:
        return self.a + self.b * x


def fit_linear(x: Sequence[float], y: Sequence[float]) -> LinearFit:
    """Least squares of ``y`` on ``1, x`` with a non-negative intercept and slope: ordinary least
    squares, or through the origin when its intercept would be negative (a negative fixed cost
    would predict small states at nothing), or the mean when its slope would be (a cost that
    falls with size, e.g. peaks read on long-lived workers, would predict large states at less
    than small ones); one point: through the origin."""
    if len(x) != len(y) or not x:
        raise ValueError(f"need as many x as y, at least one; got {len(x)} and {len(y)}")
    n = len(x)
    if n == 1 or max(x) == min(x):
        a, b = 0.0, (sum(y) / sum(x) if sum(x) else 0.0)
    else:
        mx, my = sum(x) / n, sum(y) / n
        b = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y, strict=True)) / sum(
            (xi - mx) ** 2 for xi in x
        )
        a = my - b * mx
        if b < 0:
            a, b = my, 0.0
        elif a < 0:
            a, b = 0.0, sum(xi * yi for xi, yi in zip(x, y, strict=True)) / sum(xi * xi for xi in x)
    err = max(
        (abs(a + b * xi - yi) / abs(yi) for xi, yi in zip(x, y, strict=True) if yi), default=0.0
    )
    return LinearFit(a, b, err)


def lpt_finish(durations: Sequence[float], workers: int) -> float:
    """Makespan of independent tasks taken longest first by ``workers`` identical workers (a free
    worker takes the longest task left): O(n log n), for thousands of tasks."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: need at least one")
    if any(d < 0 or not math.isfinite(d) for d in durations):
        raise ValueError("durations must be finite and >= 0")
    free = [0.0] * min(workers, max(1, len(durations)))
    end = 0.0
    for d in sorted(durations, reverse=True):
        t = heapq.heappop(free)
        end = max(end, t + d)
        heapq.heappush(free, t + d)
    return end


@dataclass(frozen=True)
class ProductionPrediction:
    workers: int
    replicates: int
    replicates_per_task: int
    tasks: int
    wall_s: float
    compute_s: float  # the schedule's makespan (spine per worker included)
    largest_task_s: float  # the floor: the longest single task (largest state)
    cpu_s: float  # total worker-seconds of work
    write_bound_s: float  # all bytes / the store's aggregate throughput
    stored_bytes: float
    peak_task_mb: float
    bound: str

    def row(self) -> dict[str, Any]:
        return asdict(self)


def task_durations(
    states: Sequence[ProductionState],
    replicates: int,
    *,
    replicates_per_task: int | None = None,
    task_s: float = 0.0,
    write_mb_s: float | None = None,
) -> list[float]:
    """Seconds of each task: per state, ``replicates`` split into tasks of at most
    ``replicates_per_task`` (default: all in one), each ``task_s + setup_s + k · (replicate_s +
    bytes_per_replicate / write_mb_s)``."""
    if replicates < 1:
        raise ValueError(f"replicates = {replicates}: need at least one")
    chunk = (
        replicates if replicates_per_task is None else max(1, min(replicates, replicates_per_task))
    )
    out = []
    for s in states:
        per = s.replicate_s + (s.bytes_per_replicate / 1e6 / write_mb_s if write_mb_s else 0.0)
        left = replicates
        while left > 0:
            k = min(chunk, left)
            out.append(task_s + s.setup_s + k * per)
            left -= k
    return out


def predict_production(
    states: Sequence[ProductionState],
    replicates: int,
    workers: int,
    *,
    replicates_per_task: int | None = None,
    task_s: float = 0.0,
    worker_s: float = 0.0,
    flow_s: float = 0.0,
    write_mb_s: float | None = None,
    store_mb_s: float | None = None,
) -> ProductionPrediction:
    """Predicted wall time (module docstring): ``flow_s + max(worker_s + LPT makespan of the tasks,
    stored bytes / store_mb_s)``."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: need at least one")
    durs = task_durations(
        states, replicates, replicates_per_task=replicates_per_task, task_s=task_s,
        write_mb_s=write_mb_s,
    )  # fmt: skip
    compute = worker_s + lpt_finish(durs, workers)
    # the most replicates one task holds
    held = (
        replicates if replicates_per_task is None else max(1, min(replicates, replicates_per_task))
    )
    largest = max(durs, default=0.0)
    stored = replicates * sum(s.bytes_per_replicate for s in states)
    write_bound = stored / 1e6 / store_mb_s if store_mb_s else 0.0
    cpu = sum(durs) + worker_s * min(workers, len(durs))
    if write_bound > compute:
        bound = "store throughput"
    elif worker_s + largest >= 0.99 * compute:
        bound = "largest state task"
    else:
        bound = "work / workers"
    return ProductionPrediction(
        workers=workers,
        replicates=replicates,
        replicates_per_task=replicates if replicates_per_task is None else replicates_per_task,
        tasks=len(durs),
        wall_s=flow_s + max(compute, write_bound),
        compute_s=compute,
        largest_task_s=largest,
        cpu_s=cpu,
        write_bound_s=write_bound,
        stored_bytes=stored,
        peak_task_mb=max(
            (s.peak_mb + (held - 1) * s.peak_mb_per_replicate for s in states), default=0.0
        ),
        bound=bound,
    )


def workers_needed(
    states: Sequence[ProductionState],
    replicates: int,
    deadline_s: float,
    *,
    max_workers: int = 100_000,
    **kw: Any,
) -> int | None:
    """The fewest workers whose predicted wall time is within ``deadline_s``, or None when even
    one worker per task is not enough (the largest task, the spine, the flow or the store exceed
    it). Searches every ``N`` up to one worker per task (LPT's makespan need not fall with ``N``
    at every step)."""
    n_tasks = len(
        task_durations(states, replicates, replicates_per_task=kw.get("replicates_per_task"))
    )
    top = min(max_workers, max(1, n_tasks))
    if predict_production(states, replicates, top, **kw).wall_s > deadline_s:
        return None
    lo = 1
    # the work bound: fewer workers than cpu / deadline cannot finish in time
    p1 = predict_production(states, replicates, 1, **kw)
    lo = max(1, math.floor((p1.compute_s - kw.get("worker_s", 0.0)) / deadline_s))
    for n in range(lo, top + 1):
        if predict_production(states, replicates, n, **kw).wall_s <= deadline_s:
            return n
    return top  # pragma: no cover - top satisfies it (checked above)


def scale_states(
    blocks_people: Sequence[tuple[str, int, int]],
    setup: LinearFit,
    replicate: LinearFit,
    bytes_fit: LinearFit,
    peak: LinearFit,
    *,
    measured: dict[str, ProductionState] | None = None,
    by: str = "blocks",
) -> list[ProductionState]:
    """Every state's costs: the measured ones as measured, the others from the fits (in
    ``blocks`` or ``people``, as ``by`` says)."""
    if by not in ("blocks", "people"):
        raise ValueError(f"by = {by!r}: give 'blocks' or 'people'")
    out = []
    for label, blocks, people in blocks_people:
        if measured and label in measured:
            out.append(measured[label])
            continue
        x = float(blocks if by == "blocks" else people)
        out.append(
            ProductionState(
                label, blocks, people, max(0.0, setup(x)), max(0.0, replicate(x)),
                max(0.0, bytes_fit(x)), max(0.0, peak(x)),
            )
        )  # fmt: skip
    return out
