"""Where a small run's fixed cost goes: `dpaudit run --no-report` of a spec (default: the shipped
one) in a temporary directory, and the CPU seconds of every process of its tree (the run, the
embedded Prefect API server, the process local workers are forked from, the workers), sampled
through ``bench_orchestration.run_sampled`` until each ends (not a test).

    .venv/bin/python benchmarks/bench_fixed_cost.py [SPEC] [--runs N]
    .venv/bin/python benchmarks/bench_fixed_cost.py [SPEC] --vs TREE [--runs N]

Prints the machine, then per run: the run's stage lines, and a table of the processes (first and
last seen, CPU seconds, kind), their CPU sum and the wall time. With ``--vs TREE`` (another
checkout, e.g. a worktree of main), the run of this checkout and of TREE alternated as fresh
processes (``_timing.alternate``, N rounds after a warm-up of each): the median CPU seconds of the
run's own process (every thread of it: the flow's, Dask's client, Prefect's log and event workers;
not the API server nor the workers) and the median wall of the command.
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
from _timing import alternate, child_timed
from bench_orchestration import run_sampled

#: the run in this interpreter, then its own process's CPU seconds (``-c``: the workers' forkserver
#: does not run it again) and its wall
_SELF_TIMED = (
    "import atexit, resource, runpy, sys, time\n"
    "t0 = time.perf_counter()\n"
    "def done():\n"
    "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    print(f'run process cpu={r.ru_utime + r.ru_stime:.3f} wall={time.perf_counter() - t0:.3f}')\n"
    "atexit.register(done)\n"
    "sys.argv = ['flows.cli', *sys.argv[1:]]\n"
    "runpy.run_module('flows.cli', run_name='__main__')\n"
)


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


def versus(spec: list[str], other: Path, runs: int) -> None:
    """This checkout's run against ``other``'s, alternated as fresh processes."""
    here = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-c", _SELF_TIMED, "run", *spec, "--no-report", "--overwrite"]
    pattern = r"run process cpu=(?P<cpu>[0-9.]+) wall=(?P<wall>[0-9.]+)"
    with tempfile.TemporaryDirectory() as tmp:

        def one(tree: Path, name: str) -> Any:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cwd = Path(tmp) / name
            cwd.mkdir(exist_ok=True)
            return child_timed(argv, cwd=cwd, env=env, pattern=pattern, label=name)

        print(
            f"method: median CPU-s of the run's own process (getrusage at its exit) and wall of "
            f"{runs} alternated rounds after 1 warm-up of each | load {os.getloadavg()[0]:.2f} | "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        )
        paired = alternate(
            lambda: one(other, "vs"), lambda: one(here, "this"), rounds=runs,
            labels=(f"{other}", "this checkout"),
        )  # fmt: skip
    print(f"the run's own process: {paired.line()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--vs", type=Path, help="another checkout to alternate with")
    a = ap.parse_args()
    spec = [str(Path(a.spec).resolve())] if a.spec else []
    print(machine_info())
    if a.vs:
        versus(spec, a.vs.resolve(), a.runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            print(f"run {i + 1}:")
            one_run(spec, tmp)


if __name__ == "__main__":
    main()
