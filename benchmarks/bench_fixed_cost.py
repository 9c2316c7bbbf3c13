"""Where a small run's fixed cost goes: `dpaudit run --no-report` of a spec (default: the shipped
one) in a temporary directory, its stage lines stamped as they arrive, and the CPU seconds of every
process of its tree (the run, the embedded Prefect API server, the process local workers are
forked from, the workers), polled every 0.1 s until each ends (not a test).

    .venv/bin/python benchmarks/bench_fixed_cost.py [SPEC] [--runs N]

Prints the machine, then per run: seconds from the start to each stage line, and a table of the
processes (start, end, CPU seconds, command), their CPU sum and the wall time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from _machine import machine_info


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
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    stages: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("dpaudit: "):
                stages.append((time.perf_counter() - t0, line.rstrip()[len("dpaudit: ") + 9 :]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: dict[int, dict[str, float | str]] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in procs:
            try:
                with p.oneshot():
                    ct = p.cpu_times()
                    row = seen.setdefault(
                        p.pid,
                        {"cmd": " ".join(p.cmdline()), "start": time.perf_counter() - t0},
                    )
                    row["cpu"] = ct.user + ct.system
                    row["end"] = time.perf_counter() - t0
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    reader.join(timeout=5)
    if proc.returncode != 0:
        print(f"exit {proc.returncode}", *(s for _, s in stages), sep="\n")
        raise SystemExit(proc.returncode)
    for t, s in stages:
        print(f"  {t:6.1f} s  {s}")
    print(f"  {'start':>6} {'end':>6} {'CPU s':>6}  process")
    total = 0.0
    for row in sorted(seen.values(), key=lambda r: float(r["start"])):
        total += float(row["cpu"])
        kind = _kind(str(row["cmd"]))
        print(f"  {row['start']:6.1f} {row['end']:6.1f} {row['cpu']:6.2f}  {kind}")
    print(
        f"  CPU sum {total:.1f} s (polled: a process's last 0.1 s may be missed); wall {wall:.1f} s"
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
