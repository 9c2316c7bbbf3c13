"""Error bars of a state-size published table with ``dpaudit run``, end to end, timed.

    python benchmarks/bench_published_errors.py                      # 160,704 blocks, 25 runs
    python benchmarks/bench_published_errors.py --blocks 12 --queries total,votingage

Writes a synthetic published pl94 table of one state (by default the 2020 average state: 62
counties, 27 tracts per county, 3 block groups per tract, 32 blocks per block group, 160,704
blocks; a block's 28 cells gamma–Poisson counts, about 39 people a block, most cells 0) and an areas
file mapping every block to one of 8 congressional districts (runs of whole counties) and one of 100
legislative districts (runs of whole block groups), then runs ``dpaudit run`` of the error-bars
spec in a fresh directory, as a user would: the default local cluster and embedded Prefect API.
Prints and appends to ``results/published_errors_bench.jsonl``: the wall time and the CPU seconds
of the command and its processes, their peak memory, the stage lines the run printed, the sizes of
the intervals CSV and the store, and the machine with its load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from _machine import machine_info

RESULTS = Path(__file__).resolve().parent / "results"


def write_inputs(d: Path, counties: int, tracts: int, bgs: int, blocks: int, seed: int) -> int:
    """The published table and the areas file in ``d``; returns the number of blocks."""
    from auditlib.geography.schema import schema

    sch = schema("pl94")
    cells = sch.cell_labels(" * ".join(sch.attribute_names))
    rng = np.random.default_rng(seed)
    n = counties * tracts * bgs * blocks
    idx = np.arange(n)
    county = idx // (tracts * bgs * blocks)
    tract = idx // (bgs * blocks)
    bg = idx // blocks
    counts = rng.poisson(rng.gamma(0.2, 7.0, size=(n, len(cells))))
    with (d / "published.csv").open("w", encoding="utf-8") as f:
        f.write("county,tract,block_group,block," + ",".join(cells) + "\n")
        for i in range(n):
            f.write(f"C{county[i]},T{tract[i]},G{bg[i]},B{i},")
            f.write(",".join(map(str, counts[i])) + "\n")
    n_bg = counties * tracts * bgs
    with (d / "districts.csv").open("w", encoding="utf-8") as f:
        f.write("block,area\n")
        for i in range(n):
            f.write(f"B{i},CD{county[i] * 8 // counties + 1}\n")
            f.write(f"B{i},LD{bg[i] * 100 // n_bg + 1}\n")
    return n


SPEC = """[audit]
allocation = "pl94_2021_production"
replicates = {replicates}
seed = 1

[population]
kind = "table"
path = "published.csv"
levels = ["county", "tract", "block_group"]
unit = "block"
attributes = "pl94"

[release]
kind = "published"
levels = {{ US = "", State = "All", County = "county", Tract = "tract", Block_Group = "block_group", Block = "block" }}
areas = "districts.csv"
alpha = 0.1
{queries}
"""


def peak_rss_mb(pid: int, stop: threading.Event, out: list[float]) -> None:
    """Sum of the resident memory of ``pid`` and its descendants, sampled every second."""
    import psutil

    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    while not stop.is_set():
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            break
        out.append(total / 2**20)
        stop.wait(1.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counties", type=int, default=62)
    ap.add_argument("--tracts", type=int, default=27, help="per county")
    ap.add_argument("--block-groups", type=int, default=3, help="per tract")
    ap.add_argument("--blocks", type=int, default=32, help="per block group")
    ap.add_argument("--replicates", type=int, default=25)
    ap.add_argument("--queries", default="", help="comma-separated (default: every pl94 query)")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--keep", type=Path, help="run in this directory and keep it")
    ap.add_argument("--note", default="", help="recorded with the row (e.g. the code's commit)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="dpaudit-errors-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n = write_inputs(work, a.counties, a.tracts, a.block_groups, a.blocks, a.seed)
    inputs_s = time.perf_counter() - t0
    queries = [q for q in a.queries.split(",") if q]
    qline = f"queries = {json.dumps(queries)}" if queries else ""
    (work / "errors.toml").write_text(SPEC.format(replicates=a.replicates, queries=qline))
    exe = Path(sys.executable).with_name("dpaudit")
    cmd = [str(exe), "run", "errors.toml"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    stop, rss = threading.Event(), []
    sampler = threading.Thread(target=peak_rss_mb, args=(proc.pid, stop, rss), daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    csv = work / "results" / "audit.errors.csv"
    row = {
        "blocks": n,
        **({"note": a.note} if a.note else {}),
        "replicates": a.replicates,
        "queries": queries or "all",
        "exit_code": proc.returncode,
        "inputs_s": round(inputs_s, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "peak_rss_mb": round(max(rss, default=0.0)),
        "csv_mb": round(csv.stat().st_size / 2**20, 1) if csv.exists() else None,
        "csv_rows": sum(1 for _ in csv.open()) - 1 if csv.exists() else None,
        "stdout": out.splitlines()[-40:],
        "load_start": round(load0, 2),
        "load_end": round(os.getloadavg()[0], 2),
        "machine": machine_info(),
    }
    with (RESULTS / "published_errors_bench.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print(out)
    print(json.dumps({k: v for k, v in row.items() if k != "stdout"}, indent=1))
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
