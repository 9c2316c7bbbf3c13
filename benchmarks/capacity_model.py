"""The capacity model's pure part: fitted costs in, the predicted wall time of an audit out.

An audit of a TopDown release on the spine runs, per state, one task (or a batch of states per
task) that draws the state's histograms once (``setup``), runs every replicate's TopDown
(``per replicate``) and writes the state's regions of the store; the nation's sum follows every
state, one EPL task per geolevel follows the simulation, and the accounting tasks (submitted first)
need no simulation. The model places these tasks on ``N`` workers the way the flow and Dask do
(:func:`list_schedule`: tasks in submission order, a free worker takes the first one whose
dependencies are done), each task paying the orchestrator's per-task cost, and bounds the
simulation by the store's aggregate write throughput. It needs no Dask, Prefect or store: the
measured figures come from ``benchmarks/capacity.py measure``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from flows.audit.batching import pack  # the flow's own batching: the model packs as it does


def list_schedule(
    durations: Sequence[float],
    workers: int,
    deps: Sequence[Sequence[int]] | None = None,
) -> tuple[float, list[float]]:
    """(makespan, finish time of each task) of tasks given in submission order on ``workers``
    identical workers: whenever a worker is free it takes the first task (in order) whose
    dependencies (``deps[i]``: indices of tasks that must finish first) have finished; a task whose
    dependencies are not done waits, later ready tasks may pass it (as Dask does)."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: need at least one")
    n = len(durations)
    if any(d < 0 or not math.isfinite(d) for d in durations):
        raise ValueError("durations must be finite and >= 0")
    need = [list(deps[i]) if deps is not None else [] for i in range(n)]
    for i, ds in enumerate(need):
        if any(not 0 <= j < n or j == i for j in ds):
            raise ValueError(f"task {i}: bad dependency in {ds}")
    finish = [math.inf] * n
    started = [False] * n
    free: list[tuple[float, int]] = [(0.0, w) for w in range(workers)]  # (free at, worker)
    heapq.heapify(free)
    running: list[tuple[float, int]] = []  # (finish time, task)
    done_at: dict[int, float] = {}
    left = n
    while left:
        t, w = heapq.heappop(free)
        # tasks that finished by t are done
        while running and running[0][0] <= t:
            f, j = heapq.heappop(running)
            done_at[j] = f
        ready = next(
            (i for i in range(n) if not started[i] and all(j in done_at for j in need[i])), None
        )
        if ready is None:
            if not running:
                raise ValueError("dependency cycle: no task can start")
            # wait for the next finish, then try again with this worker
            f, j = heapq.heappop(running)
            done_at[j] = f
            heapq.heappush(free, (max(t, f), w))
            continue
        start = max([t, *(done_at[j] for j in need[ready])])
        finish[ready] = start + durations[ready]
        started[ready] = True
        left -= 1
        heapq.heappush(running, (finish[ready], ready))
        heapq.heappush(free, (finish[ready], w))
    return (max(finish) if n else 0.0), finish


def lpt_makespan(durations: Sequence[float], workers: int) -> float:
    """Longest processing time first: the list schedule of the tasks sorted by decreasing
    duration (within 4/3 of the optimum, Graham 1969)."""
    return list_schedule(sorted(durations, reverse=True), workers)[0]


@dataclass(frozen=True)
class StateWork:
    """One state of an audit: its blocks and people (the cost's regressors), and the bytes one
    replicate writes into the store over all its geolevels (as the store's layout pads them)."""

    label: str
    blocks: int
    people: int
    write_bytes_per_replicate: float
    data_bytes_per_replicate: float = 0.0  # the residuals alone, no padding
    buffer_items: int = 0  # items of the largest region one write holds in memory (padded)
    data_buffer_items: int = 0  # the same without padding: the state's largest region


