"""A full-US PL94 production replicate on a real local Dask cluster: sparse TopDown over the
2,016-cell ``pl94_production`` histogram (every query of ``pl94_2021_production``, GQ invariants)
for every state of the synthetic 2020 spine, one task per state, the released histograms'
residuals written to a local Zarr store.

    .venv/bin/python benchmarks/bench_production.py [--states 51 | S01,S10,… | ladder]
        [--replicates 1] [--workers 2] [--memory-limit 8GB] [--store DIR] [--out results/x.json]
        [--dask-malloc]

Each task (largest state first) takes the spine (generated once per worker process), draws its
state's sparse population (``spine_state_sparse_population``), runs ``sparse_topdown`` for each
replicate, and writes per (replicate, level) the non-zero items of ``released − true`` (over the
union of the released and true non-zero cells: ``unit · 2016 + cell`` as int64 keys, the
difference as int32) to ``<store>/<state>/r<replicate>/<level>/{keys,residual}`` (Zarr v3, default
compression). It returns only small summaries: CPU-s of each step (``time.process_time`` of the
worker process), the worker's peak RSS (sampled every 0.1 s during the task, and its
``ru_maxrss``), the non-zero cells per level. A benchmark of the computation and of the store's
size, not the product's store layout.

The workers get the malloc thresholds of the workers a ``dpaudit run`` starts
(``flows/runtime/dask_malloc.py``); ``--dask-malloc`` keeps Dask's own, as the runs before
2026-11-30 had them. ``--states ladder`` runs the smallest, a middle and the largest state (extrapolation);
``--states 51`` all 51 states. Results (JSON) under ``benchmarks/results/``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _machine import machine_info  # noqa: E402
from _timing import PeakRSS  # noqa: E402

RESULTS = HERE / "results"
SEED = 20200401
SCHEMA = "pl94_production"
ALLOCATION = "pl94_2021_production"

_SPINE: dict[int, Any] = {}


def _spine(seed: int) -> Any:
    """The full-US spine, generated once per worker process."""
    if seed not in _SPINE:
        from auditlib.geography.spine import generate_spine

        _SPINE[seed] = generate_spine(seed)
    return _SPINE[seed]


def residual_items(dp: Any, truth: Any, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, released − true) over the union of both histograms' non-zero items."""
    kd = dp.unit_of_entry() * n_cells + dp.cells.astype(np.int64)
    kt = truth.unit_of_entry() * n_cells + truth.cells.astype(np.int64)
    keys = np.union1d(kd, kt)
    res = np.zeros(keys.size, dtype=np.int32)
    res[np.searchsorted(keys, kd)] += dp.counts.astype(np.int32)
    res[np.searchsorted(keys, kt)] -= truth.counts.astype(np.int32)
    nz = res != 0
    return keys[nz], res[nz]


def run_state(
    state: int, label: str, seed: int, replicates: int, measured: Any, store: str | None
) -> dict[str, Any]:
    """One state's task: population, every replicate's sparse TopDown, the residuals' writes."""
    import zarr

    from auditlib.geography.sparse_population import spine_state_sparse_population
    from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
    from auditlib.simulate.topdown import spine_state

    t_wall = time.perf_counter()
    cpu0 = time.process_time()
    rss_before = PeakRSS().peak
    out: dict[str, Any] = {"state": label, "pid": os.getpid()}
    with PeakRSS() as peak:
        spine = _spine(seed)
        cpu1 = time.process_time()
        hierarchy, pops = spine_state(spine, state)
        pop = spine_state_sparse_population(spine, state, seed, schemas=("pl94_production",))
        cpu2 = time.process_time()
        out.update(
            blocks=int(pops.shape[0]),
            people=int(pops.sum()),
            levels=list(hierarchy.levels),
            spine_cpu_s=cpu1 - cpu0,
            population_cpu_s=cpu2 - cpu1,
            topdown_cpu_s=[],
            write_cpu_s=[],
            iterations=[],
            nnz_true=[],
            nnz_dp=[],
            residual_items=[],
            written_bytes=0,
        )
        n_cells = pop.pl94.schema.n_cells
        root = zarr.open_group(store, mode="a") if store else None
        for r in range(replicates):
            c0 = time.process_time()
            rel = sparse_topdown(
                hierarchy.parents,
                hierarchy.levels,
                pop.pl94,
                pop.pl94_invariants,
                measured,
                noise_rngs(seed, state, len(hierarchy.levels), r),
            )
            c1 = time.process_time()
            items = []
            for i, level in enumerate(hierarchy.levels):
                keys, res = residual_items(rel.dp[i], rel.truth[i], n_cells)
                items.append(int(keys.size))
                if root is not None:
                    g = root.require_group(f"{label}/r{r}/{level}")
                    for name, arr in (("keys", keys), ("residual", res)):
                        a = g.create_array(
                            name,
                            shape=arr.shape,
                            dtype=arr.dtype,
                            chunks=(max(1, min(arr.size, 1 << 20)),),
                            overwrite=True,
                        )
                        a[...] = arr
                        out["written_bytes"] += int(arr.nbytes)
            c2 = time.process_time()
            out["topdown_cpu_s"].append(c1 - c0)
            out["write_cpu_s"].append(c2 - c1)
            out["iterations"].append(list(rel.iterations))
            out["residual_items"].append(items)
            if r == 0:
                out["nnz_true"] = [int(h.nnz) for h in rel.truth]
            out["nnz_dp"].append([int(h.nnz) for h in rel.dp])
            del rel
    out["cpu_s"] = time.process_time() - cpu0
    out["wall_s"] = time.perf_counter() - t_wall
    out["rss_before_mb"] = rss_before / 1e6
    out["peak_rss_mb"] = peak.peak / 1e6
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    return out


