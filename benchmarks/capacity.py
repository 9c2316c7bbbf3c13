"""Capacity model of a spine TopDown audit: measure the costs, predict an audit's wall time on N
workers, check the prediction against real runs.

    .venv/bin/python benchmarks/capacity.py measure [--states auto:8 | ST38,ST10,…] [--s3-url s3://b/p]
    .venv/bin/python benchmarks/capacity.py predict [--replicates 1000] [--workers 16,64,256]
    .venv/bin/python benchmarks/capacity.py check [--workers 1,2,4] [--states …] [--replicates 3]
    .venv/bin/python benchmarks/capacity.py production [--replicates 1,100] [--workers 2,16,64,256]

``measure`` (40 CPU-s of TopDown and 13 GB of padded writes, plus a small audit; 30 min at
load 15–30 on 2 shared cores; ``--resume`` reuses what an interrupted run measured) runs, each in a fresh process (its own peak RSS, CPU-s by
``time.process_time``, one BLAS thread as on a Dask worker), one state of the audit's spine over the
``pl94`` schema as the flow's task does (``flows.audit.blocks.topdown_state``: histograms, every replicate's
TopDown, residuals) and writes its regions into a local Zarr store of the audit's layout
(``storage.store.write_residual_block``); the states span the smallest to the largest. It fits
CPU-s ≈ a + b·blocks (setup: histograms) and a + b·blocks + c·people (per replicate), peak memory,
the store's write rate, the per-task cost of a Prefect task on Dask (no-op tasks, Prefect vs plain
Dask on one worker), and, from a small audit run through ``dpaudit run``, the flow's fixed cost and
the EPL and accounting tasks' costs. Results: ``benchmarks/results/capacity_measure.json``.

``predict`` reads them, takes every state's blocks and people from the spine
(``auditlib.geography.spine``, the audit's population seed) and each region's written bytes from the
audit's plan, and places the flow's tasks on N workers (``capacity_model.predict``). ``check`` runs a
moderate audit (6 states × 2 replicates) through ``dpaudit run`` on 1, 2 and 4 local worker
processes (≈ 100 CPU-s each; 10–13 min each at load 16–28) and compares. Each mode
rewrites its CSV in ``benchmarks/results/`` and regenerates ``benchmarks/capacity.md`` from all of
them: re-run ``measure`` after a change to TopDown or the store, then ``predict`` and ``check``.

``production`` reads ``benchmarks/bench_production.py``'s per-state costs of the ``pl94_production``
schema (sparse TopDown; finished runs and the states a running one has finished): each state's
compute costs from the one-replicate run with most states, the newest among equals (other runs
give only the states it lacks), its stored bytes from the first of them that wrote a store
(``--runs A,B`` names the runs instead); it fits the states not measured linearly in blocks, and predicts full-US audits on N workers with
``production_model.predict_production`` (and the fewest workers for ``--deadline-h``); its section
of ``capacity.md`` is replaced in place.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as Dask's nanny starts workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import csv
import dataclasses
import json
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _machine import commit, machine_info  # noqa: E402
from _results import write_rows  # noqa: E402
from capacity_model import (  # noqa: E402
    Audit,
    Costs,
    StateWork,
    fit_process_overhead,
    predict,
    replicates_per_task_for,
)

RESULTS = HERE / "results"
MEASURE_JSON = RESULTS / "capacity_measure.json"
STATES_JSON = RESULTS / "capacity_states.json"
ORCH_JSON = RESULTS / "capacity_orchestration.json"  # per-state figures, kept as they are measured
PREDICT_CSV = RESULTS / "capacity_predict.csv"
CHECK_RUNS_CSV = RESULTS / "capacity_check_runs.csv"
CHECK_CSV = RESULTS / "capacity_check.csv"
PROCESS_JSON = RESULTS / "capacity_process.json"  # the per-process CPU fitted by `check`
REPORT = HERE / "capacity.md"
SEED = 20200401  # the shipped spec's audit.seed: the spine's population seed derives from it

#: assumptions of the S3 figures (not measured here: replace with `measure --s3-url` on the real one)
S3_WORKER_MB_S = 100.0  # one worker's s3fs multipart PUTs of zstd-compressed Zarr chunks
S3_AGGREGATE_MB_S = 5000.0  # the bucket's aggregate (keys spread over prefixes; 3,500 PUT/s each)


# ------------------------------------------------------------------------------------------ specs
def spec_data(states: Any, replicates: int, workers: int = 2) -> dict[str, Any]:
    """A spine TopDown audit over ``pl94`` (the ``pl94_2021_production`` queries), as ``dpaudit
    run`` reads it: no composed accounting and no result cache (each run pays the same)."""
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": replicates, "seed": SEED},
        "population": {"kind": "spine", "spine_states": states, "attributes": "pl94"},
        "release": {"kind": "topdown"},
        "accounting": {"composed": False, "cache": False},
        "cluster": {"n_workers": workers},
    }


def plan_of(data: dict[str, Any]) -> Any:
    from flows.spec import parse_spec
    from flows.spec.plan import make_plan

    return make_plan(parse_spec(data))


def spine_counts(plan: Any) -> dict[str, tuple[int, int]]:
    """{state label: (blocks, people)} of every state of the plan's spine region."""
    from flows.spec.sources import load_spine, spine_state_labels

    sp = load_spine(plan.spine.seed, plan.spine.region)
    blocks = sp.units_per_state("Block")
    people = sp.populations()["State"]
    labels = spine_state_labels(plan.spine.region)
    return {labels[i]: (int(blocks[i]), int(people[i])) for i in range(sp.n_states)}


def _largest_region(plan: Any) -> int:
    """Items of the largest (state, geolevel) region: what every region was padded to in the
    layout-1 store (the *padded* figures of the model)."""
    return max((b.n_items for b in plan.blocks), default=0)


def state_work(plan: Any, counts: dict[str, tuple[int, int]]) -> list[StateWork]:
    """Every state of the plan with its bytes per replicate (4-byte residual per replicate, 14
    bytes of item indices): each region at its own length (the store today), and padded to the
    largest region (layout 1, kept for comparison)."""
    r = plan.replicates
    n_max = _largest_region(plan)
    out = []
    per_item = 4.0 + 14.0 / r
    for label in plan.states:
        if label not in counts:
            continue  # the nation
        regions = [b for b in plan.blocks if plan.states[b.state] == label]
        blocks, people = counts[label]
        out.append(
            StateWork(
                label,
                blocks,
                people,
                len(regions) * n_max * per_item,
                sum(b.n_items for b in regions) * per_item,
                n_max,
                max(b.n_items for b in regions),
            )
        )
    return out


def audit_of(plan: Any, counts: dict[str, tuple[int, int]], composed: bool = False) -> Audit:
    items = [0] * len(plan.geolevels)
    for b in plan.blocks:
        items[b.level] += b.n_items
    per_item = 4.0 * plan.replicates + 14.0  # residuals of every replicate; item indices
    nation = [b for b in plan.blocks if b.state_key == 0]
    return Audit(
        tuple(state_work(plan, counts)),
        plan.replicates,
        tuple(items),
        account_levels=len(plan.geolevels),
        composed=composed,
        nation=bool(nation),
        empty_bytes=(len(plan.empty) * _largest_region(plan) * per_item, 0.0),
        nation_bytes=(
            len(nation) * _largest_region(plan) * per_item,
            sum(b.n_items for b in nation) * per_item,
        ),
    )


