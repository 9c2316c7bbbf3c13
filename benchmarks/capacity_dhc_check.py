"""The capacity model of the DHC (``production_states.py predict``) against real ``dpaudit run``s:
the DHC production audit (``benchmarks/specs/dhc_production_us.toml``) over a few states already
in the ledger (``results/dhc_us_states.jsonl``), one replicate, on 1, 2 and 4 local workers, each
run's flow wall time beside the model's prediction (not a test).

    PYTHONPATH=. .venv/bin/python benchmarks/capacity_dhc_check.py run \\
        [--states ST49,ST39,ST51,ST30] [--workers 1,2,4]
    PYTHONPATH=. .venv/bin/python benchmarks/capacity_dhc_check.py show

``run`` writes ``results/capacity_dhc_check.csv`` (one row per run) and prints the table; ``show``
prints it again from the CSV and today's ledger. A run is the spec's, restricted to the states, on
``n`` workers (8 GiB each, one thread), without a report.

Two predictions of a run on ``n`` workers, as ``capacity_production_check.py`` makes PL94's: the
tasks' makespan, longest first (``production_model.predict_production``, a task per state, the
Prefect cost of a task and the spine per worker as ``capacity.py`` measured them), each worker at
its share of the machine's cores (``min(1, cores / n)``), plus the run's fixed part (the 1-worker
run's flow beyond its predicted tasks, so that run's error is 0 by construction and the 2- and
4-worker runs test it). A state's cost is either its ledger row's CPU-s (*recorded*: tests the
scheduling) or the fit in people over the batches' rows that ``predict --batches-only`` uses for
the states not yet run (*fitted*: tests what the national prediction rests on)."""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine_info  # noqa: E402
from _results import check_main, read_check_rows  # noqa: E402

SPEC = HERE / "specs" / "dhc_production_us.toml"
LEDGER = HERE / "results" / "dhc_us_states.jsonl"
CHECK_CSV = HERE / "results" / "capacity_dhc_check.csv"
#: four of batch 1's states, 0.64–1.15 M people: ≈ 720 worker CPU-s in the ledger
DEFAULT_STATES = "ST49,ST39,ST51,ST30"


def spec_data(states: list[str], workers: int) -> dict[str, Any]:
    """The DHC production spec over ``states`` on ``workers`` local workers."""
    data = tomllib.loads(SPEC.read_text())
    data["audit"]["name"] = f"capacity check: {data['audit']['name']}, {len(states)} states"
    data["population"]["spine_states"] = states
    data["cluster"] = {"n_workers": workers, "threads_per_worker": 1, "memory_limit": "8GiB"}
    return data


def predictions(states: list[str], workers: int) -> dict[str, float]:
    """The model's wall time of the tasks on ``workers`` workers at their share of this machine's
    cores, from the recorded costs and from the fitted ones."""
    import capacity
    from production_model import ProductionState, fit_linear, predict_production
    from production_states import _ledger

    rows = _ledger(str(LEDGER))
    missing = [s for s in states if s not in rows]
    if missing:
        raise SystemExit(f"not in {LEDGER.name}: {' '.join(missing)}; check recorded states")
    batch = [r for r in rows.values() if r["blocks_sha256"]]
    fit = fit_linear([float(r["people"]) for r in batch], [r["cpu_s"] for r in batch])
    _, _, measured = capacity.production_measured()
    costs = capacity.load_costs()[0] if capacity.MEASURE_JSON.exists() else None
    kw = {
        "task_s": costs.task_s if costs else 0.3,
        "worker_s": max(r["spine_cpu_s"] for r in measured),
    }
    speed = min(1.0, (os.cpu_count() or 1) / workers)
    out = {}
    for name, cost in (("recorded", lambda r: r["cpu_s"]), ("fitted", lambda r: fit(r["people"]))):
        picked = [ProductionState(s, 0, rows[s]["people"], 0.0, cost(rows[s])) for s in states]
        p = predict_production(picked, 1, workers, **kw)
        out[f"{name}_s"] = p.wall_s / speed
        out[f"{name}_work_s"] = p.cpu_s
    return out


def run(args: argparse.Namespace) -> None:
    from capacity import check_runs, write_rows

    print(machine_info(), flush=True)
    states = args.states.split(",")
    predictions(states, 1)  # every state is in the ledger, before any run
    workers = [int(x) for x in args.workers.split(",")]
    rows = check_runs(lambda n: spec_data(states, n), workers, states, 1)
    write_rows(CHECK_CSV, rows)
    show(args)


def show(args: argparse.Namespace) -> None:
    runs = read_check_rows(CHECK_CSV, "capacity_dhc_check.py")
    one = next((r for r in runs if int(r["workers"]) == 1), None)
    fixed = {"recorded": 0.0, "fitted": 0.0}
    if one is not None:
        p1 = predictions(one["states"].split(";"), 1)
        fixed = {k: max(0.0, float(one["flow_s"]) - p1[f"{k}_s"]) for k in fixed}
    print(f"fixed part (the 1-worker run's flow beyond its tasks): recorded costs "
          f"{fixed['recorded']:.0f} s, fitted {fixed['fitted']:.0f} s")  # fmt: skip
    print("| workers | measured flow | recorded costs | error | fitted costs | error | load |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        n, flow = int(r["workers"]), float(r["flow_s"])
        p = predictions(r["states"].split(";"), n)
        cells = []
        for k in ("recorded", "fitted"):
            pred = p[f"{k}_s"] + fixed[k]
            cells.append(f"{pred:.0f} s | {100 * (pred - flow) / flow:+.0f} %")
        print(
            f"| {n} | {flow:.0f} s | {' | '.join(cells)} | "
            f"{float(r['load_before']):.1f}–{float(r['load_after']):.1f} |"
        )


def main() -> None:
    check_main(__doc__, run, show, DEFAULT_STATES)


if __name__ == "__main__":
    main()