@dataclass(frozen=True)
class Costs:
    """Fitted costs, in seconds of one worker (one core, one thread) and MB (10⁶ bytes).

    setup: the state's histograms and hierarchy, once per state task = ``setup_s + setup_s_per_block
    · blocks``; one replicate = ``rep_s + rep_s_per_block · blocks + rep_s_per_person · people``;
    writes at ``write_mb_s`` per worker; ``task_s``: the orchestrator's cost of one task seen on
    its worker (Prefect on Dask); ``flow_s``: the flow's own fixed work (plan, template, groups);
    ``worker_s``: once per worker (the spine generated in a fresh process); EPL of a geolevel
    ``epl_s + epl_s_per_mresidual · residuals / 10⁶``; accounting per level ``account_level_s`` and
    composed ``account_composed_s``; peak memory of a state task ``mem_mb + mem_mb_per_block ·
    blocks + replicates · (mem_mb_per_block_replicate · blocks + mem_mb_per_replicate)`` plus, while
    it writes its largest region, ``mem_write_factor`` × that region's chunk (``buffer_items`` ×
    (4 · replicates + 14) bytes).
    """

    setup_s: float
    setup_s_per_block: float
    rep_s: float
    rep_s_per_block: float
    rep_s_per_person: float
    write_mb_s: float
    task_s: float
    flow_s: float
    worker_s: float
    epl_s: float
    epl_s_per_mresidual: float
    account_level_s: float
    account_composed_s: float
    mem_mb: float
    mem_mb_per_block: float
    mem_mb_per_block_replicate: float
    mem_mb_per_replicate: float
    mem_write_factor: float = 1.0  # peak RSS of a region write per byte of its chunk
    #: CPU-s of each worker process besides its tasks and the spine (``worker_s``): the process's
    #: start, its imports (numpy, Prefect, Dask, dpaudit), its Prefect client and its heartbeats
    process_s: float = 0.0
    #: CPU-s of the run's own processes besides the tasks (the flow's process: imports, plan,
    #: template, the cluster's start; the Prefect API server): on a cluster they run on a node
    #: of their own, on shared cores they take cycles from the workers
    fixed_cpu_s: float = 0.0

    def worker_start(self) -> float:
        """CPU-s one worker process spends before (and beside) its tasks: the spine it is given
        or builds (``worker_s``) and its own start, imports and client (``process_s``)."""
        return self.worker_s + self.process_s

    def overhead_cpu(self, workers: int) -> float:
        """CPU-s of a run on ``workers`` worker processes that is not the work of its tasks:
        every worker's start (:meth:`worker_start`) and the run's own processes
        (``fixed_cpu_s``)."""
        return workers * self.worker_start() + self.fixed_cpu_s

    def setup(self, s: StateWork) -> float:
        return self.setup_s + self.setup_s_per_block * s.blocks

    def replicate(self, s: StateWork) -> float:
        return self.rep_s + self.rep_s_per_block * s.blocks + self.rep_s_per_person * s.people

    def state_task(self, s: StateWork, replicates: int, padded: bool = True) -> float:
        """Seconds of one state's work for ``replicates`` replicates, writes included."""
        per = s.write_bytes_per_replicate if padded else s.data_bytes_per_replicate
        write = replicates * per / 1e6 / self.write_mb_s
        return self.setup(s) + replicates * self.replicate(s) + write

    def memory_mb(self, s: StateWork, replicates: int, padded: bool = True) -> float:
        return (
            self.mem_mb
            + self.mem_mb_per_block * s.blocks
            + replicates * (self.mem_mb_per_block_replicate * s.blocks + self.mem_mb_per_replicate)
            + self.mem_write_factor
            * (s.buffer_items if padded else s.data_buffer_items)
            * (4 * replicates + 14)
            / 1e6
        )

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Audit:
    """What is audited: the states, replicates, and per geolevel the residuals one replicate
    writes (summed over states: EPL's input), with the accounting tasks the flow submits."""

    states: tuple[StateWork, ...]
    replicates: int
    level_items: tuple[int, ...]  # items per replicate, per geolevel, over all states
    account_levels: int  # per-geolevel accounting tasks
    composed: bool = False  # the all-levels composed accounting (cold: no cached result)
    nation: bool = True
    #: bytes the regions without data take (one task writes them all; padded like the others)
    #: and the nation's region (written after every state), each (padded, unpadded)
    empty_bytes: tuple[float, float] = (0.0, 0.0)
    nation_bytes: tuple[float, float] = (0.0, 0.0)


