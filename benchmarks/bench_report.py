"""Timing of the report and of the exact accuracy sums (not a test).

Run: ``python benchmarks/bench_report.py [STORE]``. Prints the machine, then the time of the exact
MSE/MAE of one count (counts 0..10, with and without clipping) at Su, Su & Wang's smallest and largest
σ², of the accuracy group of one audit (8 levels × 10 queries × 2 noises), and, given a store (e.g.
``results/audit.zarr``), of rendering its HTML report in one process and with the EPL and accuracy
sections in a forked second process (:mod:`flows.report.parallel`), alternated after one warm-up
render of each: median wall and CPU (the child's CPU included), and the report's size.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _machine import machine_info
from _timing import SelfTimed, alternate

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
        render_times(sys.argv[1])


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the forked second process)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _render(store: str, out: Path, parallel: bool) -> SelfTimed:
    """One render, timed with its forked second process's CPU included."""
    from flows.report.render import render_report

    t0, c0 = time.perf_counter(), _cpu()
    render_report(store, out, parallel=parallel)
    return SelfTimed(_cpu() - c0, time.perf_counter() - t0)


def render_times(store: str, runs: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = {p: Path(tmp) / f"report-{p}.html" for p in (False, True)}
        # the warm-up render of each: font cache, first imports of the renderers
        paired = alternate(
            lambda: _render(store, out[False], False),
            lambda: _render(store, out[True], True),
            rounds=runs,
            labels=("one process", "EPL and accuracy sections forked"),
        )
        print(
            f"method: median CPU-s of this process and its reaped children (the forked second "
            f"process) and median wall, {runs} alternated rounds after 1 warm-up of each"
        )
        print(f"render_report({store}): {paired.line(2)}")
        print(f"pages: {out[True].stat().st_size / 1e6:.2f} MB")
        print(f"pages byte-identical: {out[False].read_bytes() == out[True].read_bytes()}")


if __name__ == "__main__":
    main()
