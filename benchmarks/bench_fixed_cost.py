"""Where a small run's fixed cost goes: `dpaudit run --no-report` of a spec (default: the shipped
one) in a temporary directory, and the CPU seconds of every process of its tree (the run, the
embedded Prefect API server, the process local workers are forked from, the workers), sampled
through ``bench_orchestration.run_sampled`` until each ends (not a test).

    .venv/bin/python benchmarks/bench_fixed_cost.py [SPEC] [--runs N]

Prints the machine, then per run: the run's stage lines, and a table of the processes (first and
last seen, CPU seconds, kind), their CPU sum and the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import machine_info
from bench_orchestration import run_sampled


def _kind(cmd: str) -> str:
    if "uvicorn" in cmd:
        return "Prefect API server"
    if "forkserver" in cmd:
        return "forkserver / worker"
    if "spawn_main" in cmd:
        return "worker (spawned)"
    if "resource_tracker" in cmd:
        return "resource tracker"
    return "dpaudit run" if "flows.cli" in cmd else cmd[:40]


def one_run(spec: list[str], cwd: str) -> None:
    cmd = [sys.executable, "-m", "flows.cli", "run", *spec, "--no-report", "--overwrite"]
    seen: dict[int, dict[str, Any]] = {}
    t0 = time.perf_counter()

    def sample(p: Any, root: bool) -> int:
        ct = p.cpu_times()
        now = time.perf_counter() - t0
        row = seen.setdefault(p.pid, {"kind": _kind(" ".join(p.cmdline())), "start": now})
        row["cpu"], row["end"] = ct.user + ct.system, now
        return 0

    here = os.getcwd()
    os.chdir(cwd)
    try:
        wall, _, text = run_sampled(cmd, sample)
    finally:
        os.chdir(here)
    for line in text.splitlines():
        if line.startswith("dpaudit: "):
            print(f"  {line[len('dpaudit: ') + 9 :]}")
    print(f"  {'start':>6} {'end':>6} {'CPU s':>6}  process")
    rows = sorted(seen.values(), key=lambda r: float(r["start"]))
    for r in rows:
        print(f"  {r['start']:6.1f} {r['end']:6.1f} {r['cpu']:6.2f}  {r['kind']}")
    total = sum(float(r["cpu"]) for r in rows)
    print(
        f"  CPU sum {total:.1f} s (sampled: a process's last 0.2 s may be missed); wall {wall:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    spec = [str(Path(a.spec).resolve())] if a.spec else []
    print(machine_info())
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            print(f"run {i + 1}:")
            one_run(spec, tmp)


if __name__ == "__main__":
    main()