@dataclass
class Prediction:
    workers: int
    wall_s: float
    simulation_s: float  # first simulation task start → last state done
    epl_s: float  # the EPL tail after the simulation
    critical_state_s: float  # the longest single state task
    cpu_s: float  # total worker-seconds of work (no idling)
    write_bound_s: float  # total bytes / aggregate store throughput
    bound: str  # what sets the wall time
    tasks: int
    peak_task_mb: float
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = "; ".join(self.notes)
        return d


def predict(
    audit: Audit,
    costs: Costs,
    workers: int,
    *,
    tasks_per_worker: int = 2,
    replicates_per_task: int | None = None,
    store_mb_s: float | None = None,
    padded: bool = True,
    speed: float = 1.0,
) -> Prediction:
    """Predicted wall time of ``audit`` on ``workers`` workers.

    Tasks as the flow makes them: the accounting (composed first) submitted first, then the states
    packed longest-first into ``workers × tasks_per_worker`` batches (at most one per state;
    ``replicates_per_task``: a state's replicates split over tasks of that many, which the flow
    does not do today), the nation after every state, one EPL per geolevel after the simulation.
    Each task pays ``costs.task_s``; each worker process first pays its start
    (:meth:`Costs.worker_start`); ``speed`` < 1 slows every worker (shared cores). The
    simulation's end is at least the written bytes over ``store_mb_s`` (aggregate, all workers).
    ``cpu_s`` of the result counts the tasks only; :meth:`Costs.overhead_cpu` is the rest."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: need at least one")
    if speed <= 0:
        raise ValueError(f"speed = {speed}: need > 0")
    r = audit.replicates
    chunk = r if replicates_per_task is None else max(1, min(r, replicates_per_task))
    # work units: (state index, replicates in this unit)
    units: list[tuple[int, int]] = []
    for i in range(len(audit.states)):
        left = r
        while left > 0:
            k = min(chunk, left)
            units.append((i, k))
            left -= k
    unit_cost = [costs.state_task(audit.states[i], k, padded) for i, k in units]
    n_tasks = len(units) if tasks_per_worker == 0 else min(len(units), workers * tasks_per_worker)
    groups = pack(unit_cost, max(1, n_tasks)) if units else []
    o = costs.task_s
    durations: list[float] = []
    deps: list[list[int]] = []
    acct = [costs.account_composed_s] if audit.composed else []
    acct += [costs.account_level_s] * audit.account_levels
    for a in acct:
        durations.append(a + o)
        deps.append([])
    lay = 0 if padded else 1
    if audit.empty_bytes[lay] > 0:
        durations.append(audit.empty_bytes[lay] / 1e6 / costs.write_mb_s + o)
        deps.append([])
    sim_ids = []
    for g in groups:
        sim_ids.append(len(durations))
        durations.append(sum(unit_cost[i] for i in g) + o)
        deps.append([])
    last_sim = list(sim_ids)
    if audit.nation and sim_ids:
        last_sim = [len(durations)]
        durations.append(audit.nation_bytes[lay] / 1e6 / costs.write_mb_s + o)
        deps.append(list(sim_ids))
    epl_ids = []
    for items in audit.level_items:
        epl_ids.append(len(durations))
        durations.append(costs.epl_s + costs.epl_s_per_mresidual * items * r / 1e6 + o)
        deps.append(list(sim_ids))
    durations = [d / speed for d in durations]
    # each worker process first starts (imports, client) and gets the spine: its first task waits
    _, finish = list_schedule(durations, workers, deps)
    start_pad = costs.worker_start() / speed
    sim_end = max((finish[i] for i in last_sim), default=0.0) + start_pad
    total_bytes = (
        sum(
            (s.write_bytes_per_replicate if padded else s.data_bytes_per_replicate) * r
            for s in audit.states
        )
        + audit.empty_bytes[lay]
        + audit.nation_bytes[lay]
    )
    write_bound = total_bytes / 1e6 / store_mb_s if store_mb_s else 0.0
    notes: list[str] = []
    crit = max(unit_cost, default=0.0) / speed
    total = sum(durations)
    shift = 0.0
    if write_bound > sim_end:
        notes.append(
            f"store-bound: {total_bytes / 1e12:.2f} TB at {store_mb_s:g} MB/s take "
            f"{write_bound:.0f} s, more than the {sim_end:.0f} s of compute"
        )
        shift = write_bound - sim_end
        sim_end = write_bound
    epl_end = max((finish[i] for i in epl_ids), default=sim_end - start_pad) + start_pad + shift
    acct_end = max((finish[i] for i in range(len(acct))), default=0.0) + start_pad
    end = max(sim_end, epl_end, acct_end)
    sim_work = sum(durations[i] for i in sim_ids)
    # what sets the wall time
    if acct_end >= max(sim_end, epl_end):
        bound = "accounting"
    elif epl_end - sim_end > 0.25 * end:
        bound = "EPL after the simulation"
    elif shift > 0:
        bound = "store throughput"
    elif crit + start_pad >= 0.9 * sim_end:
        bound = "largest state task"
    elif sim_work / workers >= 0.8 * (sim_end - start_pad):
        bound = "work / workers"
    else:
        bound = "batching"
    wall = costs.flow_s / speed + end
    peak = max(
        (costs.memory_mb(audit.states[i], k, padded) for i, k in units),
        default=0.0,
    )
    return Prediction(
        workers=workers,
        wall_s=wall,
        simulation_s=sim_end,
        epl_s=max(0.0, epl_end - sim_end),
        critical_state_s=crit,
        cpu_s=total,
        write_bound_s=write_bound,
        bound=bound,
        tasks=len(durations),
        peak_task_mb=peak,
        notes=notes,
    )


def fit_process_overhead(
    runs: Sequence[tuple[int, float, float]],
) -> tuple[float, float]:
    """(fixed CPU-s per run, CPU-s per worker process) of the CPU that runs spent besides their
    tasks, from ``runs`` of (workers, measured CPU-s of every process, modelled CPU-s of the
    tasks): least squares of ``measured − modelled = fixed + workers · per_worker``, both ≥ 0
    (one run, or runs all on one worker count: all of it per worker)."""
    if not runs:
        raise ValueError("no runs to fit the per-process overhead from")
    w = [float(n) for n, _, _ in runs]
    y = [max(0.0, m - t) for _, m, t in runs]
    k = len(runs)
    mw, my = sum(w) / k, sum(y) / k
    sxx = sum((a - mw) ** 2 for a in w)
    if sxx == 0:
        return 0.0, my / mw
    slope = sum((a - mw) * (b - my) for a, b in zip(w, y, strict=True)) / sxx
    fixed = my - slope * mw
    if slope < 0:  # no growth with the workers: a fixed cost only
        return my, 0.0
    if fixed < 0:  # through the origin: per worker only
        return 0.0, sum(a * b for a, b in zip(w, y, strict=True)) / sum(a * a for a in w)
    return fixed, slope


def replicates_per_task_for(
    costs: Costs, states: Sequence[StateWork], worker_mb: float, padded: bool = False
) -> int:
    """The most replicates one state task may hold with every state's task within ``worker_mb``
    (``Costs.memory_mb`` of the largest state), at least 1 (0: even one replicate does not fit)."""
    if not states:
        return 1

    def peak(k: int) -> float:
        return max(costs.memory_mb(s, k, padded) for s in states)

    if peak(1) > worker_mb:
        return 0
    k = 1
    while peak(2 * k) <= worker_mb and k < 1 << 20:
        k *= 2
    lo, hi = k, 2 * k  # peak(lo) fits, peak(hi) does not (memory grows with k)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if peak(mid) <= worker_mb else (lo, mid)
    return lo
