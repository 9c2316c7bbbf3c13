"""The production-schema capacity model (``benchmarks/production_model.py``) against schedules
computed by hand: longest-first placement, the largest state's floor, splitting replicates,
the store's bound and the fewest workers for a deadline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from production_model import (
    LinearFit,
    ProductionState,
    fit_linear,
    lpt_finish,
    predict_production,
    scale_states,
    task_durations,
    workers_needed,
)

A = ProductionState("A", blocks=100, people=1000, setup_s=1.0, replicate_s=10.0)
B = ProductionState("B", blocks=10, people=100, setup_s=1.0, replicate_s=1.0)


def test_longest_first_placement() -> None:
    # Graham's case: 3 | 3, then 2 → worker free at 3, 2 → the other, 2 → 5 + 2 = 7
    assert lpt_finish([2, 2, 2, 3, 3], 2) == 7.0
    assert lpt_finish([1, 1, 1, 1], 2) == 2.0
    assert lpt_finish([5.0], 4) == 5.0
    assert lpt_finish([], 3) == 0.0
    with pytest.raises(ValueError, match="workers = 0"):
        lpt_finish([1.0], 0)


def test_task_durations_split_replicates_and_pay_writes() -> None:
    s = ProductionState("S", 1, 1, setup_s=2.0, replicate_s=3.0, bytes_per_replicate=1e6)
    # 5 replicates in tasks of 2, 2, 1; each 0.5 s of orchestration, the setup once per task,
    # per replicate 3 s + 1 MB at 1 MB/s
    got = task_durations([s], 5, replicates_per_task=2, task_s=0.5, write_mb_s=1.0)
    assert got == [0.5 + 2 + 2 * 4, 0.5 + 2 + 2 * 4, 0.5 + 2 + 1 * 4]
    assert task_durations([s], 5) == [2 + 5 * 3]
    with pytest.raises(ValueError, match="replicates = 0"):
        task_durations([s], 0)


def test_the_largest_state_bounds_one_task_per_state() -> None:
    # A: 1 + 3·10 = 31 s, B: 1 + 3 = 4 s; 2 workers: 31; + spine 2 s + flow 5 s = 38 s
    p = predict_production([A, B], 3, 2, worker_s=2.0, flow_s=5.0)
    assert (p.tasks, p.largest_task_s, p.compute_s, p.wall_s) == (2, 31.0, 33.0, 38.0)
    assert p.bound == "largest state task"
    assert p.cpu_s == 31 + 4 + 2 * 2
    # more workers do not help
    assert predict_production([A, B], 3, 64, worker_s=2.0, flow_s=5.0).wall_s == 38.0


def test_splitting_replicates_lifts_the_floor() -> None:
    # tasks 11, 11, 11 (A) and 2, 2, 2 (B) on 2 workers: 11 | 11, then 11 → 22 | 2, 2, 2 → 17
    p = predict_production([A, B], 3, 2, replicates_per_task=1, worker_s=2.0, flow_s=5.0)
    assert (p.tasks, p.largest_task_s, p.compute_s, p.wall_s) == (6, 11.0, 24.0, 29.0)
    assert p.bound == "work / workers"
    # 3 workers: 11 each, then 2 each → 13 (+2 + 5 = 20)
    p3 = predict_production([A, B], 3, 3, replicates_per_task=1, worker_s=2.0, flow_s=5.0)
    assert p3.wall_s == 20.0 and p3.bound == "work / workers"


def test_the_store_bounds_the_run() -> None:
    a = ProductionState("A", 1, 1, setup_s=0.0, replicate_s=1.0, bytes_per_replicate=50e6)
    # 4 replicates × 50 MB = 200 MB at 10 MB/s: 20 s, more than the 4 s of compute on 1 worker
    p = predict_production([a], 4, 1, store_mb_s=10.0)
    assert p.stored_bytes == 200e6 and p.write_bound_s == 20.0 and p.wall_s == 20.0
    assert p.bound == "store throughput"
    assert predict_production([a], 4, 1, store_mb_s=1000.0).wall_s == 4.0


def test_a_tasks_memory_grows_with_the_replicates_it_holds() -> None:
    # A: 500 MB at one replicate + 10 MB a further one; B: 600 MB, nothing more
    a = ProductionState("A", 1, 1, 0.0, 1.0, peak_mb=500.0, peak_mb_per_replicate=10.0)
    b = ProductionState("B", 1, 1, 0.0, 1.0, peak_mb=600.0)
    assert predict_production([a, b], 1, 2).peak_task_mb == 600.0
    assert predict_production([a, b], 60, 2).peak_task_mb == 500.0 + 59 * 10.0  # one task
    # in tasks of 25 replicates: 24 more; of 1: the one-replicate peaks, B's the larger
    assert predict_production([a, b], 60, 2, replicates_per_task=25).peak_task_mb == 740.0
    assert predict_production([a, b], 60, 2, replicates_per_task=1).peak_task_mb == 600.0


def test_fewest_workers_for_a_deadline() -> None:
    kw: dict[str, Any] = {"replicates_per_task": 1, "worker_s": 2.0, "flow_s": 5.0}
    # 1 worker: 39 s of tasks + 7 = 46 s; 2 workers: 29 s (above); 3 workers: 20 s
    assert workers_needed([A, B], 3, 30.0, **kw) == 2
    assert workers_needed([A, B], 3, 29.0, **kw) == 2
    assert workers_needed([A, B], 3, 28.9, **kw) == 3
    assert workers_needed([A, B], 3, 46.0, **kw) == 1
    # the floor, 11 + 2 + 5 = 18 s: 4 workers (A's three 11 s tasks, B's three 2 s on the fourth)
    assert workers_needed([A, B], 3, 18.0, **kw) == 4
    assert workers_needed([A, B], 3, 17.9, **kw) is None
    # one task per state: the floor is A's 31 s task
    assert workers_needed([A, B], 3, 37.9, worker_s=2.0, flow_s=5.0) is None


def test_linear_fit_and_scaled_states() -> None:
    f = fit_linear([1, 2, 3], [3, 5, 7])
    assert f.a == pytest.approx(1.0) and f.b == pytest.approx(2.0) and f.max_rel_err < 1e-12
    # OLS would give y = -1 + 2x; with a ≥ 0 the fit goes through the origin: b = Σxy / Σx² = 7/5
    origin = fit_linear([1, 2], [1, 3])
    assert origin.a == 0.0 and origin.b == pytest.approx(7 / 5)
    assert origin.max_rel_err == pytest.approx(max(abs(7 / 5 - 1), abs(14 / 5 - 3) / 3))
    falling = fit_linear([1, 2, 3], [5, 4, 3])  # a negative slope: the mean, flat
    assert (falling.a, falling.b) == (4.0, 0.0)
    one = fit_linear([2], [4])
    assert (one.a, one.b) == (0.0, 2.0)
    with pytest.raises(ValueError, match="as many"):
        fit_linear([1, 2], [1])
    fits = (LinearFit(1.0, 0.5, 0.0), LinearFit(0.0, 2.0, 0.0), LinearFit(0.0, 10.0, 0.0),
            LinearFit(100.0, 1.0, 0.0))  # fmt: skip
    got = scale_states([("A", 100, 1000), ("C", 4, 40)], *fits, measured={"A": A})
    assert got[0] is A
    assert got[1] == ProductionState("C", 4, 40, 3.0, 8.0, 40.0, 104.0)
    by_people = scale_states([("C", 4, 40)], *fits, by="people")
    assert by_people[0].replicate_s == 80.0
    with pytest.raises(ValueError, match="by = 'x'"):
        scale_states([("C", 4, 40)], *fits, by="x")