# ---------------------------------------------------------------------------------------- measure
def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure_state(data: dict[str, Any], label: str, url: str, write: bool) -> dict[str, Any]:
    """In a fresh process: one state's task of the audit ``data`` (every replicate), and with
    ``write`` its regions written into the store at ``url``."""
    from flows.audit.blocks import state_population, topdown_state
    from storage import store

    t, c = time.perf_counter(), time.process_time()
    plan = plan_of(data)  # generates the spine (cached per process, as on a worker)
    spine_s = time.process_time() - c
    spine_wall = time.perf_counter() - t
    top = next(b for b in plan.blocks_at(plan.topdown_top) if plan.states[b.state] == label)
    rss0 = _peak_rss_mb()
    state_population(plan, top.state_key)  # first use: the schema's matrices, imports
    c = time.process_time()
    state_population(plan, top.state_key)  # as topdown_state pays it
    setup = time.process_time() - c
    c, t = time.process_time(), time.perf_counter()
    levels, _, _ = topdown_state(plan, top)
    run = time.process_time() - c
    wall = time.perf_counter() - t
    peak = _peak_rss_mb()
    c, t_w = time.process_time(), time.perf_counter()
    written = 0
    for gi, res in levels.items() if write else ():
        n = store.write_residual_block(url, top.state, gi, res)
        written += n * (4 * plan.replicates + 14)
    write_cpu, write_wall = time.process_time() - c, time.perf_counter() - t_w
    return {
        "state": label,
        "replicates": plan.replicates,
        "spine_cpu_s": spine_s,
        "spine_wall_s": spine_wall,
        "setup_cpu_s": setup,
        "topdown_cpu_s": run,  # setup + replicates + residuals
        "replicate_cpu_s": (run - setup) / plan.replicates,
        "wall_s": wall,
        "write_cpu_s": write_cpu,
        "write_wall_s": write_wall,
        "write_bytes": written,
        "rss_before_mb": rss0,
        "peak_rss_mb": peak,  # before the writes
        "write_buffer_mb": plan.n_items_max * (4 * plan.replicates + 14) / 1e6 if write else 0.0,
        "peak_rss_write_mb": _peak_rss_mb(),
        "load": os.getloadavg()[0],
    }


def spine_cpu() -> float:
    """CPU-s of a fresh process's first plan of the full-US audit: the spine it generates."""
    c = time.process_time()
    plan_of(spec_data("all", 1))
    return time.process_time() - c


def shared_speed(workers: int, load: float) -> float:
    """A worker's share of a core when ``workers`` busy workers and the other jobs' ``load`` share
    the machine's cores (processor sharing), at most 1."""
    cores = os.cpu_count() or 1
    return min(1.0, cores / (workers + load))


def in_fresh_process(fn: Any, *args: Any) -> Any:
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as ex:
        return ex.submit(fn, *args).result()


def pick_states(counts: dict[str, tuple[int, int]], spec: str) -> list[str]:
    if not spec.startswith("auto:"):
        return spec.split(",")
    k = int(spec.split(":", 1)[1])
    by_size = sorted(counts, key=lambda s: counts[s][0])
    idx = sorted({round(i * (len(by_size) - 1) / (k - 1)) for i in range(k)})
    return [by_size[i] for i in idx]


def nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.optimize import nnls as _nnls

    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = _nnls(x / scale, y)
    return np.asarray(coef / scale)


def orchestration_cost(tmp: str, n: int = 24) -> dict[str, float]:
    """Wall seconds per task on one worker: ``n`` no-op tasks (``write_empty_blocks`` of nothing)
    as Prefect tasks on Dask vs plain Dask, one after the other; CPU of every process."""
    from bench_orchestration import cpu_seconds
    from distributed import Client, LocalCluster
    from prefect import flow
    from prefect_dask import DaskTaskRunner

    from flows.audit import tasks

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as c,
        Client(c) as client,
    ):
        client.submit(tasks.write_empty_blocks.fn, "", None, [], pure=False).result()  # warm

        @flow(name="capacity-no-ops", task_runner=DaskTaskRunner(address=c.scheduler_address))  # type: ignore[arg-type]
        def no_ops() -> None:
            futs = [tasks.write_empty_blocks.submit("", None, []) for _ in range(n)]  # type: ignore[call-overload]
            for f in futs:
                f.result()

        no_ops()  # warm: the flow's and the worker's first Prefect task
        c0, t0 = cpu_seconds(), time.perf_counter()
        no_ops()
        p_wall, p_cpu = time.perf_counter() - t0, cpu_seconds() - c0
        c0, t0 = cpu_seconds(), time.perf_counter()
        futs = [
            client.submit(tasks.write_empty_blocks.fn, "", None, [], pure=False) for _ in range(n)
        ]
        client.gather(futs)
        d_wall, d_cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return {
        "tasks": n,
        "prefect_wall_s": p_wall,
        "prefect_cpu_s": p_cpu,
        "dask_wall_s": d_wall,
        "dask_cpu_s": d_cpu,
        "task_s": max(0.0, (p_wall - d_wall) / n),
        "task_cpu_s": max(0.0, (p_cpu - d_cpu) / n),
        "load": os.getloadavg()[0],
    }


def run_dpaudit(data: dict[str, Any], tmp: str, name: str) -> dict[str, Any]:
    """``dpaudit run`` of ``data`` (no report) in a subprocess: wall, flow wall, CPU of the whole
    process tree (sampled), load averages before and after."""
    import psutil
    from bench_orchestration import run_sampled

    from flows.spec.toml_writer import dump_toml
    from storage import store

    spec = Path(tmp) / f"{name}.toml"
    spec.write_text(dump_toml(data))
    out = Path(tmp) / f"{name}.zarr"
    dpaudit = Path(sys.executable).with_name("dpaudit")
    load0 = os.getloadavg()
    cmd = [str(dpaudit), "run", str(spec), "--store", str(out), "--no-report", "--overwrite"]
    cpu: dict[int, float] = {}
    role: dict[int, str] = {}
    loads: list[float] = []

    def sample(p: psutil.Process, root: bool) -> int:
        t = p.cpu_times()
        rss = int(p.memory_info().rss)
        if root:
            role[p.pid] = "flow"
        elif p.pid not in role:
            line = " ".join(p.cmdline())
            role[p.pid] = "server" if "uvicorn" in line else "workers"
        # its own CPU only: a parent's children times count its reaped children again (the run's
        # process reaps the forkserver, which reaped the workers), and those are sampled too
        cpu[p.pid] = t.user + t.system
        return rss

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, peak, _ = run_sampled(cmd, sample, lambda: loads.append(os.getloadavg()[0]))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    attrs = store.root_attrs(str(out))
    return {
        "url": str(out),
        "command_s": wall,
        "flow_s": float(attrs["wall_time_s"]),
        # the whole tree, exactly: the command and every descendant reaped within it (the
        # per-process figures below are samples, each missing at most its last 0.2 s)
        "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        # CPU-s by process: the CLI (flow), the API server, the Dask processes (nannies, workers)
        **{
            f"cpu_{k}_s": sum(v for pid, v in cpu.items() if role.get(pid) == k)
            for k in ("flow", "server", "workers")
        },
        "peak_rss_mb": peak / 1e6,
        "load_before": load0[0],
        "load_after": os.getloadavg()[0],
        "load_mean": float(np.mean(loads)) if loads else load0[0],
        "store_mb": sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6,
    }


def epl_and_accounting(data: dict[str, Any], url: str) -> dict[str, list[float]]:
    """CPU-s of the finished audit's EPL per geolevel (its pieces and their combine, in one call)
    and accounting task per geolevel, as the flow calls them (with its arguments), in this
    process; and the residuals per level."""
    from flows.audit import epl_level, tasks
    from flows.audit.flow import eps_grid_for
    from flows.audit.groups import ALPHA_GRID, calibration_delta_for
    from flows.spec import parse_spec
    from storage.result_store import ResultStore

    spec = parse_spec(data)
    plan = plan_of(data)
    epl, resid, acct = [], [], []
    for g in range(len(plan.geolevels)):
        c = time.process_time()
        epl_level.epl_geolevel(ResultStore.at(url), plan, g, spec.epl.knobs())
        epl.append(time.process_time() - c)
        resid.append(float(sum(b.n_items for b in plan.blocks if b.level == g) * plan.replicates))
    a = spec.audit
    grid = eps_grid_for(spec)
    for level in spec.accounted_geolevels:
        c = time.process_time()
        tasks.account.fn(
            a.allocation,
            a.neighbours,
            a.universe,
            a.region,
            level,
            list(spec.accounting.deltas),
            grid,
            ALPHA_GRID,
            calibration_delta_for(spec),
            label=level,
            use_cache=False,
        )
        acct.append(time.process_time() - c)
    return {"epl_cpu_s": epl, "residuals": resid, "account_cpu_s": acct}


def write_rate_remote(url: str, data: dict[str, Any], label: str) -> dict[str, float]:
    """Write one measured state's regions to ``url`` (e.g. ``s3://bucket/prefix``; endpoint and
    credentials from the environment, ``FSSPEC_S3_ENDPOINT_URL``, …): MB/s per worker."""
    from storage import store

    plan = plan_of(data)
    store.create_residual_template(url, **plan.template_layout(), attrs={"run_id": "capacity"})
    r = in_fresh_process(measure_state, data, label, url, True)
    return {"s3_write_mb_s": r["write_bytes"] / 1e6 / r["write_wall_s"], "state": label}


