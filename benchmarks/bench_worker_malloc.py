"""What glibc's malloc thresholds cost a worker's task: one spine state's sparse TopDown
(``flows.audit.production.production_runs``, in a thread as a Dask worker runs its tasks) in fresh
processes whose environment is, in turn, glibc's default, Dask's nanny default
(``MALLOC_TRIM_THRESHOLD_=65536``) and the setting a run gives the workers it starts
(``flows.runtime.dask_malloc``); alternated rounds, median CPU seconds, kernel seconds and minor
page faults of each (not a test).

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_worker_malloc.py \\
        [--schema dhc_production] [--state smallest] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _machine import machine_info

ROOT = Path(__file__).resolve().parents[1]

#: the child: the spec's one state, its TopDown in a thread, its resource use as one JSON line
_CHILD = r"""
import json, resource, sys, threading, time
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from flows.audit.production import production_runs
spec = json.loads(sys.argv[1])
plan = make_plan(parse_spec(spec))
block = next(b for b in plan.blocks if b.state_key > 0)
out = {}
def run():
    t = time.thread_time()
    production_runs(plan, block)
    out["thread_cpu_s"] = time.thread_time() - t
th = threading.Thread(target=run)
th.start(); th.join()
ru = resource.getrusage(resource.RUSAGE_SELF)
out.update(user_s=ru.ru_utime, sys_s=ru.ru_stime, minflt=ru.ru_minflt)
out["maxrss_mb"] = ru.ru_maxrss / 1024
print(json.dumps(out))
"""


def variants() -> dict[str, dict[str, str]]:
    from flows.runtime.dask_malloc import WORKER_MALLOC_THRESHOLD

    t = str(WORKER_MALLOC_THRESHOLD)
    return {
        "glibc default": {},
        "Dask's nanny (trim 65536)": {"MALLOC_TRIM_THRESHOLD_": "65536"},
        f"dpaudit's workers (trim = mmap = {t})": {
            "MALLOC_TRIM_THRESHOLD_": t,
            "MALLOC_MMAP_THRESHOLD_": t,
        },
    }


def spec_of(schema: str, state: str) -> dict:
    import numpy as np

    from flows.spec.sources import load_spine

    if state == "smallest":
        st = int(np.argmin(load_spine(7, "US").populations()["State"]))
        state = f"ST{st + 1:02d}"
    allocation = "dhc_2023_production" if schema == "dhc_production" else "pl94_2021_production"
    return {
        "audit": {"allocation": allocation, "replicates": 1, "seed": 11},
        "population": {"kind": "spine", "seed": 7, "spine_states": [state], "attributes": schema},
        "release": {"kind": "topdown", "tolerance": 0.05},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schema", default="dhc_production")
    ap.add_argument("--state", default="smallest", help="a spine label (ST13) or 'smallest'")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    spec = spec_of(args.schema, args.state)
    print(machine_info())
    state = spec["population"]["spine_states"][0]
    print(
        f"{args.schema}, {state} of the seed-7 spine, tolerance 0.05, 1 replicate; "
        f"{args.rounds} alternated rounds, one fresh process a run"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    base["PYTHONPATH"] = str(ROOT)
    got: dict[str, list[dict]] = {name: [] for name in variants()}
    for r in range(args.rounds):
        for name, env in variants().items():
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, json.dumps(spec)],
                env={**base, **env}, capture_output=True, text=True, check=True,
            )  # fmt: skip
            got[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"  round {r + 1}, {name}: {got[name][-1]}", flush=True)
    print(
        f"{'environment':<44} {'task CPU-s':>10} {'sys s':>7} {'minor faults':>13} {'peak MB':>8}"
    )
    for name, runs in got.items():

        def med(k: str, runs: list[dict] = runs) -> float:
            return statistics.median(x[k] for x in runs)

        print(
            f"{name:<44} {med('thread_cpu_s'):>10.1f} {med('sys_s'):>7.1f} "
            f"{med('minflt'):>13,.0f} {med('maxrss_mb'):>8.0f}"
        )


if __name__ == "__main__":
    main()
