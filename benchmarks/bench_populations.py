"""Benchmark: per-block PL94-like histograms for the largest state of the synthetic US spine.

From the repository root (or with the package installed):

    PYTHONPATH=. python benchmarks/bench_populations.py            # largest state, 28 cells
    PYTHONPATH=. python benchmarks/bench_populations.py --state 0

Prints the time, the traced peak memory of the histogram step and the share of empty cells.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
from _machine import machine_info

from auditlib.geography.populations import spine_state_histograms
from auditlib.geography.schema import schema
from auditlib.geography.spine import generate_spine


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


if __name__ == "__main__":
    main()
