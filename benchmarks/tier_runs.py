"""A test tier run as CI runs it, timed, with the machine's load beside it.

    python benchmarks/tier_runs.py fast                        # the fast tier as .ci/run runs it
    python benchmarks/tier_runs.py fast --runs 3 --burners 8   # thrice, 8 CPU hogs beside it
    python benchmarks/tier_runs.py slow                        # the slow tier as .ci/run runs it

Both tiers run on two pytest processes (``-n 2``), as ``.ci/run`` runs them; ``--workers 1`` runs
one.

Each run appends one JSON line to ``benchmarks/results/tier_runs.jsonl``: the tier, the pytest
command, its exit code and summary line ("1983 passed, 70 deselected in 601.2s"), the wall time,
the CPU seconds of pytest and the processes it waited for, the 1-minute load average sampled every
30 s (min and max), the number of CPU-bound burner processes beside it, and the machine. The full
pytest output of each run goes to ``benchmarks/results/tier_runs/<tier>-<start time>.log``.
Run it from the repository's root with the project's virtualenv."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from _machine import machine_info

RESULTS = Path(__file__).resolve().parent / "results"

#: the pytest arguments of each tier, as .ci/run gives them
TIER_ARGS = {"fast": [], "slow": ["-m", "slow"]}


def _burn() -> None:  # pragma: no cover - a CPU hog, killed by the parent
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def _summary(text: str) -> str:
    lines = [
        ln.strip("= ")
        for ln in text.splitlines()
        if " in " in ln and ("passed" in ln or "failed" in ln)
    ]
    return lines[-1] if lines else ""


def run_tier(tier: str, workers: int, burners: int) -> dict[str, object]:
    cmd = [sys.executable, "-m", "pytest", *TIER_ARGS[tier], "-p", "no:cacheprovider"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    stamp = time.strftime("%Y%m%dT%H%M%S")
    log = RESULTS / "tier_runs" / f"{tier}-{stamp}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    loads: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            loads.append(os.getloadavg()[0])
            stop.wait(30)

    hogs = [mp.Process(target=_burn, daemon=True) for _ in range(burners)]
    for h in hogs:
        h.start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    for h in hogs:
        h.kill()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "tier": tier,
        "command": " ".join(["python", *cmd[1:]]),
        "exit_code": rc,
        "summary": _summary(log.read_text(encoding="utf-8")),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load_min": round(min(loads), 2),
        "load_max": round(max(loads), 2),
        "burners": burners,
        "log": str(log.relative_to(RESULTS.parent.parent)),
        "machine": machine_info(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tier", choices=sorted(TIER_ARGS))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--burners", type=int, default=0, help="CPU-bound processes run beside it")
    ap.add_argument(
        "--workers", type=int, default=2, help="pytest-xdist workers (-n), 2 as .ci/run"
    )
    args = ap.parse_args()
    failed = 0
    for _ in range(args.runs):
        row = run_tier(args.tier, args.workers, args.burners)
        with (RESULTS / "tier_runs.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
        failed += row["exit_code"] != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
