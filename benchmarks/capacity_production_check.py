"""The production capacity model (``capacity.py production``) against real ``dpaudit run``s: the
``pl94_production`` spine audit of a few states, one replicate, on 1, 2 and 4 local workers, each
run's flow wall time beside the model's prediction from the per-state costs it uses (not a test).

    PYTHONPATH=. .venv/bin/python benchmarks/capacity_production_check.py run \\
        [--states S05,S12,…] [--workers 1,2,4] [--replicates 1]
    PYTHONPATH=. .venv/bin/python benchmarks/capacity_production_check.py show

``run`` writes ``results/capacity_production_check.csv`` (one row per run) and prints the table;
``show`` prints it again from the CSV and today's per-state costs. The spec is the production
audit's (``benchmarks/specs/pl94_production_us.toml``) over the given states of the spine the
benchmark measured (``population.seed`` = ``bench_production.SEED``, so ``S05`` is ``ST05`` of
the same spine), without the composed accounting (its cold 61 CPU-s is not in the model) and
without a report.

The model's prediction of a run on ``n`` workers: the tasks' makespan, longest first
(``production_model.predict_production``: each state's population and replicate CPU-s, the
Prefect cost of a task, the spine per worker), with each worker at its share of the machine's
cores (``min(1, cores / n)``: 4 workers on 2 cores run at half speed), plus the run's fixed
part, which the model leaves out (the per-level accounting, the EPL, the blocks' writes, the
template): the flow's wall time beyond the tasks on one worker (the 1-worker run's flow minus its
predicted tasks) is given beside it, so the 1-worker run's error with it is 0 by construction
and the 2- and 4-worker runs test it. (The CSV of 2026-11-30 was written while ``capacity.run_dpaudit`` still added each
process's reaped children to its own CPU, counting the workers twice: its CPU-s columns
overstate, and the table leaves them out.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine_info  # noqa: E402
from _results import check_main, read_check_rows  # noqa: E402

CHECK_CSV = HERE / "results" / "capacity_production_check.csv"
#: a mix of sizes (blocks 15,074 to 402,387 of the benchmark's spine): ≈ 130 worker CPU-s in all
DEFAULT_STATES = "S01,S10,S22,S30,S41,S44,S46,S49"


def spec_data(labels: list[str], replicates: int, workers: int, seed: int) -> dict[str, Any]:
    """The production audit's spec over ``labels`` (``S05`` → the spine's ``ST05``)."""
    return {
        "audit": {
            "name": "capacity check: pl94_production, some states",
            "allocation": "pl94_2021_production",
            "replicates": replicates,
        },
        "population": {
            "kind": "spine",
            "attributes": "pl94_production",
            "spine_states": [f"ST{s[1:]}" for s in labels],
            "seed": seed,
        },
        "release": {"kind": "topdown"},
        "accounting": {"composed": False, "cache": False},
        "cluster": {"n_workers": workers, "threads_per_worker": 1, "memory_limit": "8GiB"},
    }


def predictions(labels: list[str], replicates: int, workers: int) -> dict[str, float]:
    """The model's wall time of the tasks on ``workers`` workers, dedicated and at their share of
    this machine's cores."""
    from capacity import production_measured, production_states
    from production_model import predict_production

    _, _, rows = production_measured()
    states, _ = production_states(rows)
    picked = [s for s in states if s.label in labels]
    if len(picked) != len(labels):
        raise SystemExit(f"unknown states in {labels}: the spine has S01..S{len(states):02d}")
    spine_s = max(r["spine_cpu_s"] for r in rows)
    p = predict_production(picked, replicates, workers, task_s=0.3, worker_s=spine_s)
    speed = min(1.0, (os.cpu_count() or 1) / workers)
    return {"dedicated_s": p.wall_s, "shared_s": p.wall_s / speed, "work_cpu_s": p.cpu_s}


def run(args: argparse.Namespace) -> None:
    from bench_production import SEED
    from capacity import check_runs, write_rows

    print(machine_info(), flush=True)
    labels = args.states.split(",")
    workers = [int(x) for x in args.workers.split(",")]
    rows = check_runs(
        lambda n: spec_data(labels, args.replicates, n, SEED), workers, labels, args.replicates
    )
    write_rows(CHECK_CSV, rows)
    show(args)


def show(args: argparse.Namespace) -> None:
    runs = read_check_rows(CHECK_CSV, "capacity_production_check.py")
    one = next((r for r in runs if int(r["workers"]) == 1), None)
    fixed = 0.0
    if one is not None:
        p1 = predictions(one["states"].split(";"), int(one["replicates"]), 1)
        fixed = max(0.0, float(one["flow_s"]) - p1["shared_s"])
    print(
        f"| workers | measured flow | predicted (shared cores) | error | with the 1-worker run's "
        f"fixed {fixed:.0f} s | error | modelled work | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        n, reps = int(r["workers"]), int(r["replicates"])
        p = predictions(r["states"].split(";"), reps, n)
        flow = float(r["flow_s"])
        err = 100 * (p["shared_s"] - flow) / flow
        err_f = 100 * (p["shared_s"] + fixed - flow) / flow
        print(
            f"| {n} | {flow:.0f} s | {p['shared_s']:.0f} s | {err:+.0f} % | "
            f"{p['shared_s'] + fixed:.0f} s | {err_f:+.0f} % | {p['work_cpu_s']:.0f} CPU-s | "
            f"{float(r['load_before']):.1f}–{float(r['load_after']):.1f} |"
        )


def main() -> None:
    check_main(__doc__, run, show, DEFAULT_STATES, replicates=True)


if __name__ == "__main__":
    main()