def dir_bytes(path: Path) -> tuple[int, int]:
    """(bytes, files) under ``path``."""
    total = files = 0
    for p in path.rglob("*"):
        if p.is_file():
            total += p.stat().st_size
            files += 1
    return total, files


def pick_states(spine: Any, spec: str) -> list[int]:
    """State indices, largest population first: ``51``/``all``, ``ladder`` (smallest, the median,
    the largest), a number ``k`` (the k evenly spaced by population), or labels ``S01,S10``."""
    pops = spine.populations()["State"]
    order = [int(i) for i in np.argsort(-pops, kind="stable")]
    if spec in ("all", "51"):
        return order
    if spec == "ladder":
        return [order[0], order[len(order) // 2], order[-1]]
    if spec.isdigit():
        k = int(spec)
        pick = np.unique(np.linspace(0, len(order) - 1, k).round().astype(int))
        return [order[i] for i in pick]
    labels = [s.strip() for s in spec.split(",") if s.strip()]
    idx = []
    for s in labels:
        if not (s.startswith("S") and s[1:].isdigit() and 1 <= int(s[1:]) <= spine.n_states):
            raise SystemExit(f"bench_production: unknown state {s!r}; give S01..S{spine.n_states}")
        idx.append(int(s[1:]) - 1)
    return sorted(idx, key=lambda i: -pops[i])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", default="ladder")
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="8GB")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--store", default=None, help="Zarr store directory (default: a temporary one)")
    ap.add_argument("--no-store", action="store_true", help="compute only, write nothing")
    ap.add_argument("--keep-store", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--dask-malloc",
        action="store_true",
        help="keep Dask's nanny's MALLOC_TRIM_THRESHOLD_=65536 (the runs before 2026-11-30), "
        "not the thresholds of the workers a dpaudit run starts",
    )
    args = ap.parse_args()
    if not args.dask_malloc:
        from flows.runtime.dask_malloc import apply_malloc_defaults

        apply_malloc_defaults()  # as a dpaudit run's local cluster (flows/runtime/cluster.py)

    import dask
    from dask.distributed import Client, LocalCluster, as_completed

    dask.config.set({"distributed.scheduler.allowed-failures": 0})  # a killed task is not rerun

    from auditlib.allocations import load_allocation
    from auditlib.geography.schema import schema
    from auditlib.geography.spine import LEVELS, generate_spine
    from auditlib.simulate.measured import allocation_measured

    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    spine = generate_spine(args.seed)  # not _spine(): the task must not carry it to the workers
    spine_s = time.perf_counter() - t0
    states = pick_states(spine, args.states)
    sch = schema(SCHEMA)
    measured = allocation_measured(
        load_allocation(ALLOCATION), list(LEVELS), sch.query_names, "bounded", schema=sch
    )
    tmp = None
    store: str | None = None
    if not args.no_store:
        if args.store:
            store = args.store
            shutil.rmtree(store, ignore_errors=True)
        else:
            tmp = tempfile.mkdtemp(prefix="bench_production_")
            store = str(Path(tmp) / "residuals.zarr")
    print(
        f"{len(states)} states × {args.replicates} replicate(s) on {args.workers} workers; "
        f"load {load_before[0]:.2f}; spine {spine_s:.1f} s",
        flush=True,
    )
    out = (
        Path(args.out) if args.out else RESULTS / f"production_{args.states.replace(',', '_')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".states.jsonl")
    partial.unlink(missing_ok=True)
    command = " ".join(["bench_production.py", *sys.argv[1:]])
    rows: list[dict[str, Any]] = []
    loads: list[float] = []
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        t_start = time.perf_counter()
        futures = [
            client.submit(
                run_state,
                st,
                f"S{st + 1:02d}",
                args.seed,
                args.replicates,
                measured,
                store,
                key=f"state-S{st + 1:02d}",
                priority=len(states) - k,  # largest first
                pure=False,
            )
            for k, st in enumerate(states)
        ]
        failed: list[str] = []
        for fut in as_completed(futures):
            try:
                row = fut.result()
            except Exception as e:  # e.g. a worker killed over its memory limit
                failed.append(f"{fut.key}: {type(e).__name__}: {e}")
                print(f"FAILED {failed[-1]}", flush=True)
                continue
            row["finished_s"] = time.perf_counter() - t_start
            loads.append(os.getloadavg()[0])
            row["load"] = loads[-1]
            rows.append(row)
            with partial.open("a") as f:  # each state as it finishes: an interrupted run keeps them
                f.write(json.dumps({**row, "command": command}, default=float) + "\n")
            print(
                f"{row['finished_s']:8.1f} s  {row['state']}  blocks {row['blocks']:>7,}  "
                f"people {row['people']:>10,}  CPU {row['cpu_s']:7.1f} s (pop "
                f"{row['population_cpu_s']:.1f}, topdown {sum(row['topdown_cpu_s']):.1f}, write "
                f"{sum(row['write_cpu_s']):.1f})  wall {row['wall_s']:7.1f} s  peak RSS "
                f"{row['peak_rss_mb']:,.0f} MB  load {row['load']:.1f}",
                flush=True,
            )
        wall = time.perf_counter() - t_start
        worker_rss = {
            a: w["metrics"]["memory"] / 1e6 for a, w in client.scheduler_info()["workers"].items()
        }
    store_bytes, store_files = dir_bytes(Path(store)) if store else (0, 0)
    by_pid: dict[int, float] = {}
    for r in rows:
        by_pid[r["pid"]] = max(by_pid.get(r["pid"], 0.0), r["peak_rss_mb"])
    summary = {
        "started": started,
        "machine": machine_info(),
        "command": command,
        "states": len(states),
        "replicates": args.replicates,
        "workers": args.workers,
        "memory_limit": args.memory_limit,
        "worker_malloc": "dask" if args.dask_malloc else "dpaudit (32 MiB thresholds)",
        "wall_s": wall,
        "cpu_s": sum(r["cpu_s"] for r in rows),
        "topdown_cpu_s": sum(sum(r["topdown_cpu_s"]) for r in rows),
        "population_cpu_s": sum(r["population_cpu_s"] for r in rows),
        "write_cpu_s": sum(sum(r["write_cpu_s"]) for r in rows),
        "spine_cpu_s": sum(r["spine_cpu_s"] for r in rows),
        "blocks": sum(r["blocks"] for r in rows),
        "people": sum(r["people"] for r in rows),
        "peak_rss_mb_per_worker": sorted(by_pid.values(), reverse=True),
        "worker_rss_mb_at_end": sorted(worker_rss.values(), reverse=True),
        "failed": failed,
        "store_bytes": store_bytes,
        "store_files": store_files,
        "written_bytes": sum(r["written_bytes"] for r in rows),
        "load_before": load_before[0],
        "load_mean": float(np.mean(loads)) if loads else None,
        "load_after": os.getloadavg()[0],
        "per_state": sorted(rows, key=lambda r: -r["people"]),
    }
    print(
        f"wall {wall:.1f} s, CPU {summary['cpu_s']:.1f} s, store {store_bytes / 1e6:,.1f} MB in "
        f"{store_files} files, peak RSS per worker {summary['peak_rss_mb_per_worker']} MB, "
        f"load {load_before[0]:.1f} / {summary['load_mean']} / {summary['load_after']:.1f}",
        flush=True,
    )
    out.write_text(json.dumps(summary, indent=1, default=float) + "\n")
    print(f"wrote {out}")
    if tmp and not args.keep_store:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
