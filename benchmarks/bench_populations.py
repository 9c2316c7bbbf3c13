"""Benchmark: per-block PL94-like histograms for the largest state of the synthetic US spine.

From the repository root (or with the package installed):

    PYTHONPATH=. python benchmarks/bench_populations.py            # largest state, 28 cells
    PYTHONPATH=. python benchmarks/bench_populations.py --state 0

Prints the time, the traced peak memory of the histogram step and the share of empty cells; then
the time of Flaxman & Petti's SA4 release (G(0.25) on every block x cell, county totals invariant) and of
SA3 (total at 0.25, strata at 0.75, L1 consistency) on those blocks.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
from _machine import machine_info

from auditlib.geography.populations import spine_state_histograms
from auditlib.geography.schema import schema
from auditlib.geography.spine import LEVELS, generate_spine
from auditlib.simulate.stratified import invariant_release, stratified_release


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=20200325)
    ap.add_argument("--state", type=int, default=None, help="state index (default: most blocks)")
    ap.add_argument("--schema", default="pl94")
    args = ap.parse_args()
    print(machine_info())
    spine = generate_spine(args.seed)
    per_state = spine.units_per_state("Block")
    state = int(np.argmax(per_state)) if args.state is None else args.state
    s = schema(args.schema)
    tracemalloc.start()
    t = time.perf_counter()
    h = spine_state_histograms(spine, state, s, seed=args.seed)
    dt = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    occupied = h.sum(axis=1) > 0
    print(
        f"state {spine.state_names[state]}: {h.shape[0]:,} blocks x {h.shape[1]} cells "
        f"({h.nbytes / 1e6:.0f} MB int32) in {dt:.2f} s; traced peak {peak / 1e6:.0f} MB; "
        f"empty cells of occupied blocks {np.mean(h[occupied] == 0):.1%}"
    )
    county = np.flatnonzero(spine.state_of("Block") == state)
    for level in reversed(LEVELS[2:]):
        county = spine.parents[level][county].astype(np.int64)
    county -= county.min()
    rng = np.random.default_rng(args.seed)
    t = time.perf_counter()
    sa4 = invariant_release(h, county, 0.25, rng)
    t4 = time.perf_counter() - t
    t = time.perf_counter()
    stratified_release(h, 0.25, 0.75, rng)
    t3 = time.perf_counter() - t
    print(
        f"SA4 over {county.max() + 1} counties: {t4:.2f} s (county totals exact: "
        f"{np.array_equal(np.bincount(county, sa4.strata.sum(1)), np.bincount(county, h.sum(1)))}); "
        f"SA3: {t3:.2f} s"
    )


if __name__ == "__main__":
    main()
