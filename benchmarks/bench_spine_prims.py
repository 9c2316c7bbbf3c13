"""Benchmark: the DHC's Prim and Tract_Subset_Group levels drawn on the spine — counts, fan-outs,
the time to derive them, and the problems they cut the largest county into.

    PYTHONPATH=. python benchmarks/bench_spine_prims.py --seed 20200325 --seed 7
    PYTHONPATH=. python benchmarks/bench_spine_prims.py --seed 20200325 --county-cells

Per seed (the US spine): Prims and Tract_Subset_Groups, the largest fan-out of every link of
``PRIM_LEVELS``, and the median time of ``spine._prims`` (the levels derived from the drawn spine).
``--county-cells`` draws the people of the largest county by tracts
(``sparse_block_population`` on its blocks; tens of seconds for a county of millions) and prints,
per level below it, the largest problem of one parent: children × the parent's non-zero DHC cells
(``sparse_topdown._child_variables``; a chunk never splits a parent), with and without the Prim
levels.
"""

from __future__ import annotations

import argparse
import time
from itertools import pairwise

import numpy as np
from _machine import machine_info

from auditlib.geography import spine as spine_module
from auditlib.geography.sparse_population import sparse_block_population
from auditlib.geography.spine import PRIM_LEVELS, Spine, generate_spine, tallies_2020


def counts(spine: Spine, seed: int, repeats: int) -> None:
    links = spine.parents_over(PRIM_LEVELS)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        spine_module._prims(spine.parents, ("US",), tallies_2020(), seed)
        times.append(time.perf_counter() - t)
    print(
        f"seed {seed}: {spine.n_units('County'):,} counties, {spine.n_units('Prim'):,} Prims, "
        f"{spine.n_units('Tract_Subset_Group'):,} Tract_Subset_Groups, "
        f"{spine.n_units('Tract'):,} tracts; derived in {1e3 * float(np.median(times)):.1f} ms "
        f"(median of {repeats})"
    )
    for (up, lo), p in zip(pairwise(PRIM_LEVELS), links, strict=True):
        kids = np.bincount(p)
        print(f"  {up} -> {lo}: largest fan-out {kids.max():,}, mean {kids.mean():.2f}")


def county_cells(spine: Spine) -> None:
    state_of_county, county_of_prim, prim_of_tsg, tsg_of_tract = spine.parents_over(PRIM_LEVELS)[:4]
    tracts = np.bincount(spine.parents["Tract"])
    c = int(np.argmax(tracts))
    t0, t1 = np.searchsorted(spine.parents["Tract"], [c, c + 1])
    bg0, bg1 = np.searchsorted(spine.parents["Block_Group"], [t0, t1])
    b0, b1 = np.searchsorted(spine.parents["Block"], [bg0, bg1])
    t = time.perf_counter()
    pop = sparse_block_population(spine.block_population[b0:b1], np.random.default_rng(0))
    people = int(pop.dhc.counts.sum())
    print(
        f"largest county: {tracts[c]:,} tracts in {spine.state_names[state_of_county[c]]}, "
        f"{people:,} people drawn in {time.perf_counter() - t:.1f} s"
    )
    # each block's unit at every level of the county (units renumbered from 0, in order)
    tract = spine.parents["Block_Group"][spine.parents["Block"][b0:b1]].astype(np.int64)
    tsg = tsg_of_tract[tract].astype(np.int64)
    prim = prim_of_tsg[tsg].astype(np.int64)
    nnz = {}
    for level, u in (("County", np.zeros_like(tract)), ("Prim", prim), ("Tract_Subset_Group", tsg)):
        agg = pop.dhc.aggregate(u - u.min(), int(u.max() - u.min()) + 1)
        nnz[level] = np.diff(agg.indptr).astype(np.int64)
    n_prims = int(np.sum(county_of_prim == c))
    groups = np.bincount(prim_of_tsg)[county_of_prim == c]  # groups per Prim of the county
    in_group = np.bincount(tsg_of_tract[t0:t1] - tsg.min())  # tracts per group of the county
    cells = int(nnz["County"][0])
    print(f"  County -> Prim: {n_prims} x {cells:,} = {n_prims * cells:,}")
    print(f"  Prim -> Tract_Subset_Group: largest {(groups * nnz['Prim']).max():,}")
    print(
        f"  Tract_Subset_Group -> Tract: largest {(in_group * nnz['Tract_Subset_Group']).max():,}"
    )
    print(
        f"  without the Prim levels, County -> Tract: {tracts[c]} x {cells:,} = {tracts[c] * cells:,}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, action="append", help="spine seeds (default 20200325)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--county-cells", action="store_true")
    args = ap.parse_args()
    print(machine_info())
    for seed in args.seed or [20200325]:
        t = time.perf_counter()
        spine = generate_spine(seed)
        print(f"spine (seed {seed}, with its Prims): {time.perf_counter() - t:.1f} s")
        counts(spine, seed, args.repeats)
        if args.county_cells:
            county_cells(spine)


if __name__ == "__main__":
    main()
