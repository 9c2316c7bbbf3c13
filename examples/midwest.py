"""The 1990 Midwest county x race counts (plotnine's ``midwest``) under a geometric release, and its EPL.

Needs the optional extra: ``pip install 'dpaudit[examples]'``. Then, from the repository root:

    python examples/midwest.py                  # epsilon = 0.25, 20 replicates
    python examples/midwest.py --epsilon 1.0

The table (437 counties of IL, IN, MI, OH, WI; columns poptotal, popwhite, popblack, popamerindian,
popasian, popother) is read into a state -> county hierarchy with a five-level race schema. Each
replicate adds two-sided geometric noise G(epsilon) to every county x race cell (the GDPC of seed 001
at the cell level: epsilon-DP per cell for one person added or removed); the EPL of the residuals
(DP - true, zero cells included) should be close to epsilon. Then seed 003's SA3 (total at
epsilon/4, strata at 3 epsilon/4, L1-consistent non-negative integers) and SA4 (strata at epsilon,
state totals invariant) on the same cells.

Measured (seed 1990, 20 replicates; EPL of geometric / SA3 / SA4): epsilon = 0.25 -> 0.284 /
0.220 / 0.277; epsilon = 1.0 -> 0.995 / 0.766 / 0.953 (SA3's strata get 3/4 of epsilon). Counties are large (few cells near 0), so
non-negativity and the state-total invariant change little here.
"""

from __future__ import annotations

import argparse

import numpy as np

from auditlib import seeds
from auditlib.epl import epl
from auditlib.geography.schema import custom_schema
from auditlib.geography.tabular import read_counts
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.simulate.stratified import invariant_release, stratified_release

COLUMNS = ["popwhite", "popblack", "popamerindian", "popasian", "popother"]
#: keyed streams of this example: (EXAMPLE_NOISE, release 0/1/2, replicate)
EXAMPLE_NOISE = 40


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=0.25)
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1990)
    args = ap.parse_args()
    try:
        from plotnine.data import midwest
    except ImportError:
        raise SystemExit("This example needs plotnine: pip install 'dpaudit[examples]'") from None

    race = custom_schema("race5", [("race", ["white", "black", "aian", "asian", "other"])])
    pop = read_counts(
        midwest, COLUMNS, levels=["state"], unit="county", schema=race, total="poptotal"
    )
    h = pop.histograms
    print(
        f"{pop.n_units('state')} states, {pop.n_units('county')} counties, "
        f"{h.sum():,} people; cells {pop.schema.cell_labels('race')}"
    )
    states = pop.level_histograms("state").sum(axis=1)
    print("state totals:", dict(zip(pop.labels["state"], states.tolist(), strict=True)))
    noise = TwoSidedGeometric(args.epsilon)
    residuals = np.stack(
        [
            noise.rvs(h.shape, seeds.rng(args.seed, EXAMPLE_NOISE, 0, r))
            for r in range(args.replicates)
        ]
    )
    dp = h[None] + residuals  # the released county x race counts of every replicate
    result = epl(residuals.ravel())
    print(
        f"geometric release, epsilon = {args.epsilon}: {residuals.size:,} residuals, "
        f"{(dp < 0).mean():.1%} negative released counts; EPL = {result.epl:.3f} ({result.status})"
    )

    # seed 003: SA3 (total at epsilon/4, strata at 3 epsilon/4, L1-consistent non-negative integers)
    # and SA4 (strata at epsilon, state totals invariant)
    county_state = pop.parents["county"]
    sa3 = [
        stratified_release(h, args.epsilon / 4, 3 * args.epsilon / 4, _rng(args, 1, r))
        for r in range(args.replicates)
    ]
    sa4 = [
        invariant_release(h, county_state, args.epsilon, _rng(args, 2, r))
        for r in range(args.replicates)
    ]
    for name, runs in (("SA3", sa3), ("SA4", sa4)):
        res = np.concatenate([r.strata_residuals().ravel() for r in runs])
        print(f"{name}: EPL of the county x race residuals = {epl(res).epl:.3f}")


def _rng(args: argparse.Namespace, release: int, replicate: int) -> np.random.Generator:
    return seeds.rng(args.seed, EXAMPLE_NOISE, release, replicate)


if __name__ == "__main__":
    main()
