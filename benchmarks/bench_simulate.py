"""Benchmark: Flaxman's GDPC/RDPC/ADPC per run, noise sampling rates, the full US spine.

From the repository root (or with the package installed):

    PYTHONPATH=. python benchmarks/bench_simulate.py              # N = 10⁶, μ = 100, J = 3
    PYTHONPATH=. python benchmarks/bench_simulate.py --no-spine   # skip the 8.2 M-block spine

Times are the best of ``--repeat`` repetitions (per-run figures: the mean over ``--runs`` runs).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np
from _machine import machine_info
from _results import best_of

from auditlib.geography.flaxman import generate_population
from auditlib.geography.spine import LEVELS, generate_spine
from auditlib.mechanisms import DiscreteGaussian, TwoSidedGeometric
from auditlib.simulate.hierarchical import (
    ALGORITHMS,
    Algorithm,
    CountTree,
    release,
    simulate_residuals,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6, help="people N")
    ap.add_argument("--mu", type=float, default=100.0, help="mean people per location μ")
    ap.add_argument("--levels", type=int, default=3, help="levels J")
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=200, help="runs per algorithm")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20200325)
    ap.add_argument("--no-spine", action="store_true", help="skip the full spine")
    args = ap.parse_args()
    print(machine_info())

    n = int(args.n)
    t, pop = best_of(
        lambda: generate_population(n, args.levels, args.mu, seed=args.seed), args.repeat
    )
    tt, tree = best_of(lambda: CountTree.from_population(pop), args.repeat)
    h = pop.hierarchy
    print(
        f"\nFlaxman 2019 setting: N = {n:,}, J = {args.levels}, μ = {args.mu:g} -> C = {h.children}, "
        f"{h.n_leaves:,} leaves"
    )
    print(
        f"  population (leaf codes) {t * 1e3:8.2f} ms;  exact counts, all levels {tt * 1e3:6.2f} ms"
    )
    for algo in ALGORITHMS:

        def runs(a: Algorithm = algo) -> None:
            for r in range(args.runs):
                release(tree, a, args.epsilon, np.random.default_rng(r), n_runs=4)

        def chunk(a: Algorithm = algo) -> None:
            simulate_residuals(tree, a, args.epsilon, seed=1, replicates=500, n_runs=4)

        tr, _ = best_of(runs, args.repeat)
        tr500, _ = best_of(chunk, 1)
        print(
            f"  {algo.upper()}: {tr / args.runs * 1e3:7.3f} ms per run;  500 keyed replicates "
            f"with residuals {tr500:6.3f} s"
        )

    print("\nnoise sampling rates (10⁷ draws)")
    g = np.random.default_rng(args.seed)
    for name, mech in (
        ("discrete Gaussian σ² = 1", DiscreteGaussian(1.0)),
        ("discrete Gaussian σ² = 1744.4", DiscreteGaussian(1744.4)),
        ("discrete Gaussian σ² = 1e6", DiscreteGaussian(1e6)),
        ("two-sided geometric ε = 0.1", TwoSidedGeometric(0.1)),
    ):
        ts, _ = best_of(lambda m=mech: m.rvs(10_000_000, g), args.repeat)  # type: ignore[misc]
        print(f"  {name:32s} {1e7 / ts / 1e6:7.1f} M draws/s")

    if args.no_spine:
        return
    print("\nfull spine (50 states + DC, and Puerto Rico)")
    tracemalloc.start()
    t0 = time.perf_counter()
    spine = generate_spine(args.seed, puerto_rico=True)
    ts = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    tsp, _ = best_of(lambda: generate_spine(args.seed, puerto_rico=True), args.repeat)
    print(
        f"  generation {tsp:6.2f} s (first call {ts:.2f} s); arrays {spine.nbytes / 1e6:.0f} MB; "
        f"peak traced {peak / 1e6:.0f} MB; process max RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    print("  units: " + ", ".join(f"{lv} {spine.n_units(lv):,}" for lv in LEVELS))
    pops = spine.populations()
    b = spine.block_population
    print(
        f"  population {int(b.sum()):,}; empty blocks {np.mean(b == 0):.1%}; block p50/p99/max "
        f"{np.percentile(b, 50):.0f}/{np.percentile(b, 99):.0f}/{b.max()}; states "
        f"{pops['State'][:51].min():,}..{pops['State'][:51].max():,}"
    )
    tt, stree = best_of(lambda: CountTree.from_spine(spine), 1)
    tr, _ = best_of(lambda: release(stree, "rdpc", 1.0, np.random.default_rng(0)), args.repeat)
    tg, _ = best_of(lambda: release(stree, "gdpc", 1.0, np.random.default_rng(0)), args.repeat)
    print(
        f"  count tree {tt:.2f} s; one RDPC run on the spine (6 levels) {tr:.2f} s; "
        f"GDPC on the blocks {tg:.2f} s"
    )


if __name__ == "__main__":
    main()