def measure(args: argparse.Namespace) -> None:
    from storage import store

    print(machine_info(), flush=True)
    t_start = time.perf_counter()
    full = plan_of(spec_data("all", 1))
    counts = spine_counts(full)
    states = pick_states(counts, args.states)
    print(f"states measured: {', '.join(f'{s} ({counts[s][0]:,} blocks)' for s in states)}")
    tmp = tempfile.mkdtemp(prefix="dpaudit-capacity-")
    # each state's figures are kept as soon as measured: `--resume` reuses them after a failure
    kept = json.loads(STATES_JSON.read_text()) if args.resume and STATES_JSON.exists() else []
    rows: list[dict[str, Any]] = []

    def keep(r: dict[str, Any]) -> None:
        rows.append(r)
        RESULTS.mkdir(exist_ok=True)
        STATES_JSON.write_text(json.dumps(rows + [k for k in kept if k not in rows], indent=1))

    def reuse(label: str, reps: int) -> dict[str, Any] | None:
        return next((k for k in kept if k["state"] == label and k["replicates"] == reps), None)

    try:
        data = spec_data(states, 1)
        plan = plan_of(data)
        url = f"{tmp}/measure.zarr"
        store.create_residual_template(url, **plan.template_layout(), attrs={"run_id": "capacity"})
        writers = {states[0], states[len(states) // 2]}  # the padded regions: same bytes for all
        for s in states:
            r = reuse(s, 1) or in_fresh_process(measure_state, data, s, url, s in writers)
            r.update(blocks=counts[s][0], people=counts[s][1])
            keep(r)
            print(
                f"{s}: {r['blocks']:,} blocks, setup {r['setup_cpu_s']:.2f} CPU-s, replicate "
                f"{r['replicate_cpu_s']:.2f} CPU-s, write {r['write_bytes'] / 1e6:.0f} MB in "
                f"{r['write_cpu_s']:.2f} CPU-s, peak RSS {r['peak_rss_mb']:.0f} MB "
                f"({r['peak_rss_write_mb']:.0f} MB writing; load {r['load']:.1f}); spine "
                f"{r['spine_cpu_s'] or float('nan'):.2f} CPU-s",
                flush=True,
            )
        # memory (and CPU) per extra replicate: the two smallest mid-size states at 3 replicates
        data3 = spec_data(states, args.mem_replicates)
        url3 = f"{tmp}/measure3.zarr"
        store.create_residual_template(
            url3, **plan_of(data3).template_layout(), attrs={"run_id": "capacity"}
        )
        mem_states = [states[len(states) // 2 - 1], states[len(states) // 2]]
        for s in mem_states:
            r = reuse(s, args.mem_replicates) or in_fresh_process(
                measure_state, data3, s, url3, False
            )
            r.update(blocks=counts[s][0], people=counts[s][1])
            keep(r)
            print(
                f"{s} × {args.mem_replicates} replicates: replicate {r['replicate_cpu_s']:.2f} "
                f"CPU-s, peak RSS {r['peak_rss_mb']:.0f} MB",
                flush=True,
            )
        from flows.runtime.cluster import apply_prefect_defaults, prefect_api

        if args.resume and ORCH_JSON.exists():
            orch = json.loads(ORCH_JSON.read_text())
        else:
            apply_prefect_defaults()
            with prefect_api(startup_timeout=900):  # a loaded machine starts it slowly
                orch = orchestration_cost(tmp)
            ORCH_JSON.write_text(json.dumps(orch, indent=1))
        print(
            f"per task: Prefect on Dask {orch['task_s']:.3f} s wall / {orch['task_cpu_s']:.3f} "
            f"CPU-s more than plain Dask (load {orch['load']:.1f})",
            flush=True,
        )
        # a small audit through the flow: its fixed cost, and its EPL and accounting tasks
        small_states = sorted(counts, key=lambda s: counts[s][0])[:2]
        small = spec_data(small_states, 2, workers=1)
        last = json.loads(MEASURE_JSON.read_text()) if MEASURE_JSON.exists() else {}
        prev = last.get("small_audit") if args.resume else None
        if prev and prev.get("states") == small_states:  # `--resume`: the last measured one
            run = {k: prev[k] for k in ("flow_s", "load_before", "command_s", "cpu_s")}
            ea = {k: prev[k] for k in ("epl_cpu_s", "residuals", "account_cpu_s")}
            run["reused_from"] = prev.get("measured_utc") or last.get("measured_utc", "earlier")
        else:
            run = run_dpaudit(small, tmp, "small")
            ea = epl_and_accounting(small, run["url"])
        run["measured_utc"] = run.get("reused_from") or datetime.now(UTC).isoformat(
            timespec="seconds"
        )
        print(
            f"small audit ({', '.join(small_states)}, 2 replicates, 1 worker): flow "
            f"{run['flow_s']:.1f} s; EPL per level {[round(x, 2) for x in ea['epl_cpu_s']]} CPU-s; "
            f"accounting per level {[round(x, 2) for x in ea['account_cpu_s']]} CPU-s",
            flush=True,
        )
        s3 = write_rate_remote(args.s3_url, data, states[len(states) // 2]) if args.s3_url else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    costs = fit(rows, args.mem_replicates, orch, ea)
    # the flow's fixed cost: the small audit's flow wall minus what the model gives it without
    sp = plan_of(small)
    pred = predict(audit_of(sp, counts), costs, 1)
    # the flow's wall at the load it ran under, in seconds of a dedicated core (processor
    # sharing: one worker and the other jobs' load on the machine's cores)
    speed = shared_speed(1, run["load_before"])
    flow_s = max(0.0, run["flow_s"] * speed - (pred.wall_s - costs.flow_s))
    costs = Costs(**{**costs.as_dict(), "flow_s": flow_s})
    out = {
        "measured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "commit": commit(),
        "states": rows,
        "orchestration": orch,
        "small_audit": {**run, **ea, "states": small_states},
        "s3": s3,
        "costs": costs.as_dict(),
        "seconds": time.perf_counter() - t_start,
    }
    RESULTS.mkdir(exist_ok=True)
    MEASURE_JSON.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(costs.as_dict(), indent=1))
    print(f"measure took {out['seconds']:.0f} s; wrote {MEASURE_JSON.relative_to(HERE.parent)}")
    render()


def fit(
    rows: list[dict[str, Any]], mem_r: int, orch: dict[str, float], ea: dict[str, list[float]]
) -> Costs:
    one = [r for r in rows if r["replicates"] == 1]
    multi = [r for r in rows if r["replicates"] > 1]
    b = np.array([r["blocks"] for r in one], float)
    p = np.array([r["people"] for r in one], float)
    x2 = np.column_stack([np.ones_like(b), b])
    setup = nnls(x2, np.array([r["setup_cpu_s"] for r in one]))
    rep = nnls(
        np.column_stack([np.ones_like(b), b, p]), np.array([r["replicate_cpu_s"] for r in one])
    )
    mem1 = nnls(x2, np.array([r["peak_rss_mb"] for r in one]))
    # per extra replicate: (RSS at mem_r − RSS at 1) / (mem_r − 1) = c·blocks + d
    d_rows = []
    for m in multi:
        base = next(r for r in one if r["state"] == m["state"])
        d_rows.append((m["blocks"], (m["peak_rss_mb"] - base["peak_rss_mb"]) / (mem_r - 1)))
    if len(d_rows) >= 2:
        mb = nnls(
            np.column_stack([[r[0] for r in d_rows], np.ones(len(d_rows))]),
            np.array([r[1] for r in d_rows]),
        )
    else:
        mb = np.zeros(2)
    spines = [r["spine_cpu_s"] for r in rows if r.get("spine_cpu_s") is not None]
    w_bytes = sum(r["write_bytes"] for r in rows)
    w_cpu = sum(r["write_cpu_s"] for r in rows)
    writers = [r for r in one if r["write_bytes"] > 0]
    w_factor = min(
        (
            max(0.0, r["peak_rss_write_mb"] - r["peak_rss_mb"]) / r["write_buffer_mb"]
            for r in writers
        ),
        default=1.0,
    )
    e = nnls(
        np.column_stack([np.ones(len(ea["residuals"])), np.array(ea["residuals"]) / 1e6]),
        np.array(ea["epl_cpu_s"]),
    )
    accts = ea["account_cpu_s"]
    return Costs(
        setup_s=float(setup[0]),
        setup_s_per_block=float(setup[1]),
        rep_s=float(rep[0]),
        rep_s_per_block=float(rep[1]),
        rep_s_per_person=float(rep[2]),
        write_mb_s=w_bytes / 1e6 / w_cpu,
        task_s=orch["task_cpu_s"],  # CPU of every process per task: load-independent
        flow_s=0.0,
        worker_s=float(np.median(spines)) if spines else in_fresh_process(spine_cpu),
        epl_s=float(e[0]),
        epl_s_per_mresidual=float(e[1]),
        account_level_s=float(np.mean(accts)) if accts else 0.0,
        account_composed_s=COMPOSED_ACCOUNT_S,
        mem_mb=float(mem1[0]),
        mem_mb_per_block=float(mem1[1]),
        mem_mb_per_block_replicate=float(mb[0]),
        mem_mb_per_replicate=float(mb[1]),
        mem_write_factor=w_factor,
    )


#: the composed accounting of ``pl94_2021_production`` (all levels) without a cached result:
#: benchmarks/README.md, "Composed accounting off the critical path" (60.9 CPU-s cold)
COMPOSED_ACCOUNT_S = 60.9


def load_costs() -> tuple[Costs, dict[str, Any]]:
    if not MEASURE_JSON.exists():
        raise SystemExit(f"no {MEASURE_JSON.name}: run `benchmarks/capacity.py measure` first")
    m = json.loads(MEASURE_JSON.read_text())
    return Costs(**{**m["costs"], **_process_costs()}), m


def _process_costs() -> dict[str, float]:
    """``process_s`` and ``fixed_cpu_s`` as ``check`` fitted them (none before a check)."""
    if not PROCESS_JSON.exists():
        return {}
    p = json.loads(PROCESS_JSON.read_text())
    return {k: float(p[k]) for k in ("process_s", "fixed_cpu_s")}


# ---------------------------------------------------------------------------------------- predict
SCENARIOS = (
    # (name, spine_states, replicates, composed accounting)
    ("full US pl94, 1 replicate", "all", 1),
    ("full US pl94, 25 replicates", "all", 25),
    ("full US pl94, 100 replicates", "all", 100),
    ("full US pl94, 1,000 replicates", "all", 1000),
)


def predict_rows(
    costs: Costs,
    workers: list[int],
    replicates: list[int],
    tasks_per_worker: int,
    worker_gb: float = 16.0,
) -> list[dict[str, Any]]:
    rows = []
    full = plan_of(spec_data("all", 1))
    counts = spine_counts(full)
    for r in replicates:
        plan = plan_of(spec_data("all", r))
        audit = audit_of(plan, counts, composed=True)
        # the flow today: a state's replicates split into tasks of `cluster.replicates_per_task`,
        # chosen for the workers' memory; the store holds each block at its own length
        fit = max(1, replicates_per_task_for(costs, audit.states, worker_gb * 1e3))
        variants: list[tuple[str, dict[str, Any]]] = [
            (f"split ({fit} per task), local disk", {"split": fit, "data": True}),
            (f"split ({fit} per task), S3", {"s3": True, "split": fit, "data": True}),
            ("one task per state (replicates_per_task = 0), S3", {"s3": True, "data": True}),
        ]
        for name, v in variants:
            c = costs
            if v.get("s3"):
                c = Costs(
                    **{**costs.as_dict(), "write_mb_s": min(costs.write_mb_s, S3_WORKER_MB_S)}
                )
            for n in workers:
                pr = predict(
                    audit,
                    c,
                    n,
                    tasks_per_worker=tasks_per_worker,
                    replicates_per_task=v.get("split"),
                    store_mb_s=S3_AGGREGATE_MB_S if v.get("s3") else None,
                    padded=not v.get("data"),
                )
                row = {"replicates": r, "variant": name, **pr.row()}
                row["fits_worker"] = pr.peak_task_mb <= worker_gb * 1e3
                row["worker_gb"] = worker_gb
                lay = 1 if v.get("data") else 0
                row["written_tb"] = (
                    sum(
                        (
                            s.data_bytes_per_replicate
                            if v.get("data")
                            else s.write_bytes_per_replicate
                        )
                        for s in audit.states
                    )
                    * r
                    + audit.empty_bytes[lay]
                    + audit.nation_bytes[lay]
                ) / 1e12
                rows.append(row)
    return rows


def predict_mode(args: argparse.Namespace) -> None:
    costs, _ = load_costs()
    workers = [int(x) for x in args.workers.split(",")]
    reps = [int(x) for x in args.replicates.split(",")]
    rows = predict_rows(costs, workers, reps, args.tasks_per_worker, args.worker_gb)
    write_rows(PREDICT_CSV, rows)
    for r in rows:
        print(
            f"{r['replicates']:>5} replicates, {r['variant']:<38} {r['workers']:>4} workers: "
            f"{_hours(r['wall_s']):>9}  ({r['bound']}; largest state task "
            f"{_hours(r['critical_state_s'])}, peak task memory {r['peak_task_mb'] / 1e3:.1f} GB, "
            f"written {r['written_tb']:.2f} TB)"
        )
    render()


# ------------------------------------------------------------------------------------------ check
def check_runs(
    spec_for: Any, workers: list[int], states: list[str], replicates: int
) -> list[dict[str, Any]]:
    """``dpaudit run`` of ``spec_for(n)`` for each ``n`` of ``workers`` (:func:`run_dpaudit`, its
    store removed), one row each, printed as it ends."""
    rows = []
    tmp = tempfile.mkdtemp(prefix="dpaudit-capacity-check-")
    try:
        for n in workers:
            run = run_dpaudit(spec_for(n), tmp, f"check{n}")
            shutil.rmtree(run.pop("url"), ignore_errors=True)
            rows.append(
                {
                    "workers": n,
                    "states": ";".join(states),
                    "replicates": replicates,
                    **run,
                    "measured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                }
            )
            print(
                f"{n} workers: flow {run['flow_s']:.1f} s, command {run['command_s']:.1f} s, "
                f"{run['cpu_s']:.0f} CPU-s (all processes); load {run['load_before']:.1f} → "
                f"{run['load_after']:.1f} (mean {run['load_mean']:.1f})",
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def check(args: argparse.Namespace) -> None:
    """Real runs only; the predictions are made from the current costs when rendering (so a new
    ``measure`` re-predicts the same runs)."""
    print(machine_info(), flush=True)
    states = args.states.split(",")
    workers = [int(x) for x in args.workers.split(",")]
    rows = check_runs(
        lambda n: spec_data(states, args.replicates, workers=n), workers, states, args.replicates
    )
    write_rows(CHECK_RUNS_CSV, rows)
    render()


def check_rows(costs: Costs) -> list[dict[str, Any]]:
    """The check's runs beside the model's predictions from ``costs``: on dedicated cores, and
    with every task slowed to a worker's share of the cores under the load before the run.

    The per-process CPU (``process_s``, ``fixed_cpu_s``) is fitted to these runs' CPU-s (all
    processes) beyond the modelled tasks (``fit_process_overhead``) and written to
    ``capacity_process.json``, which every later prediction uses; each run's wall time is
    predicted with and without it."""
    runs = _read_csv(CHECK_RUNS_CSV)
    if not runs:
        return []
    counts = spine_counts(plan_of(spec_data("all", 1)))
    base = Costs(**{**costs.as_dict(), "process_s": 0.0, "fixed_cpu_s": 0.0})
    audits = []
    for r in runs:
        n, reps = int(r["workers"]), int(r["replicates"])
        audit = audit_of(plan_of(spec_data(r["states"].split(";"), reps, n)), counts)
        tasks_cpu = predict(audit, base, n).cpu_s + base.flow_s
        audits.append((n, audit, tasks_cpu))
    pairs = list(zip(audits, runs, strict=True))
    if all(r.get("cpu_workers_s") for r in runs):
        # the worker processes' own CPU beyond the tasks: what delays each worker's tasks; the
        # rest (the CLI's process with the scheduler and nannies, the API server) runs beside them
        _, per_worker = fit_process_overhead(
            [(n, float(r["cpu_workers_s"]), t) for (n, _, t), r in pairs]
        )
        fixed = sum(float(r["cpu_s"]) - t - n * per_worker for (n, _, t), r in pairs) / len(pairs)
        fixed = max(0.0, fixed)
    else:
        fixed, per_worker = fit_process_overhead(
            [(n, float(r["cpu_s"]), t) for (n, _, t), r in pairs]
        )
    process_s = max(0.0, per_worker - costs.worker_s)
    PROCESS_JSON.write_text(
        json.dumps(
            {
                "process_s": process_s,
                "fixed_cpu_s": fixed,
                "per_worker_cpu_s": per_worker,
                "runs": [r["measured_utc"] for r in runs],
                "workers": [n for n, _, _ in audits],
            },
            indent=1,
        )
    )
    full = Costs(**{**costs.as_dict(), "process_s": process_s, "fixed_cpu_s": fixed})
    out = []
    for (n, audit, tasks_cpu), r in zip(audits, runs, strict=True):
        flow = float(r["flow_s"])
        speed = shared_speed(n, float(r["load_before"]))
        shared = predict(audit, full, n, speed=speed)
        before = predict(audit, base, n, speed=speed)
        out.append(
            {
                "workers": n,
                "states": len(r["states"].split(";")),
                "replicates": int(r["replicates"]),
                "measured_flow_s": flow,
                "predicted_shared_s": shared.wall_s,
                "error_pct": 100 * (shared.wall_s - flow) / flow,
                "predicted_shared_no_process_s": before.wall_s,
                "error_no_process_pct": 100 * (before.wall_s - flow) / flow,
                "predicted_dedicated_s": predict(audit, full, n).wall_s,
                "speed": speed,
                "measured_cpu_s": float(r["cpu_s"]),
                "cpu_flow_s": float(r.get("cpu_flow_s") or "nan"),
                "cpu_server_s": float(r.get("cpu_server_s") or "nan"),
                "cpu_workers_s": float(r.get("cpu_workers_s") or "nan"),
                "modelled_tasks_s": tasks_cpu,
                "modelled_work_s": tasks_cpu + full.overhead_cpu(n),
                "load_before": float(r["load_before"]),
                "load_mean": float(r["load_mean"]),
                "load_after": float(r["load_after"]),
            }
        )
    write_rows(CHECK_CSV, out)
    return out


# ----------------------------------------------------------------------------------------- output
def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _hours(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def render() -> None:
    """``benchmarks/capacity.md`` from the results present (measure, predict, check)."""
    if not MEASURE_JSON.exists():
        return
    m = json.loads(MEASURE_JSON.read_text())
    c = m["costs"]
    lines = [
        "# Capacity model (generated by `benchmarks/capacity.py`; do not edit)",
        "",
        f"Measured {m['measured_utc']} at commit {m['commit']}: {m['machine']}. CPU-s are "
        "`time.process_time` of one process with one BLAS thread (a Dask worker's), so they hold "
        "under the shared machine's load; wall times do not.",
        "",
        "## Measured costs",
        "",
        "| state | blocks | people | replicates | setup CPU-s | CPU-s per replicate | written MB | write CPU-s | peak RSS MB | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def num(v: Any, fmt: str) -> str:
        return "–" if v is None or (fmt != ",.0f" and v == 0 and fmt == ".2f") else format(v, fmt)

    for r in m["states"]:
        lines.append(
            f"| {r['state']} | {r['blocks']:,} | {r['people']:,} | {r['replicates']} | "
            f"{num(r['setup_cpu_s'], '.2f')} | {r['replicate_cpu_s']:.2f} | "
            f"{r['write_bytes'] / 1e6:,.0f} | {num(r['write_cpu_s'], '.2f')} | "
            f"{r['peak_rss_mb']:,.0f} | {num(r['load'], '.1f')} |"
        )
    if any(r.get("recovered") for r in m["states"]):
        lines += [
            "",
            "Rows without a load: figures printed by an earlier run of `measure` that stopped "
            "later (its Prefect API server did not start in time at load 28), reused with "
            "`--resume`; their setup is not printed for the 3-replicate runs.",
        ]
    o = m["orchestration"]
    sa = m["small_audit"]
    lines += [
        "",
        "Fitted (non-negative least squares over the states above):",
        "",
        f"- setup (histograms, hierarchy; once per state task): {c['setup_s']:.3f} + "
        f"{c['setup_s_per_block'] * 1e6:.3f}·10⁻⁶·blocks CPU-s",
        f"- one replicate (TopDown, residuals): {c['rep_s']:.3f} + "
        f"{c['rep_s_per_block'] * 1e6:.3f}·10⁻⁶·blocks + {c['rep_s_per_person'] * 1e9:.3f}·10⁻⁹·people CPU-s",
        f"- peak RSS of a state task: {c['mem_mb']:.0f} + {c['mem_mb_per_block'] * 1e3:.3f}·10⁻³·blocks MB "
        f"at one replicate, + ({c['mem_mb_per_block_replicate'] * 1e3:.3f}·10⁻³·blocks + "
        f"{c['mem_mb_per_replicate']:.0f}) MB per further replicate",
        f"- store writes (`write_residual_block`, local Zarr, padded regions): "
        f"{c['write_mb_s']:.0f} MB/s of uncompressed chunk per worker (CPU)"
        + (f"; S3 endpoint: {m['s3']['s3_write_mb_s']:.0f} MB/s" if m.get("s3") else ""),
        f"- a Prefect task on Dask: {c['task_s']:.3f} CPU-s (all processes: worker, flow, API "
        f"server) more than a plain Dask task, counted as the task's time on its worker "
        f"({o['tasks']} no-op tasks on one worker; wall {o['task_s']:.3f} s more per task at load "
        f"{o['load']:.1f})",
        f"- the spine, generated once per worker process: {c['worker_s']:.1f} CPU-s",
        f"- EPL of a geolevel: {c['epl_s']:.2f} + {c['epl_s_per_mresidual']:.3f}·(residuals/10⁶) "
        f"CPU-s; accounting of one geolevel {c['account_level_s']:.2f} CPU-s (mean), composed "
        f"{c['account_composed_s']:.1f} CPU-s (cold, from the README)",
        f"- the flow's fixed cost: {c['flow_s']:.1f} s of a dedicated core (a "
        f"{len(sa['states'])}-state, 2-replicate audit on 1 worker, run "
        f"{sa.get('measured_utc', '?')}: flow {sa['flow_s']:.1f} s at load "
        f"{sa['load_before']:.1f}, times the worker's share of a core, minus the modelled tasks)",
        "",
    ]
    pred = _read_csv(PREDICT_CSV)
    if pred:
        lines += [
            "## Predictions: full-US `pl94` audits",
            "",
            f"Workers of {pred[0].get('worker_gb', '16')} GB; *fits*: the largest task's peak "
            "memory fits one.",
            "",
            "| replicates | variant | workers | wall | bound | largest state task | peak task memory (fits) | written |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in pred:
            lines.append(
                f"| {int(r['replicates']):,} | {r['variant']} | {r['workers']} | "
                f"**{_hours(float(r['wall_s']))}** | {r['bound']} | "
                f"{_hours(float(r['critical_state_s']))} | {float(r['peak_task_mb']) / 1e3:,.1f} GB "
                f"({'yes' if r['fits_worker'] == 'True' else '**no**'}) | "
                f"{float(r['written_tb']):.2f} TB |"
            )
        lines += ["", *ASSUMPTIONS, ""]
    chk = check_rows(Costs(**c))
    if chk:
        lines += [
            "## Check: predicted vs measured (`dpaudit run`, local worker processes)",
            "",
            f"Runs of {_read_csv(CHECK_RUNS_CSV)[0]['measured_utc']}; states "
            f"{_read_csv(CHECK_RUNS_CSV)[0]['states'].replace(';', ', ')}.",
            "",
            "| workers | states × replicates | flow measured | predicted (shared cores) | error | without per-process CPU | error | predicted (dedicated cores) | speed | CPU-s measured (all processes: flow / API server / Dask) | modelled: tasks + per-process = work | load before / mean / after |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in chk:
            parts = "/".join(
                "–" if r[k] != r[k] else f"{r[k]:.0f}"
                for k in ("cpu_flow_s", "cpu_server_s", "cpu_workers_s")
            )
            lines.append(
                f"| {r['workers']} | {r['states']} × {r['replicates']} | "
                f"{r['measured_flow_s']:.1f} s | {r['predicted_shared_s']:.1f} s | "
                f"{r['error_pct']:+.0f} % | {r['predicted_shared_no_process_s']:.1f} s | "
                f"{r['error_no_process_pct']:+.0f} % | {r['predicted_dedicated_s']:.1f} s | "
                f"{r['speed']:.2f} | {r['measured_cpu_s']:.0f} ({parts}) | "
                f"{r['modelled_tasks_s']:.0f} + "
                f"{r['modelled_work_s'] - r['modelled_tasks_s']:.0f} = {r['modelled_work_s']:.0f} | "
                f"{r['load_before']:.1f} / {r['load_mean']:.1f} / {r['load_after']:.1f} |"
            )
        pj = json.loads(PROCESS_JSON.read_text())
        lines += [
            "",
            f"Per-process CPU fitted to these runs (`fit_process_overhead`): the Dask worker "
            f"processes' CPU-s beyond the modelled tasks = workers × {pj['per_worker_cpu_s']:.1f} "
            f"CPU-s (least squares; of which {c['worker_s']:.1f} counted as the spine and "
            f"{pj['process_s']:.1f} as the process's start, imports, Prefect client and heartbeats "
            f"over the run, `process_s`), and the rest of every process's CPU-s, "
            f"{pj['fixed_cpu_s']:.0f} CPU-s per run (mean), as the run's own processes (the CLI's "
            "process, which also holds the local cluster's scheduler and nannies, and the Prefect "
            "API server). Each worker pays its own before its first task (the model's "
            "`predict`); the fixed part runs beside the workers and is only counted in CPU-s.",
            "",
            *CHECK_NOTES,
            "",
        ]
    lines += production_lines()
    REPORT.write_text("\n".join(lines))


ASSUMPTIONS = [
    "Assumptions of the predictions:",
    "",
    "- Workers: one core and one thread each, not shared, as fast as the measuring machine's; "
    "memory as the table's peak task memory needs (more than a worker has: the task is killed).",
    "- Tasks as the flow makes them: a state's replicates split into ranges of "
    "`cluster.replicates_per_task` (here the most that fit a worker's memory, "
    "`replicates_per_task_for`), the (state, range) units packed longest-first into "
    "`workers × tasks_per_worker` (2) batches; each unit draws its state's histograms again "
    "(its setup). The variant *one task per state* (`replicates_per_task = 0`) keeps a state's "
    "replicates in one task: the largest state (926,741 blocks) is then the floor of the wall "
    "time whatever the cluster, and its memory grows with the replicates.",
    "- Workers' start: each worker process pays the spine and its own start (`process_s`, fitted "
    "by `check` to the measured runs' CPU) before its first task.",
    "- Scheduler: the measured Prefect-on-Dask cost per task (a few hundred tasks at most: the "
    "Prefect API and the Dask scheduler are far from their limits); accounting submitted first, "
    "the composed one cold (no cached result); EPL per geolevel after the simulation, its CPU "
    "linear in the level's residuals.",
    f"- Store: each block at its own length (the flat item axis). Local disk: the measured write rate per worker, no aggregate limit. S3: "
    f"**assumed, not measured**, {S3_WORKER_MB_S:.0f} MB/s per worker and {S3_AGGREGATE_MB_S:,.0f} "
    "MB/s for the bucket (S3 scales per key prefix, 3,500 PUT/s each; one Zarr chunk is one "
    "object): measure yours with `measure --s3-url`. Peak task memory counts the write buffer "
    "of the task's replicates of its largest region.",
]

CHECK_NOTES = [
    "The machine has 2 cores shared with other jobs: *speed* is the share of a core one worker "
    "gets under processor sharing, cores / (workers + the load average before the run), capped at "
    "1; *predicted (shared cores)* divides every task by it. 4 workers oversubscribe the 2 cores "
    "even when idle. The load average moves during a run, so the error of a single run carries "
    "its load's change; CPU-s (all processes, the CLI's and the API server's included) is the "
    "load-independent comparison.",
]


# ------------------------------------------------------------------------ production schemas
PRODUCTION_CSV = RESULTS / "capacity_production.csv"
PRODUCTION_WORKERS_CSV = RESULTS / "capacity_production_workers.csv"


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _run_from_states(f: Path) -> dict[str, Any] | None:
    """The summary of a run that did not end, rebuilt from the states it finished."""
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    if not rows:
        return None
    loads = [r["load"] for r in rows]
    return {
        "started": "",
        "command": rows[0]["command"],
        "states": len(rows),
        "replicates": len(rows[0]["topdown_cpu_s"]),
        "workers": len({r["pid"] for r in rows}),
        "memory_limit": "",
        "wall_s": max(r["finished_s"] for r in rows),
        "cpu_s": sum(r["cpu_s"] for r in rows),
        "store_bytes": 0,
        "written_bytes": sum(r["written_bytes"] for r in rows),
        "load_before": loads[0],
        "load_mean": sum(loads) / len(loads),
        "load_after": loads[-1],
        "per_state": rows,
        "finished": False,
    }


def production_runs(results: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """``bench_production.py``'s one-replicate runs in ``results`` by name (``production_us_r3``
    for ``production_us_r3.json``): each finished run's ``.json``, else (a run still going or
    stopped) the states it finished, ``.states.jsonl``, its summary rebuilt from them."""
    runs: dict[str, dict[str, Any]] = {}
    names = {f.name.removesuffix(".json") for f in results.glob("production_*.json")}
    names |= {
        f.name.removesuffix(".states.jsonl") for f in results.glob("production_*.states.jsonl")
    }
    for name in sorted(names):
        done = results / f"{name}.json"
        d = json.loads(done.read_text()) if done.exists() else None
        if d is None:
            d = _run_from_states(results / f"{name}.states.jsonl")
        if isinstance(d, dict) and d.get("replicates") == 1 and d.get("per_state"):
            runs[name] = {**d, "name": name}
    return runs


def _started(d: dict[str, Any]) -> datetime:
    """A run's start (a run that did not end has none: the oldest)."""
    try:
        return datetime.fromisoformat(d.get("started") or "")
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def production_order(
    runs: dict[str, dict[str, Any]], prefer: list[str] | None = None
) -> list[dict[str, Any]]:
    """The runs in order of preference: those named in ``prefer`` (in its order, only them), else
    every run, the one with most states first and, among runs of as many states, the newest
    (``started``) first — so a later full-US run replaces an earlier one, and a run of a few
    states only fills the states the larger runs lack."""
    if prefer:
        missing = [p for p in prefer if p.removesuffix(".json") not in runs]
        if missing:
            raise SystemExit(
                f"capacity.py production: no one-replicate run {', '.join(missing)} in "
                f"benchmarks/results/; give one of {', '.join(sorted(runs)) or '(none)'}"
            )
        return [runs[p.removesuffix(".json")] for p in prefer]
    return sorted(runs.values(), key=lambda d: (len(d["per_state"]), _started(d)), reverse=True)


def production_measured(
    results: Path = RESULTS, prefer: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """Per-state rows of ``bench_production.py``'s one-replicate runs (``production_runs``), in
    ``production_order``. Each state's compute costs (CPU-s of the spine, population, TopDown and
    residuals, peak RSS) come from the first run that measured it; its stored bytes from the first
    run that wrote a store and measured it (a ``--no-store`` run has none): the raw bytes it wrote
    and, as stored, its state's directory in that run's ``--store`` if there, else its share of
    the run's whole store (the run's compression), else the compression of the other states; a
    state no store run measured has ``stored_bytes`` None. Returns the first run's summary (the
    compute costs'; rebuilt from its rows if it did not end), the first store run's summary (or
    None) and the rows, largest state first, each naming its ``cpu_run`` and ``bytes_run``."""
    runs = production_runs(results)
    if not runs:
        raise SystemExit("no benchmarks/results/production_*: run bench_production.py first")
    order = production_order(runs, prefer)
    rows_by: dict[str, dict[str, Any]] = {}
    for d in order:
        for r in d["per_state"]:
            if r["state"] not in rows_by:
                rows_by[r["state"]] = {**r, "cpu_run": d["name"], "stored_bytes": None}
    stored_by = [d for d in order if d.get("written_bytes")]
    for d in reversed(stored_by):  # the first store run that measured a state wins
        argv = d["command"].split()
        at = argv[argv.index("--store") + 1] if "--store" in argv else None
        share = d["store_bytes"] / d["written_bytes"] if d.get("store_bytes") else None
        for r in d["per_state"]:
            if r["state"] not in rows_by or not r["written_bytes"]:
                continue
            sdirs = (
                [base / at / r["state"] for base in (results.parent.parent, results)] if at else []
            )
            sdir = next((p for p in sdirs if p.is_dir()), None)
            if sdir is not None:
                stored: float | None = _dir_bytes(sdir)
            elif share is not None:
                stored = r["written_bytes"] * share
            else:
                stored = None
            rows_by[r["state"]].update(
                written_bytes=r["written_bytes"], stored_bytes=stored, bytes_run=d["name"]
            )
    known = [r for r in rows_by.values() if r["stored_bytes"] is not None]
    ratio = sum(r["stored_bytes"] for r in known) / max(1, sum(r["written_bytes"] for r in known))
    for r in rows_by.values():
        if r["stored_bytes"] is None and r.get("bytes_run"):  # raw bytes, no store measured
            r["stored_bytes"] = r["written_bytes"] * (ratio if known else 1.0)
    return (
        order[0],
        stored_by[0] if stored_by else None,
        sorted(rows_by.values(), key=lambda r: -r["blocks"]),
    )


def replicate_memory_slope(results: Path = RESULTS) -> tuple[float, str]:
    """Bytes of a task's peak RSS per further replicate it holds, per person of its state, from
    ``bench_replicate_memory.py``'s newest runs (the worker's peak in the simulation, between its
    two largest replicate counts: the step where the parts' temporaries have reached their bound),
    and where it comes from; 0 and "" without them."""
    path = results / "replicate_memory.jsonl"
    if not path.exists():
        return 0.0, ""
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    newest = max(r["measured_utc"] for r in rows)
    run = sorted((r for r in rows if r["measured_utc"] == newest), key=lambda r: r["replicates"])
    if len(run) < 2:
        return 0.0, ""
    a, b = run[-2], run[-1]
    from production_states import _people

    people = _people(str(HERE / "specs" / a["spec"]))[a["state"]]
    mb = (b["simulate_dask_peak_gb"] - a["simulate_dask_peak_gb"]) * 1e9
    slope = max(0.0, mb / (b["replicates"] - a["replicates"]) / people)
    return slope, (
        f"{a['state']} ({people / 1e6:.2f} M people) at {a['replicates']} and {b['replicates']} "
        f"replicates, commit {b['commit']}"
    )


def production_states(
    rows: list[dict[str, Any]], memory_slope: float | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """Every spine state's costs (``production_model.ProductionState``): the measured states as
    measured, the others from linear fits in blocks over the measured ones (a measured state's
    stored bytes, when no run wrote a store of it, from the fit over those that did)."""
    from production_model import ProductionState, fit_linear, scale_states

    from auditlib.geography.spine import generate_spine

    x = [float(r["blocks"]) for r in rows]
    stored = [r for r in rows if r["stored_bytes"] is not None]
    fits = {
        "setup": fit_linear(x, [r["population_cpu_s"] for r in rows]),
        "replicate": fit_linear(x, [r["topdown_cpu_s"][0] + r["write_cpu_s"][0] for r in rows]),
        "bytes": (
            fit_linear([float(r["blocks"]) for r in stored], [r["stored_bytes"] for r in stored])
            if stored
            else fit_linear([1.0], [0.0])
        ),
        "peak": fit_linear(x, [r["peak_rss_mb"] for r in rows]),
    }
    measured = {
        r["state"]: ProductionState(
            r["state"],
            r["blocks"],
            r["people"],
            r["population_cpu_s"],
            r["topdown_cpu_s"][0] + r["write_cpu_s"][0],
            r["stored_bytes"]
            if r["stored_bytes"] is not None
            else max(0.0, fits["bytes"](r["blocks"])),
            r["peak_rss_mb"],
        )
        for r in rows
    }
    sp = generate_spine(SEED)
    blocks = sp.units_per_state("Block")
    people = sp.populations()["State"]
    bp = [(f"S{i + 1:02d}", int(blocks[i]), int(people[i])) for i in range(sp.n_states)]
    states = scale_states(
        bp, fits["setup"], fits["replicate"], fits["bytes"], fits["peak"], measured=measured
    )
    # a task's memory grows with the replicates it holds (their released histograms, the parts'
    # temporaries up to their bound): measured per person, the same for every state
    slope = replicate_memory_slope()[0] if memory_slope is None else memory_slope
    states = [dataclasses.replace(s, peak_mb_per_replicate=slope * s.people / 1e6) for s in states]
    return states, fits


def production_rows(
    states: list[Any],
    replicates: list[int],
    workers: list[int],
    deadline_s: float,
    fixed: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Predictions per (replicates, task granularity, workers), and the fewest workers for the
    deadline; ``fixed``: task_s, worker_s, flow_s, write_mb_s, store_mb_s."""
    from production_model import predict_production, workers_needed

    variants = [
        ("one task per state", None),
        ("a task per range of 25 replicates (the default)", 25),
        ("one task per state × replicate", 1),
    ]
    rows, need = [], []
    for r in replicates:
        for name, split in variants:
            if split is not None and r <= split:
                continue  # the same tasks as one per state
            for n in workers:
                p = predict_production(states, r, n, replicates_per_task=split, **fixed)
                rows.append({"variant": name, **p.row()})
            n_min = workers_needed(states, r, deadline_s, replicates_per_task=split, **fixed)
            need.append(
                {
                    "replicates": r,
                    "variant": name,
                    "deadline_h": deadline_s / 3600,
                    "workers_needed": n_min if n_min is not None else "",
                    "floor_s": fixed["flow_s"]
                    + fixed["worker_s"]
                    + predict_production(
                        states, r, 1, replicates_per_task=split, **fixed
                    ).largest_task_s,
                }
            )
    return rows, need


def production_mode(args: argparse.Namespace) -> None:
    prefer = [x.strip() for x in args.runs.split(",") if x.strip()] if args.runs else None
    summary, bytes_run, rows = production_measured(prefer=prefer)
    stored = [r for r in rows if r["stored_bytes"] is not None]
    raw = sum(r["written_bytes"] for r in stored)
    compression = sum(r["stored_bytes"] for r in stored) / raw if raw else 1.0
    slope, slope_from = replicate_memory_slope()
    states, fits = production_states(rows, slope)
    costs, _ = load_costs() if MEASURE_JSON.exists() else (None, None)
    spine_s = max(r["spine_cpu_s"] for r in rows)
    fixed = {
        "task_s": costs.task_s if costs else 0.3,
        "worker_s": spine_s,
        "flow_s": costs.flow_s if costs else 0.0,
        "write_mb_s": S3_WORKER_MB_S,
        "store_mb_s": S3_AGGREGATE_MB_S,
    }
    reps = [int(x) for x in args.replicates.split(",")]
    workers = [int(x) for x in args.workers.split(",")]
    pred, need = production_rows(states, reps, workers, args.deadline_h * 3600, fixed)
    write_rows(PRODUCTION_CSV, pred)
    write_rows(PRODUCTION_WORKERS_CSV, need)
    run = {k: v for k, v in summary.items() if k != "per_state"}
    if not run["store_bytes"]:  # a run that did not end: its states' directories
        run["store_bytes"] = sum(
            r["stored_bytes"] for r in rows if r.get("bytes_run") == run["name"]
        )
    meta = {
        "runs_preferred": prefer or [],
        "run": run,
        "bytes_run": (
            {k: v for k, v in bytes_run.items() if k != "per_state"} if bytes_run else None
        ),
        "measured_states": [r["state"] for r in rows],
        "cpu_runs": _count_by(rows, "cpu_run"),
        "bytes_runs": _count_by(rows, "bytes_run"),
        "compression": compression,
        "fits": {k: asdict_fit(f) for k, f in fits.items()},
        "fixed": fixed,
        "replicate_memory": {"bytes_per_person": slope, "from": slope_from},
    }
    (RESULTS / "capacity_production.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in pred:
        print(
            f"{p['replicates']:>4} replicates, {p['variant']:<31} {p['workers']:>4} workers: "
            f"{_hours(p['wall_s']):>8} ({p['bound']}; largest task {_hours(p['largest_task_s'])}, "
            f"work {p['cpu_s'] / 3600:.1f} core-h, stored {p['stored_bytes'] / 1e9:.1f} GB)"
        )
    for x in need:
        print(
            f"{x['replicates']} replicates, {x['variant']}: {x['workers_needed'] or 'no number of'} "
            f"workers within {x['deadline_h']:g} h (floor {_hours(x['floor_s'])})"
        )
    write_production_section()


def _count_by(rows: list[dict[str, Any]], key: str) -> dict[str, int]:
    """How many rows each run gave ``key`` (``cpu_run``, ``bytes_run``)."""
    out: dict[str, int] = {}
    for r in rows:
        if r.get(key):
            out[r[key]] = out.get(r[key], 0) + 1
    return out


def asdict_fit(f: Any) -> dict[str, float]:
    return {"a": f.a, "b": f.b, "max_rel_err": f.max_rel_err}


PRODUCTION_HEADING = "## Production schema: full-US `pl94_production` audits (sparse TopDown)"


def write_production_section() -> None:
    """Replace (or add) the production section at the end of ``capacity.md``, leaving the rest
    as ``render`` made it."""
    text = REPORT.read_text() if REPORT.exists() else ""
    if PRODUCTION_HEADING in text:
        text = text[: text.index(PRODUCTION_HEADING)]
    REPORT.write_text(text.rstrip("\n") + "\n\n" + "\n".join(production_lines()))


def production_lines() -> list[str]:
    """The production-schema section of ``capacity.md`` (empty before ``production`` ran)."""
    meta_p = RESULTS / "capacity_production.json"
    if not (meta_p.exists() and PRODUCTION_CSV.exists()):
        return []
    meta = json.loads(meta_p.read_text())
    run, fits, fixed = meta["run"], meta["fits"], meta["fixed"]
    brun = meta.get("bytes_run")
    cpu_runs, bytes_runs = meta.get("cpu_runs", {}), meta.get("bytes_runs", {})
    memory = meta.get("replicate_memory") or {}
    slope, where = float(memory.get("bytes_per_person", 0.0)), memory.get("from", "")

    def runs_of(counts: dict[str, int]) -> str:
        return ", ".join(f"`{k}` ({v} states)" for k, v in counts.items())

    lines = [
        PRODUCTION_HEADING,
        "",
        "Measured by `benchmarks/bench_production.py` (one-replicate runs; "
        + (
            "as `--runs` named them: " + ", ".join(f"`{x}`" for x in meta["runs_preferred"])
            if meta.get("runs_preferred")
            else "the run with most states, the newest among equals, first"
        )
        + "; each state's compute costs from the first run that measured it, its stored bytes "
        "from the first that wrote a store). Compute costs (CPU-s of the spine, the population, "
        f"TopDown and residuals; peak RSS) from `{run.get('name', '?')}` "
        f"({run['states']} states × 1 replicate on {run['workers']} local Dask workers"
        + (f", {run['memory_limit']} each; started {run['started']}" if run["started"] else "")
        + f"; load {run['load_before']:.1f} / {run['load_mean'] or 0:.1f} / "
        f"{run['load_after']:.1f}): wall {_hours(run['wall_s'])}, {run['cpu_s']:,.0f} worker "
        "CPU-s, "
        + (
            f"store {run['store_bytes'] / 1e6:,.0f} MB"
            if run["store_bytes"]
            else "no store written (`--no-store`: its write CPU-s are the residuals' computation "
            "alone)"
        )
        + (
            " — **the run did not finish**: the states it finished"
            if run.get("finished") is False
            else ""
        )
        + (f"; other runs' states it lacks: {runs_of(cpu_runs)}" if len(cpu_runs) > 1 else "")
        + ". "
        + (
            "Stored bytes from the same run"
            if brun and brun.get("name") == run.get("name") and len(bytes_runs) == 1
            else f"Stored bytes from `{brun['name']}` (started {brun['started'] or '?'}: "
            f"{brun['states']} states, store {brun['store_bytes'] / 1e6:,.0f} MB for "
            f"{brun['written_bytes'] / 1e6:,.0f} MB raw"
            + (f"; {runs_of(bytes_runs)}" if len(bytes_runs) > 1 else "")
            + "); the store's layout (per level int64 keys + int32 residuals, Zarr v3 default "
            "codec) has not changed since"
            if brun
            else "No run wrote a store: stored bytes unknown (0)"
        )
        + ". States measured: "
        + (
            f"all {len(meta['measured_states'])} (the predictions use each state's measured cost; "
            "the fits below summarise them)."
            if len(meta["measured_states"]) >= run["states"] and run.get("finished") is not False
            else f"{len(meta['measured_states'])}; the others from the fits below."
        ),
        "",
        f"- population (once per task): {fits['setup']['a']:.2f} + "
        f"{fits['setup']['b'] * 1e6:.2f}·10⁻⁶·blocks CPU-s",
        f"- one replicate (sparse TopDown, residuals, local writes): {fits['replicate']['a']:.2f} + "
        f"{fits['replicate']['b'] * 1e6:.1f}·10⁻⁶·blocks CPU-s (worst relative error on the "
        f"measured states {fits['replicate']['max_rel_err']:.0%})",
        f"- stored residuals per replicate: {fits['bytes']['b']:.1f} bytes per block "
        f"(compressed, {meta['compression']:.2f} of the raw int64 keys + int32 residuals)",
        f"- peak RSS of a state task: {fits['peak']['a']:.0f} + {fits['peak']['b'] * 1e3:.2f}·10⁻³·"
        "blocks MB at one replicate"
        + (
            f", + {slope:.1f} bytes a person per further replicate the task holds (its released "
            f"histograms, the parts' temporaries; `bench_replicate_memory.py`: {where})"
            if slope
            else ""
        ),
        f"- per task {fixed['task_s']:.2f} s (Prefect on Dask), the spine {fixed['worker_s']:.1f} "
        f"CPU-s per worker, S3 writes {fixed['write_mb_s']:.0f} MB/s per worker and "
        f"{fixed['store_mb_s']:,.0f} MB/s aggregate (assumed)",
        "",
        "| replicates | tasks | workers | wall | bound | largest task | work (core-h) | stored | peak task memory |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in _read_csv(PRODUCTION_CSV):
        lines.append(
            f"| {int(p['replicates']):,} | {p['variant']} ({p['tasks']}) | {p['workers']} | "
            f"**{_hours(float(p['wall_s']))}** | {p['bound']} | "
            f"{_hours(float(p['largest_task_s']))} | {float(p['cpu_s']) / 3600:.1f} | "
            f"{float(p['stored_bytes']) / 1e9:.1f} GB | {float(p['peak_task_mb']) / 1e3:.1f} GB |"
        )
    lines += ["", "Fewest workers to finish within the deadline:", ""]
    for x in _read_csv(PRODUCTION_WORKERS_CSV):
        n = x["workers_needed"] or "none (the floor is above the deadline)"
        lines.append(
            f"- {int(x['replicates']):,} replicates, {x['variant']}: **{n}** within "
            f"{float(x['deadline_h']):g} h (floor: the largest task, {_hours(float(x['floor_s']))})"
        )
    lines += [
        "",
        "Assumptions: one-core workers as fast as the measuring machine's core (CPU-s measured "
        "under load carry its cache contention: conservative); tasks taken longest first (Dask "
        "priorities); the composed accounting off the critical path (cached, or on one worker "
        "while the states run); the EPL tail not counted; thousands of tasks are far below the "
        "Dask scheduler's limits (≈ 1 ms per task) and each pays the measured Prefect cost.",
        "",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure", help="per-state CPU and memory, write rate, orchestration cost")
    m.add_argument("--states", default="auto:8", help="auto:K (smallest to largest) or labels")
    m.add_argument("--mem-replicates", type=int, default=3)
    m.add_argument("--s3-url", default="", help="also time writes to this s3:// prefix")
    m.add_argument(
        "--resume", action="store_true", help="reuse the states measured by an interrupted run"
    )
    p = sub.add_parser("predict", help="wall time of full-US pl94 audits on N workers")
    p.add_argument("--replicates", default="1,25,100,1000")
    p.add_argument("--workers", default="2,4,16,52,64,256")
    p.add_argument("--tasks-per-worker", type=int, default=2)
    p.add_argument("--worker-gb", type=float, default=16.0, help="memory of one worker, GB")
    c = sub.add_parser("check", help="predicted vs measured dpaudit runs on 1, 2, 4 workers")
    c.add_argument("--workers", default="1,2,4")
    c.add_argument("--states", default="ST38,ST42,ST21,ST24,ST10,ST31")
    c.add_argument("--replicates", type=int, default=2)
    pp = sub.add_parser(
        "production", help="full-US pl94_production audits on N workers, from bench_production"
    )
    pp.add_argument("--replicates", default="1,100")
    pp.add_argument("--workers", default="2,16,64,256")
    pp.add_argument("--deadline-h", type=float, default=10.0)
    pp.add_argument(
        "--runs",
        default="",
        help="result names in benchmarks/results/ in order of preference (e.g. "
        "production_us_r3_sortfree,production_us_r2); default: most states first, then newest",
    )
    r = sub.add_parser("render", help="rewrite benchmarks/capacity.md from the results")
    del r
    args = ap.parse_args()
    if args.mode == "measure":
        measure(args)
    elif args.mode == "predict":
        predict_mode(args)
    elif args.mode == "check":
        check(args)
    elif args.mode == "production":
        production_mode(args)
    else:
        render()


if __name__ == "__main__":
    main()
