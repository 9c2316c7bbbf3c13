"""The capacity model's pure prediction (``benchmarks/capacity_model.py``): list scheduling against
brute-force optimal schedules on tiny cases, dependencies, and the audit prediction's bounds and
monotonicity in the number of workers."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from capacity_model import (
    Audit,
    Costs,
    StateWork,
    fit_process_overhead,
    list_schedule,
    lpt_makespan,
    predict,
    replicates_per_task_for,
)

from tests.unit.test_batching import brute_force_makespan  # the best makespan, by brute force

COSTS = Costs(
    setup_s=0.1,
    setup_s_per_block=1e-6,
    rep_s=0.05,
    rep_s_per_block=1e-5,
    rep_s_per_person=0.0,
    write_mb_s=300.0,
    task_s=0.3,
    flow_s=5.0,
    worker_s=1.5,
    epl_s=0.1,
    epl_s_per_mresidual=0.03,
    account_level_s=0.5,
    account_composed_s=60.0,
    mem_mb=500.0,
    mem_mb_per_block=1e-3,
    mem_mb_per_block_replicate=2e-4,
    mem_mb_per_replicate=10.0,
)


def random_audit(g: np.random.Generator, n_states: int, replicates: int) -> Audit:
    states = tuple(
        StateWork(f"S{i}", int(g.lognormal(11, 1)), 0, float(g.uniform(0, 1e9)))
        for i in range(n_states)
    )
    return Audit(states, replicates, (10, 1_000, 100_000), account_levels=3, composed=True)


def test_lpt_within_grahams_bound_of_brute_force_optimum() -> None:
    g = np.random.default_rng(20261124)
    for _ in range(150):
        n = int(g.integers(1, 8))
        m = int(g.integers(1, 4))
        d = [float(x) for x in g.integers(1, 20, size=n)]
        opt = brute_force_makespan(d, m)
        lpt = lpt_makespan(d, m)
        assert opt >= max(max(d), sum(d) / m) - 1e-9
        assert opt - 1e-9 <= lpt <= (4 / 3 - 1 / (3 * m)) * opt + 1e-9, (d, m, lpt, opt)


def test_lpt_meets_grahams_bound_exactly_and_list_order_matters() -> None:
    # Graham's tight case for 2 workers: LPT puts 3 | 3, then 2+2 | 2 on top: 7; the optimum
    # is 3+3 | 2+2+2 = 6, and 7 = (4/3 - 1/6) * 6
    assert lpt_makespan([2, 2, 2, 3, 3], 2) == 7.0
    assert brute_force_makespan([2, 2, 2, 3, 3], 2) == 6.0
    # short tasks first: 1 | 1, then 2 on the first free worker: 3; longest first: 2 | 1+1 = 2
    assert list_schedule([1, 1, 2], 2)[0] == 3.0
    assert lpt_makespan([1, 1, 2], 2) == 2.0 == brute_force_makespan([1, 1, 2], 2)


def test_dependencies_wait_and_later_ready_tasks_pass() -> None:
    # a chain takes its sum whatever the workers
    assert list_schedule([1, 2, 3], 5, [[], [0], [1]])[0] == 6.0
    # task 1 waits for task 0 (4 s); task 2 (ready) runs meanwhile on the second worker
    span, finish = list_schedule([4, 1, 2], 2, [[], [0], []])
    assert finish == [4.0, 5.0, 2.0] and span == 5.0
    with pytest.raises(ValueError, match="cycle"):
        list_schedule([1, 1], 2, [[1], [0]])


def test_prediction_is_monotone_in_workers_with_one_task_per_state() -> None:
    g = np.random.default_rng(3)
    for _ in range(20):
        audit = random_audit(g, int(g.integers(1, 30)), int(g.integers(1, 20)))
        walls = [predict(audit, COSTS, n, tasks_per_worker=0).wall_s for n in range(1, 40)]
        assert all(b <= a + 1e-9 for a, b in itertools.pairwise(walls)), walls


def test_prediction_bounds_and_the_largest_state() -> None:
    g = np.random.default_rng(11)
    for _ in range(20):
        audit = random_audit(g, int(g.integers(2, 40)), int(g.integers(1, 10)))
        largest = max(COSTS.state_task(s, audit.replicates) for s in audit.states)
        work = sum(COSTS.state_task(s, audit.replicates) for s in audit.states)
        for n in (1, 2, 4, 16, 64, 256):
            p = predict(audit, COSTS, n)
            assert p.critical_state_s == pytest.approx(largest)
            assert p.simulation_s >= max(largest, work / n) - 1e-9
            assert p.wall_s >= p.simulation_s + COSTS.flow_s - 1e-9
    # beyond one worker per state the wall time stays that of the largest state's task
    audit = random_audit(np.random.default_rng(5), 10, 4)
    w = [predict(audit, COSTS, n).wall_s for n in (10, 20, 256)]
    assert w[0] == pytest.approx(w[1]) == pytest.approx(w[2])
    # splitting a state's replicates over tasks removes that floor
    split = predict(audit, COSTS, 256, replicates_per_task=1)
    assert split.simulation_s < predict(audit, COSTS, 256).simulation_s


def test_store_throughput_bounds_the_simulation() -> None:
    audit = random_audit(np.random.default_rng(2), 8, 5)
    total_mb = sum(s.write_bytes_per_replicate for s in audit.states) * 5 / 1e6
    free = predict(audit, COSTS, 64)
    slow = predict(audit, COSTS, 64, store_mb_s=total_mb / (10 * free.simulation_s))
    assert slow.bound == "store throughput"
    assert slow.simulation_s == pytest.approx(10 * free.simulation_s)
    assert slow.wall_s > free.wall_s


def test_shared_cores_slow_every_task() -> None:
    audit = random_audit(np.random.default_rng(4), 6, 2)
    full = predict(audit, COSTS, 2)
    half = predict(audit, COSTS, 2, speed=0.5)
    assert half.wall_s == pytest.approx(2 * full.wall_s)
    with pytest.raises(ValueError):
        predict(audit, COSTS, 0)


def test_each_worker_process_pays_its_start_hand_computed() -> None:
    """One state of 3 replicates on one worker: setup 1 s + 3 × 2 s, a task cost of 0.5 s, then the
    worker's start (spine 4 s + process 6 s) before it, and the flow's 3 s: 20.5 s."""
    costs = Costs(
        **{
            **COSTS.as_dict(),
            "setup_s": 1.0,
            "setup_s_per_block": 0.0,
            "rep_s": 2.0,
            "rep_s_per_block": 0.0,
            "task_s": 0.5,
            "flow_s": 3.0,
            "worker_s": 4.0,
            "process_s": 6.0,
            "fixed_cpu_s": 50.0,
        }
    )
    audit = Audit(
        (StateWork("S", 1000, 0, 0.0),), 3, (), account_levels=0, composed=False, nation=False
    )
    p = predict(audit, costs, 1)
    assert p.simulation_s == pytest.approx(7.5 + 10.0)
    assert p.wall_s == pytest.approx(3.0 + 7.5 + 10.0)
    assert p.cpu_s == pytest.approx(7.5)  # the tasks only
    # without the per-process cost: 4 s of spine only
    base = Costs(**{**costs.as_dict(), "process_s": 0.0})
    assert predict(audit, base, 1).wall_s == pytest.approx(3.0 + 7.5 + 4.0)
    # at half a core every second doubles, the process's start included
    assert predict(audit, costs, 1, speed=0.5).wall_s == pytest.approx(41.0)
    # the CPU beside the tasks: 4 workers × (4 + 6) s + the run's own 50 s
    assert costs.worker_start() == pytest.approx(10.0)
    assert costs.overhead_cpu(4) == pytest.approx(90.0)
    # split into 3 tasks of one replicate on 3 workers: each 1 + 2 + 0.5 s after its 10 s start
    split = predict(audit, costs, 3, replicates_per_task=1, tasks_per_worker=0)
    assert split.tasks == 3
    assert split.wall_s == pytest.approx(3.0 + 3.5 + 10.0)


def test_fit_of_the_per_process_overhead_hand_computed() -> None:
    # measured − modelled = 20, 30, 50 CPU-s on 1, 2, 4 workers: 10 s per run + 10 s per worker
    fixed, per = fit_process_overhead([(1, 25.0, 5.0), (2, 35.0, 5.0), (4, 55.0, 5.0)])
    assert (fixed, per) == (pytest.approx(10.0), pytest.approx(10.0))
    # 20 and 60 on 1 and 3 workers: 20 per worker, nothing fixed
    assert fit_process_overhead([(1, 30.0, 10.0), (3, 70.0, 10.0)]) == (
        pytest.approx(0.0),
        pytest.approx(20.0),
    )
    # fewer with more workers (noise): the mean, fixed
    assert fit_process_overhead([(1, 50.0, 0.0), (2, 40.0, 0.0)]) == (45.0, 0.0)
    # a negative intercept: through the origin, (1·5 + 2·20) / (1 + 4) = 9 per worker
    assert fit_process_overhead([(1, 5.0, 0.0), (2, 20.0, 0.0)]) == (0.0, pytest.approx(9.0))
    # one run: all of it per worker
    assert fit_process_overhead([(2, 30.0, 10.0)]) == (0.0, pytest.approx(10.0))
    with pytest.raises(ValueError):
        fit_process_overhead([])


def test_replicates_per_task_within_a_memory_budget_hand_computed() -> None:
    """Memory of a state task: 500 + 10⁻³·blocks + k·(2·10⁻⁴·blocks + 10) MB, plus its largest
    region's write (items × (4k + 14) bytes). 10⁶ blocks, 10⁶ items: 1,500 + k·210 + 4k + 14 MB."""
    big = StateWork("B", 1_000_000, 0, 0.0, data_buffer_items=1_000_000)
    small = StateWork("S", 1_000, 0, 0.0, data_buffer_items=1_000)
    assert COSTS.memory_mb(big, 1, padded=False) == pytest.approx(1514 + 214)
    # 1,514 + 214·k ≤ 16,000: k ≤ 67.7
    assert replicates_per_task_for(COSTS, [small, big], 16_000) == 67
    assert replicates_per_task_for(COSTS, [small, big], 1514 + 214 * 5) == 5
    assert replicates_per_task_for(COSTS, [small, big], 1514 + 214 * 5 - 1) == 4
    assert replicates_per_task_for(COSTS, [small, big], 1_000) == 0  # not even one
