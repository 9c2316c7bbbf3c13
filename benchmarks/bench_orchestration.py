"""Orchestration cost: Prefect + Dask vs plain Dask per simulation task, and 1 → 2 worker speed-up.

    .venv/bin/python benchmarks/bench_orchestration.py [--states N] [--replicates R] [--repeats K]

1. Overhead per task at the default chunking (one task per (state, geolevel) block, the shipped spec):
   the same block function runs as ``client.map`` on a 2-process LocalCluster and as Prefect tasks
   (``DaskTaskRunner`` on that cluster, one embedded API server). Overhead per task =
   (Prefect wall − Dask wall) × workers / tasks, against the mean task time measured inside the tasks.
2. Speed-up of the Prefect + Dask simulation from 1 to 2 worker processes on a state-parallel spec
   (``--states`` states, all blocks independent).

Best of ``--repeats`` runs (alternating) for each figure; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

from _machine import machine_info


def cpu_seconds() -> float:
    """CPU time of this process and all its descendants: flow, scheduler, API server, workers."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def template(url: str, plan: Any) -> None:

    from storage import store

    sigma2 = plan.sigma2_matrix()
    store.create_residual_template(
        url,
        states=plan.states,
        geolevels=plan.geolevels,
        replicates=plan.replicates,
        n_items=plan.n_items_max,
        queries=plan.queries,
        sigma2=sigma2,
        attrs={"run_id": "bench"},
    )


def run_dask(client: Any, url: str, plan: Any) -> tuple[float, float, list[float]]:
    """(wall s, CPU s, seconds inside each task) of the blocks as plain Dask tasks."""
    from flows import tasks

    template(url, plan)
    c0, t0 = cpu_seconds(), time.perf_counter()
    n = len(plan.blocks)
    futs = client.map(tasks.simulate_block.fn, [url] * n, [plan] * n, list(plan.blocks), pure=False)
    out = client.gather(futs)
    return time.perf_counter() - t0, cpu_seconds() - c0, [o["seconds"] for o in out]


def run_prefect(address: str, url: str, plan: Any) -> tuple[float, float, list[float]]:
    """(wall s, CPU s, seconds inside each task) of the blocks as Prefect tasks on Dask."""
    from prefect import flow
    from prefect.futures import wait
    from prefect_dask import DaskTaskRunner

    from flows import tasks

    @flow(name="bench-fan-out", task_runner=DaskTaskRunner(address=address))  # type: ignore[arg-type]
    def fan_out() -> list[dict[str, Any]]:
        futs = [tasks.simulate_block.submit(url, plan, b) for b in plan.blocks]
        wait(futs)
        return [f.result() for f in futs]

    template(url, plan)
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = fan_out()
    return time.perf_counter() - t0, cpu_seconds() - c0, [o["seconds"] for o in out]


def plan_for(states: int | None, replicates: int | None) -> Any:
    from flows.plan import make_plan
    from flows.spec import load_spec, parse_spec

    data = load_spec().model_dump(mode="json", by_alias=True)
    if states is not None:
        data["population"]["states"] = states
    if replicates is not None:
        data["audit"]["replicates"] = replicates
    return make_plan(parse_spec(data))


def cluster(n: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=4, help="states of the speed-up spec")
    ap.add_argument("--replicates", type=int, default=None, help="replicates (default: spec's)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from flows.runtime import apply_prefect_defaults

    apply_prefect_defaults()
    from distributed import Client

    from flows.runtime import prefect_api

    print(machine_info())
    tmp = tempfile.mkdtemp(prefix="dpaudit-bench-")
    with prefect_api():
        plan = plan_for(None, args.replicates)
        n = len(plan.blocks)
        with cluster(2) as c_, Client(c_) as client:
            run_dask(client, f"{tmp}/warm.zarr", plan)  # imports and caches on the workers
            best: dict[str, tuple[float, float]] = {}
            task_s = 0.0
            for k in range(args.repeats):
                w, cpu, secs = run_dask(client, f"{tmp}/d{k}.zarr", plan)
                best["dask"] = min(best.get("dask", (w, cpu)), (w, cpu))
                task_s = sum(secs) / len(secs)
                w, cpu, _ = run_prefect(c_.scheduler_address, f"{tmp}/p{k}.zarr", plan)
                best["prefect"] = min(best.get("prefect", (w, cpu)), (w, cpu))
        (dw, dc), (pw, pc) = best["dask"], best["prefect"]
        wall_task = (pw - dw) * 2 / n
        cpu_task = (pc - dc) / n
        print(
            f"overhead, default spec ({n} blocks, {plan.replicates} replicates, 2 workers): "
            f"plain Dask {dw:.2f} s wall / {dc:.2f} CPU-s, Prefect + Dask {pw:.2f} s / {pc:.2f} CPU-s; "
            f"mean task {task_s:.3f} s; overhead per task {wall_task:.3f} s wall "
            f"({100 * wall_task / task_s:.0f} % of task time), {cpu_task:.3f} CPU-s "
            f"({100 * cpu_task / task_s:.0f} %)"
        )
        sp = plan_for(args.states, args.replicates)
        walls: dict[int, float] = {}
        for workers in (1, 2):
            with cluster(workers) as c, Client(c) as client:
                run_dask(client, f"{tmp}/warm{workers}.zarr", sp)
                fastest = float("inf")
                for k in range(args.repeats):
                    w, _, _ = run_prefect(c.scheduler_address, f"{tmp}/s{workers}-{k}.zarr", sp)
                    fastest = min(fastest, w)
                walls[workers] = fastest
        print(
            f"speed-up, {args.states} states ({len(sp.blocks)} blocks), Prefect + Dask: "
            f"1 worker {walls[1]:.2f} s, 2 workers {walls[2]:.2f} s, "
            f"speed-up {walls[1] / walls[2]:.2f}x"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
