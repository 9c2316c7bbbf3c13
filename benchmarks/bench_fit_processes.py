"""Benchmark: a state's sparse TopDown with its fits' parts in processes beside it
(``cluster.fit_processes``, ``flows.runtime.part_pool``) against in its own process: wall seconds
(what a large state's task gains on a worker with cores to spare), CPU seconds of this process and
of the pool's processes, and whether the releases are the same (they must be, bit for bit).

    PYTHONPATH=. python benchmarks/bench_fit_processes.py [--processes 2] [--rounds 3] \
        [--case dhc_production:S18:0.05 --case pl94_production:S41:1 …]

The wall-time gain needs the cores idle: on a machine running other work it measures the share
it gets. Per case (schema, spine state, spine scale) the state's people are drawn once, then one
replicate (every level, same noise generators) is run each way, alternated after a warm-up of each
(``_timing.alternate``); the pool is started once per run, as a state's task starts it.
``--side one|pool`` runs one way only (a large state timed in two sittings, e.g. with other work
on the machine paused between them).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from _machine import machine_info
from _timing import SelfTimed, alternate, method_line
from bench_fit_route import SEED, state_case

from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
from flows.runtime.part_pool import PartPool

CASES = ("dhc_production:S18:0.05", "pl94_production:S41:1")


def _case(text: str, processes: int, rounds: int, warmup: int, side: str) -> None:
    st, hierarchy, hist, inv, measured = state_case(text)

    def run(n: int) -> SelfTimed:
        c0, w0 = time.process_time(), time.perf_counter()
        pool = PartPool(n) if n > 1 else None
        try:
            rel = sparse_topdown(
                hierarchy.parents, hierarchy.levels, hist, inv, measured,
                noise_rngs(SEED, st, len(hierarchy.levels), 0), pool=pool,
            )  # fmt: skip
        finally:
            if pool is not None:
                pool.close()
        cpu = time.process_time() - c0 + (0.0 if pool is None else pool.cpu)
        return SelfTimed(cpu, time.perf_counter() - w0, rel)

    if side != "both":  # one way only (a large state, timed in two sittings)
        n = 1 if side == "one" else processes
        got = run(n)
        print(f"  fit_processes {n}: wall {got.wall:.1f} s, CPU {got.cpu:.1f} s (this process "
              f"and the pool's); levels' iterations {got.value.iterations}")  # fmt: skip
        return
    paired = alternate(
        lambda: run(1), lambda: run(processes), rounds=rounds, warmup=warmup,
        labels=("fit_processes 1", f"fit_processes {processes}"),
    )  # fmt: skip
    print("  " + paired.line(1))
    wall = [paired.median_wall(i) for i in (0, 1)]
    print(f"  wall: {wall[0]:.1f} → {wall[1]:.1f} s ({wall[0] / wall[1]:.2f}× faster)")
    a: Any
    b: Any
    a, b = paired.values
    same = all(
        np.array_equal(x.cells, y.cells) and np.array_equal(x.counts, y.counts)
        for x, y in zip(a.dp, b.dp, strict=True)
    )
    print(f"  releases identical: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--case", action="append", help="schema:state:spine-scale")
    ap.add_argument("--side", choices=("both", "one", "pool"), default="both",
                    help="one way only: one process, or the pool")  # fmt: skip
    args = ap.parse_args()
    print(machine_info())
    if args.side == "both":
        print(method_line(args.rounds, args.warmup))
    else:  # one run: a sitting of a series that alternates the two ways
        print("method: one run, wall seconds and CPU seconds of this process and the pool's")
    for case in args.case or CASES:
        _case(case, args.processes, args.rounds, args.warmup, args.side)


if __name__ == "__main__":
    main()
