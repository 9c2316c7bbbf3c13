"""The 1990 Midwest county x race counts (plotnine's ``midwest``) under Flaxman's releases, and their EPL.

Needs plotnine (in the ``test`` and ``examples`` extras). Then, from the repository root:

    python examples/midwest.py                  # epsilon = 0.5, 100 replicates
    python examples/midwest.py --epsilon 1.0

The table (437 counties of IL, IN, MI, OH, WI; columns poptotal, popwhite, popblack, popamerindian,
popasian, popother) is read into a state -> county hierarchy with a five-level race schema, and seed
001's tree is root (the Midwest) -> 5 states -> 437 counties -> 2,185 county x race cells (J = 3).
Each replicate releases it with Flaxman's three algorithms (two-sided geometric noise):

* GDPC: the cells with G(epsilon). Its loss is epsilon exactly, so its EPL should be close to epsilon.
* RDPC: every level with G(epsilon/4), raked top-down. EPL of the cells about epsilon/4, but a
  person is in one count of every level and the levels are nearly uncorrelated: the composed EPL
  (sum over the path, :func:`auditlib.epl.composed.composed_epl`) is about epsilon.
* ADPC: the mean of 4 GDPC runs at epsilon/4. Its exact loss over the 5-95 % window is 0.55 epsilon
  (the geometric pmfs convolved; tests/unit/test_epl_flaxman.py), not epsilon/2 nor 0.75-0.8 epsilon.

Then Flaxman & Petti's SA3 (total at epsilon/4, strata at 3 epsilon/4, L1-consistent non-negative integers)
and SA4 (strata at epsilon, state totals invariant) on the same cells.

Measured (seed 1990, 100 replicates = 218,500 cell residuals; EPL / epsilon, Flaxman-Petti method):
see the table in docs/epl.md ("Real data: the Midwest counts"); tests/unit/test_epl_midwest.py
checks them against the expectations above.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from auditlib import seeds
from auditlib.epl import epl
from auditlib.epl.composed import composed_epl
from auditlib.geography.schema import custom_schema
from auditlib.geography.tabular import TabularPopulation, read_counts
from auditlib.simulate.hierarchical import CountTree, simulate_residuals
from auditlib.simulate.stratified import invariant_release, stratified_release

COLUMNS = ["popwhite", "popblack", "popamerindian", "popasian", "popother"]
#: keyed streams of this example: (EXAMPLE_NOISE, release 1/2, replicate) for SA3/SA4
EXAMPLE_NOISE = 40


def midwest_population() -> TabularPopulation:
    """plotnine's ``midwest`` as a state -> county table of five race counts."""
    try:
        from plotnine.data import midwest
    except ImportError:
        raise SystemExit("This example needs plotnine: pip install 'dpaudit[examples]'") from None
    race = custom_schema("race5", [("race", ["white", "black", "aian", "asian", "other"])])
    return read_counts(
        midwest, COLUMNS, levels=["state"], unit="county", schema=race, total="poptotal"
    )


def midwest_tree(pop: TabularPopulation) -> tuple[CountTree, list[np.ndarray]]:
    """Flaxman's tree of the counts, root -> state -> county -> county x race cell, and for every
    level the unit of each leaf (cell), as :func:`auditlib.epl.composed.composed_epl` takes them."""
    h = pop.histograms
    counties = pop.count_tree()  # root -> state -> county totals
    county_of_cell = np.repeat(np.arange(h.shape[0]), h.shape[1])
    tree = CountTree(
        (*counties.counts, h.ravel()),
        (*counties.parents, county_of_cell),
        ("Midwest", "state", "county", "cell"),
    )
    state_of_cell = tree.parents[1][county_of_cell]
    maps = [np.zeros(h.size, np.int64), state_of_cell, county_of_cell, np.arange(h.size)]
    return tree, maps


def flaxman_epl(epsilon: float, replicates: int, seed: int) -> dict[str, Any]:
    """EPL (Flaxman-Petti method, 5-95 % window, factor 0.1) of the cells under GDPC, RDPC and
    ADPC (P = 4), and RDPC's composed EPL over the four levels a person is counted in."""
    tree, maps = midwest_tree(midwest_population())
    out: dict[str, Any] = {"epsilon": epsilon, "cells": int(tree.leaf_counts.size)}
    for alg in ("gdpc", "rdpc", "adpc"):
        p = 4 if alg == "adpc" else None
        res = simulate_residuals(tree, alg, epsilon, seed=seed, replicates=replicates, n_runs=p)  # type: ignore[arg-type]
        leaf = res["cell"].ravel()
        out["n"] = int(leaf.size)
        out[alg] = epl(leaf).epl
        if alg == "rdpc":
            levels = [res[name] for name in tree.names]
            c = composed_epl(levels, maps, seed=np.random.SeedSequence(seed))
            out["rdpc_levels"] = c.per_level
            out["rdpc_composed"] = c.epl_sum
            out["rdpc_composed_ci"] = (c.ci_low, c.ci_high)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1990)
    args = ap.parse_args()
    pop = midwest_population()
    h = pop.histograms
    print(
        f"{pop.n_units('state')} states, {pop.n_units('county')} counties, "
        f"{h.sum():,} people; cells {pop.schema.cell_labels('race')}"
    )
    states = pop.level_histograms("state").sum(axis=1)
    print("state totals:", dict(zip(pop.labels["state"], states.tolist(), strict=True)))
    eps = args.epsilon
    r = flaxman_epl(eps, args.replicates, args.seed)
    print(f"Flaxman 2019 releases, epsilon = {eps}: {r['n']:,} cell residuals; EPL / epsilon:")
    print(f"  GDPC {r['gdpc'] / eps:.3f}   ADPC (P = 4) {r['adpc'] / eps:.3f}")
    levels = " ".join(f"{v / eps:.3f}" for v in r["rdpc_levels"])
    lo, hi = r["rdpc_composed_ci"]
    print(
        f"  RDPC cells {r['rdpc'] / eps:.3f}; per level (root..cells) {levels}; composed "
        f"{r['rdpc_composed'] / eps:.3f} [{lo / eps:.3f}, {hi / eps:.3f}]"
    )

    # Flaxman & Petti's appendix: SA3 (total at epsilon/4, strata at 3 epsilon/4, L1-consistent non-negative integers)
    # and SA4 (strata at epsilon, state totals invariant)
    county_state = pop.parents["county"]
    sa3 = [
        stratified_release(h, eps / 4, 3 * eps / 4, _rng(args, 1, r))
        for r in range(args.replicates)
    ]
    sa4 = [
        invariant_release(h, county_state, eps, _rng(args, 2, r)) for r in range(args.replicates)
    ]
    for name, runs in (("SA3", sa3), ("SA4", sa4)):
        res = np.concatenate([x.strata_residuals().ravel() for x in runs])
        print(f"{name}: EPL / epsilon of the county x race residuals = {epl(res).epl / eps:.3f}")


def _rng(args: argparse.Namespace, release: int, replicate: int) -> np.random.Generator:
    return seeds.rng(args.seed, EXAMPLE_NOISE, release, replicate)


if __name__ == "__main__":
    main()
