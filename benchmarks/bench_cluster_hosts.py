"""The deploy recipes' production audit on a cluster of separately started processes, each on a
host of its own (not a test: `tests/integration/test_cluster_hosts.py` runs the same on one small
state).

Hosts are network namespaces with their own addresses on one bridge (the traffic stays on this
machine; needs the right to create namespaces, as root): the Prefect server and the submitting
``dpaudit run`` on the bridge's address, a ``dask scheduler`` on a second host and one ``dask
worker`` (1 thread, ``--memory-limit``) on each further host, every one started as the recipes
start them (``DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP=600s``, the workers' malloc thresholds). The
spec is the recipes' own (``deploy/compose/nightly.toml``) with ``--replicates`` and
``--states``; its ``[output]`` goes to ``--dir``. Afterwards ``dpaudit verify`` of the store and
the server's record of the flow run.

Measured: the command's wall time; CPU seconds of every process started (server, scheduler,
workers and their nannies, the run), each process's last ``cpu_times`` seen, sampled every
``--every`` s (a process loses what it used after its last sample: the figure errs low); the largest
resident set of one process. A JSON line goes to ``--out`` with the machine and the commit.

    sudo env PYTHONPATH=. .venv/bin/python benchmarks/bench_cluster_hosts.py --replicates 1 \\
        --dir /tmp/hosts --out benchmarks/results/cluster_hosts.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import psutil

from benchmarks._machine import commit, cpu_model, machine_info
from flows.spec.toml_writer import dump_toml
from tests.integration._hosts import can_make_hosts, cluster_on_hosts
from tests.integration._processes import own_environment

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "deploy" / "compose" / "nightly.toml"
NET = "10.231.9"  # not the integration test's subnet: both may run at once


class Sampler:
    """Every ``every`` s: each process's cumulative CPU seconds (last seen) and largest RSS, over
    the given roots and all their descendants."""

    def __init__(self, roots: list[subprocess.Popen[bytes]], every: float) -> None:
        self.roots, self.every = roots, every
        self.cpu: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU-s
        self.names: dict[tuple[int, float], str] = {}
        self.peak: dict[tuple[int, float], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        for root in list(self.roots):
            try:
                top = psutil.Process(root.pid)
                procs = [top, *top.children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                try:
                    with p.oneshot():
                        key = (p.pid, p.create_time())
                        t = p.cpu_times()
                        self.cpu[key] = t.user + t.system
                        self.peak[key] = max(self.peak.get(key, 0), p.memory_info().rss)
                        if key not in self.names:
                            argv = [Path(x).name if x.startswith("/") else x for x in p.cmdline()]
                            self.names[key] = " ".join(argv[:4])[:60]  # no path of this machine
                except psutil.Error:
                    pass

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()


def recipe_spec(path: Path, scheduler: str, replicates: int, states: list[str] | None) -> Path:
    spec = tomllib.loads(RECIPE.read_text())
    spec["audit"]["replicates"] = replicates
    if states:
        spec["population"]["spine_states"] = states
    spec["output"] = {"store": "hosts.zarr", "report": "hosts.html"}
    spec["cluster"] = {**spec.get("cluster", {}), "scheduler": scheduler, "timeout_s": 259_200}
    path.write_text(dump_toml(spec))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--states", nargs="*", help="spine states (default: the recipe's, all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="8GiB")
    ap.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    ap.add_argument("--dir", type=Path, required=True, help="a new directory for the run")
    ap.add_argument("--out", type=Path, help="append the figures as a JSON line")
    a = ap.parse_args()
    if a.dir.exists():
        ap.error(f"--dir {a.dir} exists: name a new directory (the run's store and logs go there)")
    if a.replicates < 1 or a.workers < 1:
        ap.error(f"--replicates {a.replicates} --workers {a.workers}: both must be at least 1")
    why = can_make_hosts()
    if why:
        ap.error(f"{why}: run as root (network namespaces are this machine's hosts)")
    a.dir.mkdir(parents=True)
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in own_environment().items() if k != "PREFECT_API_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"] = "600s"
    malloc = {"MALLOC_TRIM_THRESHOLD_": "33554432", "MALLOC_MMAP_THRESHOLD_": "33554432"}
    print(machine_info(), flush=True)
    with cluster_on_hosts(
        a.dir, env, workers=a.workers, memory_limit=a.memory_limit, worker_env=malloc, net=NET
    ) as cluster:
        print("workers:", " ".join(cluster.workers), flush=True)
        env["PREFECT_API_URL"] = cluster.api
        spec = recipe_spec(a.dir / "hosts.toml", cluster.scheduler, a.replicates, a.states)
        t0 = time.monotonic()
        with (a.dir / "run.log").open("wb") as log:
            run = subprocess.Popen(
                [str(bindir / "dpaudit"), "run", spec.name], cwd=a.dir, env=env, stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            with Sampler([*cluster.procs, run], a.every) as sampled:
                code = run.wait()
        wall = time.monotonic() - t0
        verify = subprocess.run(
            [str(bindir / "dpaudit"), "verify", "hosts.zarr"], cwd=a.dir, env=env,
            capture_output=True, text=True,
        )  # fmt: skip
        flow_runs = cluster.http.post("/flow_runs/filter", json={"limit": 10}).json()
    row: dict[str, Any] = {
        "script": "bench_cluster_hosts.py",
        "commit": commit(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "machine": machine_info(),
        "spec": "deploy/compose/nightly.toml",
        "replicates": a.replicates,
        "states": a.states or "all",
        "workers": a.workers,
        "memory_limit": a.memory_limit,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "cpu_s": round(sum(sampled.cpu.values()), 1),
        "cpu_s_by_process": {
            f"{k[0]} {sampled.names[k]}": round(v, 1)
            for k, v in sorted(sampled.cpu.items())
            if v >= 1
        },
        "peak_rss_gb": round(max(sampled.peak.values()) / 1e9, 2),
        "verify_exit_code": verify.returncode,
        "verify": verify.stdout.strip().splitlines()[-1:] if verify.stdout else [],
        "flow_runs": [r["state_type"] for r in flow_runs],
    }
    print(json.dumps(row, indent=1), flush=True)
    if code != 0:  # a refused spec or a failed run: its own words, and no figures recorded
        sys.exit(f"dpaudit run exited {code}: see {a.dir / 'run.log'}")
    if a.out:
        with a.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    sys.exit(0 if code == 0 and verify.returncode == 0 else 1)


if __name__ == "__main__":
    main()
