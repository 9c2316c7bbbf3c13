"""Benchmark: direct samples of releases on (D, D′) of the 2020-sized US spine, one state at a time.

    PYTHONPATH=. python benchmarks/bench_direct.py                     # the smallest and a median state
    PYTHONPATH=. python benchmarks/bench_direct.py --copies 20 --states 0 4

TopDown runs one state (the one holding the chosen unit: each state is its own release), with the
``pl94_2021_production`` total query's σ² per spine level; ``--copies`` runs of D and of D′ are each
one ``topdown()`` call on that many copies of the state. D′ moves one person into the state's first
non-empty block from its last one. Also: GDPC, ADPC (P = 4), the allocation measurement and SA3 of
the same block (vectorised draws), and one MPL run of ``topdown_count()`` at Askin, Kutta & Dette's sizes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _machine import machine_info

from auditlib.allocations import load_allocation
from auditlib.geography.spine import LEVELS, generate_spine
from auditlib.mpl import topdown_count
from auditlib.mpl.mpl import mpl_known
from auditlib.simulate.direct import (
    Allocation,
    Hierarchical,
    Stratified,
    TopDown,
    release_samples,
)
from auditlib.simulate.neighbours_hist import HistogramDatabase, move_person
from auditlib.simulate.topdown import allocation_measured, unexpressible_queries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--copies", type=int, default=10, help="TopDown runs on D and on D′ each")
    ap.add_argument("--draws", type=int, default=1_000_000, help="draws of the vectorised releases")
    ap.add_argument("--states", type=int, nargs="*", default=None, help="spine state indices")
    args = ap.parse_args()
    print(machine_info())
    t = time.perf_counter()
    spine = generate_spine(args.seed)
    print(f"spine: {spine.n_units('Block'):,} blocks in {time.perf_counter() - t:.1f} s")
    blocks = spine.units_per_state("Block")
    states = args.states
    if states is None:
        order = np.argsort(blocks)
        states = [int(order[0]), int(order[order.size // 2])]
    alloc = load_allocation("pl94_2021_production")
    skip = unexpressible_queries(alloc, LEVELS, ("total",))  # the total only
    measured = TopDown.of(allocation_measured(alloc, LEVELS, ("total",), "add_remove", skip=skip))
    for s in states:
        db = HistogramDatabase.from_spine(spine, state=s)
        full = np.flatnonzero(db.histograms[:, 0] > 0)
        pair = move_person(db, int(full[-1]), 0, int(full[0]))
        t = time.perf_counter()
        r = release_samples(
            pair, measured, level="Block", unit=int(full[0]), replicates=args.copies, seed=1
        )
        dt = time.perf_counter() - t
        print(
            f"state {s}: {db.n_blocks:,} blocks; TopDown {2 * args.copies} runs in {dt:.2f} s "
            f"({dt / (2 * args.copies) * 1e3:.0f} ms per run); block count "
            f"D {r.truth_d} → mean {r.dp_d.mean():.2f}, D′ {r.truth_d_prime} → "
            f"mean {r.dp_d_prime.mean():.2f}"
        )
        for name, rel in (
            ("GDPC ε=1", Hierarchical("gdpc", 1.0)),
            ("ADPC ε=1 P=4", Hierarchical("adpc", 1.0, 4)),
            ("allocation σ²=4", Allocation(4.0)),
            ("SA3 ε=1", Stratified("sa3", 1.0)),
        ):
            t = time.perf_counter()
            release_samples(
                pair, rel, level="Block", unit=int(full[0]), replicates=args.draws, seed=1
            )
            dt = time.perf_counter() - t
            print(
                f"  {name:16s} {2 * args.draws:,} draws in {dt:.2f} s ({2 * args.draws / dt:,.0f}/s)"
            )
    e = topdown_count()
    t = time.perf_counter()
    res = mpl_known(e, 20_000, 50_000, np.random.default_rng(0))
    print(
        f"MPL of topdown_count() at n = 2e4, N = 5e4: {time.perf_counter() - t:.2f} s; {res.summary()}"
    )


if __name__ == "__main__":
    main()
