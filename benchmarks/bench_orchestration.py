"""Orchestration cost: Prefect + Dask vs plain Dask per simulation task, 1 → 2 worker speed-up, and
the full-US spine audit through ``dpaudit run``.

    .venv/bin/python benchmarks/bench_orchestration.py [--states N] [--replicates R] [--repeats K]
        [--tasks-per-worker T] [--mode overhead,speedup,spine]

1. ``overhead``: the audit flow's simulation batches (``flows.audit.batching``: ``2 workers ×
   --tasks-per-worker`` tasks, the spec's default) of a ``--states``-state synthetic spec at
   ``--replicates``, run as ``client.map`` on a 2-process LocalCluster and as Prefect tasks
   (``DaskTaskRunner`` on that cluster, one embedded API server). Overhead per task = (Prefect −
   Dask) CPU-s (every process: flow, scheduler, API server, workers) / tasks, against the mean task
   time measured inside the tasks; the same with one task per block (``tasks_per_worker = 0``).
2. ``speedup``: the batched Prefect + Dask simulation on 1 and 2 worker processes.
3. ``spine``: ``dpaudit run`` of the full-US spine TopDown audit (total query, 1 replicate) on a
   2-worker local cluster in a subprocess: wall time, peak resident memory of all its processes
   (sampled), store size.

Best of ``--repeats`` runs (alternating) for each figure; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
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


def run_sampled(
    cmd: list[str], sample: Callable[[Any, bool], int], tick: Callable[[], None] = lambda: None
) -> tuple[float, int, str]:
    """Run ``dpaudit`` ``cmd`` in a subprocess; every 0.2 s ``tick()``, then ``sample(p, root)``
    (inside ``p.oneshot()``; ``root``: ``p`` is the command's own process) of each process ``p`` of
    its tree, which returns its resident bytes (a process gone meanwhile is skipped). Wall seconds,
    the largest sampled resident bytes of the tree and the output; exits if the run fails."""
    import psutil

    t0 = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    while proc.poll() is None:
        tick()
        rss = 0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                with p.oneshot():
                    rss += sample(p, p is proc)
            except psutil.Error:
                continue
        peak = max(peak, rss)
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    text = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"dpaudit run failed ({proc.returncode}):\n{text[-3000:]}")
    return wall, peak, text


def template(url: str, plan: Any) -> None:
    from storage import store

    store.create_residual_template(
        url,
        **plan.template_layout(),
        attrs={"run_id": "bench"},
    )


def run_dask(
    client: Any, url: str, plan: Any, batches: list[Any]
) -> tuple[float, float, list[float]]:
    """(wall s, CPU s, seconds inside each task) of the batches as plain Dask tasks."""
    from flows.audit import tasks
    from storage.result_store import ResultStore

    template(url, plan)
    c0, t0 = cpu_seconds(), time.perf_counter()
    n = len(batches)
    blocks = [list(b.blocks) for b in batches]
    rs = ResultStore.at(url)
    futs = client.map(tasks.simulate_blocks.fn, [rs] * n, [plan] * n, blocks, pure=False)
    out = client.gather(futs)
    return time.perf_counter() - t0, cpu_seconds() - c0, [o["seconds"] for o in out]


def run_prefect(
    address: str, url: str, plan: Any, batches: list[Any]
) -> tuple[float, float, list[float]]:
    """(wall s, CPU s, seconds inside each task) of the batches as Prefect tasks on Dask."""
    from prefect import flow
    from prefect.futures import wait
    from prefect_dask import DaskTaskRunner

    from flows.audit import tasks

    @flow(name="bench-fan-out", task_runner=DaskTaskRunner(address=address))  # type: ignore[arg-type]
    def fan_out() -> list[dict[str, Any]]:
        futs = [
            tasks.simulate_blocks.with_options(task_run_name=f"simulate {b.label}").submit(
                url, plan, list(b.blocks)
            )
            for b in batches
        ]
        wait(futs)
        return [f.result() for f in futs]

    template(url, plan)
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = fan_out()
    return time.perf_counter() - t0, cpu_seconds() - c0, [o["seconds"] for o in out]


def plan_for(states: int | None, replicates: int | None) -> Any:
    from flows.spec import load_spec, parse_spec
    from flows.spec.plan import make_plan

    data = load_spec().model_dump(mode="json", by_alias=True)
    if states is not None:
        data["population"]["states"] = states
    if replicates is not None:
        data["audit"]["replicates"] = replicates
    return make_plan(parse_spec(data))


def cluster(n: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)


def overhead(tmp: str, plan: Any, per_worker: int, repeats: int) -> tuple[int, float]:
    from distributed import Client

    from flows.audit.batching import batch_blocks

    batches = batch_blocks(plan, list(plan.blocks), 2, per_worker)
    n = len(batches)
    with cluster(2) as c_, Client(c_) as client:
        run_dask(client, f"{tmp}/warm-{per_worker}.zarr", plan, batches[:2])  # imports, caches
        best: dict[str, tuple[float, float]] = {}
        task_s = 0.0
        for k in range(repeats):
            w, cpu, secs = run_dask(client, f"{tmp}/d{per_worker}-{k}.zarr", plan, batches)
            best["dask"] = min(best.get("dask", (w, cpu)), (w, cpu))
            task_s = sum(secs) / len(secs)
            w, cpu, _ = run_prefect(
                c_.scheduler_address, f"{tmp}/p{per_worker}-{k}.zarr", plan, batches
            )
            best["prefect"] = min(best.get("prefect", (w, cpu)), (w, cpu))
    (dw, dc), (pw, pc) = best["dask"], best["prefect"]
    states = sum(1 for b in plan.blocks if plan.geolevels[b.level] == "State")
    print(
        f"overhead, {states} states ({len(plan.blocks)} blocks, {plan.replicates} replicates) in "
        f"{n} tasks (tasks_per_worker = {per_worker}, 2 workers): plain Dask {dw:.2f} s wall / "
        f"{dc:.2f} CPU-s, Prefect + Dask {pw:.2f} s / {pc:.2f} CPU-s; Prefect adds {pc - dc:.2f} "
        f"CPU-s ({100 * (pc - dc) / dc:.1f} % of the Dask run's CPU), {(pc - dc) / n:.3f} CPU-s "
        f"per task; mean task {task_s:.3f} s wall inside; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    return n, pc - dc


def speedup(tmp: str, plan: Any, per_worker: int, repeats: int) -> None:
    from distributed import Client

    from flows.audit.batching import batch_blocks

    walls: dict[int, float] = {}
    cpus: dict[int, float] = {}
    for workers in (1, 2):
        batches = batch_blocks(plan, list(plan.blocks), workers, per_worker)
        with cluster(workers) as c, Client(c) as client:
            run_dask(client, f"{tmp}/warm{workers}.zarr", plan, batches[:workers])
            for k in range(repeats):
                url = f"{tmp}/s{workers}-{k}.zarr"
                w, cpu, _ = run_prefect(c.scheduler_address, url, plan, batches)
                if w < walls.get(workers, float("inf")):
                    walls[workers], cpus[workers] = w, cpu
    states = sum(1 for b in plan.blocks if plan.geolevels[b.level] == "State")
    print(
        f"speed-up, {states} states ({len(plan.blocks)} blocks, {plan.replicates} "
        f"replicates, tasks_per_worker = {per_worker}), Prefect + Dask: 1 worker {walls[1]:.2f} s "
        f"({cpus[1]:.1f} CPU-s), 2 workers {walls[2]:.2f} s ({cpus[2]:.1f} CPU-s), speed-up "
        f"{walls[1] / walls[2]:.2f}x; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )


SPINE_SPEC = """\
[audit]
allocation = "pl94_2021_production"
replicates = 1
[population]
kind = "spine"
spine_states = "all"
attributes = "total"
[release]
kind = "topdown"
[cluster]
n_workers = 2
"""


def spine(tmp: str) -> None:
    """``dpaudit run`` of the full-US spine audit in a subprocess; RSS of its process tree sampled."""
    import psutil

    spec = Path(tmp) / "spine.toml"
    spec.write_text(SPINE_SPEC)
    out = Path(tmp) / "spine.zarr"
    dpaudit = Path(sys.executable).with_name("dpaudit")
    cmd = [str(dpaudit), "run", str(spec), "--store", str(out), "--no-report"]
    cpu: dict[int, float] = {}  # last CPU time seen of every process of the tree

    def sample(p: psutil.Process, root: bool) -> int:
        rss = int(p.memory_info().rss)
        t = p.cpu_times()
        cpu[p.pid] = t.user + t.system
        return rss

    wall, peak, text = run_sampled(cmd, sample)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    from storage import store

    flow_s = store.root_attrs(str(out)).get("wall_time_s")
    print(
        f"full-US spine audit (TopDown, total, 1 replicate, 2 workers): dpaudit run {wall:.1f} s "
        f"(flow {flow_s} s), {sum(cpu.values()):.0f} CPU-s (all processes), peak RSS of all processes {peak / 2**20:.0f} MiB, store "
        f"{size / 2**20:.1f} MiB; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(text.strip().splitlines()[-1] if text.strip() else "", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=8, help="synthetic states")
    ap.add_argument("--replicates", type=int, default=None, help="replicates (default: spec's)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tasks-per-worker", type=int, default=None, help="default: the spec's")
    ap.add_argument("--mode", default="overhead,speedup", help="overhead, speedup, spine")
    args = ap.parse_args()
    modes = set(args.mode.split(","))

    from flows.runtime.cluster import apply_prefect_defaults

    apply_prefect_defaults()
    from flows.runtime.cluster import prefect_api
    from flows.spec import load_spec

    per_worker = args.tasks_per_worker
    if per_worker is None:
        per_worker = load_spec().cluster.tasks_per_worker
    print(machine_info(), flush=True)
    print(f"load before: {os.getloadavg()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="dpaudit-bench-")
    if "spine" in modes:
        spine(tmp)
    if modes & {"overhead", "speedup"}:
        with prefect_api():
            plan = plan_for(args.states, args.replicates)
            if "overhead" in modes:
                n1, e1 = overhead(tmp, plan, per_worker, args.repeats)
                n0, e0 = overhead(tmp, plan, 0, args.repeats)
                if n0 != n1:  # Prefect's CPU = per flow + per task x tasks: solve the two runs
                    per_task = (e0 - e1) / (n0 - n1)
                    print(
                        f"fit: Prefect costs {per_task:.3f} CPU-s per task and "
                        f"{e1 - n1 * per_task:.2f} CPU-s per flow run",
                        flush=True,
                    )
            if "speedup" in modes:
                speedup(tmp, plan, per_worker, args.repeats)
    print(f"load after: {os.getloadavg()}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
