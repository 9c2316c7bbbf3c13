"""Timing of the report and of the exact accuracy sums (not a test).

Run: ``python benchmarks/bench_report.py [STORE]``. Prints the machine, then the time of the exact
MSE/MAE of one count (counts 0..10, with and without clipping) at Su, Su & Wang's smallest and largest
σ², of the accuracy group of one audit (8 levels × 10 queries × 2 noises), and, given a store (e.g.
``results/audit.zarr``), of rendering its HTML report (wall and CPU, after one warm-up
render) and the report's size.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _machine import machine_info

from auditlib.accuracy import count_accuracy
from auditlib.summaries import ACCURACY_COUNTS, accuracy_by_query


def best_of(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print(machine_info())
    for s2 in (4.9995, 456.62):
        t = best_of(lambda s2=s2: count_accuracy(s2, ACCURACY_COUNTS))
        print(f"count_accuracy(σ² = {s2:g}, counts 0..10): {1e3 * t:.2f} ms")
    sigma2 = np.repeat(
        [[68.49], [5.0], [16.12], [10.46], [10.46], [5.76], [11.61], [456.62]], 10, 1
    )
    factor = np.full(8, 0.8)
    t = best_of(lambda: accuracy_by_query(sigma2, factor))
    print(f"accuracy group (8 levels x 10 queries x 2 noises): {1e3 * t:.2f} ms")
    if len(sys.argv) > 1:
        from flows.report.render import render_report

        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.html"
            render_report(sys.argv[1], out)  # warm: font cache, first imports of the renderers
            walls, cpus = [], []
            for _ in range(3):
                t0, c0 = time.perf_counter(), time.process_time()
                render_report(sys.argv[1], out)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            print(
                f"render_report({sys.argv[1]}): best of 3 {min(walls):.2f} s wall, "
                f"{min(cpus):.2f} s CPU, {out.stat().st_size / 1e6:.2f} MB"
            )


if __name__ == "__main__":
    main()
