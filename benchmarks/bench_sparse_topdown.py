"""Benchmark: sparse TopDown releases of whole spine states over a production schema, per level.

    PYTHONPATH=. python benchmarks/bench_sparse_topdown.py --schema pl94_production --states S01,S16
    PYTHONPATH=. python benchmarks/bench_sparse_topdown.py --schema dhc_production --states S13 \
        --replicates 1 --tol 0.05
    PYTHONPATH=. python benchmarks/bench_sparse_topdown.py --schema dhc_production --states smallest \
        --spine-scale 0.05

Each state's blocks come from the spine (``--spine-scale`` < 1: a spine with the 2020 tallies and
population scaled, as the unit tests use), its people from
:func:`~auditlib.geography.sparse_population.spine_state_sparse_population`; every query of the
schema's production allocation is measured at every level (``pl94_2021_production``;
``dhc_2023_production`` over its seven levels, Prim and Tract_Subset_Group the spine's drawn ones
and Tract_Subset its tracts; ``--no-prims``: over the spine's five levels, as before them). Per level the script prints
the fit's variables and FISTA iterations, the wall and CPU seconds of the level (measurement, fit,
rounding) and the process's peak resident set so far; per replicate it checks that no production
constraint is broken at any level (:func:`~auditlib.geography.sparse_histograms.invariant_violations`)
and that children sum to parents. ``smallest`` / ``largest`` pick the spine's state by population.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
from _machine import machine_info

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import invariant_violations
from auditlib.geography.sparse_population import spine_state_sparse_population
from auditlib.geography.spine import Spine, generate_spine, tallies_2020
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
from auditlib.simulate.topdown import spine_state
from flows.spec.sources import spine_levels

ALLOCATION = {"pl94_production": "pl94_2021_production", "dhc_production": "dhc_2023_production"}
ALLOCATION_LEVELS = {
    "pl94_production": ["State", "County", "Tract", "Block_Group", "Block"],
    "dhc_production": [
        "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group", "Block",
    ],
}  # fmt: skip


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def pick_state(spine: Spine, name: str) -> int:
    pops = spine.populations()["State"]
    if name == "smallest":
        return int(np.argmin(pops))
    if name == "largest":
        return int(np.argmax(pops))
    return list(spine.state_names).index(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--schema", default="pl94_production", choices=sorted(ALLOCATION))
    ap.add_argument("--states", default="smallest", help="spine state names, smallest, largest")
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20200325)
    ap.add_argument("--spine-scale", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-4, help="the fit's stopping step (people)")
    ap.add_argument("--max-iter", type=int, default=20_000)
    ap.add_argument("--no-prims", action="store_true", help="DHC without Prim, Tract_Subset_Group")
    args = ap.parse_args()
    print(machine_info())
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    t = time.perf_counter()
    if args.spine_scale < 1:
        spine = generate_spine(
            4,
            totals={"US": tallies_2020()["US"].scaled(args.spine_scale)},
            population={"US": int(331_449_281 * args.spine_scale)},
        )
    else:
        spine = generate_spine(args.seed)
    print(f"spine: {time.perf_counter() - t:.1f} s")
    sch = schema(args.schema)
    levels = ALLOCATION_LEVELS[args.schema]
    if args.no_prims:
        levels = [g for g in levels if g not in ("Prim", "Tract_Subset_Group")]
    measured = allocation_measured(
        load_allocation(ALLOCATION[args.schema]), levels, sch.query_names, "bounded", schema=sch
    )
    for name in args.states.split(","):
        st = pick_state(spine, name)
        t = time.perf_counter()
        hierarchy, _ = spine_state(spine, st, spine_levels(tuple(levels)))
        pop = spine_state_sparse_population(spine, st, args.seed)
        hist, inv = pop.histograms(args.schema), pop.invariants(args.schema)
        print(
            f"{spine.state_names[st]}: {hist.n_units:,} blocks, {inv.state_total:,} people, "
            f"{hist.nnz:,} non-zero block cells; population {time.perf_counter() - t:.1f} s, "
            f"peak RSS {peak_rss_mb():.0f} MB"
        )
        for r in range(args.replicates):
            clock = [time.perf_counter(), time.process_time()]
            start = list(clock)

            def on_level(i: int, level: str, clock: list[float] = clock, r: int = r) -> None:
                wall, cpu = time.perf_counter() - clock[0], time.process_time() - clock[1]
                print(
                    f"  replicate {r} {level}: {wall:.1f} s wall, {cpu:.1f} CPU-s, peak RSS "
                    f"{peak_rss_mb():.0f} MB",
                    flush=True,
                )
                clock[0], clock[1] = time.perf_counter(), time.process_time()

            rel = sparse_topdown(
                hierarchy.parents, hierarchy.levels, hist, inv, measured,
                noise_rngs(args.seed, st, len(hierarchy.levels), r),
                tol=args.tol, max_iter=args.max_iter, on_level=on_level,
            )  # fmt: skip
            wall, cpu = time.perf_counter() - start[0], time.process_time() - start[1]
            bad = {
                rel.levels[i]: v
                for i in range(len(rel.levels))
                if any((v := invariant_violations(rel.dp[i], rel.invariants[i])).values())
            }
            for i in range(1, len(rel.levels)):
                up = rel.dp[i].aggregate(hierarchy.parents[i - 1], rel.dp[i - 1].n_units)
                assert np.array_equal(up.counts, rel.dp[i - 1].counts)
            print(
                f"  replicate {r}: {wall:.1f} s wall, {cpu:.1f} CPU-s; variables per level "
                f"{rel.variables}; iterations {rel.iterations}; released non-zero block cells "
                f"{rel.dp[-1].nnz:,}; violations {bad or 'none'}; peak RSS {peak_rss_mb():.0f} MB"
            )


if __name__ == "__main__":
    main()
